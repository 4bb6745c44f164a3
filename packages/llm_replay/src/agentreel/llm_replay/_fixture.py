"""Reading a fixture directory into per-session scripts of recorded model calls.

A fixture holds ``session.jsonl`` (the main recording) and ``session.<n>.jsonl`` for
n = 1..k, numbered in session order (SPEC section 4); the names, the numbering rule, the
override file and the ``{{cwd}}`` token are the session package's fixture layout
(``agentreel.session``). Each session's script is its own ``assistant/chunk`` events —
after ``seed_length`` for children, since a fork child's seed is its parent's history —
grouped into calls that end at ``finish``.
Everything is decoded once, here, so streaming a call is iterating a tuple.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from agentreel.llm import (
    BlockEnd,
    Chunk,
    Finish,
    ReasoningDelta,
    ReasoningPart,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
)
from agentreel.llm_replay._deltas import delta_streams, delta_text, regrouped, with_delta_text
from agentreel.llm_replay._overrides import Override, load_overrides
from agentreel.llm_replay.exceptions import FixtureError, IncompleteCallError
from agentreel.session import (
    CWD_TOKEN,
    MAIN_SESSION_FILE,
    OVERRIDE_FILE,
    AssistantChunk,
    RequestHeader,
    RequestHeaderData,
    SessionHeader,
    SessionLogError,
    SessionLogReader,
    SubagentStart,
    ToolCall,
    json_message_text,
    open_session_log,
    order_sessions,
    remasked_messages,
    remasked_tools,
    rerecord_command,
    session_file_name,
    session_file_number,
    session_token,
    without_texts,
)


class RecordedCall(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded model call: its chunks (ending with ``finish``) and its request header.

    ``number`` counts from 1 within the session. ``cwd_chunks`` lists the positions of
    chunks that contain the ``{{cwd}}`` token, so substitution touches only those.
    A frozen msgspec Struct, not a frozen dataclass: one is built per recorded call, and
    a frozen dataclass's ``__init__`` (``object.__setattr__`` per field) cost 8x as much.
    """

    number: int
    turn: int
    step: int
    chunks: tuple[Chunk, ...]
    request: RequestHeaderData | None
    cwd_chunks: tuple[int, ...]
    started: float = 0.0
    """When the call started, on the recording's one clock (epoch ms): its
    ``request/header``'s time, else its first chunk's."""
    ended: float = 0.0
    """When it ended: its ``finish`` chunk's time (SPEC 13: the recorded schedule)."""


@dataclass(frozen=True, slots=True)
class Script:
    """One recorded session's model calls, in order.

    ``number`` is the fixture file number (0 = ``session.jsonl``, n = ``session.<n>.jsonl``).
    """

    number: int
    path: Path
    header: SessionHeader
    calls: tuple[RecordedCall, ...]
    spawned: dict[int, str] = field(default_factory=dict)
    # The log records the agent's side of delegation (tool calls, subagent/start), as an
    # in-process agent writes it; a proxy's log holds model calls only.
    records_delegation: bool = False

    @property
    def file(self) -> str:
        return self.path.name

    @property
    def label(self) -> str:
        """``session.2.jsonl ({{session:2}})`` — how messages name a script (``script_label``)."""
        header = self.header
        return script_label(self.file, self.number, header.parent_session, header.spawn_index)


def script_label(file: str, number: int, parent: str | None, spawn_index: int | None) -> str:
    """A recorded script as the user sees it: its fixture file and its golden token (the
    number is its session-order position, as the goldens number sessions), ``side lane``
    for a session under a parent without a spawn index (a proxy's side call). Never the
    recorded UUID, which says nothing to a reader and is the same only for one recording."""
    lane = ", side lane" if parent is not None and spawn_index is None else ""
    return f"{file} ({session_token(number)}{lane})"


@dataclass(frozen=True, slots=True)
class Recording:
    """Every script of a fixture directory, in session order, plus the lineage map.

    ``lineage`` maps (recorded parent id, spawn_index) to the script number of the child
    recorded with that identity — from the child's header, or from the parent's
    ``subagent/start`` event. ``spawned`` holds every (parent id, spawn_index) → child id
    the recording knows of, including children whose log is missing from the fixture.
    """

    fixture_dir: Path
    scripts: tuple[Script, ...]
    lineage: dict[tuple[str, int], int]
    spawned: dict[tuple[str, int], str] = field(default_factory=dict)
    overrides: dict[tuple[int, int], Override] = field(default_factory=dict)

    @property
    def scenario(self) -> str:
        return self.fixture_dir.name


