"""The recording of one MCP connection: writing it (masks, machine facts, the secret scan
applied to every line before it is written) and reading it back as client steps."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentreel.mcp_replay._layout import (
    MCP_RECORDING_PATTERN,
    MCP_RECORDINGS_DIR,
    RECORDING_VERSION,
    recording_path,
    shown_path,
)
from agentreel.mcp_replay.exceptions import McpRecordingError, McpSecretError
from agentreel.session import CWD_TOKEN, KeyMask, Mask, SecretScan, mask_install_paths

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Masking:
    """What is written and compared instead of the live text: the run's cwd as
    ``{{cwd}}``, install paths as their tokens (machine facts, SPEC 13), and — in what the
    client sends — the scenario's masks (each match as ``{{token}}``).

    A server's message keeps what a scenario mask matches: replay serves it as written, and
    the agent passes it on to its model, whose recorded request holds what the server said
    (a date in mcp-server-time's answer, printed by Claude Code and Gemini CLI). Served as
    ``{{token}}`` it would make that request drift; the cwd is restored and install paths
    are machine facts the model recording masks alike.

    A key mask (``KeyMask``) names a JSON key whose value varies between runs: that value
    (a string, number, boolean or null; an object under the key is walked), at any depth,
    is written as ``{{token}}`` on both sides — what the client sends
    (compared) and what the server answers (served as written, so the agent gets the
    placeholder: for a value it does not pass on to its model verbatim, such as a request
    id or a time in ``structuredContent`` or ``_meta``)."""

    cwd: str | None = None
    masks: tuple[Mask | KeyMask, ...] = ()
    _compiled: tuple[tuple[re.Pattern[str], str], ...] = field(default=(), compare=False)
    _keys: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        compiled = tuple(
            (m.compile(self.cwd), f"{{{{{m.token}}}}}") for m in self.masks if isinstance(m, Mask)
        )
        object.__setattr__(self, "_compiled", compiled)
        keys = {m.key: m.placeholder for m in self.masks if isinstance(m, KeyMask)}
        object.__setattr__(self, "_keys", keys)

    def apply(self, text: str, *, from_server: bool = False) -> str:
        if self._keys:
            text = encode(_keyed(json.loads(text), self._keys))
        if self.cwd and len(self.cwd) > 1:
            text = text.replace(json.dumps(self.cwd)[1:-1], CWD_TOKEN)
        text = mask_install_paths(text)
        if from_server:
            return text
        for pattern, token in self._compiled:
            text = pattern.sub(token, text)
        return text

    def restore(self, text: str) -> str:
        """A recorded server message as the live agent gets it: ``{{cwd}}`` back to its cwd."""
        if self.cwd and CWD_TOKEN in text:
            return text.replace(CWD_TOKEN, json.dumps(self.cwd)[1:-1])
        return text


def encode(message: Message) -> str:
    """A message as written and served: its keys in the order they came. An agent may print
    a server's structured answer as it got it (Claude Code does), so sorted keys on replay
    would change what it sends its model."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def _keyed(value: Any, keys: dict[str, str]) -> Any:
    """``value`` with the value of every key in ``keys`` (any depth) as its placeholder
    where that value is a scalar: an object or array under the key is walked instead (a
    tool's input schema lists its arguments by name, and must stay a schema)."""
    if isinstance(value, dict):
        return {
            k: keys[k] if k in keys and not isinstance(v, dict | list) else _keyed(v, keys)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_keyed(item, keys) for item in value]
    return value


def _canonical(message: Message) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


class ConnectionRecorder:
    """Writes one connection's exchanges to the next free ``mcp/<server>.<n>.jsonl``
    (the number taken by an exclusive create, so concurrent shims never share a file)."""

    def __init__(
        self,
        recordings: Path,
        server: str,
        transport: str,
        session: str | None,
        masking: Masking,
        scan: SecretScan | None = None,
    ) -> None:
        (recordings / MCP_RECORDINGS_DIR).mkdir(parents=True, exist_ok=True)
        self._masking = masking
        self._scan = scan or SecretScan()
        n = 0
        while True:
            path = recording_path(recordings, server, n)
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                break
            except FileExistsError:
                n += 1
        self.path = path
        self._file = os.fdopen(fd, "w", encoding="utf-8")
        header = {"mcp_recording": RECORDING_VERSION, "server": server, "session": session}
        self._write(encode({**header, "transport": transport}), header=True)

    def client(self, message: Message) -> None:
        self._write(encode({"from": "client", "message": message}))

    def server(self, message: Message) -> None:
        self._write(encode({"from": "server", "message": message}), from_server=True)

    def close(self) -> None:
        self._file.close()

    def _write(self, line: str, *, from_server: bool = False, header: bool = False) -> None:
        if not header:  # the header is ours: no mask may rename its server or session
            line = self._masking.apply(line, from_server=from_server)
        hits = self._scan.scan(shown_path(self.path), line.encode())
        if hits:
            listing = "; ".join(hit.describe() for hit in hits)
            raise McpSecretError(
                f"refusing to write a credential to {shown_path(self.path)}: {listing}. "
                "Give the server a test credential, or allow a deliberate fake one by its sha256 "
                "(shown above) in the scenario's [record] allow_secrets"
            )
        self._file.write(line + "\n")
        self._file.flush()


@dataclass(frozen=True, slots=True)
class Step:
    """One client message of a recorded connection and the server messages that followed
    it before the next client message."""

    message: Message
    key: str
    replies: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class RecordedConnection:
    path: Path
    server: str
    n: int
    session: str | None
    prelude: tuple[Message, ...]
    steps: tuple[Step, ...]

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(step.key for step in self.steps)


# What a client message is compared by: its method and params (no ``_meta``: progress
# tokens and trace ids), or a response's result or error. Never its JSON-RPC id.
def compare_key(message: Message) -> str:
    if "method" in message:
        params = message.get("params")
        if isinstance(params, dict):
            params = {k: v for k, v in params.items() if k != "_meta"}
        return _canonical({"method": message["method"], "params": params})
    return _canonical({k: message[k] for k in ("result", "error") if k in message})


def load_recordings(recordings: Path, server: str) -> list[RecordedConnection]:
    """Every recorded connection of ``server``, in the order they opened."""
    folder = recordings / MCP_RECORDINGS_DIR
    found: list[RecordedConnection] = []
    if not folder.is_dir():
        return found
    for path in folder.iterdir():
        match = MCP_RECORDING_PATTERN.match(path.name)
        if match and match["server"] == server:
            found.append(_load(path, server, int(match["n"])))
    return sorted(found, key=lambda r: r.n)


def all_servers(recordings: Path) -> list[str]:
    folder = recordings / MCP_RECORDINGS_DIR
    if not folder.is_dir():
        return []
    names = {m["server"] for p in folder.iterdir() if (m := MCP_RECORDING_PATTERN.match(p.name))}
    return sorted(names)


def _load(path: Path, server: str, n: int) -> RecordedConnection:
    lines = path.read_text(encoding="utf-8").splitlines()
    records: list[Message] = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise McpRecordingError(
                f"{shown_path(path)}:{number}: not JSON ({exc.msg}); re-record the scenario"
            ) from None
        records.append(record)
    if not records or records[0].get("mcp_recording") != RECORDING_VERSION:
        raise McpRecordingError(
            f"{shown_path(path)}:1: not an MCP recording of version {RECORDING_VERSION}"
        )
    prelude: list[Message] = []
    steps: list[tuple[Message, list[Message]]] = []
    for number, record in enumerate(records[1:], 2):
        side, message = record.get("from"), record.get("message")
        if side not in ("client", "server") or not isinstance(message, dict):
            raise McpRecordingError(
                f"{shown_path(path)}:{number}: expected "
                '{"from": "client"|"server", "message": {...}}'
            )
        if side == "client":
            steps.append((message, []))
        elif steps:
            steps[-1][1].append(message)
        else:
            prelude.append(message)
    return RecordedConnection(
        path=path,
        server=server,
        n=n,
        session=records[0].get("session"),
        prelude=tuple(prelude),
        steps=tuple(Step(m, compare_key(m), tuple(r)) for m, r in steps),
    )


def describe_call(message: Message) -> str:
    """``tools/call 'add'`` / ``resources/read 'note://x'`` / ``initialize``."""
    method = message.get("method")
    if method is None:
        return "a response to the server's request"
    params = message.get("params")
    if isinstance(params, dict):
        for key in ("name", "uri", "ref"):
            if isinstance(params.get(key), str):
                return f"{method} {params[key]!r}"
    return str(method)


def arguments_of(message: Message) -> Any:
    params = message.get("params")
    if isinstance(params, dict):
        if "arguments" in params:
            return params["arguments"]
        return {k: v for k, v in params.items() if k not in ("_meta", "name")}
    if "method" in message:
        return {}
    return message.get("result", message.get("error", params))


def lines_of(values: Sequence[str]) -> str:
    return "\n".join(values)
