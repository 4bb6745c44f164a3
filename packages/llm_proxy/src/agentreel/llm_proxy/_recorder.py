"""Record mode's recorder: one session log per resolved session and lane (SPEC 4, 11).

Every lane is a session log of section 4: a header (parent, spawn index, origin), then per
model call ``turn/start``, the ``request/header`` built from the HTTP request, every
``assistant/chunk`` (these two written by ``agentreel.session.CallRecorder``),
``turn/end`` (flushed there, so a killed proxy keeps every finished call). A child names
its parent (explicit or native headers, or — without headers — the conversation that
handed on its first message: a pending tool call's argument, or for a caller with no
identity a payload of the reply's text, ``agentreel.llm_replay.lanes.delegated_by``). A child's
spawn index is the one its header gives, else the order in which its parent issued the
delegation it was found by (numbered 0, 1, … at close; SPEC 4), else its arrival order: a
guess, kept in ``Recorder.warnings`` for the record command to print at its end (the
recording is valid, only not reproducible when children start at once). A conversation's
lanes are it and, under it without a spawn index, its side calls (title, router,
classifier; a headerless one goes with the conversation whose first user message it
restates): which lane is which is decided from what each lane is — the one with more
calls, then the one with tools, then a content key (``session_rank``) — when the recorder
closes, never by arrival (SPEC 11). Until then each lane's log is flushed as it was
opened (a killed proxy loses nothing); ``close`` rewrites the headers that the rule
changes. The lanes' logs are written by ``_lane_logs`` (``LaneLogs``, ``CallRecording``),
which replay's served logs share. Nothing written may hold a credential
(``agentreel.session.SecretScan``, the one scan): each record as it is written is checked
for the keys clients sent (``SecretInRecordingError`` stops that call's recording at once),
and at close each lane's whole log — every line, so known key shapes and auth headers too, a
key streamed across deltas whole in its ``block-end`` — before anything is harvested; a lane
with a hit is refused like one that held a client's key.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from agentreel.brand import new_session_id
from agentreel.llm import SPAWN_INDEX_HEADER
from agentreel.llm.wire import WIRE_APIS
from agentreel.llm_proxy._identity import Identity
from agentreel.llm_proxy._lane_logs import CallRecording, Lane, LaneKind, LaneLogs
from agentreel.llm_proxy._requests import ParsedRequest
from agentreel.llm_proxy._verbatim import (
    VerbatimCall,
    cuts_the_cwd,
    encode_line,
    holds_the_cwd,
)
from agentreel.llm_replay import Capture
from agentreel.llm_replay.lanes import (
    Chain,
    LaneSignature,
    captured_values,
    chain,
    delegated_by,
    first_user_text,
    first_user_texts,
    lane_signature,
    message_digests,
    request_strings,
    restates,
)
from agentreel.session import (
    VERBATIM_FILE,
    RequestHeaderData,
    SecretFoundError,
    Session,
    SessionHeader,
    encode_record,
    epoch_ms,
    now_ms,
    order_sessions,
    session_file_name,
)

logger = logging.getLogger("agentreel.llm_proxy")

ANONYMOUS_KEY = "<anonymous>"
_SECRET_HEADERS = tuple(
    sorted({header for spec in WIRE_APIS.values() for header in spec.auth_headers})
)
"""Where clients send their keys: every wire API's ``auth_headers``."""


