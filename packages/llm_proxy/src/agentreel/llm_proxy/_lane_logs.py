"""Session logs written lane by lane, the one writer both sides share (SPEC 4, 11).

A lane is one recorded conversation and its session log: a header (parent, spawn index,
origin), then per model call ``turn/start``, the ``request/header`` built from the HTTP
request, every ``assistant/chunk`` (these two written by ``agentreel.session.CallRecorder``),
``turn/end`` (flushed there, so a killed proxy keeps every finished call). ``LaneLogs``
opens a lane's calls (``CallRecording``) and writes their records, each checked for the
keys clients sent (``SecretInRecordingError`` stops that call's recording at once, its
lane's log removed at close); closing seals a call still streaming as interrupted.
Upstream errors are recorded as a call ending in an ``error`` finish that carries the raw
status, headers and body, so replay answers them the same way.

Record mode's ``Recorder`` (``_recorder``: which lane a call goes to, which of a caller's
lanes is its session) and replay's ``ServedLogs`` (``_served_logs``: the lanes of the
scripts served) are the two kinds of ``LaneLogs``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from agentreel.llm import BlockEnd, Chunk, Finish, ToolCallPart
from agentreel.llm_proxy._errors import CUT_CODE, HTTP_CODE_PREFIX, STREAM_ERROR_CODE
from agentreel.llm_proxy.exceptions import SecretInRecordingError
from agentreel.llm_replay.lanes import (
    Delegation,
    LaneSignature,
    Reply,
    delegations,
    delta_text,
    recorded_reply,
    tokenized_chunks,
)
from agentreel.session import (
    AssistantChunkData,
    CallRecorder,
    RequestHeaderData,
    SecretScan,
    Session,
    SessionStore,
    TurnEndData,
    TurnStartData,
)

logger = logging.getLogger("agentreel.llm_proxy")

# Headers of an upstream error worth replaying (what clients and their retry logic read).
_ERROR_HEADERS = ("retry-after", "retry-after-ms", "x-request-id", "request-id", "content-type")


def kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The response headers a recording keeps and replay answers with (lower-cased): the
    content type, retry hints, the provider's request id — never a cookie or a date."""
    return {k.lower(): v for k, v in headers.items() if k.lower() in _ERROR_HEADERS}


INTERRUPTED_MESSAGE = "the proxy was stopped (signal or end of input) while this call was streaming"
REFUSED_MESSAGE = "not recorded from here on: a record of this call held a live API key"


LaneKind = Literal["session", "side", "delegated"]
"""How a lane was opened: its caller's first lane (``session``, which carries the caller's
relation to its parent), a side call under the caller's session (``side``), or a
child found through a delegation, headerless or sharing its parent's identity
(``delegated``)."""


