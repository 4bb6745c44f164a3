"""Stream chunks: the one tagged union every provider yields, and its JSON codec.

The wire form is one JSON object per chunk with a ``type`` tag; default-valued optional
fields are omitted so that a chunk round-trips byte for byte.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from agentreel.llm._messages import ReasoningPart, TextPart, ToolCallPart
from agentreel.llm.exceptions import ChunkDecodeError

BlockType = Literal["text", "reasoning", "tool-call"]
FinishReason = Literal["stop", "tool-calls", "max-tokens", "aborted", "error"]
CompletedBlock = TextPart | ReasoningPart | ToolCallPart


class _ChunkBase(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", omit_defaults=True):
    pass


class BlockStart(_ChunkBase, frozen=True, tag="block-start"):
    index: int
    block_type: BlockType


class TextDelta(_ChunkBase, frozen=True, tag="text-delta"):
    index: int
    text: str


class ReasoningDelta(_ChunkBase, frozen=True, tag="reasoning-delta"):
    index: int
    text: str


class ToolCallDelta(_ChunkBase, frozen=True, tag="tool-call-delta"):
    index: int
    id: str
    arguments_delta: str
    name: str | None = None


class BlockEnd(_ChunkBase, frozen=True, tag="block-end"):
    index: int
    block: CompletedBlock


class Usage(_ChunkBase, frozen=True, tag="usage"):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None


class Finish(_ChunkBase, frozen=True, tag="finish"):
    reason: FinishReason
    message: str | None = None
    code: str | None = None


Chunk = BlockStart | TextDelta | ReasoningDelta | ToolCallDelta | BlockEnd | Usage | Finish

_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Chunk)
_MANY_DECODER = msgspec.json.Decoder(list[Chunk])


def encode_chunk(chunk: Chunk) -> bytes:
    """Encode one chunk as compact JSON bytes."""
    return _ENCODER.encode(chunk)


def decode_chunk(data: bytes | str) -> Chunk:
    """Decode one chunk; a bad input raises ``ChunkDecodeError`` naming the field."""
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise ChunkDecodeError(f"invalid chunk {_preview(data)}: {exc}") from None


def decode_chunks(data: bytes | str) -> list[Chunk]:
    """Decode a JSON array of chunks in one pass."""
    try:
        return _MANY_DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise ChunkDecodeError(f"invalid chunk array {_preview(data)}: {exc}") from None


def _preview(data: bytes | str, limit: int = 120) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return repr(text if len(text) <= limit else text[:limit] + "…")
