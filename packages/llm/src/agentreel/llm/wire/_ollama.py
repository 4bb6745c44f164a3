"""Ollama's native API, both ways: ``POST /api/chat`` and ``POST /api/generate``.

A stream is NDJSON (``application/x-ndjson``): one JSON object per line, each carrying the
next piece of the answer (``message.content`` / ``message.thinking`` for chat, ``response``
/ ``thinking`` for generate; a chat's tool calls come whole in one line's
``message.tool_calls``, their arguments an object, without ids), the last with ``done:
true``, its ``done_reason`` and the token counts (``prompt_eval_count``, ``eval_count``).
A request streams unless it says ``"stream": false``; then the answer is that last object
with the whole message. Errors are ``{"error": "…"}``, as a body or as a stream's line.

Wire → chunks: a reasoning block then a text block (in the order they started), one
tool-call block per call (ids minted ``ollama-call-<n>``: Ollama sends none and matches a
result by the tool's name), all ended at ``done``; ``usage``; ``finish``: ``stop`` →
stop (tool-calls when the answer called tools), ``length`` → max-tokens, anything else →
error with the wire reason as code. The raw ``done_reason``, the model and the
``created_at`` of the answer are kept as its ``ResponseMeta``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
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
from agentreel.llm.wire._api import WireApiSpec, WirePath
from agentreel.llm.wire._common import (
    MetaWatch,
    UpstreamStreamError,
    finish_in,
    function_tools,
    grow,
    meta_in,
    provider_label,
    stopped_with,
    stream_cut,
    usage_in,
)
from agentreel.llm.wire._request import (
    WireRequest,
    body_model,
    canonical,
    chat_rule_text,
    text_of,
)
from agentreel.llm.wire._sse import SseEvent, json_bytes

MINTED_CALL_ID_PREFIX = "ollama-call-"
CREATED_AT = "1970-01-01T00:00:00Z"
"""The ``created_at`` of an answer re-encoded without a recorded one."""
_DONE = b'"done":true'


def ends_ollama_stream(frame: bytes) -> bool:
    """The line that ends an Ollama stream (``"done": true``)."""
    return _DONE in frame.replace(b" ", b"")


def ollama_error_body(status: int, message: str, code: str | None = None) -> bytes:
    """Ollama's error: ``{"error": "<message>"}`` (the client raises ``ResponseError``)."""
    del status, code
    return json_bytes({"error": message})


def ollama_line_frame(raw: str) -> bytes:
    """A recorded line (an in-stream error's raw data) sent again."""
    return raw.encode() + b"\n"


def ollama_stream_error_frame(message: str) -> bytes:
    """An error line inside a stream."""
    return json_bytes({"error": message}) + b"\n"


def ollama_models_body(models: Sequence[str]) -> bytes:
    """A ``GET /api/tags`` answer naming ``models``."""
    return json_bytes(
        {
            "models": [
                {
                    "name": model,
                    "model": model,
                    "modified_at": CREATED_AT,
                    "size": 0,
                    "digest": "",
                    "details": {},
                }
                for model in models
            ]
        }
    )


# -- request ---------------------------------------------------------------------------------


def _streams(body: dict[str, Any]) -> bool:
    return body.get("stream") is not False  # Ollama streams unless told not to


def _message(raw: dict[str, Any]) -> Message:
    role = raw.get("role")
    if role == "tool":
        name = str(raw.get("tool_name") or raw.get("name") or raw.get("tool_call_id") or "")
        result = ToolResultPart(call_id=name, content=text_of(raw.get("content")))
        return Message(role="tool", content=(result,))
    parts: list[ContentPart] = []
    thinking = raw.get("thinking")
    if role == "assistant" and isinstance(thinking, str) and thinking:
        parts.append(ReasoningPart(thinking))
    text = text_of(raw.get("content"))
    if text or role != "assistant":
        parts.append(TextPart(text))
    for call in raw.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            arguments = function.get("arguments")
            parts.append(
                ToolCallPart(
                    id=str(function.get("name") or ""),
                    name=str(function.get("name") or ""),
                    arguments=arguments if isinstance(arguments, str) else canonical(arguments),
                )
            )
    for image in raw.get("images") or []:
        parts.append(TextPart(canonical({"image": image})))
    wire_role: Role = "assistant" if role == "assistant" else "user"
    if role == "system":
        wire_role = "system"
    return Message(role=wire_role, content=tuple(parts) or (TextPart(""),))


