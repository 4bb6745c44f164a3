"""The fixture layout: how a directory of recorded session logs is named (SPEC 5, 7, 11).

One owner for these facts, imported by everything that writes or reads a fixture — the
harness writes recordings, ``agentreel.llm_replay`` reads them, the proxy writes
``--fixture`` directories:

- the main session's log is ``session.jsonl``; its children (everything else, in session
  order) are ``session.<n>.jsonl`` for n = 1..k, contiguous, no leading zeros;
- ``replay.override.json`` beside them patches recorded calls (throw / hang);
- a recording made through the proxy also holds ``wire.ndjson`` (each call's answer as the
  upstream sent it, which replay serves byte for byte) and ``models.json`` (the upstream's
  ``GET /v1/models`` answers), when the run had any;
- the live cwd is written ``{{cwd}}`` in a recording, and replay turns it back.

The numbering rule is the session order of ``order_sessions``: the n-th log of a harvest
is ``session_file_name(n)``. This module only names files; what a missing or stray file
means is the reader's business (replay raises ``FixtureError``, the harness's inventory
lists gaps and orphans).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import msgspec

__all__ = [
    "CWD_TOKEN",
    "DEFAULT_REFRESH_COMMAND",
    "DEFAULT_RERECORD_COMMAND",
    "MAIN_SESSION_FILE",
    "MODELS_FILE",
    "OVERRIDE_FILE",
    "PROXY_RECORDING_FILES",
    "RECORDING_FILE_PATTERN",
    "REFRESH_COMMAND_ENV",
    "RERECORD_COMMAND_ENV",
    "SESSION_FILE_PATTERN",
    "VERBATIM_FILE",
    "recording_names",
    "refresh_command",
    "rerecord_command",
    "session_file_name",
    "session_file_number",
    "tokenize_cwd",
]

CWD_TOKEN = "{{cwd}}"
MAIN_SESSION_FILE = "session.jsonl"
OVERRIDE_FILE = "replay.override.json"
# ``session.jsonl`` (group 1 empty) or ``session.<n>.jsonl`` with n >= 1, no leading zero.
SESSION_FILE_PATTERN = re.compile(r"session(?:\.([1-9][0-9]*))?\.jsonl")
VERBATIM_FILE = "wire.ndjson"
"""A proxy recording's answers as the upstream sent them, one call a line (not ``.jsonl``:
every ``*.jsonl`` under a sessions root is read as a session log)."""
MODELS_FILE = "models.json"
"""A proxy recording's ``GET /v1/models`` answers, by query string."""
PROXY_RECORDING_FILES = (VERBATIM_FILE, MODELS_FILE)
"""What a recording made through the proxy holds beside its session logs."""
RECORDING_FILE_PATTERN = re.compile(
    "|".join([SESSION_FILE_PATTERN.pattern, *map(re.escape, PROXY_RECORDING_FILES)])
)
"""Every file a recording consists of: what a writer of recordings replaces (a file an
earlier recording had and the new one lacks goes)."""


def session_file_name(number: int) -> str:
    """``session.jsonl`` for 0 (the main session), ``session.<n>.jsonl`` otherwise."""
    if number < 0:
        raise ValueError(f"a fixture file number is 0 (main) or a positive n; got {number}")
    return MAIN_SESSION_FILE if number == 0 else f"session.{number}.jsonl"


def session_file_number(name: str) -> int | None:
    """The number a recording file name stands for (0 = main), or ``None`` if ``name`` is
    not ``session.jsonl`` / ``session.<n>.jsonl``."""
    match = SESSION_FILE_PATTERN.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1) or 0)


def recording_names(directory: Path) -> list[str]:
    """The recording files present in ``directory``, ``session.jsonl`` first, then by n.

    Only regular files with a recording name count; gaps are not filled or reported.
    """
    found: list[tuple[int, str]] = []
    for path in directory.glob("session*.jsonl"):
        number = session_file_number(path.name)
        if number is not None and path.is_file():
            found.append((number, path.name))
    return [name for _, name in sorted(found)]


RERECORD_COMMAND_ENV = "AGENTREEL_RERECORD_COMMAND"
"""How the user re-records a scenario, ``{scenario}`` where its name goes. Set by the layer
that knows how agentreel is run (the noxfile inside this repository); the harness passes it
on to the agent it starts. Unset: the ``agentreel`` command line."""
REFRESH_COMMAND_ENV = "AGENTREEL_REFRESH_COMMAND"
"""How the user rewrites a scenario's goldens; the same convention."""
DEFAULT_RERECORD_COMMAND = "agentreel record {scenario}"
DEFAULT_REFRESH_COMMAND = "agentreel refresh {scenario}"
_SCENARIO = "{scenario}"


