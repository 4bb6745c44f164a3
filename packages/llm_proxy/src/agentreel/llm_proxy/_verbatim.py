"""The upstream's answers as it sent them, per call: what replay serves byte for byte.

Chunks are the model of a call (in-process replay, overrides, drift), but re-encoding them
loses what the model does not hold: every field a provider adds (usage details, logprobs,
``reasoning_details``, a tool block's ``caller``), its key order and spacing, its framing.
So record mode also keeps each answered call's bytes — the SSE frames as they arrived (the
last may lack its closing blank line) or the whole JSON body — with its status and kept
headers, one line per call in ``wire.ndjson`` beside the session logs (not ``.jsonl``: every
``*.jsonl`` under a sessions root is read as a session log; never inside the logs:
the logs stay what the harness reads and reviewers diff). Replay serves a call bound as
recorded (no override) from here; an overridden call is re-encoded from its chunks.

A fixture's ``wire.ndjson`` starts with its format stamp, ``{"format":…,"masks":…}``
(``agentreel.session``'s ``RECORDING_FORMAT``, SPEC 15); one without is format 1, a newer
one is refused naming both versions.

Keyed by the session log's id and the call's turn, which replay's binding gives back
(``Script.header.id``, ``RecordedCall.turn``). The cwd is kept as ``{{cwd}}``, as in the
logs, and becomes the live cwd when served. Chosen over keeping only what differs from
the re-encoding by measurement (``nox -s bench -- --only proxy``: the corpus's fixture size
and load time): a real provider's frames almost never equal agentreel's re-encoding, so a
difference holds nearly every frame anyway, and reads worse.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import msgspec

from agentreel.llm_proxy.exceptions import ProxyConfigError
from agentreel.session import (
    CWD_TOKEN,
    MASKS_VERSION,
    RECORDING_FORMAT,
    VERBATIM_FILE,
    newer_stamp_problem,
)


class VerbatimCall(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One call's answer as the upstream sent it.

    ``frames``: a stream's SSE frames, each with its terminator as sent (joined, the body);
    ``body``: a non-streaming answer's JSON body; ``cut``: the upstream broke the stream
    off, so replay drops the connection after the frames, as it did."""

    session: str
    turn: int
    api: str
    status: int
    headers: dict[str, str]
    frames: list[str] | None = None
    body: str | None = None
    cut: bool = False
    binary: bool = False
    """The frames are binary (AWS event-stream messages), each byte one code point
    (latin-1): served as those bytes, never with the cwd put in (their CRCs cover it), so
    an answer holding the cwd is not kept."""
    times: list[int] | None = None
    """When each frame arrived (a body: when it was whole), in milliseconds after the
    request reached the proxy: the first the call's first-byte delay, the differences its
    inter-frame gaps — what ``pace = "recorded"`` serves them at. Optional: a recording
    without it (made before it was kept) is served instantly under any pace, and an older
    agentreel reads a recording with it (it ignores the field), so the format stays."""

    @property
    def key(self) -> tuple[str, int]:
        return (self.session, self.turn)


