"""NDJSON streams (Ollama's): one JSON object per line, split as bytes arrive."""

from __future__ import annotations

from agentreel.llm.wire._sse import SseEvent


class NdjsonSplitter:
    """Feed bytes in any pieces; get back every line completed by them, each as an event
    whose ``data`` is the line (no name), so a decoder reads both framings alike."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[SseEvent]:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        return [_event(line) for line in lines if line.strip()]

    def flush(self) -> list[SseEvent]:
        """The last line when the stream ended without its newline."""
        line, self._buffer = self._buffer, b""
        return [_event(line)] if line.strip() else []


def _event(line: bytes) -> SseEvent:
    return SseEvent(name="", data=line.decode("utf-8", "replace").strip())


def split_lines(data: bytes) -> list[bytes]:
    """``data`` cut after each newline, newlines kept: joined, the pieces are ``data``."""
    return data.splitlines(keepends=True)
