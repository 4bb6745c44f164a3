"""Reading a session log back into typed records."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import msgspec

from agentreel.session._codec import EVENT_DECODER, EVENTS_DECODER, HEADER_DECODER
from agentreel.session._events import HEADER_VERSION, EndSeed, Event, SessionHeader
from agentreel.session.exceptions import (
    CorruptLineError,
    SeedLengthError,
    UnsupportedVersionError,
)

# No command: how the user re-records is known above (they rebuild the message from the
# error's problem and advice, adding the command).
_REPAIR = (
    "The log is not usable as a fixture: restore it from version control or re-record the scenario"
)
_BOM = b"\xef\xbb\xbf"


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

    A torn last line (no trailing newline and not decodable: the writer was killed
    mid-line) is reported in ``torn_tail`` with every earlier event kept. A bad line
    anywhere else (a blank one is named as blank), a byte-order mark, an unknown header
    version, a ``seq`` out of order, a ``seed_length`` beyond the log, or a fork seed not
    followed by ``session/end-seed`` raises a ``SessionLogError`` naming ``file:line``.

    Speed: the event lines are turned into one JSON array in place (newlines become
    commas) and decoded in a single codec call, so there is no Python work per event
    beyond a ``seq`` check; only when that fails is the file walked line by line to name
    the bad line. The event structs are not tracked by the garbage collector.
    """
    path = Path(path)
    buffer = _read(path)
    if not buffer or buffer.isspace():
        raise CorruptLineError(path, 1, "empty file: no session header", _REPAIR)
    if buffer.startswith(_BOM):
        raise CorruptLineError(
            path,
            1,
            "the file starts with a UTF-8 byte-order mark (BOM), as editors write for "
            "'UTF-8 with BOM'; a session log is plain UTF-8",
            "Save it without the BOM, restore it from version control, or re-record the scenario",
        )

    header_end = buffer.find(b"\n")
    if header_end == 0 or (header_end > 0 and buffer[:header_end].isspace()):
        raise CorruptLineError(path, 1, _BLANK + " where the session header belongs", _REPAIR)
    if header_end < 0:  # the header is the only line, and has no newline
        return _finish(path, _decode_header(path, bytes(buffer), torn=True), [], None)
    header = _decode_header(path, bytes(buffer[:header_end]), torn=False)

    torn: TornLine | None = None
    last_event: Event | None = None
    last_newline = len(buffer) - 1
    if buffer[-1:] != b"\n":
        # The last line has no newline: the writer may have died mid-line.
        last_newline = buffer.rfind(b"\n")
        tail = bytes(buffer[last_newline + 1 :])
        tail_number = 2 + buffer.count(b"\n", header_end + 1)
        try:
            last_event = EVENT_DECODER.decode(tail)
        except msgspec.DecodeError as exc:
            torn = TornLine(line=tail_number, text=tail, problem=str(exc))

    events: list[Event] = []
    if last_newline > header_end:
        decoded, line_count = _decode_all(buffer, header_end, last_newline)
        # One event a line (two records on one line, or one split by a raw newline inside
        # a string, decode fine as an array but change the count), each in seq order.
        if decoded is not None and len(decoded) == line_count and _in_seq_order(decoded):
            events = decoded
        else:
            del buffer, decoded
            events = _decode_lines(path)
    if last_event is not None:
        events.append(last_event)
        _check_seq(path, events, len(events) - 1)
    return _finish(path, header, events, torn)


_BLANK = "blank line (a session log holds one JSON record per line, with no empty lines)"
_SLICE = 1 << 20


def _read(path: Path) -> bytearray:
    with path.open("rb", buffering=0) as file:
        buffer = bytearray(os.fstat(file.fileno()).st_size)
        view = memoryview(buffer)
        filled = 0
        while filled < len(buffer):
            got = file.readinto(view[filled:])
            if not got:
                break
            filled += got
        view.release()
        rest = file.read()  # the file grew while we read: keep all of it
    del buffer[filled:]
    buffer += rest
    return buffer


