"""OpenAI Chat Completions on the wire: ``data: {chunk}\\n\\n`` frames of
``chat.completion.chunk`` objects, a final usage-only chunk when
``stream_options.include_usage`` is set, then ``data: [DONE]``; a ``chat.completion`` body
without ``stream: true``; the error bodies. Encoders from recorded chunks (replay, the
stub's non-streaming answers) and the decoder of an upstream's stream (record)."""

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
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from agentreel.llm.wire._api import WireApiSpec, openai_paths
from agentreel.llm.wire._chat_mapper import OpenAIStreamMapper
from agentreel.llm.wire._common import (
    CREATED,
    MetaWatch,
    UpstreamStreamError,
    finish_in,
    function_tools,
    meta_in,
    provider_label,
    usage_in,
    wire_reason,
    wrap,
)
from agentreel.llm.wire._listing import models_listing_body
from agentreel.llm.wire._request import (
    JSON_FORMATS,
    WireRequest,
    body_model,
    canonical,
    chat_rule_text,
    flag,
    format_type,
    stop_list,
    text_of,
)
from agentreel.llm.wire._sse import SseEvent, bare_error_frame, json_bytes

CHAT_FINISH_REASONS = {
    "stop": "stop",
    "tool-calls": "tool_calls",
    "max-tokens": "length",
    "refusal": "content_filter",
}


_OPENAI_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("not_found_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def openai_stream_error_frame(message: str) -> bytes:
    """An error inside an OpenAI-style stream, as OpenAI-compatible servers send it."""
    error = {"message": message, "type": "server_error", "param": None, "code": None}
    return b"data: " + json_bytes({"error": error}) + b"\n\n"


OPENAI_AUTH_HEADERS = ("authorization", "api-key")
"""Where an OpenAI client sends its key (``api-key``: Azure OpenAI's), for each OpenAI API."""


def openai_error_body(status: int, message: str, code: str | None = None) -> bytes:
    kind, default_code = _OPENAI_ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return json_bytes(
        {"error": {"message": message, "type": kind, "param": None, "code": code or default_code}}
    )


def _chat_envelope(meta: ResponseMeta, model: str, response_id: str) -> dict[str, Any]:
    """The fields every Chat Completions chunk (and body) repeats: as recorded, else minted."""
    envelope: dict[str, Any] = {
        "id": meta.id or response_id,
        "object": "chat.completion.chunk",
        "created": CREATED if meta.created is None else meta.created,
        "model": meta.model or model,
    }
    if meta.system_fingerprint is not None:
        envelope["system_fingerprint"] = meta.system_fingerprint
    return envelope


def _openai_usage_body(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens or 0},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
    }


def _tool_positions(chunks: Sequence[Chunk]) -> dict[int, int]:
    """Block index → position among the call's tool calls (the Chat Completions index)."""
    positions: dict[int, int] = {}
    for chunk in chunks:
        if isinstance(chunk, BlockStart) and chunk.block_type == "tool-call":
            positions[chunk.index] = len(positions)
    return positions


