"""Anthropic Messages on the wire: ``event: <type>\\ndata: {json}\\n\\n`` frames
``message_start``, ``ping``, ``content_block_start/delta/stop``, ``message_delta``,
``message_stop``; a ``message`` body without ``stream: true``; the error bodies and the
in-stream ``error`` event. Encoders from recorded chunks and the decoder of an upstream's
stream."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentreel.llm._chunks import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    ReasoningDelta,
    ResponseMeta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from agentreel.llm._messages import (
    ContentPart,
    Message,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from agentreel.llm.wire._api import MODEL, OPENAI_BASE, WireApiSpec, WirePath, vertex_base
from agentreel.llm.wire._common import (
    MetaWatch,
    UpstreamStreamError,
    finish_in,
    first_tool_delta,
    meta_in,
    provider_label,
    usage_in,
    wire_reason,
    wrap,
)
from agentreel.llm.wire._listing import models_listing_body
from agentreel.llm.wire._messages_mapper import AnthropicStreamMapper
from agentreel.llm.wire._request import (
    RuleText,
    WireRequest,
    body_model,
    canonical,
    conversation_end,
    flag,
    format_type,
    rule_text_of,
    rule_tools,
    stop_list,
    text_of,
    tool_spec,
)
from agentreel.llm.wire._sse import SseEvent, event_frame, json_bytes

MESSAGES_STOP_REASONS = {
    "stop": "end_turn",
    "tool-calls": "tool_use",
    "max-tokens": "max_tokens",
    "refusal": "refusal",
}


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def anthropic_stream_error_frame(message: str) -> bytes:
    """Anthropic's in-stream ``error`` event (e.g. ``overloaded_error`` mid-response)."""
    return event_frame(
        "error", {"type": "error", "error": {"type": "overloaded_error", "message": message}}
    )


def anthropic_error_body(status: int, message: str) -> bytes:
    kind = _ANTHROPIC_ERROR_TYPES.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )
    return json_bytes({"type": "error", "error": {"type": kind, "message": message}})


def _anthropic_usage(usage: Usage | None) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens if usage else 0,
        "cache_creation_input_tokens": (usage.cache_write_tokens or 0) if usage else 0,
        "cache_read_input_tokens": (usage.cache_read_tokens or 0) if usage else 0,
        "output_tokens": usage.output_tokens if usage else 0,
    }


def message_start_frames(message_id: str, model: str, usage: dict[str, Any]) -> list[bytes]:
    """The frames every Messages stream opens with: ``message_start`` (an empty assistant
    message with its id, model and starting usage), then ``ping``."""
    message: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return [
        event_frame("message_start", {"type": "message_start", "message": message}),
        event_frame("ping", {"type": "ping"}),
    ]


def messages_chunk_frames(
    chunks: Sequence[Chunk], *, model: str, message_id: str, meta: ResponseMeta | None = None
) -> list[bytes]:
    """Anthropic Messages SSE frames for one recorded call: a frame per recorded delta."""
    usage = usage_in(chunks)
    meta = meta_in(chunks, meta)
    start_usage = {**_anthropic_usage(usage), "output_tokens": 1}
    frames = message_start_frames(meta.id or message_id, meta.model or model, start_usage)

    def delta(at: int, value: dict[str, Any]) -> bytes:
        payload = {"type": "content_block_delta", "index": at, "delta": value}
        return event_frame("content_block_delta", payload)

    for position, chunk in enumerate(chunks):
        if isinstance(chunk, BlockStart):
            block: dict[str, Any]
            if chunk.block_type == "text":
                block = {"type": "text", "text": ""}
            elif chunk.block_type == "reasoning":
                block = {"type": "thinking", "thinking": "", "signature": ""}
            else:
                first = first_tool_delta(chunks, position, chunk.index)
                block = {
                    "type": "tool_use",
                    "id": first.id if first else "",
                    "name": (first.name or "") if first else "",
                    "input": {},
                }
            payload = {"type": "content_block_start", "index": chunk.index, "content_block": block}
            frames.append(event_frame("content_block_start", payload))
        elif isinstance(chunk, TextDelta):
            frames.append(delta(chunk.index, {"type": "text_delta", "text": chunk.text}))
        elif isinstance(chunk, ReasoningDelta):
            frames.append(delta(chunk.index, {"type": "thinking_delta", "thinking": chunk.text}))
        elif isinstance(chunk, ToolCallDelta):
            if chunk.arguments_delta:
                value = {"type": "input_json_delta", "partial_json": chunk.arguments_delta}
                frames.append(delta(chunk.index, value))
        elif isinstance(chunk, BlockEnd):
            block_done = chunk.block
            if isinstance(block_done, ReasoningPart) and block_done.signature:
                signature = {"type": "signature_delta", "signature": block_done.signature}
                frames.append(delta(chunk.index, signature))
            stop = {"type": "content_block_stop", "index": chunk.index}
            frames.append(event_frame("content_block_stop", stop))
        elif isinstance(chunk, Finish):
            reason = wire_reason(chunk, MESSAGES_STOP_REASONS)
            payload = {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": meta.stop_sequence},
                "usage": {"output_tokens": usage.output_tokens if usage else 0},
            }
            frames.append(event_frame("message_delta", payload))
            frames.append(event_frame("message_stop", {"type": "message_stop"}))
    return frames


