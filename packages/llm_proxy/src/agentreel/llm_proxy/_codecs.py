"""The proxy's side of the wire codec: each request's API dispatched onto
``agentreel.llm.wire``, which owns every wire rule — upstream wire → agentreel chunks
(record; decoding reuses the SDK adapters' own mappers on the decoded JSON, imported when
record mode first decodes, so replay never imports a provider SDK) and chunks → wire
(replay: one wire event per recorded chunk, with the recorded ``ResponseMeta``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from agentreel.llm import Chunk, ResponseMeta
from agentreel.llm.wire import (
    CHAT_STREAM_ENDINGS,
    GEMINI_STREAM_ENDINGS,
    MESSAGES_STREAM_ENDINGS,
    RESPONSES_STREAM_ENDINGS,
    ChatDecoder,
    GeminiDecoder,
    MessagesDecoder,
    ResponsesDecoder,
    WireDecoder,
    chat_chunk_body,
    chat_chunk_frames,
    gemini_chunk_body,
    gemini_chunk_frames,
    messages_chunk_body,
    messages_chunk_frames,
    responses_chunk_body,
    responses_chunk_frames,
)
from agentreel.llm_proxy._requests import ParsedRequest
from agentreel.llm_proxy._routes import Api


def decoder(api: Api, upstream: str) -> WireDecoder:
    """A fresh decoder for one call of ``api``."""
    if api == "chat":
        return ChatDecoder(upstream)
    if api == "messages":
        return MessagesDecoder(upstream)
    if api == "gemini":
        return GeminiDecoder(upstream)
    return ResponsesDecoder(upstream)


def response_id(api: Api, seed: str) -> str:
    """A stable wire id for a replayed response (``chatcmpl-…``, ``msg_…``, ``resp_…``;
    Gemini's ``responseId`` has no prefix)."""
    digest = hashlib.sha256(seed.encode()).hexdigest()[:24]
    return {"chat": "chatcmpl-", "messages": "msg_", "responses": "resp_", "gemini": ""}[
        api
    ] + digest


def encode_stream(
    request: ParsedRequest,
    chunks: Sequence[Chunk],
    wire_id: str,
    meta: ResponseMeta | None = None,
) -> list[bytes]:
    """The SSE frames answering ``request`` with one recorded call; ``meta``: the call's
    recorded ``ResponseMeta`` when ``chunks`` do not yet hold its finish."""
    if request.api == "chat":
        return chat_chunk_frames(
            chunks,
            model=request.model,
            response_id=wire_id,
            include_usage=request.include_usage,
            meta=meta,
        )
    if request.api == "messages":
        return messages_chunk_frames(chunks, model=request.model, message_id=wire_id, meta=meta)
    if request.api == "gemini":
        return gemini_chunk_frames(chunks, model=request.model, response_id=wire_id, meta=meta)
    return responses_chunk_frames(
        chunks, model=request.model, response_id=wire_id, namespaced=request.namespaced, meta=meta
    )


def encode_body(
    request: ParsedRequest,
    chunks: Sequence[Chunk],
    wire_id: str,
    meta: ResponseMeta | None = None,
) -> bytes:
    """The non-streaming JSON body answering ``request`` with one recorded call."""
    if request.api == "chat":
        return chat_chunk_body(chunks, model=request.model, response_id=wire_id, meta=meta)
    if request.api == "messages":
        return messages_chunk_body(chunks, model=request.model, message_id=wire_id, meta=meta)
    if request.api == "gemini":
        return gemini_chunk_body(chunks, model=request.model, response_id=wire_id, meta=meta)
    return responses_chunk_body(
        chunks, model=request.model, response_id=wire_id, namespaced=request.namespaced, meta=meta
    )


def without_ending(api: Api, frames: list[bytes]) -> list[bytes]:
    """A stream's frames minus those that end it (a replayed cut or error ends otherwise)."""
    endings = {
        "chat": CHAT_STREAM_ENDINGS,
        "messages": MESSAGES_STREAM_ENDINGS,
        "responses": RESPONSES_STREAM_ENDINGS,
        "gemini": GEMINI_STREAM_ENDINGS,
    }[api]
    return [frame for frame in frames if not frame.startswith(endings)]