@dataclass(eq=False)
class Lane:
    """One recorded conversation: its session log and where its next call goes."""

    session: Session
    key: str
    signature: LaneSignature
    kind: LaneKind = "session"
    parent_key: str | None = None
    """The caller whose session this lane hangs under when that is decided by caller, not
    by a delegating call: the parent identity of a session lane, the own caller of a side
    lane. Closing re-points it to that caller's session as the rule decides it."""
    first: tuple[str, ...] = ()
    """The message digests of the lane's first request."""
    tools: bool = False
    """Whether its first request offered tools (an agent's conversation, not a side call)."""
    tool_digests: frozenset[str] = frozenset()
    """The digests of the tools its first request offered: a request of its signature but
    with fewer tools continues it (``agentreel.llm_replay.lanes.narrows``)."""
    previous: tuple[str, ...] = ()
    """The message digests of its latest request, and (below) the reply to it: a request
    that starts with both continues this lane (SPEC 11 conversation chaining)."""
    reply: Reply | None = None
    calls: int = 0
    busy: bool = False
    delegations: list[Delegation] = field(default_factory=list)
    """What this lane's replies hand to other conversations (tool calls' argument strings,
    the reply text's payloads), in the order issued: a headerless child is found by its
    first message among them (``agentreel.llm_replay.lanes.delegated_by``, replay's rule too)."""
    first_user: str | None = None
    """The text of its first request's first user message (whitespace folded)."""
    owner: Lane | None = None
    """For a side lane: the lane it is a side call of (the conversation whose first user
    message it restates, else its caller's first lane); closing ranks the two together."""
    parent_lane: Lane | None = None
    """For a child: the lane it was opened under; closing re-points it to the session that
    lane's group elects."""
    # Digests of the messages whose whole text this lane's log already holds: a text is
    # written once, at the first request holding it (a conversation resends its history).
    texts_written: set[str] = field(default_factory=set)
    tool_calls: int = 0
    children: int = 0
    refused: bool = False
    """A record of this lane held a live key: its log is removed at close (the text
    streamed before the refusal may spell the key across records)."""
    claimed: set[int] = field(default_factory=set)
    """The ordinals of this lane's delegations a child has been found by (one child each)."""
    ordinal: int | None = None
    """For a child found by its parent's delegation: that delegation's ordinal among the
    parent lane's. Closing numbers a parent's such children 0, 1, … in this order — the
    order the parent issued them (SPEC 4), whatever order they arrived in."""
    handoff_picked: str | None = None
    """For a child handed a conversation by a call picked among several of its parent's
    reply, none named like a transfer: which, a guess ``Recorder.warnings`` says at close."""
    by_arrival: str | None = None
    """For a child whose header names its parent but not its spawn index, and whose
    delegating call was not found: its caller as described (``Identity.describe``) — its
    spawn index is its arrival order, a guess ``Recorder.warnings`` says at close."""


def _texts_once(header: RequestHeaderData, written: set[str]) -> RequestHeaderData:
    """``header`` without the message and tool texts already in ``written`` (digests),
    which it then holds every text of ``header``: replay finds each by its digest. A
    message kept as JSON (format 3) keeps no readable ``text`` beside it: replay reads it
    from the JSON (``json_message_text``)."""
    if not any(
        message.text is not None or message.json is not None for message in header.messages
    ) and not any(tool.text is not None for tool in header.tools):
        return header
    messages = []
    for message in header.messages:
        if message.digest in written:
            if message.text is not None or message.json is not None:
                message = msgspec.structs.replace(message, text=None, json=None)
        elif message.text is not None or message.json is not None:
            written.add(message.digest)
            if message.json is not None and message.text is not None:
                # The readable text is the JSON's (``json_message_text``): kept once.
                message = msgspec.structs.replace(message, text=None)
        messages.append(message)
    tools = []
    for tool in header.tools:
        if tool.text is not None and tool.digest in written:
            tool = msgspec.structs.replace(tool, text=None)
        elif tool.text is not None:
            written.add(tool.digest)
        tools.append(tool)
    return msgspec.structs.replace(header, messages=tuple(messages), tools=tuple(tools))


