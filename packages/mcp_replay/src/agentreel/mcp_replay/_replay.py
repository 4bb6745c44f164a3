"""Replay of MCP connections: binding a live connection to its session's recording,
answering each client message from it, and the run's state (claims, what was answered,
failures) that the check at the end reads (SPEC 19).

A connection that names its session is answered from that session's recording. One that
does not is bound by call order and content: its handshake (``initialize``, the lists) is
answered from the first free recording it matches so far, and its first call binds it to
the first free recording whose messages it matches up to there. A recording is taken by
an exclusive create of its claim file, so concurrent stdio shims (one process per
connection) never answer from one recording twice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentreel.mcp_replay import _failures
from agentreel.mcp_replay._layout import CLAIM_SUFFIX, FAILURE_PREFIX
from agentreel.mcp_replay._recording import (
    Masking,
    Message,
    RecordedConnection,
    all_servers,
    compare_key,
    encode,
    load_recordings,
)
from agentreel.mcp_replay.exceptions import McpDriftError

# Messages that set a connection up rather than call something: answered before the
# connection is bound to one recording.
HANDSHAKE_METHODS = frozenset(
    {
        "initialize",
        "ping",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
        "logging/setLevel",
    }
)


class RunState:
    """The run's state folder, shared by every process replaying MCP for one run."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._claims: dict[Path, int] = {}

    def _claim_path(self, recording: RecordedConnection) -> Path:
        return self.folder / f"{recording.server}.{recording.n}{CLAIM_SUFFIX}"

    def claimed(self, recording: RecordedConnection) -> bool:
        return self._claim_path(recording).exists()

    def claim(self, recording: RecordedConnection) -> bool:
        try:
            fd = os.open(self._claim_path(recording), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        self._claims[self._claim_path(recording)] = fd
        return True

    def answered(self, recording: RecordedConnection, count: int) -> None:
        """How many client messages of ``recording`` were answered: rewritten in place on
        the claim file held open (one write a call; a rename per call cost milliseconds)."""
        fd = self._claims[self._claim_path(recording)]
        os.pwrite(fd, f"{count:>12}\n".encode(), 0)

    def answered_count(self, recording: RecordedConnection) -> int | None:
        path = self._claim_path(recording)
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            return None
        return int(text) if text else 0

    def release(self, recording: RecordedConnection) -> None:
        """Close the claim file of a connection that ended (its count stays)."""
        fd = self._claims.pop(self._claim_path(recording), None)
        if fd is not None:
            os.close(fd)

    def fail(self, server: str, message: str) -> None:
        """Keep a failure for the check at the end (whatever the agent did with its error)."""
        n = 0
        while True:
            path = self.folder / f"{FAILURE_PREFIX}{server}.{os.getpid()}.{n}.txt"
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                break
            except FileExistsError:
                n += 1
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(message)

    def failures(self) -> list[str]:
        paths = sorted(self.folder.glob(f"{FAILURE_PREFIX}*.txt"), key=lambda p: p.stat().st_mtime)
        return [p.read_text(encoding="utf-8") for p in paths]


class ConnectionReplay:
    """One live connection answered from a recording of its server."""

    def __init__(
        self,
        server: str,
        recordings: list[RecordedConnection],
        state: RunState,
        session: str | None,
        masking: Masking,
        scenario: str | None,
    ) -> None:
        self.server = server
        self.session = session
        self._state = state
        self._masking = masking
        self._scenario = scenario
        self._all = recordings
        self._recordings = [r for r in recordings if session is None or r.session == session]
        self._pending: list[str] = []
        self._bound: RecordedConnection | None = None
        self._position = 0
        self.failed: str | None = None

    def answer(self, live: Message) -> list[Message]:
        """The server messages the recording answers ``live`` with (a response's id set to
        ``live``'s), or ``McpDriftError`` (kept in the run state too)."""
        try:
            return self._answer(live)
        except McpDriftError as exc:
            self.failed = str(exc)
            self._state.fail(self.server, str(exc))
            raise

    def _answer(self, live: Message) -> list[Message]:
        masked = json.loads(self._masking.apply(encode(live)))
        key = compare_key(masked)
        if self._bound is None:
            recording = self._bind(masked, key)
        else:
            recording = self._bound
            unrecorded = self._position >= len(recording.steps)
            if unrecorded or recording.steps[self._position].key != key:
                failure = _failures.unrecorded if unrecorded else _failures.differs
                raise McpDriftError(
                    failure(
                        self.server, self.session, recording, self._position, masked, self._scenario
                    )
                )
        step = recording.steps[self._position]
        self._position += 1
        if self._bound is not None:
            self._state.answered(self._bound, self._position)
        return [self._reply(m, step.message, live) for m in step.replies]

    def _bind(self, masked: Message, key: str) -> RecordedConnection:
        self._pending.append(key)
        depth = len(self._pending)
        free = [r for r in self._recordings if not self._state.claimed(r)]
        matching = [r for r in free if r.keys[:depth] == tuple(self._pending)]
        if masked.get("method") in HANDSHAKE_METHODS or ("method" in masked and "id" not in masked):
            # A session with no recording of its own still gets its handshake answered
            # (servers answer it alike), so its first call is what names the failure.
            fallback = [r for r in self._all if r.keys[:depth] == tuple(self._pending)]
            if matching or fallback:
                return (matching or fallback)[0]
        else:
            for recording in matching:
                if self._state.claim(recording):
                    self._bound = recording
                    return recording
        self._pending.pop()
        # Name the drift against the free recording that matched longest.
        nearest = max(free, key=lambda r: _common(r.keys, self._pending), default=None)
        if (
            nearest is not None
            and len(nearest.steps) > depth - 1
            and _common(nearest.keys, self._pending) == depth - 1
        ):
            message = _failures.differs(
                self.server, self.session, nearest, depth - 1, masked, self._scenario
            )
            raise McpDriftError(message)
        raise McpDriftError(
            _failures.unrecorded(self.server, self.session, None, depth - 1, masked, self._scenario)
        )

    def _reply(self, recorded: Message, request: Message, live: Message) -> Message:
        text = self._masking.restore(encode(recorded))
        message: Message = json.loads(text)
        if "id" in request and message.get("id") == request["id"] and "method" not in message:
            message["id"] = live.get("id")
        return message

    def close(self) -> None:
        """A connection that ended before its first call takes the recording it matched."""
        if self._bound is None and self._pending and not self.failed:
            depth = len(self._pending)
            for recording in self._recordings:
                if recording.keys[:depth] == tuple(self._pending) and self._state.claim(recording):
                    self._bound = recording
                    self._state.answered(recording, depth)
                    return


def _common(keys: tuple[str, ...], pending: list[str]) -> int:
    n = 0
    for a, b in zip(keys, pending, strict=False):
        if a != b:
            break
        n += 1
    return n


def recording_failures(state_folder: Path) -> list[str]:
    """What the run's shims and endpoint failed on (record or replay), first first: a
    credential a recorder refused to write, a server not installed, a drifted call."""
    if not state_folder.is_dir():
        return []
    return RunState(state_folder).failures()


def check_replayed(recordings: Path, state_folder: Path, scenario: str | None = None) -> None:
    """Raise ``McpDriftError`` for the first failure any connection met, else for recorded
    calls never made (every recording of every server in ``recordings``)."""
    state = RunState(state_folder)
    failures = state.failures()
    if failures:
        raise McpDriftError(failures[0])
    messages: list[str] = []
    for server in all_servers(recordings):
        for recording in load_recordings(recordings, server):
            answered = state.answered_count(recording) or 0
            if answered < len(recording.steps):
                messages.append(_failures.never_made(recording, answered, scenario))
    if messages:
        raise McpDriftError(messages[0])
