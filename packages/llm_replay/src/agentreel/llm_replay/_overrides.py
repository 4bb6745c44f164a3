"""``replay.override.json``: patch one recorded call with a failure or a hang.

Format (strict: an unknown key is an error naming the file and the key)::

    {"overrides": [
        {"action": "throw", "session": 0, "call": 2, "chunks": 3,
         "code": "server_error", "status": 500, "message": "upstream died"},
        {"action": "hang", "session": 1, "call": 1, "chunks": 2}
    ]}

``session`` is the fixture file number (0 = ``session.jsonl``, n = ``session.<n>.jsonl``);
``call`` counts from 1 within that session's script; ``chunks`` is how many recorded chunks
are streamed first (default 0; fewer than the call holds, so ``finish`` is never sent).
``throw`` then raises ``agentreel.llm.LlmError(code, status, message)``; ``hang`` then
waits until the stream is cancelled.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from agentreel.llm_replay.exceptions import OverrideError
from agentreel.session import rerecord_command

_DEFAULT_MESSAGE = "failure injected by replay.override.json"


class _CallOverride(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="action", forbid_unknown_fields=True
):
    """The recorded call patched (``session`` file number, ``call`` from 1) and how many of
    its chunks stream first."""

    session: int
    call: int
    chunks: int = 0


class ThrowOverride(_CallOverride, frozen=True, tag="throw"):
    """Stream ``chunks`` recorded chunks, then raise ``LlmError(code, status, message)``."""

    code: str = "server_error"
    status: int | None = None
    message: str = _DEFAULT_MESSAGE


class HangOverride(_CallOverride, frozen=True, tag="hang"):
    """Stream ``chunks`` recorded chunks, then wait until the stream is cancelled."""


Override = ThrowOverride | HangOverride


class _OverrideFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    overrides: list[Override]


_DECODER = msgspec.json.Decoder(_OverrideFile)


def load_overrides(path: Path, chunks_per_call: list[list[int]]) -> dict[tuple[int, int], Override]:
    """Parse and check ``path`` against the scripts it patches.

    ``chunks_per_call[session][call - 1]`` is the number of chunks of that recorded call.

    Returns ``{(session number, call number): override}``.
    """
    scenario = path.parent.name
    advice = (
        'Expected {"overrides": [{"action": "throw"|"hang", "session": <file number>, '
        '"call": <1-based>, "chunks": <prefix length>, ...}]}; throw also takes "code", '
        '"status", "message".'
    )
    try:
        parsed = _DECODER.decode(path.read_bytes())
    except msgspec.DecodeError as exc:
        raise OverrideError(path, f"{path}: invalid override file: {exc}. {advice}") from None
    except OSError as exc:
        raise OverrideError(
            path,
            f"cannot read {path}: {exc}. Check the file's permissions, or delete it to "
            "replay the recording unpatched.",
        ) from None
    result: dict[tuple[int, int], Override] = {}
    for position, override in enumerate(parsed.overrides):
        where = f"{path}: $.overrides[{position}]"
        if not 0 <= override.session < len(chunks_per_call):
            raise OverrideError(
                path,
                f"{where}: session {override.session} does not exist; the fixture has "
                f"sessions 0..{len(chunks_per_call) - 1} (0 = session.jsonl, n = "
                f"session.<n>.jsonl). Fix the override or re-record: {rerecord_command(scenario)}",
            )
        recorded = len(chunks_per_call[override.session])
        if not 1 <= override.call <= recorded:
            raise OverrideError(
                path,
                f"{where}: session {override.session} has no call {override.call}; it recorded "
                f"{recorded} call(s), numbered from 1. Fix the override's call number.",
            )
        if override.chunks < 0:
            raise OverrideError(
                path,
                f"{where}: chunks must be >= 0, got {override.chunks}; set it to how many "
                "recorded chunks to stream before the failure (0 = none).",
            )
        available = chunks_per_call[override.session][override.call - 1]
        if override.chunks >= available:
            raise OverrideError(
                path,
                f"{where}: chunks {override.chunks} must be fewer than the {available} chunks "
                f"session {override.session} call {override.call} recorded (the prefix never "
                "includes finish).",
            )
        key = (override.session, override.call)
        if key in result:
            raise OverrideError(
                path,
                f"{where}: session {override.session} call {override.call} is overridden "
                "twice; keep one entry per call.",
            )
        result[key] = override
    return result