def fixture_files(fixture_dir: Path) -> list[Path]:
    """``session.jsonl`` then ``session.1.jsonl``..``session.<k>.jsonl``; anything else
    named ``session.*`` (or a missing or skipped number) is a ``FixtureError``."""
    if not fixture_dir.is_dir():
        raise FixtureError(
            fixture_dir,
            f"replay fixture directory {fixture_dir} does not exist or is not a directory. "
            "Pass the scenario directory holding session.jsonl, or record it first: "
            + rerecord_command(fixture_dir.name),
        )
    numbered: dict[int, Path] = {}
    main: Path | None = None
    for path in sorted(fixture_dir.iterdir()):
        if not path.name.startswith("session."):
            continue
        file_number = session_file_number(path.name)
        if file_number is None or not path.is_file():
            raise FixtureError(
                path,
                f"stray file {path} in replay fixture {fixture_dir}: only session.jsonl and "
                "session.<n>.jsonl (n = 1, 2, ... without leading zeros) may be named "
                "session.*. Remove or rename it, or re-record: "
                + rerecord_command(fixture_dir.name),
            )
        if file_number == 0:
            main = path
        else:
            numbered[file_number] = path
    if main is None:
        missing = fixture_dir / MAIN_SESSION_FILE
        raise FixtureError(
            missing,
            f"missing {missing}: a replay fixture needs the main session's recording. "
            f"Record the scenario: {rerecord_command(fixture_dir.name)}",
        )
    files = [main]
    for number in range(1, len(numbered) + 1):
        if number not in numbered:
            missing = fixture_dir / session_file_name(number)
            present = ", ".join(p.name for _, p in sorted(numbered.items()))
            raise FixtureError(
                missing,
                f"missing {missing}: child recordings must be numbered 1..k without gaps "
                f"(found {present}). Restore the file or re-record: "
                + rerecord_command(fixture_dir.name),
            )
        files.append(numbered[number])
    return files


def load_recording(fixture_dir: Path | str, *, respect_seed_length: bool = True) -> Recording:
    """Load and derive every script of ``fixture_dir`` (and its overrides, if any).

    Every load checks the recording is consistent (SPEC 10), each failure a
    ``FixtureError`` naming the file: one session id in two files, a child whose id is its
    parent's, a child with lineage whose parent's log lacks the matching
    ``subagent/start``, child files not numbered in session order, the recording run's
    absolute cwd where ``{{cwd}}`` belongs.

    ``respect_seed_length=False`` is a test hook: it treats a fork child's seed as its
    own, which replays the parent's calls to the child — the bug the seed slice prevents.
    """
    fixture_dir = Path(fixture_dir)
    scripts: list[Script] = []
    for number, path in enumerate(fixture_files(fixture_dir)):
        scripts.append(_load_script(number, path, fixture_dir.name, respect_seed_length))
    _check_consistency(scripts, rerecord_command(fixture_dir.name))
    lineage, spawned = _lineage(scripts, fixture_dir)
    overrides: dict[tuple[int, int], Override] = {}
    override_path = fixture_dir / OVERRIDE_FILE
    if override_path.exists():
        overrides = load_overrides(
            override_path, [[len(c.chunks) for c in s.calls] for s in scripts]
        )
    return Recording(
        fixture_dir=fixture_dir,
        scripts=tuple(scripts),
        lineage=lineage,
        spawned=spawned,
        overrides=overrides,
    )


