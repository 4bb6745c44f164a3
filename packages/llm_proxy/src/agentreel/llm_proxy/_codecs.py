"""The proxy's side of the wire codec: each request's API dispatched through the wire
registry (``agentreel.llm.wire.wire_api``), whose API modules own every wire rule — upstream
wire → agentreel chunks (record; the same mappers the SDK adapters use, on the decoded
JSON) and chunks → wire (replay: one wire event per recorded chunk, with the recorded
``ResponseMeta``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from agentreel.llm import Chunk, ResponseMeta
from agentreel.llm.wire import WireDecoder, wire_api
from agentreel.llm_proxy._requests import ParsedRequest
from agentreel.llm_proxy._routes import Api


def decoder(api: Api, upstream: str) -> WireDecoder:
    """A fresh decoder for one call of ``api``."""
    return wire_api(api).decoder(upstream)


def response_id(api: Api, seed: str) -> str:
    """A stable wire id for a replayed response (``chatcmpl-…``, ``msg_…``, ``resp_…``;
    Gemini's ``responseId`` has no prefix)."""
    return wire_api(api).response_id_prefix + hashlib.sha256(seed.encode()).hexdigest()[:24]


def encode_stream(
    request: ParsedRequest,
    chunks: Sequence[Chunk],
    wire_id: str,
    meta: ResponseMeta | None = None,
) -> list[bytes]:
    """The SSE frames answering ``request`` with one recorded call; ``meta``: the call's
    recorded ``ResponseMeta`` when ``chunks`` do not yet hold its finish."""
    return wire_api(request.api).encode_stream(request, chunks, wire_id, meta)


def encode_body(
    request: ParsedRequest,
    chunks: Sequence[Chunk],
    wire_id: str,
    meta: ResponseMeta | None = None,
) -> bytes:
    """The non-streaming JSON body answering ``request`` with one recorded call."""
    return wire_api(request.api).encode_body(request, chunks, wire_id, meta)


def without_ending(api: Api, frames: list[bytes]) -> list[bytes]:
    """A stream's frames minus those that end it (a replayed cut or error ends otherwise)."""
    return wire_api(api).without_ending(frames)
