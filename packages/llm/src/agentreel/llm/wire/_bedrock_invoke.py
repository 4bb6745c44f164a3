"""AWS Bedrock's InvokeModel with an Anthropic payload: ``POST /model/<modelId>/invoke`` (an
Anthropic Messages body, ``anthropic_version: bedrock-2023-05-31``, no model: the path names
it) and ``/invoke-with-response-stream``: an AWS event stream of ``chunk`` events whose
payload ``{"bytes": <base64>}`` is one Messages stream event. So both directions are the
Messages API's (``_messages``) inside Bedrock's framing (``_eventstream``)."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from agentreel.llm._chunks import Chunk, ResponseMeta
from agentreel.llm.wire._api import BEDROCK_MODEL, WirePath
from agentreel.llm.wire._bedrock import BEDROCK_CONVERSE_API
from agentreel.llm.wire._common import UpstreamStreamError
from agentreel.llm.wire._eventstream import (
    EXCEPTION_PREFIX,
    decode_event_message,
    event_frame,
)
from agentreel.llm.wire._messages import (
    MESSAGES_API,
    MessagesDecoder,
    parse_messages_request,
)
from agentreel.llm.wire._request import WireRequest
from agentreel.llm.wire._sse import SseEvent, SseSplitter, json_bytes


def parse_invoke_request(
    body: dict[str, Any], model: str = "", stream: bool = False
) -> WireRequest:
    """A Messages body; the model and whether it streams are the path's."""
    request = parse_messages_request(body, model, stream)
    return dataclasses.replace(request, api="bedrock-invoke", stream=stream)


class InvokeDecoder:
    """An InvokeModel answer: each ``chunk`` event's Messages event, fed to the Messages
    decoder; an exception message is an in-stream error."""

    def __init__(self, upstream: str) -> None:
        self._inner = MessagesDecoder(upstream)

    @property
    def ended(self) -> bool:
        return False

    def event(self, event: SseEvent) -> list[Chunk]:
        if event.name.startswith(EXCEPTION_PREFIX):
            raise UpstreamStreamError(event.name.removeprefix(EXCEPTION_PREFIX) + "\n" + event.data)
        if event.name != "chunk" or not event.data:
            return []
        encoded = json.loads(event.data).get("bytes") or ""
        inner = base64.b64decode(encoded).decode()
        kind = json.loads(inner).get("type", "")
        return self._inner.event(SseEvent(name=str(kind), data=inner))

    def finish(self) -> list[Chunk]:
        return self._inner.finish()

    def body(self, data: dict[str, Any]) -> list[Chunk]:
        return self._inner.body(data)


def _chunk_frame(data: bytes) -> bytes:
    return event_frame("chunk", json_bytes({"bytes": base64.b64encode(data).decode()}))


def _stream(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> list[bytes]:
    """The Messages stream, each of its events in a ``chunk`` frame."""
    frames = MESSAGES_API.encode_stream(request, chunks, wire_id, meta)
    splitter = SseSplitter()
    return [_chunk_frame(event.data.encode()) for frame in frames for event in splitter.feed(frame)]


def ends_invoke_stream(frame: bytes) -> bool:
    """A ``chunk`` whose Messages event ends the stream (``message_delta``, ``message_stop``)."""
    try:
        event = decode_event_message(frame)
        inner = base64.b64decode(json.loads(event.data).get("bytes") or "")
        kind = json.loads(inner).get("type")
    except (ValueError, AttributeError):
        return False
    return kind in ("message_delta", "message_stop")


BEDROCK_INVOKE_API = dataclasses.replace(
    # Served as Converse is (event-stream framing, the error bodies and in-stream
    # exceptions, the models listing, the SigV4 headers, the stub's ``bedrock`` rules);
    # its own: the Messages payload, its ids, its path.
    BEDROCK_CONVERSE_API,
    name="bedrock-invoke",
    title="AWS Bedrock InvokeModel (Anthropic)",
    parse=parse_invoke_request,
    decoder=InvokeDecoder,
    encode_stream=_stream,
    encode_body=MESSAGES_API.encode_body,  # a Messages body as it is
    response_id_prefix="msg_",
    ends_stream=ends_invoke_stream,
    paths=(
        WirePath(
            BEDROCK_MODEL + "/(?P<method>invoke-with-response-stream|invoke)",
            "POST /model/<modelId>/invoke-with-response-stream|invoke",
            streaming_methods=("invoke-with-response-stream",),
            quoted_model=True,
        ),
    ),
)
"""AWS Bedrock ``POST /model/<modelId>/invoke-with-response-stream`` and ``/invoke``."""