def chat_chunk_frames(
    chunks: Sequence[Chunk],
    *,
    model: str,
    response_id: str,
    include_usage: bool,
    meta: ResponseMeta | None = None,
) -> list[bytes]:
    """Chat Completions SSE frames for one recorded call: a frame per recorded delta."""
    envelope = _chat_envelope(meta_in(chunks, meta), model, response_id)

    def frame(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        chunk: dict[str, Any] = {
            **envelope,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if include_usage:
            chunk["usage"] = None
        return b"data: " + json_bytes(chunk) + b"\n\n"

    tools = _tool_positions(chunks)
    frames = [frame({"role": "assistant", "content": ""})]
    usage: Usage | None = None
    for chunk in chunks:
        if isinstance(chunk, TextDelta):
            frames.append(frame({"content": chunk.text}))
        elif isinstance(chunk, ReasoningDelta):
            frames.append(frame({"reasoning_content": chunk.text}))
        elif isinstance(chunk, ToolCallDelta):
            entry: dict[str, Any] = {"index": tools.get(chunk.index, 0)}
            if chunk.name is not None:
                entry.update(id=chunk.id, type="function")
                entry["function"] = {"name": chunk.name, "arguments": chunk.arguments_delta}
            else:
                entry["function"] = {"arguments": chunk.arguments_delta}
            frames.append(frame({"tool_calls": [entry]}))
        elif isinstance(chunk, Usage):
            usage = chunk
        elif isinstance(chunk, Finish):
            frames.append(frame({}, wire_reason(chunk, CHAT_FINISH_REASONS)))
    if include_usage and usage is not None:
        final = {
            **envelope,
            "choices": [],
            "usage": _openai_usage_body(usage),
        }
        frames.append(b"data: " + json_bytes(final) + b"\n\n")
    frames.append(b"data: [DONE]\n\n")
    return frames


def chat_chunk_body(
    chunks: Sequence[Chunk], *, model: str, response_id: str, meta: ResponseMeta | None = None
) -> bytes:
    """A non-streaming ``chat.completion`` body holding one recorded call."""
    text = "".join(
        c.block.text for c in chunks if isinstance(c, BlockEnd) and isinstance(c.block, TextPart)
    )
    reasoning = "".join(
        c.block.text
        for c in chunks
        if isinstance(c, BlockEnd) and isinstance(c.block, ReasoningPart)
    )
    calls = [
        {
            "id": c.block.id,
            "type": "function",
            "function": {"name": c.block.name, "arguments": c.block.arguments},
        }
        for c in chunks
        if isinstance(c, BlockEnd) and isinstance(c.block, ToolCallPart)
    ]
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text or None,
        "refusal": None,
        "annotations": [],
    }
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    body: dict[str, Any] = {
        **_chat_envelope(meta_in(chunks, meta), model, response_id),
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": wire_reason(finish_in(chunks), CHAT_FINISH_REASONS),
            }
        ],
    }
    usage = usage_in(chunks)
    if usage is not None:
        body["usage"] = _openai_usage_body(usage)
    return json_bytes(body)


STREAM_ENDINGS = (b"data: [DONE]",)
"""The frames that end a Chat Completions stream (a replayed cut or error ends otherwise)."""


class ChatDecoder:
    def __init__(self, upstream: str) -> None:
        self._mapper = OpenAIStreamMapper()
        self._label = provider_label(upstream)
        self._meta = MetaWatch()

    def event(self, event: SseEvent) -> list[Chunk]:
        # The adapter's own watch of the raw events: ``[DONE]`` (a finished stream even
        # without a finish_reason) and the usage an error chunk carries.
        self._mapper.wire.see_data(event.data)
        if event.data.startswith("[DONE]") or not event.data:
            return []
        data = json.loads(event.data)
        if isinstance(data, dict) and data.get("error"):
            # The openai SDK raises on any chunk with an ``error``, choices or not
            # (OpenRouter sends one with choices: ``Token limit reached``).
            raise UpstreamStreamError(event.data, self._mapper.salvage())
        self._watch(data)
        return self._mapper.feed(wrap(data))

    def _watch(self, data: Any) -> None:
        self._meta.take(
            data, id="id", model="model", created="created", system_fingerprint="system_fingerprint"
        )
        for choice in (data.get("choices") if isinstance(data, dict) else None) or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._meta.take(choice, stop_reason="finish_reason")

    def finish(self) -> list[Chunk]:
        return self._meta.onto(self._mapper.finish(self._label))

    @property
    def ended(self) -> bool:
        """``data: [DONE]`` arrived (the adapter's watch saw it): the stream is complete."""
        return self._mapper.wire.done

    def body(self, data: dict[str, Any]) -> list[Chunk]:
        choices = []
        for choice in data.get("choices") or []:
            if isinstance(choice, dict):
                message = dict(choice.get("message") or {})
                calls = [
                    {**call, "index": position}
                    for position, call in enumerate(message.get("tool_calls") or [])
                ]
                message["tool_calls"] = calls or None
                choices.append({**choice, "delta": message})
        self._watch({**data, "choices": choices})
        chunks = self._mapper.feed(wrap({"choices": choices, "usage": data.get("usage")}))
        return chunks + self.finish()


