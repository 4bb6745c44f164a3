"""Reading a session log back into typed records."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from agentreel.session._codec import EVENT_DECODER, EVENTS_DECODER, HEADER_DECODER
from agentreel.session._events import HEADER_VERSION, EndSeed, Event, SessionHeader
from agentreel.session._format import OLDEST_FORMAT, newer_stamp_problem
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

    Speed: the event lines are turned into JSON arrays in place (newlines become commas),
    a block of lines per codec call (``open_session_log``), so there is no Python work
    per event beyond a ``seq`` check; only when a block fails is the file walked line by
    line to name the bad line. The event structs are not tracked by the garbage collector.
    """
    reader = open_session_log(path)
    events: list[Event] = []
    for block in reader:
        if events:
            events += block
        else:
            events = block
    return SessionLog(
        path=reader.path, header=reader.header, events=events, torn_tail=reader.torn_tail
    )


class SessionLogReader:
    """A session log read a block of events at a time, for a reader that needs each event
    once (replay's call derivation): it works on events still in the CPU cache — that
    alone made deriving a large recording's calls a tenth faster — and never holds them
    all.

    ``header`` and ``torn_tail`` are read when the log is opened. Iterating (once) yields
    the events in order, a list per block of lines, checked exactly as
    ``load_session_log`` checks them: a bad line raises its ``SessionLogError`` when its
    block is reached, the fork-seed checks run after the last block.
    """

    __slots__ = ("_blocks", "header", "path", "torn_tail")

    def __init__(
        self,
        path: Path,
        header: SessionHeader,
        torn_tail: TornLine | None,
        blocks: Iterator[list[Event]],
    ) -> None:
        self.path = path
        self.header = header
        self.torn_tail = torn_tail
        self._blocks = blocks

    def __iter__(self) -> Iterator[list[Event]]:
        return self._blocks


def open_session_log(path: Path | str) -> SessionLogReader:
    """Open a session log: its header and (torn) last line read now, its events as the
    returned reader is iterated (``SessionLogReader``). Errors as ``load_session_log``."""
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
        header = _decode_header(path, bytes(buffer), torn=True)
        return SessionLogReader(path, header, None, _event_blocks(path, header, None, 0, 0))
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
    blocks = _event_blocks(path, header, torn, header_end, last_newline, buffer, last_event)
    return SessionLogReader(path, header, torn, blocks)


def _event_blocks(
    path: Path,
    header: SessionHeader,
    torn: TornLine | None,
    header_end: int,
    last_newline: int,
    buffer: bytearray | None = None,
    last_event: Event | None = None,
) -> Iterator[list[Event]]:
    """The events of lines ``header_end+1 .. last_newline`` (a block at a time, in
    ``buffer``), then ``last_event``; the seed checks at the end."""
    seed_length = header.seed_length
    count = 0  # events yielded so far
    boundary: Event | None = None  # the event right after the fork seed
    start = header_end
    while buffer is not None and start < last_newline:
        end = buffer.find(b"\n", start + _BLOCK, last_newline)
        if end < 0:
            end = last_newline
        block = _decode_block(buffer, start, end)
        if block is None or not _in_seq_order(block, count):
            # Slow path: the file walked line by line names the first bad line (the lines
            # of earlier blocks decode as before).
            del buffer
            block = _decode_lines(path)[count:]
            end = last_newline
            buffer = None
        if count <= seed_length < count + len(block):
            boundary = block[seed_length - count]
        count += len(block)
        yield block
        start = end
    if last_event is not None:
        if last_event.seq != count:
            raise _seq_error(path, last_event.seq, count)
        if count == seed_length:
            boundary = last_event
        count += 1
        yield [last_event]
    _check_seed(path, header, count, boundary, torn)


_BLANK = "blank line (a session log holds one JSON record per line, with no empty lines)"
# Bytes of log lines decoded per codec call: the events of a block fit in the CPU's L2
# cache while the reader works on them (64 KiB-128 KiB measured best; 512 KiB lost it).
_BLOCK = 1 << 16


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