def _check_consistency(scripts: list[Script], command: str) -> None:
    """The recording's sessions form the tree its file numbering claims (SPEC 10)."""
    first_file: dict[str, Script] = {}
    for script in scripts:
        header = script.header
        other = first_file.setdefault(header.id, script)
        if other is not script:
            raise FixtureError(
                script.path,
                f"{other.path} and {script.path} both record session {header.id}: one "
                "session's log was copied twice (a session id is written once). Remove the "
                f"copy or re-record: {command}",
            )
        if header.parent_session == header.id:
            raise FixtureError(
                script.path,
                f"{script.path}:1: session {header.id} names itself as its parent_session; a "
                f"child's id is never its parent's. Re-record: {command}",
            )
    for script in scripts[1:]:
        header = script.header
        parent = first_file.get(header.parent_session or "")
        if parent is None or header.spawn_index is None or not parent.records_delegation:
            continue  # no lineage, or a parent log that records no delegations (a proxy's)
        started = parent.spawned.get(header.spawn_index)
        if started != header.id:
            found = (
                f"its subagent/start for spawn index {header.spawn_index} names session {started}"
                if started is not None
                else f"it has no subagent/start for spawn index {header.spawn_index}"
            )
            raise FixtureError(
                script.path,
                f"{script.path}:1: session {header.id} claims parent {header.parent_session} "
                f"and spawn index {header.spawn_index}, but the parent's log {parent.path} "
                f"does not record starting it: {found}. The files are from different runs, "
                f"or one was edited. Re-record: {command}",
            )
    ordered = order_sessions(scripts, lambda script: script.header)
    for position, script in enumerate(ordered):
        if script.number != position:
            expected = scripts[position]
            raise FixtureError(
                script.path,
                f"{script.path} holds session {script.header.id}, which comes at "
                f"{session_file_name(position)} in session order (parents before children, "
                f"siblings by spawn index); {expected.path.name} holds "
                f"{expected.header.id}. Child files must be numbered in session order: "
                f"renumber them, or re-record: {command}",
            )


def _lineage(
    scripts: list[Script], fixture_dir: Path
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], str]]:
    by_id = {script.header.id: script for script in scripts}
    lineage: dict[tuple[str, int], int] = {}
    spawned: dict[tuple[str, int], str] = {}
    for script in scripts[1:]:
        header = script.header
        if header.parent_session is None or header.spawn_index is None:
            continue
        if header.parent_session not in by_id:
            continue
        key = (header.parent_session, header.spawn_index)
        if key in lineage:
            other = scripts[lineage[key]]
            raise FixtureError(
                script.path,
                f"{script.path} and {other.path} both record spawn index {header.spawn_index} "
                f"of parent session {header.parent_session}; a child's spawn index must be "
                f"unique. Re-record: {rerecord_command(fixture_dir.name)}",
            )
        lineage[key] = script.number
        spawned[key] = header.id
    # The parent's own subagent/start events fill in children recorded without a spawn
    # index in their header, and name children whose log is missing.
    for script in scripts:
        for spawn_index, child_id in script.spawned.items():
            key = (script.header.id, spawn_index)
            spawned.setdefault(key, child_id)
            child = by_id.get(child_id)
            if key in lineage or child is None or child.number == 0:
                continue
            if child.header.parent_session not in (None, script.header.id):
                continue
            if child.number not in lineage.values():
                lineage[key] = child.number
    return lineage, spawned


def _load_script(number: int, path: Path, scenario: str, respect_seed_length: bool) -> Script:
    try:
        log = open_session_log(path)
        # The main session is never sliced; a child's seed is its parent's history.
        seed = log.header.seed_length if number > 0 and respect_seed_length else 0
        calls, spawned, delegates, incomplete = _derive_calls(log, seed, path, scenario)
    except SessionLogError as exc:
        # The session package knows neither the scenario nor the command: rebuilt here.
        raise FixtureError(
            path,
            f"cannot load replay fixture: {exc.path}:{exc.line}: {exc.problem}. {exc.advice}: "
            f"{rerecord_command(scenario)}",
        ) from None
    except OSError as exc:
        raise FixtureError(
            path,
            f"cannot read replay fixture {path}: {exc}. Check the file's permissions, or "
            f"re-record: {rerecord_command(scenario)}",
        ) from None
    # What is wrong with the file itself is named before what is wrong with its calls.
    if log.torn_tail is not None:
        raise FixtureError(
            path,
            f"{path}:{log.torn_tail.line}: the last line is cut mid-write "
            f"({log.torn_tail.problem}); a replay fixture must be complete. Re-record: "
            f"{rerecord_command(scenario)}",
        )
    if log.header.cwd != CWD_TOKEN:
        _check_no_recorded_cwd(path, log.header.cwd, rerecord_command(scenario))
    if incomplete is not None:
        raise incomplete
    return Script(
        number=number,
        path=path,
        header=log.header,
        calls=tuple(calls),
        spawned=spawned,
        records_delegation=delegates,
    )