class CallRecording:
    """One model call being recorded into its lane: its ``request/header`` and chunks go
    through the agent kit's ``CallRecorder`` (the one writer of a call's records), every
    record through the recorder's key scan; the proxy adds the turn events and what the
    HTTP outcome means (an error status, a cut, an interruption, a refusal)."""

    def __init__(self, recorder: LaneLogs, lane: Lane, turn: int) -> None:
        self._recorder = recorder
        self.lane = lane
        self.turn = turn
        self.finished = False
        self.written = 0
        self._chunks: list[Chunk] = []
        self._call: CallRecorder | None = None
        self.values: dict[str, str] = {}
        """The captured live values of its request (``{placeholder: value}``): written as
        their placeholders; deltas are held until their block ends, as a value may be split
        across them."""
        self._held: list[Chunk] = []

    def _open(self, header: RequestHeaderData) -> None:
        """Write the call's ``request/header`` (``CallRecorder`` does, through the scan),
        each message's whole text only where the lane's log does not hold it yet."""
        header = _texts_once(header, self.lane.texts_written)
        try:
            self._call = CallRecorder(
                self.lane.session,
                turn=self.turn,
                step=0,
                request=header,
                append=lambda data: self._recorder._write(self.lane, data),
            )
        except SecretInRecordingError:
            self.refuse()

    def chunk(self, chunk: Chunk) -> None:
        if self.finished or self._call is None:
            return
        if self.values:
            if delta_text(chunk) is not None:
                self._held.append(chunk)
            else:
                held, self._held = [*self._held, chunk], []
                for written in tokenized_chunks(held, self.values):
                    try:
                        self._call.chunk(written)
                    except SecretInRecordingError:
                        self.refuse()
                        return
        else:
            try:
                self._call.chunk(chunk)
            except SecretInRecordingError:
                self.refuse()
                return
        self.written += 1
        self._chunks.append(chunk)
        if isinstance(chunk, BlockEnd):
            if isinstance(chunk.block, ToolCallPart):
                self.lane.tool_calls += 1
            # Masked as the requests are (a child's first message is compared masked: a
            # time in a delegated prompt is {{time}} on both sides), as replay masks them.
            self.lane.delegations.extend(
                delegations(
                    (chunk,), len(self.lane.delegations), self._recorder.mask, call=self.turn
                )
            )
        if isinstance(chunk, Finish):
            self.lane.reply = recorded_reply(self._chunks, self._recorder.mask)
            self._end("completed" if chunk.reason != "error" else "error")

    def chunks(self, chunks: Iterable[Chunk]) -> None:
        for chunk in chunks:
            self.chunk(chunk)

    def http_error(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        """The upstream answered with an error status: record it as the call's outcome."""
        payload = {
            "status": status,
            "headers": kept_headers(headers),
            "body": body.decode("utf-8", "replace"),
        }
        self.chunk(
            Finish(reason="error", code=f"{HTTP_CODE_PREFIX}{status}", message=json.dumps(payload))
        )

    def stream_error(self, raw: str) -> None:
        """An error event inside the stream (e.g. ``overloaded_error``): kept raw."""
        self.chunk(Finish(reason="error", code=STREAM_ERROR_CODE, message=raw))

    def cut(self, detail: str) -> None:
        """The upstream stream ended without finishing: replay cuts it at the same place."""
        self.chunk(Finish(reason="error", code=CUT_CODE, message=detail))

    def streamed_text(self) -> str:
        """The text its deltas streamed so far (text, reasoning, tool arguments), joined."""
        return "".join(delta_text(chunk) or "" for chunk in self._chunks)

    def holds_value(self, text: str) -> bool:
        """Whether ``text`` holds one of the request's captured values."""
        return any(value in text for value in self.values.values())

    def abandon(self) -> None:
        """Close the call without a finish (only when the proxy itself failed)."""
        if not self.finished:
            self.cut("the proxy stopped before the call finished")

    def interrupt(self, who: str) -> None:
        """The proxy is stopping (signal, end of input) while this call streams: keep every
        chunk so far, seal the call as cut and its turn as interrupted, and say so once."""
        if self.finished:
            return
        if self._call is not None:
            try:
                self._call.seal(Finish(reason="error", code=CUT_CODE, message=INTERRUPTED_MESSAGE))
            except SecretInRecordingError:
                self.refuse()
                return
        self._end("interrupted")
        logger.warning(
            "%s: call %d was still streaming when the proxy stopped; recorded its %d "
            "chunk(s) so far, sealed as interrupted",
            who,
            self.turn + 1,
            self.written,
        )

    def _end(self, reason: str) -> None:
        self.finished = True
        self.lane.busy = False
        self._put(TurnEndData(turn=self.turn, reason=reason))  # type: ignore[arg-type]

    def _put(self, data: Any) -> bool:
        """Write one record of this call; False (and the call refused) if it held a key."""
        try:
            self._recorder._write(self.lane, data)
        except SecretInRecordingError:
            self.refuse()
            return False
        return True

    def refuse(self) -> None:
        """A record of this call held a live key (``Recorder._write`` said so): record
        nothing more of it, seal it as cut so the log stays whole, and let the stream go on
        to its client — only writing is refused, never forwarding."""
        if self.finished:
            return
        self.finished = True
        self.lane.busy = False
        self.lane.refused = True
        with suppress(SecretInRecordingError):  # neither record holds anything a client sent
            self._recorder._write(
                self.lane,
                AssistantChunkData(
                    turn=self.turn,
                    step=0,
                    chunk=Finish(reason="error", code=CUT_CODE, message=REFUSED_MESSAGE),
                ),
            )
            self._recorder._write(self.lane, TurnEndData(turn=self.turn, reason="error"))


class LaneLogs:
    """The session logs of one run under ``sessions_root``, a lane each: opens a lane's
    calls and writes their records through the run's secret scan; ``close`` seals them.
    What goes into which lane, and what closing decides, is the subclass's."""

    def __init__(
        self,
        sessions_root: Path,
        cwd: str,
        mask: Callable[[str], str] | None = None,
        allow_secrets: Iterable[str] = (),
    ) -> None:
        self.sessions_root = sessions_root
        self.cwd = cwd
        self.mask = mask
        """The request masking, applied to recorded replies before chaining compares them."""
        self._store = SessionStore(sessions_root)
        self._lanes: dict[str, list[Lane]] = {}
        self.scan = SecretScan(allow=allow_secrets)
        """The run's secret scan: the keys clients sent (``Recorder.note_secrets``), auth
        headers and known key shapes less the allowed sha256 digests (``allow_secrets``)."""
        self.errors: list[str] = []

    def _write(self, lane: Lane, data: Any) -> None:
        if self.scan.has_values:
            encoded = msgspec.json.encode(data).decode("utf-8", "replace")
            origin = self.scan.value_in(encoded)
            if origin is not None:
                turn = getattr(data, "turn", None)
                call = f"call {turn + 1} of " if isinstance(turn, int) else ""
                message = (
                    f"refused to record a live API key: the {type(data).__name__} of "
                    f"{call}session {lane.session.id} contains {origin} (not shown). The "
                    "call was still forwarded to its client, but nothing more of it was "
                    f"recorded and its log {lane.session.path} is removed (what streamed "
                    "before may spell the key). Find out why the model's answer (or the "
                    "request) holds the key — e.g. a tool or prompt that prints the "
                    "environment — remove it, and record again"
                )
                self.errors.append(message)
                raise SecretInRecordingError(message)
        lane.session.append(data)

    def _start_call(self, lane: Lane, header: RequestHeaderData) -> CallRecording:
        """Open the lane's next call: its ``turn/start`` and its ``request/header``."""
        lane.busy = True
        turn = lane.calls
        lane.calls += 1
        call = CallRecording(self, lane, turn)
        if call._put(TurnStartData(turn=turn)):
            call._open(msgspec.structs.replace(header, turn=turn, step=0))
        return call

    def close(self) -> None:
        """Flush and close every log (a call still streaming is sealed as cut)."""
        for lanes in self._lanes.values():
            for lane in lanes:
                if lane.busy:
                    lane.busy = False
                    try:
                        self._write(
                            lane,
                            AssistantChunkData(
                                turn=lane.calls - 1,
                                step=0,
                                chunk=Finish(
                                    reason="error",
                                    code=CUT_CODE,
                                    message=INTERRUPTED_MESSAGE,
                                ),
                            ),
                        )
                        self._write(lane, TurnEndData(turn=lane.calls - 1, reason="interrupted"))
                    except SecretInRecordingError:
                        pass
                lane.session.close()
        self._scan_logs()
        try:
            self._settle()
        finally:
            for lanes in self._lanes.values():
                for lane in lanes:
                    if lane.refused:
                        lane.session.path.unlink(missing_ok=True)

    def _scan_logs(self) -> None:
        """The whole scan over each closed lane's log, at close (none by default)."""

    def _settle(self) -> None:
        """What closing decides once every log is sealed and scanned (nothing by
        default); a refused lane's log is removed after it, whatever it raised."""