def parse_ollama_chat_request(
    body: dict[str, Any], model: str = "", stream: bool = False
) -> WireRequest:
    """An ``/api/chat`` body: leading ``system`` messages are the system prompt, a ``tool``
    message's result is matched by its ``tool_name``."""
    del model, stream
    system: list[str] = []
    messages: list[Message] = []
    for raw in body.get("messages") or []:
        if not isinstance(raw, dict):
            continue
        if raw.get("role") == "system" and not messages:
            system.append(text_of(raw.get("content")))
            continue
        messages.append(_message(raw))
    return WireRequest(
        api="ollama-chat",
        model=body_model(body),
        system="\n\n".join(system) if system else None,
        messages=tuple(messages),
        tools=function_tools(body),
        stream=_streams(body),
        include_usage=True,
        namespaced=False,
        structured_output=bool(body.get("format")),
        rules=chat_rule_text(
            str(body.get("model", "")),
            list(body.get("messages") or []),
            body.get("tools") or [],
        ),
    )


def parse_ollama_generate_request(
    body: dict[str, Any], model: str = "", stream: bool = False
) -> WireRequest:
    """An ``/api/generate`` body: ``system`` and one user ``prompt`` (images and a
    ``suffix`` compared by their JSON)."""
    del model, stream
    system = body.get("system")
    parts: list[ContentPart] = [TextPart(text_of(body.get("prompt")))]
    extra = {key: body[key] for key in ("suffix", "images") if body.get(key)}
    if extra:
        parts.append(TextPart(canonical(extra)))
    # As rules read it: a chat of its system prompt and its prompt (no tools).
    turns: list[Any] = [
        *([{"role": "system", "content": system}] if isinstance(system, str) else []),
        {"role": "user", "content": body.get("prompt") or ""},
    ]
    return WireRequest(
        api="ollama-generate",
        model=body_model(body),
        system=system if isinstance(system, str) else None,
        messages=(Message(role="user", content=tuple(parts)),),
        tools=(),
        stream=_streams(body),
        include_usage=True,
        namespaced=False,
        structured_output=bool(body.get("format")),
        rules=chat_rule_text(str(body.get("model", "")), turns, body.get("tools") or []),
    )


# -- wire → chunks ---------------------------------------------------------------------------