def _command(env_name: str, default: str, scenario: str) -> str:
    template = os.environ.get(env_name) or default
    if _SCENARIO not in template:
        return f"{template} {scenario}"
    return template.replace(_SCENARIO, scenario)


def rerecord_command(scenario: str) -> str:
    """The command that records ``scenario`` again: what a broken fixture's error advises.

    Lower layers only name it; which command it is comes from ``$AGENTREEL_RERECORD_COMMAND``
    (the nox form inside this repository), else the ``agentreel`` command line.
    """
    return _command(RERECORD_COMMAND_ENV, DEFAULT_RERECORD_COMMAND, scenario)


def refresh_command(scenario: str) -> str:
    """The command that rewrites ``scenario``'s goldens from its recording (see
    ``rerecord_command``; ``$AGENTREEL_REFRESH_COMMAND``)."""
    return _command(REFRESH_COMMAND_ENV, DEFAULT_REFRESH_COMMAND, scenario)


def tokenize_cwd(data: bytes, cwd: Path) -> bytes:
    """``data`` (a raw session log) with the run's cwd written as ``{{cwd}}``.

    Ids and times are kept as they are: a recording is what replay binds by. The cwd is
    expected to be a private path the recorder made (a fresh temp directory), so it holds
    no character JSON escapes and nothing else in the log starts with it: a plain
    replacement of its spellings (as given and resolved, with ``/`` and JSON's ``\\/``) is
    exact. Replay turns the token back into the live cwd.

    A model streams text and tool arguments in deltas cut anywhere, so the cwd may be split
    across two or more deltas of one block: first the cut is moved to the end of the cwd,
    which then lies whole in the delta where it starts (the following deltas lose that
    part; their number is unchanged), so it is replaced like any other occurrence.
    """
    spellings = sorted({str(cwd), str(cwd.resolve())}, key=len, reverse=True)
    forms = [form for spelling in spellings for form in (spelling, spelling.replace("/", "\\/"))]
    data = _join_split_cwd(data, [form for form in forms if len(form) > 1])
    for form in forms:
        data = data.replace(form.encode(), CWD_TOKEN.encode())
    return data


# The delta chunks of a recorded stream and the field holding their text.
_DELTA_TEXT = {
    "text-delta": "text",
    "reasoning-delta": "text",
    "tool-call-delta": "arguments_delta",
}
_CHUNK_EVENT = b'"type":"assistant/chunk"'


def _join_split_cwd(data: bytes, forms: list[str]) -> bytes:
    """``data`` with every cwd spelling that straddles deltas of one stream (one block of
    one call: turn, step, chunk type, index) moved whole into the delta where it starts.
    Only the lines of such deltas are re-encoded; every other byte is kept."""
    if not forms:
        return data
    lines = data.split(b"\n")
    streams: dict[tuple[object, ...], list[tuple[int, dict[str, Any], str]]] = {}
    for number, line in enumerate(lines):
        if _CHUNK_EVENT not in line or b'-delta"' not in line:
            continue
        try:
            event = msgspec.json.decode(line)
            chunk = event["data"]["chunk"]
            field = _DELTA_TEXT[chunk["type"]]
            text = chunk[field]
            key = (event["data"]["turn"], event["data"]["step"], chunk["type"], chunk.get("index"))
        except (msgspec.DecodeError, KeyError, TypeError):
            continue  # not a delta event (or a torn line): nothing to join
        if isinstance(text, str):
            streams.setdefault(key, []).append((number, event, field))
    for deltas in streams.values():
        texts = [event["data"]["chunk"][field] for _, event, field in deltas]
        cuts = _cuts_outside(texts, forms)
        if cuts is None:
            continue
        full = "".join(texts)
        start = 0
        for (number, event, field), end, old in zip(deltas, cuts, texts, strict=True):
            if full[start:end] != old:
                event["data"]["chunk"][field] = full[start:end]
                lines[number] = msgspec.json.encode(event)
            start = end
    return b"\n".join(lines)


def _cuts_outside(texts: list[str], forms: list[str]) -> list[int] | None:
    """The end offsets of ``texts`` in their concatenation, each cut that falls inside an
    occurrence of a ``forms`` entry moved to that occurrence's end; ``None`` when no cut
    falls inside one (the common case: nothing to change)."""
    full = "".join(texts)
    pattern = re.compile("|".join(re.escape(form) for form in forms))
    spans = [match.span() for match in pattern.finditer(full)]
    if not spans:
        return None
    cuts: list[int] = []
    end = 0
    moved = False
    for text in texts:
        end += len(text)
        cut = end
        for start, stop in spans:
            if start < cut < stop:
                cut, moved = stop, True
                break
        cuts.append(max(cut, cuts[-1]) if cuts else cut)
    return cuts if moved else None