def messages_chunk_body(
    chunks: Sequence[Chunk], *, model: str, message_id: str, meta: ResponseMeta | None = None
) -> bytes:
    """A non-streaming Anthropic ``message`` body holding one recorded call."""
    content: list[dict[str, Any]] = []
    for chunk in chunks:
        if not isinstance(chunk, BlockEnd):
            continue
        block = chunk.block
        if isinstance(block, TextPart):
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, ReasoningPart):
            signature = block.signature or ""
            content.append({"type": "thinking", "thinking": block.text, "signature": signature})
        else:
            try:
                arguments = json.loads(block.arguments or "{}")
            except ValueError:
                arguments = {"_raw_arguments": block.arguments}
            content.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
            )
    meta = meta_in(chunks, meta)
    body = {
        "id": meta.id or message_id,
        "type": "message",
        "role": "assistant",
        "model": meta.model or model,
        "content": content,
        "stop_reason": wire_reason(finish_in(chunks), MESSAGES_STOP_REASONS),
        "stop_sequence": meta.stop_sequence,
        "usage": _anthropic_usage(usage_in(chunks)),
    }
    return json_bytes(body)


STREAM_ENDINGS = (b"event: message_delta", b"event: message_stop")
"""The frames that end a Messages stream (a replayed cut or error ends otherwise)."""


class MessagesDecoder:
    def __init__(self, upstream: str) -> None:
        self._mapper = AnthropicStreamMapper()
        self._label = provider_label(upstream)
        self._meta = MetaWatch()

    def event(self, event: SseEvent) -> list[Chunk]:
        if not event.data:
            return []
        data = json.loads(event.data)
        if event.name == "error" or (isinstance(data, dict) and data.get("type") == "error"):
            raise UpstreamStreamError(event.data)
        return self._feed(data)

    def _feed(self, data: Any) -> list[Chunk]:
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "message_start":
            self._meta.take(data.get("message"), id="id", model="model")
        elif kind == "message_delta":
            self._meta.take(
                data.get("delta"), stop_reason="stop_reason", stop_sequence="stop_sequence"
            )
        return self._mapper.feed(wrap(data))

    def finish(self) -> list[Chunk]:
        return self._meta.onto(self._mapper.finish(self._label))

    @property
    def ended(self) -> bool:
        """Never before the body's end: the SDKs read a Messages stream to its end."""
        return False

    def body(self, data: dict[str, Any]) -> list[Chunk]:
        feed = self._feed
        message = {k: v for k, v in data.items() if k != "content"}
        chunks = feed({"type": "message_start", "message": message})
        for index, block in enumerate(data.get("content") or []):
            start = {"type": "content_block_start", "index": index, "content_block": block}
            chunks += feed(start)
            chunks += feed({"type": "content_block_stop", "index": index})
        delta = {"stop_reason": data.get("stop_reason"), "stop_sequence": data.get("stop_sequence")}
        chunks += feed({"type": "message_delta", "delta": delta, "usage": data.get("usage")})
        chunks += feed({"type": "message_stop"})
        return chunks + self.finish()


# -- Anthropic Messages ---------------------------------------------------------------------


def parse_messages_request(
    body: dict[str, Any], model: str = "", stream: bool = False
) -> WireRequest:
    """A request body of this API (a JSON object), parsed leniently; ``model`` and
    ``stream`` are for a path that names them (Vertex AI's names the model)."""
    del stream
    raw_system = body.get("system")
    if isinstance(raw_system, list):
        system: str | None = "\n\n".join(text_of([block]) for block in raw_system)
    elif isinstance(raw_system, str):
        system = raw_system
    else:
        system = None
    messages: list[Message] = []
    for raw in body.get("messages") or []:
        if not isinstance(raw, dict):
            continue
        role: Role = "assistant" if raw.get("role") == "assistant" else "user"
        if raw.get("role") == "system":
            role = "system"
        content = raw.get("content")
        if not isinstance(content, list):
            messages.append(Message(role=role, content=(TextPart(text_of(content)),)))
            continue
        parts = tuple(_anthropic_block(block) for block in content)
        messages.append(Message(role=role, content=parts or (TextPart(""),)))
    tools = tuple(
        tool_spec(
            tool.get("name") or tool.get("type"),
            tool.get("description"),
            tool.get("input_schema") if "input_schema" in tool else tool,
        )
        for tool in body.get("tools") or []
        if isinstance(tool, dict)
    )
    return WireRequest(
        api="messages",
        model=body_model(body) or model,  # Vertex AI names it in the path
        system=system,
        messages=tuple(messages),
        tools=tools,
        stream=flag(body, "stream"),
        include_usage=True,
        namespaced=False,
        structured_output=_structured(body),
        stop_sequences=stop_list(body.get("stop_sequences")),
        rules=_rule_text(body),
    )