class Recorder(LaneLogs):
    """Creates and writes the session logs of one record run under ``sessions_root``."""

    def __init__(
        self,
        sessions_root: Path,
        cwd: str,
        mask: Callable[[str], str] | None = None,
        allow_secrets: Iterable[str] = (),
        captures: Sequence[Capture] = (),
    ) -> None:
        super().__init__(sessions_root, cwd, mask, allow_secrets)
        self.captures = tuple(captures)
        """Live values each call's request holds, recorded as ``{{<token>:N}}``."""
        self.warnings: list[str] = []
        """What the recorder had to guess, one sentence each naming the session, its
        parent, the file and what to send instead (filled at ``close``): the recording is
        kept — it is valid and replays — but recorded again it may come out otherwise. The
        run's ``warnings`` carry them to whoever runs the recording, which prints them at
        its end (``agentreel proxy record``, ``agentreel record``)."""
        self.verbatim: list[tuple[Lane, VerbatimCall]] = []
        """Each answered call's bytes as the upstream sent them (``_verbatim``), in order;
        also appended to ``wire.ndjson`` beside the logs as each call ends."""

    @property
    def recorded_any(self) -> bool:
        """Whether any model call reached the recorder (a session log was begun)."""
        return bool(self._lanes)

    # -- secrets -------------------------------------------------------------------------

    def note_secrets(
        self, headers: Mapping[str, str], query: Mapping[str, str] | None = None
    ) -> None:
        """Remember the keys a client sent (in a header, or Gemini's ``?key=``), so no log
        ever holds them."""
        if query is not None and query.get("key"):
            self.scan.add_value(query["key"], "the key= a client sent in its URL")
        for name in _SECRET_HEADERS:
            value = headers.get(name)
            if not value:
                continue
            secret = value.removeprefix("Bearer ").removeprefix("bearer ").strip()
            self.scan.add_value(secret, f"the {name} header a client sent")

    def holds_secret(self, text: str) -> bool:
        """Whether ``text`` contains a key a client sent (so it must not be written)."""
        return self.scan.value_in(text) is not None

    def keep_verbatim(self, call: CallRecording, answer: VerbatimCall) -> None:
        """Keep one call's answer as sent (written beside the logs at once); never when its
        lane was refused, nor when it holds a key a client sent."""
        lane = call.lane
        if lane.refused:
            return
        line = encode_line(answer)
        if self.scan.value_in(line.decode("utf-8", "replace")) is not None:
            return  # the call's own records say it: the chunks hold the same text
        if call.values and call.holds_value(line.decode("utf-8", "replace")):
            # It carries a captured live value, perhaps split across frames: replay
            # re-encodes it from its chunks, where the value is its placeholder.
            return
        if cuts_the_cwd(answer, call.streamed_text(), self.cwd) or holds_the_cwd(answer, self.cwd):
            return  # the same for the cwd cut between frames: {{cwd}} is whole in chunks
        self.verbatim.append((lane, answer))
        with (self.sessions_root / VERBATIM_FILE).open("ab") as out:
            out.write(line)

    def kept_verbatim(self) -> list[VerbatimCall]:
        """The answers of the lanes whose logs are kept (a refused lane's are dropped)."""
        return [answer for lane, answer in self.verbatim if not lane.refused]

    # -- lanes ---------------------------------------------------------------------------

    def sessions_by_caller(self) -> dict[str, str]:
        """Each named caller's session id (its first lane's): what a drifted recording's
        merge knows the replayed callers by (SPEC 20)."""
        return {
            key: lanes[0].session.id
            for key, lanes in self._lanes.items()
            if lanes and key != ANONYMOUS_KEY
        }

    def begin(
        self, identity: Identity, header: RequestHeaderData, request: ParsedRequest
    ) -> CallRecording:
        """Start recording one call: find (or open) its lane and write its request header."""
        key = identity.session if identity.session is not None else ANONYMOUS_KEY
        signature = lane_signature(header)
        digests = message_digests(header)
        lanes = self._lanes.setdefault(key, [])
        lane = self._continued(
            lanes, header, request, signature, anonymous=identity.session is None
        )
        if lane is None:
            lane = self._open_lane(
                key, identity, signature, request, first=not lanes, tools=bool(header.tools)
            )
            lane.first = digests
            lane.first_user = first_user_text(request.messages)
            lane.tools = bool(header.tools)
            lanes.append(lane)
        lane.previous = digests
        call = self._start_call(lane, header)
        if self.captures:
            call.values = captured_values(self.captures, request_strings(request.options()))
        return call

    def _continued(
        self,
        lanes: list[Lane],
        header: RequestHeaderData,
        request: ParsedRequest,
        signature: LaneSignature,
        *,
        anonymous: bool = False,
    ) -> Lane | None:
        """The lane this request continues, or None for a new one.

        First the lane whose previous request and recorded reply it starts with (or whose
        failed call it retries); a request that is some lane's first request again starts a
        new conversation; else the lane it extends without the reply as recorded, then —
        for a caller with an identity — the idle lane of its signature (a client that
        rewrites its history).
        """
        # A lane's requests share its signature (another system prompt or tool set — a
        # handoff to another agent — is a lane of its own).
        idle = [lane for lane in lanes if not lane.busy and lane.signature == signature]
        extended: list[Lane] = []
        for lane in idle:
            strength = chain(lane.previous, lane.reply, header, request.messages)
            if strength is Chain.CONTINUES:
                return lane
            if strength is Chain.EXTENDS:
                extended.append(lane)
        digests = message_digests(header)
        if any(lane.first == digests for lane in lanes):
            return None
        if extended:
            return extended[0]
        if anonymous:
            # Without identity a request is only what it is (replay's rule too): one that
            # neither continues nor extends a lane of its signature is another conversation
            # — Qwen Code's classifier judging the next tool call repeats the same first
            # message with another pending call, a second worker the same task.
            return None
        return idle[0] if idle else None

    def _open_lane(
        self,
        key: str,
        identity: Identity,
        signature: LaneSignature,
        request: ParsedRequest,
        *,
        first: bool,
        tools: bool = False,
    ) -> Lane:
        parent: Lane | None = None
        owner: Lane | None = None
        spawn_index: int | None = None
        kind: LaneKind = "session"
        parent_key: str | None = None
        ordinal: int | None = None
        by_arrival: str | None = None
        anonymous = identity.session is None
        if first and identity.parent is not None:
            parent = self._main_lane(identity.parent)
            spawn_index = identity.spawn_index
            parent_key = identity.parent
            if parent is not None and spawn_index is None:
                # A native header names the parent, not the child's ordinal: the parent's
                # pending delegating call whose prompt is one of the child's user messages
                # does (Codex's child sends its environment context first, then the prompt).
                _, ordinal = self._delegating_parent(
                    request, self._lanes[identity.parent], anonymous=False, any_user=True
                )
                spawn_index = ordinal
                if ordinal is None:
                    # A guess: said once, at the end of the record command
                    # (``warnings``, built at close with the final ids and files).
                    by_arrival = identity.describe()
                    logger.info(
                        "%s: no pending delegating tool call of parent %r has one of this "
                        "child's user messages as its prompt, so its spawn index %d is its "
                        "arrival order (%s would give it)",
                        by_arrival,
                        identity.parent,
                        self._next_child_index(parent),
                        SPAWN_INDEX_HEADER,
                    )
        elif first or anonymous:
            # A new caller's (or a headerless) conversation whose first message is what a
            # conversation handed on — a pending delegating tool call's prompt, or (for a
            # caller with no identity at all) a payload of its reply's text, as a LangGraph
            # supervisor's Send — is that conversation's child (how a headerless subagent
            # is told from a side call). Another lane of a named caller is its side lane
            # even when it asks the same (a title call on the child's prompt).
            parent, ordinal = self._delegating_parent(request, anonymous=anonymous)
            spawn_index = ordinal
            if parent is not None and not first:
                kind = "delegated"
        elif tools:
            # Another conversation of a named caller, with tools, whose first message is
            # the prompt of a pending delegating call of that caller's own lanes: a child
            # that shares its parent's identity (Claude Code 0.23.1's Task subagent sends
            # the parent's metadata.user_id session id and no header of its own), not a
            # side lane. A title or classifier call (no tools) stays a side lane even when
            # it asks the same.
            parent, ordinal = self._delegating_parent(request, self._lanes[key], anonymous=False)
            spawn_index = ordinal
            if parent is not None:
                kind = "delegated"
        if parent is None and not first:
            owner = self._restated(key, request) if anonymous else None
            parent = owner or self._main_lane(key)
            owner = parent
            kind, parent_key = "side", key
        if parent is not None and spawn_index is None and first:
            spawn_index = self._next_child_index(parent)
        header = SessionHeader(
            id=new_session_id(),
            created_at=epoch_ms(),
            cwd=self.cwd,
            parent_session=parent.session.id if parent is not None else None,
            spawn_index=spawn_index,
            origin="spawn" if parent is not None else "main",
        )
        session = Session(self._store.path_for(header), header, [], now_ms)
        if parent is not None:
            parent.children += 1
        logger.info(
            "recording %s as session %s (%s)",
            identity.describe(),
            header.id,
            "side lane" if kind == "side" else f"parent {header.parent_session}",
        )
        return Lane(
            session=session,
            key=key,
            signature=signature,
            kind=kind,
            parent_key=parent_key,
            ordinal=ordinal,
            owner=owner,
            parent_lane=parent if kind != "side" else None,
            by_arrival=by_arrival,
        )

    def _main_lane(self, key: str) -> Lane | None:
        lanes = self._lanes.get(key)
        return lanes[0] if lanes else None

    def _restated(self, key: str, request: ParsedRequest) -> Lane | None:
        """For a headerless side call: the conversation it is about — the latest lane that
        is not itself a side lane and whose first user message is this request's (Qwen
        Code's classifier judging a subagent's action restates the subagent's messages)."""
        text = first_user_text(request.messages)
        if text is None:
            return None
        found = [
            lane
            for lane in self._lanes.get(key, ())
            if lane.kind != "side" and lane.first_user == text
        ]
        return found[-1] if found else None

    def _next_child_index(self, parent: Lane) -> int:
        return parent.tool_calls + parent.children

    def _delegating_parent(
        self,
        request: ParsedRequest,
        among: Iterable[Lane] | None = None,
        *,
        anonymous: bool,
        any_user: bool = False,
    ) -> tuple[Lane | None, int | None]:
        """The lane (of ``among``, else of any caller) with a delegation not yet claimed by
        a child whose text is the request's first user message, and that delegation's
        ordinal among the lane's; claims it (``agentreel.llm_replay.lanes.delegated_by``: the rule
        replay binds by). The first user message counts whole or by one of its text parts
        (Claude Code puts a ``<system-reminder>`` part before a Task child's prompt);
        ``any_user``: any of its user messages, the first that matches wins (a child whose
        parent a header names: Codex's child sends its environment context first). A
        request that restates the delegating lane's own conversation (a classifier of its
        action) is that lane's side call, not its child — unless a header names the parent
        (``any_user``): such a caller has an identity of its own, so it is no side call of
        the parent, and Codex's child starts with the very environment context its parent
        started with."""
        said_each = (
            [first_user_texts([m]) for m in request.messages if m.role == "user"]
            if any_user
            else [first_user_texts(request.messages)]
        )
        lanes = list(
            among if among is not None else (ln for group in self._lanes.values() for ln in group)
        )
        for said in said_each:
            if not said:
                continue
            for lane in lanes:
                if not any_user and restates(request.messages, lane.first_user):
                    continue
                found = delegated_by(said, lane.delegations, lane.claimed, anonymous=anonymous)
                if found is not None:
                    lane.claimed.add(found.ordinal)
                    return lane, found.ordinal
        return None, None

    # -- shutdown ------------------------------------------------------------------------

    def _settle(self) -> None:
        """Arrange the sealed logs (``_arrange``) and say what was guessed (``warnings``)."""
        self._arrange()
        self.warnings += self._arrival_warnings()

    def _arrival_warnings(self) -> list[str]:
        """One sentence per kept child numbered by arrival (``Lane.by_arrival``), naming
        it as the recording has it after ``_arrange`` — its file in session order, session
        id, caller and spawn index, and its parent's — and the header that fixes it."""
        kept = [lane for group in self._lanes.values() for lane in group if not lane.refused]
        guessed = [lane for lane in kept if lane.by_arrival is not None]
        if not guessed:
            return []
        files: dict[str, str] = {
            lane.session.id: session_file_name(number)
            for number, lane in enumerate(order_sessions(kept, lambda ln: ln.session.header))
        }
        by_id: dict[str, Lane] = {lane.session.id: lane for lane in kept}
        warnings = []
        for lane in guessed:
            header = lane.session.header
            if header.spawn_index is None and header.parent_session in by_id:
                # Ranked a side lane of its own caller: the elected lane is the child.
                header = by_id[header.parent_session].session.header
            parent = header.parent_session
            parent_file = f"{files[parent]}, " if parent in files else ""
            warnings.append(
                f"{files[header.id]} (recorded session {header.id}; the caller "
                f"{lane.by_arrival}) is numbered by arrival: its spawn index "
                f"{header.spawn_index} is the order it started in among the children of its "
                f"parent ({parent_file}recorded session {parent}), because "
                "no pending delegating tool call of that parent had one of its user "
                "messages as its prompt. The recording is kept and replays as recorded, but "
                "recorded again, children that start at the same time may arrive in another "
                "order and swap session files (and goldens). To fix it, have the child send "
                f"the header {SPAWN_INDEX_HEADER}: N with its requests (N: its ordinal "
                "among its parent's children, 0, 1, …), then record again"
            )
        return warnings

    def _scan_logs(self) -> None:
        """The whole scan over each closed lane's log (known shapes, auth headers, the keys
        clients sent, a key split across deltas): a lane with a hit is refused — its log
        removed, the run's errors say where and which rule, never the value."""
        for lanes in self._lanes.values():
            for lane in lanes:
                path = lane.session.path
                if lane.refused or not path.is_file():
                    continue
                try:
                    self.scan.check({str(path): path.read_bytes()})
                except SecretFoundError as found:
                    lane.refused = True
                    listing = "; ".join(hit.describe() for hit in found.hits)
                    self.errors.append(
                        f"refused to record a credential in session {lane.session.id}: "
                        f"{listing} (the value is not shown). Every call was still forwarded "
                        f"to its client, but the log {path} is removed. Find out why the "
                        "model's answer or the request holds a key (a tool that read a "
                        "file with one, a prompt that prints the environment), remove it, "
                        "and record again; a deliberate fake key of a test is allowed by "
                        "its sha256 (--allow-secret, [record] allow_secrets)"
                    )

    def _arrange(self) -> None:
        """Decide each conversation's session among its lanes by ``session_rank`` and
        rewrite the headers that changes. A group is a caller's first lane or a child found
        by delegation, with the side lanes opened as its side calls; its elected session
        takes the group's relation (its parent — the session the parent's group elected —
        and spawn index), the side lanes hang under it, and ``created_at`` follows the rank,
        so session order (which sorts side lanes by it) does too."""
        lanes = [lane for group in self._lanes.values() for lane in group]
        groups: dict[int, list[Lane]] = {
            id(lane): [lane] for lane in lanes if lane.kind != "side" or lane.owner is None
        }
        for lane in lanes:
            if lane.kind == "side" and lane.owner is not None:
                groups[id(lane.owner)].append(lane)
        roots = {key: group[0] for key, group in groups.items()}
        elected = {key: sorted(group, key=session_rank)[0] for key, group in groups.items()}

        def elected_of(lane: Lane) -> Lane:
            root = lane.owner if lane.kind == "side" and lane.owner is not None else lane
            return elected.get(id(root), lane)

        for key, group in groups.items():
            root = roots[key]
            ranked = sorted(group, key=session_rank)
            parent = root.session.header.parent_session
            parent_lane = root.parent_lane
            if parent_lane is None and root.parent_key is not None and root.kind == "session":
                parent_lane = self._main_lane(root.parent_key)
            if parent_lane is not None:
                parent = elected_of(parent_lane).session.id
            times = sorted(lane.session.header.created_at for lane in ranked)
            ordinal = root.ordinal  # goes with the relation to the parent
            for lane in ranked:
                lane.ordinal = None
            ranked[0].ordinal = ordinal
            for position, lane in enumerate(ranked):
                if position == 0:
                    relation: dict[str, Any] = {
                        "parent_session": parent,
                        "spawn_index": root.session.header.spawn_index,
                        "origin": "spawn" if parent is not None else "main",
                    }
                else:
                    times[position] = max(times[position], times[position - 1] + 1)
                    relation = {
                        "parent_session": ranked[0].session.id,
                        "spawn_index": None,
                        "origin": "spawn",
                    }
                _set_header(lane, created_at=times[position], **relation)
        self._number_delegated_children()

    def _number_delegated_children(self) -> None:
        """Number the children found by delegating tool calls 0, 1, … per parent in the
        order the parent issued those calls (SPEC 4) — unless a sibling has an index from a
        header or from arrival, which numbering could collide with; then the ordinals stay."""
        lanes = [lane for group in self._lanes.values() for lane in group]
        siblings: dict[str, list[Lane]] = {}
        for lane in lanes:
            header = lane.session.header
            if header.parent_session is not None and header.spawn_index is not None:
                siblings.setdefault(header.parent_session, []).append(lane)
        for children in siblings.values():
            issued = [(child.ordinal, child) for child in children if child.ordinal is not None]
            if len(issued) < len(children):
                continue
            issued.sort(key=lambda pair: pair[0])
            for index, (_, child) in enumerate(issued):
                _set_header(child, spawn_index=index)