def _decode_block(buffer: bytearray, start: int, end: int) -> list[Event] | None:
    """Decode the lines between the newlines at ``start`` and ``end`` as one array, in
    place: the newline at ``start`` becomes ``[``, those between ``,``, the one at ``end``
    ``]``. ``None`` if that does not decode to one event per line."""
    # ``replace`` is memchr-fast (``translate`` maps every byte: 4x the cost). The lines
    # are counted the same way, by the length a ``replace`` by nothing removes:
    # ``bytearray.count`` tests byte by byte, 2-3x slower. One event a line: two records on
    # one line, or one split by a raw newline inside a string, decode fine as an array but
    # change the count.
    part = slice(start + 1, end)
    piece = buffer[part]
    lines = len(piece) - len(piece.replace(b"\n", b"")) + 1
    buffer[part] = piece.replace(b"\n", b",")
    buffer[start] = ord("[")
    buffer[end] = ord("]")
    with memoryview(buffer) as view:
        try:
            block = EVENTS_DECODER.decode(view[start : end + 1])
        except msgspec.DecodeError:
            return None
    return block if len(block) == lines else None


def _in_seq_order(events: list[Event], first: int) -> bool:
    """Every event's ``seq`` is its position (``first`` for the first one). A plain loop:
    ``all(map(eq, map(attrgetter, ...), range(n)))`` cost twice as much (a range int and a
    call per event), and ``all()`` over a generator more still (a generator step each)."""
    for position, event in enumerate(events, first):  # noqa: SIM110
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


def _decode_header(path: Path, line: bytes, *, torn: bool) -> SessionHeader:
    try:
        header = HEADER_DECODER.decode(line)
    except msgspec.DecodeError as exc:
        version, stamp = _peek_version(line)
        if version is not None and version != HEADER_VERSION:
            raise _version_error(path, version) from None
        if stamp is not None and (problem := newer_stamp_problem(*stamp)) is not None:
            raise _stamp_error(path, problem) from None
        problem = "torn session header" if torn else "invalid session header"
        raise CorruptLineError(path, 1, f"{problem}: {exc}", _REPAIR) from None
    if header.version != HEADER_VERSION:
        raise _version_error(path, header.version)
    if b'"format"' not in line:
        # No stamp: the oldest format, never read as the current one.
        return msgspec.structs.replace(header, format=OLDEST_FORMAT, masks=OLDEST_FORMAT)
    if (problem := newer_stamp_problem(header.format, header.masks)) is not None:
        raise _stamp_error(path, problem)
    return header


def _stamp_error(path: Path, problem: str) -> UnsupportedVersionError:
    return UnsupportedVersionError(
        path,
        1,
        f"this session log was {problem}",
        "Upgrade agentreel to a release that reads it (pip install -U agentreel), or "
        "re-record the scenario with this one",
    )


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
        raise _seq_error(path, seq, position)


def _seq_error(path: Path, seq: int, position: int) -> CorruptLineError:
    return CorruptLineError(
        path, position + 2, f"event seq {seq} out of order (expected {position})", _REPAIR
    )


def _check_seed(
    path: Path, header: SessionHeader, count: int, boundary: Event | None, torn: TornLine | None
) -> None:
    """``count``: the log's events; ``boundary``: the one at position ``seed_length``."""
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
    if seed_length > count:
        raise SeedLengthError(
            path,
            1,
            f"seed_length {seed_length} is beyond the log's {count} events{torn_note}",
            _REPAIR,
        )
    if header.origin != "fork":
        return
    if boundary is None:  # seed_length == count
        if torn is None:
            raise SeedLengthError(
                path,
                1,
                f"fork seed of {seed_length} events is not followed by session/end-seed "
                f"(the log ends at line {seed_length + 1})",
                _REPAIR,
            )
        return
    if not isinstance(boundary, EndSeed):
        raise SeedLengthError(
            path,
            seed_length + 2,
            f"expected session/end-seed after the {seed_length}-event fork seed declared in "
            f"the header, found {type(boundary).__name__} (seq {boundary.seq})",
            _REPAIR,
        )


def _peek_version(line: bytes) -> tuple[object, tuple[object, object] | None]:
    """A header line's ``version`` and its stamp (format, masks; ``None`` without one)."""
    try:
        value = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return None, None
    if not isinstance(value, dict):
        return None, None
    stamp = (value.get("format"), value.get("masks", OLDEST_FORMAT)) if "format" in value else None
    return value.get("version"), stamp
