"""Server-sent events both ways: split from a byte stream as it arrives (decoding), and
framed (encoding). JSON is compact, as the provider APIs send it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One event: its ``event:`` name (empty when absent) and its joined ``data:`` lines."""

    name: str
    data: str


class FrameSplitter(Protocol):
    """Splits a stream's bytes, fed in any pieces, into its events."""

    def feed(self, data: bytes) -> list[SseEvent]: ...

    def flush(self) -> list[SseEvent]: ...


class SseSplitter:
    """Feed bytes in any pieces; get back every event completed by them."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[SseEvent]:
        self._buffer += data
        if b"\r" in self._buffer:
            self._buffer = self._buffer.replace(b"\r\n", b"\n")
        events: list[SseEvent] = []
        while True:
            end = self._buffer.find(b"\n\n")
            if end < 0:
                return events
            block, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
            event = _parse(block.decode("utf-8", "replace"))
            if event is not None:
                events.append(event)

    def flush(self) -> list[SseEvent]:
        """The event the stream's last bytes hold when they lack the closing blank line (a
        server that ended its last frame with one newline or none): the SDKs' decoders
        still read it, so a decoder must too."""
        block, self._buffer = self._buffer, b""
        event = _parse(block.decode("utf-8", "replace")) if block.strip() else None
        return [event] if event is not None else []

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet completed (non-empty when a stream was cut mid-event)."""
        return self._buffer


def _parse(block: str) -> SseEvent | None:
    name = ""
    data: list[str] = []
    for line in block.split("\n"):
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    if not data and not name:
        return None
    return SseEvent(name=name, data="\n".join(data))


_FRAME_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


def split_frames(data: bytes) -> list[bytes]:
    """``data`` cut after each frame's closing blank line, terminators kept: joined, the
    pieces are ``data`` again, byte for byte (a last piece without its terminator stays)."""
    frames: list[bytes] = []
    start = 0
    for end in _FRAME_END.finditer(data):
        frames.append(data[start : end.end()])
        start = end.end()
    if start < len(data):
        frames.append(data[start:])
    return frames


def json_bytes(value: Any) -> bytes:
    """``value`` as compact JSON bytes."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def event_frame(name: str, data: dict[str, Any]) -> bytes:
    """One SSE frame: ``event: <name>`` and its JSON ``data``."""
    return b"event: " + name.encode() + b"\ndata: " + json_bytes(data) + b"\n\n"


def named_error_frame(raw: str) -> bytes:
    """A recorded in-stream error sent again as ``event: error`` with its raw data."""
    return b"event: error\ndata: " + raw.encode() + b"\n\n"


def bare_error_frame(raw: str) -> bytes:
    """A recorded in-stream error sent again as a bare ``data:`` frame (Chat, Gemini)."""
    return b"data: " + raw.encode() + b"\n\n"