def session_rank(lane: Lane) -> tuple[Any, ...]:
    """Which of one caller's lanes is its session (the smallest): the conversation with
    more calls, then the one with tools, then by what its first request is (model, system
    prompt, tools, messages) — all content, so any arrival order gives the same answer.
    Total: an absent system prompt sorts before any present one (``None`` and ``str`` do not
    compare), so two lanes that tie up to the prompt still rank."""
    signature = lane.signature
    return (
        -lane.calls,
        not lane.tools,
        signature.model,
        signature.system is not None,
        signature.system or "",
        signature.tools_digest,
        signature.first_message,
        lane.first,
    )


def _set_header(lane: Lane, **changes: Any) -> None:
    """Change fields of a closed lane's header, rewriting its log when they differ."""
    header = msgspec.structs.replace(lane.session.header, **changes)
    if header != lane.session.header:
        _rewrite_header(lane.session.path, header)
        lane.session.header = header


def _rewrite_header(path: Path, header: SessionHeader) -> None:
    """Replace a closed log's first line with ``header``, atomically: until the rename the
    log is whole as flushed."""
    data = path.read_bytes()
    rest = data[data.index(b"\n") + 1 :]
    tmp = path.with_suffix(".arranging")
    tmp.write_bytes(encode_record(header) + rest)
    os.replace(tmp, path)