def _derive_calls(
    log: SessionLogReader, seed: int, path: Path, scenario: str
) -> tuple[list[RecordedCall], dict[int, str], bool, FixtureError | None]:
    """The session's calls (chunks up to each ``finish``, with the ``request/header`` of
    their step) after its first ``seed`` events, its ``subagent/start`` children, whether
    it records delegation, and the first call without ``finish`` (returned, not raised:
    the log is read to its end first, so its own errors are named first).

    Speed (replay throughput, SPEC 9): one pass, block by block as the loader decodes
    them (the events still in the CPU cache), with only a type test and a few attribute
    reads per chunk. The ``{{cwd}}`` positions are found on the way: a ``block-end`` or
    ``finish`` is searched where it is met, and a delta only tells whether it holds ``{``
    (a possible, even split, token) — only then is a call walked again (``_make_call``).
    One pass over the events beats whole-list ``map`` / ``compress`` passes here: those
    touch every object once per pass, and the objects of a large log do not fit in the
    CPU cache.
    """
    session_id = log.header.id
    calls: list[RecordedCall] = []
    pending: list[Chunk] = []
    tokens: list[int] = []  # positions in ``pending`` of block ends / finish with a token
    braces = False
    turn = step = 0
    last_request: RequestHeaderData | None = None
    request: RequestHeaderData | None = None
    request_time = started = 0.0
    spawned: dict[int, str] = {}
    delegates = False
    blocks = iter(log)
    for events in blocks:
        if seed:
            if len(events) <= seed:
                seed -= len(events)
                continue
            events = events[seed:]
            seed = 0
        for event in events:
            if type(event) is not AssistantChunk:
                if type(event) is RequestHeader:
                    last_request = event.data
                    request_time = event.time
                elif type(event) is SubagentStart:
                    spawned.setdefault(event.data.spawn_index, event.data.child_session)
                    delegates = True
                elif type(event) is ToolCall:
                    delegates = True
                continue
            data = event.data
            if not pending:
                turn = data.turn
                step = data.step
                request = last_request
                if request is not None and (request.turn != turn or request.step != step):
                    request = None
                started = request_time if request is not None else event.time
            elif data.turn != turn or data.step != step:
                break
            chunk = data.chunk
            pending.append(chunk)
            kind = type(chunk)
            if kind is TextDelta or kind is ReasoningDelta:
                if not braces and "{" in chunk.text:  # type: ignore[union-attr]
                    braces = True
            elif kind is ToolCallDelta:
                if not braces and "{" in chunk.arguments_delta:  # type: ignore[union-attr]
                    braces = True
            elif kind is BlockEnd:
                if _block_has_cwd_token(chunk):
                    tokens.append(len(pending) - 1)
            elif kind is Finish:
                message = chunk.message  # type: ignore[union-attr]
                if message is not None and CWD_TOKEN in message:
                    tokens.append(len(pending) - 1)
                calls.append(
                    _make_call(
                        len(calls) + 1,
                        turn,
                        step,
                        pending,
                        request,
                        braces,
                        tokens,
                        (started, event.time),
                    )
                )
                pending = []
                if tokens:
                    tokens = []
                braces = False
                last_request = None
        else:
            continue
        # A chunk of another step while a call is pending: that call has no finish.
        for _ in blocks:  # the rest of the log still read (and checked)
            pass
        break
    incomplete = _incomplete(path, session_id, turn, step, scenario) if pending else None
    return calls, spawned, delegates, incomplete


def _check_no_recorded_cwd(path: Path, cwd: str, command: str) -> None:
    """A header cwd other than ``{{cwd}}`` is harmless until that path appears in what
    replay hands the agent: then the live run would get the recording machine's path.

    One search of the whole file per spelling (the line is counted only on a hit)."""
    data = path.read_bytes()
    body = data.find(b"\n") + 1  # the header itself names the cwd
    if body == 0:
        return
    hits = [data.find(form, body) for form in {cwd.encode(), json.dumps(cwd)[1:-1].encode()}]
    found = [hit for hit in hits if hit >= 0]
    if found:
        number = data.count(b"\n", 0, min(found)) + 1
        raise FixtureError(
            path,
            f"{path}:{number}: the recording holds the absolute path {cwd} (the "
            f"recording run's cwd, also in the header at {path}:1) where {CWD_TOKEN} "
            "belongs; replay would hand it to the live agent unchanged. Recordings "
            f"store the cwd as {CWD_TOKEN}: re-record: {command}",
        )