def _rule_text(body: dict[str, Any]) -> RuleText:
    """A Messages body as rules read it: a user turn of ``tool_result`` blocks is the last
    tool result, the system blocks' texts joined; the model the body's own (none on Vertex
    AI and Bedrock InvokeModel, whose paths name it)."""
    raw = body.get("messages")
    messages = [m for m in (raw if isinstance(raw, list) else []) if isinstance(m, dict)]
    conversation = conversation_end(messages)
    last_user: str | None = None
    last_tool: str | None = None
    if conversation and conversation[-1].get("role") == "user":
        content = conversation[-1].get("content")
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            last_tool = "\n".join(rule_text_of(b.get("content", "")) for b in results)
        else:
            last_user = rule_text_of(content)
    return RuleText(
        model=str(body.get("model", "")),
        system=rule_text_of(body.get("system", "")),
        texts=tuple(rule_text_of(m.get("content")) for m in messages),
        last_user=last_user,
        last_tool_result=last_tool,
        tools=rule_tools(body.get("tools") or []),
    )


def _structured(body: dict[str, Any]) -> bool:
    """``output_format`` (or ``output_config.format``) of type ``json_schema``."""
    config = body.get("output_config")
    nested = config.get("format") if isinstance(config, dict) else None
    return "json_schema" in (format_type(body.get("output_format")), format_type(nested))


def _anthropic_block(block: Any) -> ContentPart:
    if not isinstance(block, dict):
        return TextPart(text_of(block))
    kind = block.get("type")
    if kind == "text":
        return TextPart(str(block.get("text") or ""))
    if kind == "tool_use":
        return ToolCallPart(
            id=str(block.get("id") or ""),
            name=str(block.get("name") or ""),
            arguments=canonical(block.get("input") or {}),
        )
    if kind == "tool_result":
        return ToolResultPart(
            call_id=str(block.get("tool_use_id") or ""),
            content=text_of(block.get("content")),
            is_error=block.get("is_error") is True,
        )
    if kind == "thinking":
        return ReasoningPart(str(block.get("thinking") or ""))
    # Images, documents, redacted thinking, server tool blocks: compared by their JSON, minus
    # cache hints that clients move between turns.
    return TextPart(canonical({k: v for k, v in block.items() if k != "cache_control"}))


def _stream(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> list[bytes]:
    return messages_chunk_frames(chunks, model=request.model, message_id=wire_id, meta=meta)


def _body(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> bytes:
    return messages_chunk_body(chunks, model=request.model, message_id=wire_id, meta=meta)


def _error_body(status: int, message: str, code: str | None = None) -> bytes:
    del code  # Anthropic's error names its type by status
    return anthropic_error_body(status, message)


MESSAGES_API = WireApiSpec(
    name="messages",
    title="Anthropic Messages",
    framing="sse",
    parse=parse_messages_request,
    decoder=MessagesDecoder,
    encode_stream=_stream,
    encode_body=_body,
    stream_endings=STREAM_ENDINGS,
    error_body=_error_body,
    models_body=models_listing_body,
    response_id_prefix="msg_",
    rule_api="anthropic",
    auth_headers=("x-api-key", "authorization"),
    paths=(
        WirePath(rf"{OPENAI_BASE}/messages", "POST /v1/messages"),
        WirePath(
            rf"{OPENAI_BASE}/messages/count_tokens",
            "POST /v1/messages/count_tokens",
            kind="count_tokens",
        ),
        # Claude on Vertex AI: a Messages body, the model in the path.
        WirePath(
            rf"{vertex_base('anthropic')}/{MODEL}:(?P<method>streamRawPredict|rawPredict)",
            "POST /v1/projects/<p>/locations/<l>/publishers/anthropic/models/<model>"
            ":streamRawPredict|rawPredict (Vertex AI)",
            streaming_methods=("streamRawPredict",),
        ),
    ),
)
"""Anthropic Messages (``POST /v1/messages``)."""
