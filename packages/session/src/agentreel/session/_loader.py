"""Reading a session log back into typed records."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import msgspec

from agentreel.session._codec import EVENT_DECODER, HEADER_DECODER
from agentreel.session._events import HEADER_VERSION, Event, SessionHeader
from agentreel.session.exceptions import (
    CorruptLineError,
    SeedLengthError,
    UnsupportedVersionError,
)

_REPAIR = (
    "The log is not usable as a fixture: restore it from version control or re-record the "
    "scenario (nox -s record -- <scenario>)"
)


@dataclass(frozen=True, slots=True)
class TornLine:
    """The last line of a log was cut mid-write (the writer was killed)."""

    line: int
    text: bytes
    problem: str


@dataclass(frozen=True, slots=True)
class SessionLog:
    """A loaded log: its header, its events and, if the tail was torn, what was lost."""

    path: Path
    header: SessionHeader
    events: list[Event]
    torn_tail: TornLine | None = None

    @property
    def seed(self) -> list[Event]:
        """The events copied in from the parent (empty unless this is a fork child)."""
        return self.events[: self.header.seed_length]

    @property
    def own_events(self) -> list[Event]:
        """The events this session produced itself (after its fork seed)."""
        return self.events[self.header.seed_length :]


def load_session_log(path: Path | str) -> SessionLog:
    """Read one ``.jsonl`` session log.

    A torn last line (no trailing newline and not decodable) is reported in
    ``torn_tail`` with every earlier event kept. A bad line anywhere else, an unknown
    header version, or a ``seed_length`` beyond the log raises an error naming file:line.
    """
    path = Path(path)
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    ends_cleanly = raw.endswith(b"\n")
    if ends_cleanly:
        lines.pop()
    if not lines or (len(lines) == 1 and not ends_cleanly and not lines[0].strip()):
        raise CorruptLineError(path, 1, "empty file: no session header", _REPAIR)

    last = len(lines) - 1
    try:
        header = HEADER_DECODER.decode(lines[0])
    except msgspec.DecodeError as exc:
        version = _peek_version(lines[0])
        if version is not None and version != HEADER_VERSION:
            raise UnsupportedVersionError(
                path,
                1,
                f"header version {version!r} is not supported (this release reads "
                f"version {HEADER_VERSION})",
                "Upgrade agentreel or re-record the scenario",
            ) from None
        if last == 0 and not ends_cleanly:
            raise CorruptLineError(path, 1, f"torn session header ({exc})", _REPAIR) from None
        raise CorruptLineError(path, 1, f"invalid session header: {exc}", _REPAIR) from None
    if header.version != HEADER_VERSION:
        raise UnsupportedVersionError(
            path,
            1,
            f"header version {header.version} is not supported (this release reads "
            f"version {HEADER_VERSION})",
            "Upgrade agentreel or re-record the scenario",
        )

    events: list[Event] = []
    torn: TornLine | None = None
    decode = EVENT_DECODER.decode
    for number, line in enumerate(lines[1:], start=2):
        try:
            event = decode(line)
        except msgspec.DecodeError as exc:
            if number - 1 == last and not ends_cleanly:
                torn = TornLine(line=number, text=line, problem=str(exc))
                break
            raise CorruptLineError(path, number, f"invalid event: {exc}", _REPAIR) from None
        if event.seq != len(events):
            raise CorruptLineError(
                path,
                number,
                f"event seq {event.seq} out of order (expected {len(events)})",
                _REPAIR,
            )
        events.append(event)

    if header.seed_length > len(events):
        raise SeedLengthError(
            path,
            1,
            f"seed_length {header.seed_length} is beyond the log's {len(events)} events",
            _REPAIR,
        )
    return SessionLog(path=path, header=header, events=events, torn_tail=torn)


def _peek_version(line: bytes) -> object:
    try:
        value = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return None
    return value.get("version") if isinstance(value, dict) else None