def _incomplete(path: Path, session_id: str, turn: int, step: int, scenario: str) -> FixtureError:
    return IncompleteCallError(
        path,
        f"{path}: session {session_id}, turn {turn}, step {step}: the recorded model call "
        "has no finish chunk (the recording was cut short). Re-record: "
        f"{rerecord_command(scenario)}",
        turn=turn,
        step=step,
    )


def _make_call(
    number: int,
    turn: int,
    step: int,
    chunks: list[Chunk],
    request: RequestHeaderData | None,
    braces: bool,
    tokens: list[int],
    times: tuple[float, float],
) -> RecordedCall:
    # A delta without a brace can hold no piece of a token (``braces``: some delta has
    # one), so without one the block ends and the finish already searched are all.
    if braces:
        chunks = _heal_split_tokens(chunks)
        cwd_chunks = tuple(i for i, chunk in enumerate(chunks) if _has_cwd_token(chunk))
    else:
        cwd_chunks = tuple(tokens) if tokens else ()
    return RecordedCall(
        number=number,
        turn=turn,
        step=step,
        chunks=tuple(chunks),
        request=request,
        cwd_chunks=cwd_chunks,
        started=times[0],
        ended=times[1],
    )


def _heal_split_tokens(chunks: list[Chunk]) -> list[Chunk]:
    """Move a ``{{cwd}}`` token split across deltas of one block into the delta where it
    starts, so per-chunk substitution sees whole tokens. Chunk count is unchanged."""
    result = list(chunks)
    for positions in delta_streams(chunks):
        pieces = [delta_text(chunks[p]) or "" for p in positions]
        full = "".join(pieces)
        if CWD_TOKEN not in full:
            continue
        spans = [m.span() for m in re.finditer(re.escape(CWD_TOKEN), full)]
        for position, text in zip(positions, regrouped(pieces, spans), strict=True):
            if text != delta_text(chunks[position]):
                result[position] = with_delta_text(chunks[position], text)
    return result


def _block_has_cwd_token(chunk: Chunk) -> bool:
    """``_has_cwd_token`` for a ``block-end`` chunk, without the type tests before it."""
    block = chunk.block  # type: ignore[union-attr]
    return CWD_TOKEN in (block.arguments if isinstance(block, ToolCallPart) else block.text)


def _has_cwd_token(chunk: Chunk) -> bool:
    if isinstance(chunk, (TextDelta, ReasoningDelta)):
        return CWD_TOKEN in chunk.text
    if isinstance(chunk, ToolCallDelta):
        return CWD_TOKEN in chunk.arguments_delta
    if isinstance(chunk, BlockEnd):
        block = chunk.block
        if isinstance(block, ToolCallPart):
            return CWD_TOKEN in block.arguments
        return CWD_TOKEN in block.text
    if isinstance(chunk, Finish):
        return chunk.message is not None and CWD_TOKEN in chunk.message
    return False


def substitute_cwd(chunk: Chunk, cwd: str, cwd_in_json: str) -> Chunk:
    """``chunk`` with ``{{cwd}}`` replaced by the live cwd.

    Tool-call arguments are JSON text, so there the cwd goes in JSON-string-escaped
    (``cwd_in_json``); identical to ``cwd`` for ordinary paths.
    """
    if isinstance(chunk, TextDelta):
        return TextDelta(index=chunk.index, text=chunk.text.replace(CWD_TOKEN, cwd))
    if isinstance(chunk, ReasoningDelta):
        return ReasoningDelta(index=chunk.index, text=chunk.text.replace(CWD_TOKEN, cwd))
    if isinstance(chunk, ToolCallDelta):
        return ToolCallDelta(
            index=chunk.index,
            id=chunk.id,
            name=chunk.name,
            arguments_delta=chunk.arguments_delta.replace(CWD_TOKEN, cwd_in_json),
        )
    if isinstance(chunk, BlockEnd):
        block = chunk.block
        if isinstance(block, ToolCallPart):
            arguments = block.arguments.replace(CWD_TOKEN, cwd_in_json)
            return BlockEnd(
                index=chunk.index,
                block=ToolCallPart(id=block.id, name=block.name, arguments=arguments),
            )
        if isinstance(block, TextPart):
            return BlockEnd(index=chunk.index, block=TextPart(block.text.replace(CWD_TOKEN, cwd)))
        reasoning = ReasoningPart(block.text.replace(CWD_TOKEN, cwd), signature=block.signature)
        return BlockEnd(index=chunk.index, block=reasoning)
    if isinstance(chunk, Finish) and chunk.message is not None:
        return msgspec.structs.replace(chunk, message=chunk.message.replace(CWD_TOKEN, cwd))
    return chunk


