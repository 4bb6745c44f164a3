"""Server-sent events split from a byte stream as it arrives (for recording upstream streams)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One event: its ``event:`` name (empty when absent) and its joined ``data:`` lines."""

    name: str
    data: str


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