class OllamaDecoder:
    """One Ollama answer, line by line (an NDJSON line is an event's ``data``)."""

    def __init__(self, upstream: str, *, generate: bool = False) -> None:
        self._label = provider_label(upstream)
        self._generate = generate
        self._next_block = 0
        self._text: tuple[int, list[str]] | None = None
        self._reasoning: tuple[int, list[str]] | None = None
        self._calls: list[tuple[int, ToolCallPart]] = []
        self._done: dict[str, Any] | None = None
        self._meta = MetaWatch()
        self._lines = 0

    @property
    def ended(self) -> bool:
        return False  # the client reads to the body's end

    def event(self, event: SseEvent) -> list[Chunk]:
        if not event.data.strip():
            return []
        data = json.loads(event.data)
        if not isinstance(data, dict):
            raise ValueError("an Ollama stream line is not a JSON object")
        return self._line(data, event.data)

    def _line(self, data: dict[str, Any], raw: str) -> list[Chunk]:
        self._lines += 1
        if data.get("error"):
            raise UpstreamStreamError(raw, self._usage_of(self._done or {}))
        self._meta.take(data, model="model", id="created_at")
        out: list[Chunk] = []
        if self._generate:
            thinking, text = data.get("thinking"), data.get("response")
            calls: list[Any] = []
        else:
            message = data.get("message")
            message = message if isinstance(message, dict) else {}
            thinking, text = message.get("thinking"), message.get("content")
            calls = message.get("tool_calls") or []
        if isinstance(thinking, str) and thinking:
            self._reasoning, grown = grow(self._reasoning, "reasoning", thinking, self._new_block)
            out += grown
        if isinstance(text, str) and text:
            self._text, grown = grow(self._text, "text", text, self._new_block)
            out += grown
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                continue
            block = self._new_block()
            call_id = str(call.get("id") or f"{MINTED_CALL_ID_PREFIX}{len(self._calls)}")
            arguments = function.get("arguments")
            text_arguments = (
                arguments
                if isinstance(arguments, str)
                else json.dumps(arguments or {}, separators=(",", ":"), ensure_ascii=False)
            )
            name = str(function.get("name") or "")
            part = ToolCallPart(id=call_id, name=name, arguments=text_arguments)
            self._calls.append((block, part))
            out += [
                BlockStart(index=block, block_type="tool-call"),
                ToolCallDelta(index=block, id=call_id, name=name, arguments_delta=text_arguments),
            ]
        if data.get("done") is True:
            self._done = data
            self._meta.take(data, stop_reason="done_reason")
        return out

    def _new_block(self) -> int:
        block = self._next_block
        self._next_block += 1
        return block

    @staticmethod
    def _usage_of(done: dict[str, Any]) -> list[Chunk]:
        if "prompt_eval_count" not in done and "eval_count" not in done:
            return []
        return [
            Usage(
                input_tokens=int(done.get("prompt_eval_count") or 0),
                output_tokens=int(done.get("eval_count") or 0),
            )
        ]

    def finish(self) -> list[Chunk]:
        if self._done is None:
            raise stream_cut(
                self._label.where(), self._lines, "lines", 'without one saying "done": true'
            )
        ends: list[tuple[int, Chunk]] = []
        if self._reasoning is not None:
            block, parts = self._reasoning
            ends.append((block, BlockEnd(index=block, block=ReasoningPart("".join(parts)))))
        if self._text is not None:
            block, parts = self._text
            ends.append((block, BlockEnd(index=block, block=TextPart("".join(parts)))))
        for block, part in self._calls:
            ends.append((block, BlockEnd(index=block, block=part)))
        out: list[Chunk] = [chunk for _, chunk in sorted(ends, key=lambda end: end[0])]
        out += self._usage_of(self._done)
        reason = str(self._done.get("done_reason") or "stop")
        if reason == "stop":
            out.append(Finish(reason="tool-calls" if self._calls else "stop"))
        elif reason == "length":
            out.append(Finish(reason="max-tokens"))
        else:
            out.append(stopped_with("done_reason", reason))
        return self._meta.onto(out)

    def body(self, data: dict[str, Any]) -> list[Chunk]:
        chunks = self._line(data, json.dumps(data))
        return chunks + self.finish()


# -- chunks → wire ---------------------------------------------------------------------------


def _done_reason(finish: Finish, meta: ResponseMeta) -> str:
    if meta.stop_reason:
        return meta.stop_reason
    if finish.reason == "max-tokens":
        return "length"
    if finish.reason == "error" and finish.code:
        return finish.code
    return "stop"


def _line_head(model: str, meta: ResponseMeta) -> dict[str, Any]:
    return {"model": meta.model or model, "created_at": meta.id or CREATED_AT}


def _done_fields(chunks: Sequence[Chunk], meta: ResponseMeta) -> dict[str, Any]:
    usage = usage_in(chunks)
    return {
        "done": True,
        "done_reason": _done_reason(finish_in(chunks), meta),
        "total_duration": 0,
        "load_duration": 0,
        "prompt_eval_count": usage.input_tokens if usage else 0,
        "prompt_eval_duration": 0,
        "eval_count": usage.output_tokens if usage else 0,
        "eval_duration": 0,
    }


def _call_body(part: ToolCallPart) -> dict[str, Any]:
    try:
        arguments: Any = json.loads(part.arguments or "{}")
    except ValueError:
        arguments = part.arguments
    call: dict[str, Any] = {"function": {"name": part.name, "arguments": arguments}}
    if part.id and not part.id.startswith(MINTED_CALL_ID_PREFIX):
        call["id"] = part.id
    return call