def _decode_all(
    buffer: bytearray, header_end: int, last_newline: int
) -> tuple[list[Event] | None, int]:
    """Decode lines ``header_end+1 .. last_newline`` as one array, rewriting ``buffer``:
    the header's newline becomes ``[``, the others ``,``, the last one ``]``. Also returns
    how many lines that region holds."""
    # Rewritten in slices so the copies stay small (peak memory ~ file + events), with
    # ``replace`` (memchr-fast): ``translate`` maps every byte and cost 4x as much. The
    # newlines are counted the same way (the length a ``replace`` by nothing removes):
    # ``bytearray.count`` tests byte by byte, 2-3x slower on the replay bench's log.
    newlines = 0
    for start in range(header_end + 1, last_newline, _SLICE):
        part = slice(start, min(start + _SLICE, last_newline))
        piece = buffer[part]
        newlines += len(piece) - len(piece.replace(b"\n", b""))
        buffer[part] = piece.replace(b"\n", b",")
    buffer[header_end] = ord("[")
    buffer[last_newline] = ord("]")
    with memoryview(buffer) as view:
        try:
            return EVENTS_DECODER.decode(view[header_end : last_newline + 1]), newlines + 1
        except msgspec.DecodeError:
            return None, newlines + 1


def _in_seq_order(events: list[Event]) -> bool:
    """Every event's ``seq`` is its position. A plain loop: ``all(map(eq, map(attrgetter,
    ...), range(n)))`` cost twice as much (a range int and a call per event), and
    ``all()`` over a generator more still (a generator step per event)."""
    for position, event in enumerate(events):  # noqa: SIM110
        if event.seq != position:
            return False
    return True


def _decode_lines(path: Path) -> list[Event]:
    """Slow path: decode event lines one by one to name the first bad one."""
    lines = path.read_bytes().split(b"\n")
    lines.pop()  # the final newline's empty piece, or the unterminated last line (apart)
    events: list[Event] = []
    decode = EVENT_DECODER.decode
    for number, line in enumerate(lines[1:], start=2):
        if not line or line.isspace():
            raise CorruptLineError(path, number, _BLANK, _REPAIR)
        try:
            event = decode(line)
        except msgspec.DecodeError as exc:
            raise CorruptLineError(path, number, f"invalid event: {exc}", _REPAIR) from None
        events.append(event)
        _check_seq(path, events, len(events) - 1)
    return events


def _finish(
    path: Path, header: SessionHeader, events: list[Event], torn: TornLine | None
) -> SessionLog:
    _check_seed(path, header, events, torn)
    return SessionLog(path=path, header=header, events=events, torn_tail=torn)


def _decode_header(path: Path, line: bytes, *, torn: bool) -> SessionHeader:
    try:
        header = HEADER_DECODER.decode(line)
    except msgspec.DecodeError as exc:
        version = _peek_version(line)
        if version is not None and version != HEADER_VERSION:
            raise _version_error(path, version) from None
        problem = "torn session header" if torn else "invalid session header"
        raise CorruptLineError(path, 1, f"{problem}: {exc}", _REPAIR) from None
    if header.version != HEADER_VERSION:
        raise _version_error(path, header.version)
    return header


def _version_error(path: Path, version: object) -> UnsupportedVersionError:
    return UnsupportedVersionError(
        path,
        1,
        f"header version {version!r} is not supported (this release reads version "
        f"{HEADER_VERSION})",
        "Upgrade agentreel to a release that reads it, or re-record the scenario",
    )


def _check_seq(path: Path, events: list[Event], position: int) -> None:
    seq = events[position].seq
    if seq != position:
        raise CorruptLineError(
            path, position + 2, f"event seq {seq} out of order (expected {position})", _REPAIR
        )


def _check_seed(
    path: Path, header: SessionHeader, events: list[Event], torn: TornLine | None
) -> None:
    seed_length = header.seed_length
    torn_note = f" (line {torn.line} is torn: the writer was killed)" if torn else ""
    if seed_length < 0 or (seed_length > 0 and header.origin != "fork"):
        raise SeedLengthError(
            path,
            1,
            f"seed_length {seed_length} is invalid for a {header.origin!r} session (only a "
            "fork child has a seed; others have 0)",
            _REPAIR,
        )
    if seed_length > len(events):
        raise SeedLengthError(
            path,
            1,
            f"seed_length {seed_length} is beyond the log's {len(events)} events{torn_note}",
            _REPAIR,
        )
    if header.origin != "fork":
        return
    if seed_length == len(events):
        if torn is None:
            raise SeedLengthError(
                path,
                1,
                f"fork seed of {seed_length} events is not followed by session/end-seed "
                f"(the log ends at line {seed_length + 1})",
                _REPAIR,
            )
        return
    boundary = events[seed_length]
    if not isinstance(boundary, EndSeed):
        raise SeedLengthError(
            path,
            seed_length + 2,
            f"expected session/end-seed after the {seed_length}-event fork seed declared in "
            f"the header, found {type(boundary).__name__} (seq {boundary.seq})",
            _REPAIR,
        )


def _peek_version(line: bytes) -> object:
    try:
        value = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return None
    return value.get("version") if isinstance(value, dict) else None
