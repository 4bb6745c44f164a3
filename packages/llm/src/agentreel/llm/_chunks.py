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


class ResponseMeta(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A call's response metadata as the provider sent it, for a replay that answers with
    the same wire fields (SPEC 11 "ids as recorded"). Written by the proxy's recorder;
    every field is optional and omitted when absent, so a recording without it (older
    ones, the in-process adapters') replays with minted ids and the request's model.

    ``stop_reason`` is the wire's raw reason (``stop_sequence``, ``pause_turn``,
    ``content_filter``, a Responses ``incomplete_details.reason``) and ``stop_sequence`` the
    sequence that stopped it; ``item_ids`` are the Responses output items' ids, in block
    order.
    """

    id: str | None = None
    model: str | None = None
    created: int | None = None
    system_fingerprint: str | None = None
    stop_reason: str | None = None
    stop_sequence: str | None = None
    item_ids: tuple[str, ...] = ()


class Finish(_ChunkBase, frozen=True, tag="finish"):
    reason: FinishReason
    message: str | None = None
    code: str | None = None
    response: ResponseMeta | None = None


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