class VerbatimStamp(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``wire.ndjson``'s first line: which recording format and mask set wrote it."""

    format: int = RECORDING_FORMAT
    masks: int = MASKS_VERSION


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(VerbatimCall)
_STAMP_LINE = _ENCODER.encode(VerbatimStamp()) + b"\n"


def _cwd_forms(cwd: str) -> tuple[str, ...]:
    """The cwd as it appears in the frames: raw, and escaped inside a JSON string."""
    escaped = json.dumps(cwd)[1:-1]
    return (escaped, cwd) if escaped != cwd else (cwd,)


def cuts_the_cwd(call: VerbatimCall, streamed: str, cwd: str) -> bool:
    """Whether the answer streams the cwd (``streamed``: its deltas' text, joined) more
    often than its frames hold it whole. A cwd cut between two frames cannot be written as
    ``{{cwd}}`` there, so the frames would keep the recording machine's path (a fixture
    holds none) and serve it on replay: such a call is served re-encoded from its chunks,
    where the token is whole."""
    if not cwd or cwd == "/":
        return False
    texts = call.frames if call.frames is not None else [call.body or ""]
    whole = sum(text.count(form) for text in texts for form in _cwd_forms(cwd))
    return sum(streamed.count(form) for form in _cwd_forms(cwd)) > whole


def holds_the_cwd(call: VerbatimCall, cwd: str) -> bool:
    """Whether a binary answer holds the cwd anywhere (so it cannot be kept: its frames'
    CRCs forbid writing ``{{cwd}}`` into them)."""
    if not call.binary or not cwd or cwd == "/":
        return False
    return any(form in frame for frame in call.frames or () for form in _cwd_forms(cwd))


def served_frames(call: VerbatimCall, cwd: str) -> list[bytes]:
    """A kept stream's frames as served: the live cwd put in (a binary one: its bytes)."""
    if call.binary:
        return [frame.encode("latin-1") for frame in call.frames or ()]
    # The cwd per frame, as it was tokenized: a token never spans two frames.
    return [with_cwd(frame, cwd).encode() for frame in call.frames or ()]


def tokenized(call: VerbatimCall, cwd: str) -> VerbatimCall:
    """``call`` with the cwd written as ``{{cwd}}`` (a fixture holds no machine path)."""
    if not cwd or cwd == "/" or call.binary:
        return call

    def token(text: str) -> str:
        for form in _cwd_forms(cwd):
            text = text.replace(form, CWD_TOKEN)
        return text

    return msgspec.structs.replace(
        call,
        frames=[token(frame) for frame in call.frames] if call.frames is not None else None,
        body=token(call.body) if call.body is not None else None,
    )


def with_cwd(text: str, cwd: str) -> str:
    """``{{cwd}}`` in served text as the live cwd (escaped: it stands inside JSON strings)."""
    return text.replace(CWD_TOKEN, _cwd_forms(cwd)[0]) if CWD_TOKEN in text else text


def encode_line(call: VerbatimCall) -> bytes:
    return _ENCODER.encode(call) + b"\n"


def read_verbatim(directory: Path) -> dict[tuple[str, int], VerbatimCall]:
    """The calls kept in ``directory``'s ``wire.ndjson`` (none: an older recording, or a
    fixture written without it — replay then re-encodes every call from its chunks)."""
    path = directory / VERBATIM_FILE
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise ProxyConfigError(f"cannot read {path}: {error}") from None
    calls: dict[tuple[str, int], VerbatimCall] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if number == 1 and line.lstrip().startswith(b'{"format"'):
            _check_stamp(path, line)
            continue
        try:
            call = _DECODER.decode(line)
        except msgspec.DecodeError as error:
            raise ProxyConfigError(
                f"{path}:{number}: not a recorded upstream answer ({error}); re-record the "
                f"scenario, or delete {VERBATIM_FILE} to replay every call re-encoded from "
                "its chunks"
            ) from None
        calls[call.key] = call
    return calls


def _check_stamp(path: Path, line: bytes) -> None:
    try:
        stamp = msgspec.json.decode(line)
    except msgspec.DecodeError as error:
        raise ProxyConfigError(
            f"{path}:1: not a format stamp ({error}); re-record the scenario"
        ) from None
    found = stamp if isinstance(stamp, dict) else {}
    problem = newer_stamp_problem(found.get("format"), found.get("masks"))
    if problem is not None:
        raise ProxyConfigError(
            f"{path} was {problem}. Upgrade agentreel to a release that reads it "
            "(pip install -U agentreel), or re-record the scenario with this one"
        )


def verbatim_file(calls: Iterable[VerbatimCall], cwd: str) -> bytes:
    """``wire.ndjson``'s bytes for ``calls``, the cwd tokenized, after the format stamp
    (empty without calls; scan them before writing)."""
    lines = b"".join(encode_line(tokenized(call, cwd)) for call in calls)
    return _STAMP_LINE + lines if lines else b""


def recorded_verbatim(sessions_root: Path, cwd: str) -> bytes:
    """``wire.ndjson``'s bytes for a fixture from the one a record run kept beside its logs
    in ``sessions_root`` (the cwd tokenized; empty: it kept none). What the harness writes
    into a scenario it recorded through the proxy; scan them before writing."""
    return verbatim_file(read_verbatim(sessions_root).values(), cwd)


def write_verbatim(directory: Path, data: bytes) -> None:
    """Write ``data`` (``verbatim_file``) as ``directory``'s ``wire.ndjson``, atomically;
    empty: remove it, so a re-recorded fixture keeps no answer of an earlier recording."""
    target = directory / VERBATIM_FILE
    if not data:
        target.unlink(missing_ok=True)
        return
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
