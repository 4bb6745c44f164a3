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
    READ_VERSIONS,
    RECORDING_VERSION,
    recording_path,
    shown_path,
)
from agentreel.mcp_replay.exceptions import McpRecordingError, McpSecretError
from agentreel.session import (
    CWD_TOKEN,
    MASKS_VERSION,
    BuiltInMasks,
    KeyMask,
    Mask,
    SecretScan,
    mask_install_paths,
    this_machine_facts,
)

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Masking:
    """What is written and compared instead of the live text (SPEC 13, 19).

    What the client sends (compared, never served): the run's cwd as ``{{cwd}}``, the
    scenario's masks (each match as ``{{token}}``), then every built-in mask of the newest
    mask set (``agentreel.session.BuiltInMasks``: install paths, machine facts — hostname,
    user, HOME, temp paths, OS — and time in every spelling; the handshake's protocol
    fields left as they are). Replay reads a recorded client message (of any format) through
    the built-in masks again (``built_in``) and compares it with the live one masked so:
    both sides through the same current masks, which are idempotent.

    What a server says (served as written): the cwd as ``{{cwd}}``, install paths as their
    tokens, and this machine's own HOME, ``user@host`` and host name as ``{{home}}``,
    ``{{user}}@{{hostname}}``, ``{{hostname}}`` (``this_machine_facts``); replay gives each
    back as the replaying machine's (``restore``), as if the server ran there. The rest is
    served as the agent got it when recording — a time of the call included: replay on any
    day serves the recorded one, and the agent's model recording masks it where the agent
    passes it on. Masked there, it would reach the agent as ``{{date}}``, and an agent whose
    model recording does not mask that text alike (a tool description's example date, kept
    as a digest by the in-process provider) would drift from its recorded request. For the
    same reason a server's message keeps what a scenario mask matches (the proxy writes
    that match as ``{{mask:N}}``, not ``{{token}}``).

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
    _built_in: BuiltInMasks | None = field(default=None, compare=False)
    _machine: tuple[tuple[re.Pattern[str] | None, str, str], ...] = field(default=(), compare=False)
    _seen: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        compiled = tuple(
            (m.compile(self.cwd), f"{{{{{m.token}}}}}") for m in self.masks if isinstance(m, Mask)
        )
        object.__setattr__(self, "_compiled", compiled)
        keys = {m.key: m.placeholder for m in self.masks if isinstance(m, KeyMask)}
        object.__setattr__(self, "_keys", keys)
        object.__setattr__(self, "_built_in", BuiltInMasks(cwd=self.cwd))
        machine = tuple(
            (None if pattern is None else re.compile(pattern), token, value)
            for pattern, token, value in this_machine_facts(self.cwd)
        )
        object.__setattr__(self, "_machine", machine)

    def apply(self, text: str, *, from_server: bool = False) -> str:
        if self._keys:
            text = encode(_keyed(json.loads(text), self._keys))
        if self.cwd and len(self.cwd) > 1:
            text = text.replace(json.dumps(self.cwd)[1:-1], CWD_TOKEN)
        text = mask_install_paths(text)
        if from_server:
            for pattern, token, _ in self._machine:
                if pattern is not None:
                    text = pattern.sub(token, text)
            return text
        for pattern, token in self._compiled:
            text = pattern.sub(token, text)
        decoded = json.loads(text)
        if isinstance(decoded.get("message"), dict):  # a recording's line
            decoded["message"] = self.built_in(decoded["message"])
            return encode(decoded)
        return encode(self.built_in(decoded))

    def built_in(self, message: Message) -> Message:
        """A client ``message`` through the built-in masks alone (its JSON-RPC envelope and
        protocol fields as they are): how replay reads a recorded client message to compare
        it with a live one. A part masked before is not masked again (a replayed call costs
        a fraction of the server it replaces, bench/mcp.py)."""
        masked = dict(message)
        for part in ("params", "result", "error"):
            if part in message:
                masked[part] = self._masked_part(message[part])
        for part in ("params", "result"):
            given, out = message.get(part), masked.get(part)
            if isinstance(given, dict) and isinstance(out, dict):
                out.update({key: given[key] for key in _PROTOCOL_FIELDS if key in given})
        return masked

    def _masked_part(self, value: Any) -> Any:
        assert self._built_in is not None
        key = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        text = self._seen.get(key)
        if text is None:
            if len(self._seen) >= _SEEN_LIMIT:
                self._seen.clear()
            masked = self._built_in.value(value)
            text = self._seen[key] = json.dumps(masked, ensure_ascii=False, separators=(",", ":"))
        return json.loads(text)

    def restore(self, text: str) -> str:
        """A recorded server message as the live agent gets it: ``{{cwd}}`` back to its cwd,
        this machine's tokens (``this_machine_facts``) back to the replaying machine's."""
        if self.cwd and CWD_TOKEN in text:
            text = text.replace(CWD_TOKEN, json.dumps(self.cwd)[1:-1])
        if "{{" in text:
            for _, token, value in self._machine:
                if value:
                    text = text.replace(token, json.dumps(value)[1:-1])
        return text


# What the handshake says of the protocol and of each side, never a fact of the machine: a
# protocol version is date-shaped ("2025-11-25"), and a client that reads it back as
# "{{date}}" refuses the server.
_PROTOCOL_FIELDS = ("protocolVersion", "clientInfo", "serverInfo")
# How many masked message parts a connection keeps, so a repeated one is masked once.
_SEEN_LIMIT = 256


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
        header = {
            "mcp_recording": RECORDING_VERSION,
            "masks": MASKS_VERSION,
            "server": server,
            "session": session,
        }
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


def load_recordings(
    recordings: Path, server: str, masking: Masking | None = None
) -> list[RecordedConnection]:
    """Every recorded connection of ``server``, in the order they opened; with ``masking``
    (replay), each client message as it is compared: through the current built-in masks
    (``Masking.built_in``), as the live one is."""
    folder = recordings / MCP_RECORDINGS_DIR
    found: list[RecordedConnection] = []
    if not folder.is_dir():
        return found
    for path in folder.iterdir():
        match = MCP_RECORDING_PATTERN.match(path.name)
        if match and match["server"] == server:
            found.append(_load(path, server, int(match["n"]), masking))
    return sorted(found, key=lambda r: r.n)


def upgrade_recording(path: Path) -> list[str]:
    """The MCP recording at ``path``, of an earlier format, rewritten in place as the
    current one, keylessly (``agentreel upgrade``, SPEC 15): its header stamped with this
    format and mask set, each client message through the built-in masks as the writer masks
    one today (replay compares it so anyway); a server's messages are left as recorded (the
    facts of the machine that recorded them are not known here, and served text is served
    as written). What changed, one line each; nothing for a current file. A recording this
    agentreel cannot read raises ``McpRecordingError`` naming it."""
    match = MCP_RECORDING_PATTERN.match(path.name)
    _load(path, match["server"] if match else "", 0, None)  # readable, or named
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    if header.get("mcp_recording") == RECORDING_VERSION:
        return []
    masking = Masking()
    stamp = {"mcp_recording": RECORDING_VERSION, "masks": MASKS_VERSION}
    out = [encode({**stamp, **{k: v for k, v in header.items() if k not in stamp}})]
    masked = 0
    for line in lines[1:]:
        record = json.loads(line)
        if record.get("from") == "client":
            message = masking.built_in(record["message"])
            if message != record["message"]:
                masked += 1
                line = encode({**record, "message": message})
        out.append(line)
    _replace(path, "\n".join(out) + "\n")
    changes = [f"format stamp: MCP recording format {RECORDING_VERSION} (masks {MASKS_VERSION})"]
    if masked:
        changes.append(f"{masked} client message(s) masked")
    return changes


def _replace(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.upgrade")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def all_servers(recordings: Path) -> list[str]:
    folder = recordings / MCP_RECORDINGS_DIR
    if not folder.is_dir():
        return []
    names = {m["server"] for p in folder.iterdir() if (m := MCP_RECORDING_PATTERN.match(p.name))}
    return sorted(names)


def _load(path: Path, server: str, n: int, masking: Masking | None) -> RecordedConnection:
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
    version = records[0].get("mcp_recording") if records else None
    masks = records[0].get("masks", 0) if records else 0
    if version not in READ_VERSIONS or not isinstance(masks, int) or masks > MASKS_VERSION:
        newer = isinstance(version, int) and version > RECORDING_VERSION
        newer = newer or (isinstance(masks, int) and masks > MASKS_VERSION)
        raise McpRecordingError(
            f"{shown_path(path)}:1: "
            + (
                f"made by a newer agentreel (MCP recording format {version!r}, built-in mask "
                f"set {masks!r}; this agentreel reads formats 1 to {RECORDING_VERSION}, "
                f"mask sets up to {MASKS_VERSION}): upgrade agentreel"
                if newer
                else f'not an MCP recording (its first line has no "mcp_recording" format '
                f"1 to {RECORDING_VERSION}); re-record the scenario"
            )
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
            steps.append((masking.built_in(message) if masking else message, []))
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
