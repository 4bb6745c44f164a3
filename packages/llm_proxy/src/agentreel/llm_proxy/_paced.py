"""Replay chunk by chunk: a call whose chunks take time (a hang or throw override, pacing)
reaches the client as the replay provider yields them, re-encoded from the chunks."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import msgspec
from aiohttp import web

from agentreel.llm import BlockStart, Chunk, Finish, LlmError, ResponseMeta, Usage
from agentreel.llm.wire import wire_api
from agentreel.llm_proxy._codecs import encode_stream, response_id, without_ending
from agentreel.llm_proxy._http import prepare_sse
from agentreel.llm_proxy._identity import Identity
from agentreel.llm_proxy._lane_logs import CallRecording
from agentreel.llm_proxy._requests import ParsedRequest

logger = logging.getLogger("agentreel.llm_proxy")


@dataclass(slots=True)
class Paced:
    """How far a paced call got: its chunks, the error that ended it, the stream started
    (if any) and how many of its frames went out, its wire id; ``client_left``: the
    client hung up while it streamed."""

    chunks: list[Chunk]
    failure: LlmError | None
    response: web.StreamResponse | None
    sent: int
    wire_id: str
    client_left: bool = False


async def stream_as_it_comes(
    request: web.Request,
    parsed: ParsedRequest,
    identity: Identity,
    stream: AsyncIterator[Chunk],
    served: CallRecording | None,
    meta: ResponseMeta | None,
) -> Paced:
    """A call whose chunks take time (a hang or throw override, pacing): each reaches
    the client (and the served log) as the provider yields it, as in-process replay
    hands it to the agent. The closing frames follow once the call has ended; a
    non-streaming request gets its body then. (An Anthropic ``message_start`` sent
    before the call's usage arrived carries no input token counts.) ``meta``: the
    recorded call's ``ResponseMeta``, so the frames sent before its finish carry the
    same ids and model as those after it."""
    chunks: list[Chunk] = []
    failure: LlmError | None = None
    response: web.StreamResponse | None = None
    sent = 0
    wire_id = ""
    try:
        async for chunk in stream:
            chunks.append(chunk)
            if served is not None:
                served.chunk(chunk)
            if isinstance(chunk, Usage | Finish):
                continue  # they shape the closing frames (and a recorded HTTP error)
            if isinstance(chunk, BlockStart) and chunk.block_type == "tool-call":
                continue  # its frame names the tool, which its first delta carries
            if not parsed.stream:
                continue
            if response is None:
                wire_id = response_id(parsed.api, msgspec.json.encode(chunk).decode())
                response = await prepare_sse(request, wire_api(parsed.api).stream_content_type)
            deltas = [c for c in chunks if not isinstance(c, Usage | Finish)]
            frames = without_ending(parsed.api, encode_stream(parsed, deltas, wire_id, meta))
            for frame in frames[sent:]:
                await response.write(frame)
            sent = len(frames)
    except LlmError as error:
        failure = error
    except ConnectionResetError:
        logger.info("the client of %s left mid-stream", identity.describe())
        return Paced(chunks, failure, response, sent, wire_id, client_left=True)
    if response is None:
        wire_id = response_id(parsed.api, msgspec.json.encode(chunks).decode())
    return Paced(chunks, failure, response, sent, wire_id)
