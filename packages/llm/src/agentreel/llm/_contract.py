"""The stream contract, checked incrementally.

Every block is started before its deltas and ended after them; deltas match their
block's type; ``usage`` (at most once) comes before ``finish``; ``finish`` comes exactly
once and nothing follows it. A stream that finishes ``stop``, ``tool-calls`` or
``max-tokens`` must have ended every block; ``aborted`` and ``error`` may leave blocks
open because the stream was cut.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable

from agentreel.llm._chunks import (
    BlockEnd,
    BlockStart,
    BlockType,
    Chunk,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from agentreel.llm._messages import ReasoningPart, TextPart, ToolCallPart
from agentreel.llm.exceptions import StreamContractError

_DELTA_BLOCK: dict[type[Chunk], BlockType] = {
    TextDelta: "text",
    ReasoningDelta: "reasoning",
    ToolCallDelta: "tool-call",
}
_END_BLOCK: dict[type[object], BlockType] = {
    TextPart: "text",
    ReasoningPart: "reasoning",
    ToolCallPart: "tool-call",
}


class StreamContractChecker:
    """Feed chunks one at a time; raises ``StreamContractError`` at the first violation."""

    __slots__ = ("_ended", "_finished", "_index", "_open", "_usage_seen")

    def __init__(self) -> None:
        self._open: dict[int, BlockType] = {}
        self._ended: set[int] = set()
        self._usage_seen = False
        self._finished = False
        self._index = 0

    def feed(self, chunk: Chunk) -> None:
        index = self._index
        self._index += 1
        if self._finished:
            raise StreamContractError(index, chunk, "chunk after finish")
        if isinstance(chunk, BlockStart):
            if chunk.index in self._open:
                raise StreamContractError(index, chunk, f"block {chunk.index} is already open")
            if chunk.index in self._ended:
                raise StreamContractError(index, chunk, f"block {chunk.index} was already ended")
            self._open[chunk.index] = chunk.block_type
        elif isinstance(chunk, TextDelta | ReasoningDelta | ToolCallDelta):
            self._check_open(index, chunk, chunk.index, _DELTA_BLOCK[type(chunk)])
        elif isinstance(chunk, BlockEnd):
            self._check_open(index, chunk, chunk.index, _END_BLOCK[type(chunk.block)])
            del self._open[chunk.index]
            self._ended.add(chunk.index)
        elif isinstance(chunk, Usage):
            if self._usage_seen:
                raise StreamContractError(index, chunk, "second usage chunk")
            self._usage_seen = True
        elif isinstance(chunk, Finish):
            if self._open and chunk.reason not in ("aborted", "error"):
                still_open = ", ".join(str(i) for i in sorted(self._open))
                raise StreamContractError(
                    index, chunk, f"finish {chunk.reason!r} while block(s) {still_open} still open"
                )
            self._finished = True

    def close(self) -> None:
        """Call at the end of the stream: a stream must end with ``finish``."""
        if not self._finished:
            raise StreamContractError(self._index, None, "stream ended without a finish chunk")

    def _check_open(self, index: int, chunk: Chunk, block: int, expected: BlockType) -> None:
        actual = self._open.get(block)
        if actual is None:
            state = "was already ended" if block in self._ended else "was never started"
            raise StreamContractError(index, chunk, f"block {block} {state}")
        if actual != expected:
            raise StreamContractError(
                index, chunk, f"block {block} is a {actual!r} block, not {expected!r}"
            )


def validate_stream(chunks: Iterable[Chunk]) -> None:
    """Check a complete chunk stream against the contract."""
    checker = StreamContractChecker()
    for chunk in chunks:
        checker.feed(chunk)
    checker.close()


async def checked_stream(chunks: AsyncIterable[Chunk]) -> AsyncIterator[Chunk]:
    """Pass chunks through, raising at the first contract violation (for tests and debug)."""
    checker = StreamContractChecker()
    async for chunk in chunks:
        checker.feed(chunk)
        yield chunk
    checker.close()