def masked_recording(
    recording: Recording,
    mask: Callable[[str], str],
    *,
    messages: bool = True,
    digests: bool = False,
) -> Recording:
    """``recording`` with ``mask`` applied to its request headers' texts (system prompt,
    message previews), as the proxy applies it to live requests before building theirs.

    The masks are idempotent, so a recording made with them is unchanged; one made before
    a rule existed (a machine fact in a system prompt) compares equal again. Digests were
    taken when recorded: a masked fact inside a message beyond its preview needs a
    re-record. A tool whose whole JSON the recording keeps (``ToolHeader.text``, once per
    log) is masked again and digested again (``remasked_tools``), so a new mask never
    breaks it. Each distinct text is masked once (a conversation repeats its system prompt).
    ``messages=False``: the messages stay as recorded — a recording made with an older
    mask set is compared with the live messages masked with that set (SPEC 15).
    ``digests``: each message whose canonical JSON the recording keeps (format 3,
    ``MessageHeader.json``) is masked again and digested again (``remasked_messages``) — a
    recording made with an older mask set compares with the live messages under today's.
    """
    masked: dict[str, str] = {}
    remask = messages
    message_jsons = {
        message.digest: message.json
        for script in recording.scripts
        for call in script.calls
        if digests and call.request is not None
        for message in call.request.messages
        if message.json is not None
    }
    tool_texts = {
        tool.digest: tool.text
        for script in recording.scripts
        for call in script.calls
        if call.request is not None
        for tool in call.request.tools
        if tool.text is not None
    }

    def text(value: str) -> str:
        found = masked.get(value)
        if found is None:
            found = masked[value] = mask(value)
        return found

    def header(request: RequestHeaderData) -> RequestHeaderData:
        if tool_texts:
            request = remasked_tools(request, tool_texts, text)
        if message_jsons:
            request = remasked_messages(request, message_jsons, text)
        system = text(request.system) if request.system is not None else None
        messages = tuple(
            message
            if not remask
            or (
                (preview := text(message.preview)) == message.preview
                and (message.text is None or text(message.text) == message.text)
            )
            else msgspec.structs.replace(
                message,
                preview=preview,
                text=text(message.text) if message.text is not None else None,
            )
            for message in request.messages
        )
        if system == request.system and messages == request.messages:
            return request
        return msgspec.structs.replace(request, system=system, messages=messages)

    return _with_requests(recording, header)


def message_texts(recording: Recording) -> tuple[Recording, dict[str, str]]:
    """The whole message and tool texts a recording keeps (``MessageHeader.text``,
    ``ToolHeader.text``, each written once per log), by digest, and the recording without
    them: replay compares digests and previews, served logs and goldens hold what they
    always held, and a drift shows the texts (``diff_request_headers(texts=...)``)."""
    texts: dict[str, str] = {}
    for script in recording.scripts:
        for call in script.calls:
            if call.request is not None:
                for message in call.request.messages:
                    if message.text is not None:
                        texts.setdefault(message.digest, message.text)
                    elif message.json is not None and message.digest not in texts:
                        texts[message.digest] = json_message_text(message.json)
                for tool in call.request.tools:
                    if tool.text is not None:
                        texts.setdefault(tool.digest, tool.text)
    if not texts:
        return recording, texts

    return _with_requests(recording, without_texts), texts


def _with_requests(
    recording: Recording, change: Callable[[RequestHeaderData], RequestHeaderData]
) -> Recording:
    """``recording`` with ``change`` applied to each call's request header."""
    scripts = tuple(
        dataclasses.replace(
            script,
            calls=tuple(
                call
                if call.request is None
                else msgspec.structs.replace(call, request=change(call.request))
                for call in script.calls
            ),
        )
        for script in recording.scripts
    )
    return dataclasses.replace(recording, scripts=scripts)
