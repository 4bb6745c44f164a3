"""Streamed deltas as one text per block, for rewriting a token that the stream split.

A recorded block's text or tool-call arguments may arrive in many deltas, and a token that
replay substitutes (``{{cwd}}``, a captured ``{{agent-id:1}}``) can be cut between two of
them. Both substitutions regroup the block's pieces so that every token lies whole in the
delta where it starts; the chunk count never changes. This module is that regrouping's one
owner, and of which text a delta adds (``delta_text``, public: the proxy's recorder joins a
call's streamed text with it).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from agentreel.llm import Chunk, ReasoningDelta, TextDelta, ToolCallDelta


def delta_text(chunk: Chunk) -> str | None:
    """The text a delta adds to its block (tool-call arguments are JSON text), else None."""
    if isinstance(chunk, TextDelta | ReasoningDelta):
        return chunk.text
    if isinstance(chunk, ToolCallDelta):
        return chunk.arguments_delta
    return None


def with_delta_text(chunk: Chunk, text: str) -> Chunk:
    """``chunk`` (a delta) adding ``text`` instead."""
    if isinstance(chunk, TextDelta | ReasoningDelta):
        return msgspec.structs.replace(chunk, text=text)
    assert isinstance(chunk, ToolCallDelta)
    return msgspec.structs.replace(chunk, arguments_delta=text)


def delta_streams(chunks: Sequence[Chunk]) -> list[list[int]]:
    """The positions of each block's deltas (one list per delta kind and block index)."""
    streams: dict[tuple[str, int], list[int]] = {}
    for position, chunk in enumerate(chunks):
        if isinstance(chunk, TextDelta | ReasoningDelta | ToolCallDelta):
            streams.setdefault((type(chunk).__name__, chunk.index), []).append(position)
    return list(streams.values())


def regrouped(pieces: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[str]:
    """``pieces`` (a block's deltas) regrouped so that no span of their joined text is cut:
    a piece that ends inside a span takes the rest of it, the next piece gives it up."""
    full = "".join(pieces)
    ends: list[int] = []
    offset = 0
    for piece in pieces:
        offset += len(piece)
        end = offset
        for start, stop in spans:
            if start < end < stop:
                end = stop
                break
        ends.append(max(end, ends[-1]) if ends else end)
    result: list[str] = []
    previous = 0
    for end in ends:
        result.append(full[previous:end])
        previous = end
    return result