# -- Chat Completions ----------------------------------------------------------------------


def parse_chat_request(body: dict[str, Any], model: str = "", stream: bool = False) -> WireRequest:
    """A request body of this API (a JSON object), parsed leniently; ``model`` and
    ``stream`` are for a path that names them (this API's body does)."""
    del model, stream
    system: list[str] = []
    messages: list[Message] = []
    for raw in body.get("messages") or []:
        if not isinstance(raw, dict):
            continue
        role = raw.get("role")
        if role in ("system", "developer"):
            text = text_of(raw.get("content"))
            if messages:
                messages.append(Message(role="system", content=(TextPart(text),)))
            else:
                system.append(text)
        elif role == "assistant":
            messages.append(_chat_assistant(raw))
        elif role in ("tool", "function"):
            call_id = str(raw.get("tool_call_id") or raw.get("name") or "")
            result = ToolResultPart(call_id=call_id, content=text_of(raw.get("content")))
            messages.append(Message(role="tool", content=(result,)))
        else:
            messages.append(Message(role="user", content=_chat_parts(raw.get("content"))))
    options = body.get("stream_options")
    return WireRequest(
        api="chat",
        model=body_model(body),
        system="\n\n".join(system) if system else None,
        messages=tuple(messages),
        tools=function_tools(body),
        stream=flag(body, "stream"),
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
        namespaced=False,
        structured_output=format_type(body.get("response_format")) in JSON_FORMATS,
        stop_sequences=stop_list(body.get("stop")),
        rules=chat_rule_text(
            str(body.get("model", "")), body.get("messages") or [], body.get("tools") or []
        ),
    )


def _chat_parts(content: Any) -> tuple[ContentPart, ...]:
    if isinstance(content, list):
        parts: list[ContentPart] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(TextPart(part["text"]))
            else:
                parts.append(TextPart(canonical(part)))
        return tuple(parts)
    return (TextPart(text_of(content)),)


def _chat_assistant(raw: dict[str, Any]) -> Message:
    parts: list[ContentPart] = []
    reasoning = raw.get("reasoning_content") or raw.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append(ReasoningPart(reasoning))
    text = text_of(raw.get("content"))
    if text:
        parts.append(TextPart(text))
    for call in raw.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        raw_function = call.get("function")
        function: dict[str, Any] = raw_function if isinstance(raw_function, dict) else {}
        arguments = function.get("arguments")
        parts.append(
            ToolCallPart(
                id=str(call.get("id") or ""),
                name=str(function.get("name") or ""),
                arguments=arguments if isinstance(arguments, str) else canonical(arguments),
            )
        )
    return Message(role="assistant", content=tuple(parts) or (TextPart(""),))


def _stream(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> list[bytes]:
    return chat_chunk_frames(
        chunks,
        model=request.model,
        response_id=wire_id,
        include_usage=request.include_usage,
        meta=meta,
    )


def _body(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> bytes:
    return chat_chunk_body(chunks, model=request.model, response_id=wire_id, meta=meta)


CHAT_API = WireApiSpec(
    name="chat",
    title="OpenAI Chat Completions",
    framing="sse",
    parse=parse_chat_request,
    decoder=ChatDecoder,
    encode_stream=_stream,
    encode_body=_body,
    stream_endings=STREAM_ENDINGS,
    error_body=openai_error_body,
    models_body=models_listing_body,
    response_id_prefix="chatcmpl-",
    rule_api="openai",
    error_frame=bare_error_frame,
    auth_headers=OPENAI_AUTH_HEADERS,
    paths=(
        *openai_paths("chat/completions", "/v1/chat/completions"),
        *openai_paths("models", "/v1/models", http_method="GET", kind="models"),
    ),
)
"""OpenAI Chat Completions (``POST /v1/chat/completions``)."""