def ollama_chunk_frames(
    chunks: Sequence[Chunk],
    *,
    model: str,
    generate: bool = False,
    meta: ResponseMeta | None = None,
) -> list[bytes]:
    """One NDJSON line per text or reasoning delta and per tool call, then the ``done``
    line; the recorded ``ResponseMeta`` gives model, ``created_at`` and ``done_reason``."""
    meta = meta_in(chunks, meta)
    head = _line_head(model, meta)
    key, thought = ("response", "thinking") if generate else ("content", "thinking")
    lines: list[bytes] = []

    def line(piece: dict[str, Any], done: dict[str, Any] | None = None) -> None:
        if generate:
            body = {**head, **piece, **(done or {"done": False})}
        else:
            message = {"role": "assistant", "content": "", **piece}
            body = {**head, "message": message, **(done or {"done": False})}
        lines.append(json_bytes(body) + b"\n")

    for chunk in chunks:
        if isinstance(chunk, TextDelta) and chunk.text:
            line({key: chunk.text})
        elif isinstance(chunk, ReasoningDelta) and chunk.text:
            line({key: "", thought: chunk.text})
        elif isinstance(chunk, BlockEnd) and isinstance(chunk.block, ToolCallPart):
            line({"tool_calls": [_call_body(chunk.block)]})
    if any(isinstance(chunk, Finish) for chunk in chunks):
        line({key: ""} if generate else {}, _done_fields(chunks, meta))
    return lines


def ollama_chunk_body(
    chunks: Sequence[Chunk],
    *,
    model: str,
    generate: bool = False,
    meta: ResponseMeta | None = None,
) -> bytes:
    """The non-streaming answer: the ``done`` object with the whole message."""
    meta = meta_in(chunks, meta)
    text = "".join(
        c.block.text for c in chunks if isinstance(c, BlockEnd) and isinstance(c.block, TextPart)
    )
    thinking = "".join(
        c.block.text
        for c in chunks
        if isinstance(c, BlockEnd) and isinstance(c.block, ReasoningPart)
    )
    calls = [
        _call_body(c.block)
        for c in chunks
        if isinstance(c, BlockEnd) and isinstance(c.block, ToolCallPart)
    ]
    body = _line_head(model, meta)
    if generate:
        body["response"] = text
        if thinking:
            body["thinking"] = thinking
    else:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if thinking:
            message["thinking"] = thinking
        if calls:
            message["tool_calls"] = calls
        body["message"] = message
    return json_bytes({**body, **_done_fields(chunks, meta)})


def _chat_stream(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> list[bytes]:
    del wire_id  # Ollama's answers carry no id
    return ollama_chunk_frames(chunks, model=request.model, meta=meta)


def _chat_body(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> bytes:
    del wire_id
    return ollama_chunk_body(chunks, model=request.model, meta=meta)


def _generate_stream(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> list[bytes]:
    del wire_id
    return ollama_chunk_frames(chunks, model=request.model, generate=True, meta=meta)


def _generate_body(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> bytes:
    del wire_id
    return ollama_chunk_body(chunks, model=request.model, generate=True, meta=meta)


def _generate_decoder(upstream: str) -> OllamaDecoder:
    return OllamaDecoder(upstream, generate=True)


OLLAMA_CHAT_API = WireApiSpec(
    name="ollama-chat",
    title="Ollama chat",
    framing="ndjson",
    parse=parse_ollama_chat_request,
    decoder=OllamaDecoder,
    encode_stream=_chat_stream,
    encode_body=_chat_body,
    error_body=ollama_error_body,
    models_body=ollama_models_body,
    rule_api="ollama",
    auth_headers=("authorization",),
    error_frame=ollama_line_frame,
    ends_stream=ends_ollama_stream,
    paths=(
        WirePath("/api/chat", "POST /api/chat"),
        WirePath("/api/tags", "GET /api/tags", "GET", kind="models"),
    ),
)
"""Ollama's ``POST /api/chat`` (and ``GET /api/tags``)."""

OLLAMA_GENERATE_API = replace(
    OLLAMA_CHAT_API,
    name="ollama-generate",
    title="Ollama generate",
    parse=parse_ollama_generate_request,
    decoder=_generate_decoder,
    encode_stream=_generate_stream,
    encode_body=_generate_body,
    paths=(WirePath("/api/generate", "POST /api/generate"),),
)
"""Ollama's ``POST /api/generate``."""
