"""OpenAI Responses on the wire: ``response.*`` events (created, output items and their
deltas, completed / incomplete / failed) and the ``response`` body; namespaced tools
(``responses-lite``). Encoders from recorded chunks and the decoder of an upstream's
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
    FinishReason,
    ReasoningDelta,
    ResponseMeta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from agentreel.llm._messages import (
    Message,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from agentreel.llm.wire._api import WireApiSpec, openai_paths
from agentreel.llm.wire._chat import OPENAI_AUTH_HEADERS, openai_error_body
from agentreel.llm.wire._common import (
    CREATED,
    MetaWatch,
    UpstreamStreamError,
    finish_in,
    first_tool_delta,
    has_error,
    meta_in,
    stream_cut,
    usage_in,
)
from agentreel.llm.wire._listing import models_listing_body
from agentreel.llm.wire._request import (
    JSON_FORMATS,
    NAMESPACE_SEPARATOR,
    RuleText,
    WireRequest,
    body_model,
    canonical,
    conversation_end,
    flag,
    format_type,
    last_user_text,
    rule_text_of,
    rule_tools,
    text_of,
    tool_spec,
    trailing_results,
)
from agentreel.llm.wire._sse import SseEvent, event_frame, json_bytes


def responses_namespaced(body: dict[str, Any]) -> bool:
    """Whether a Responses request offers namespaced tools (the ``responses-lite`` shape:
    ``{type: namespace}`` tools, top level or in an ``additional_tools`` input item)."""
    tools = list(body.get("tools") or [])
    raw = body.get("input")
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            tools += item.get("tools") or []
    return any(isinstance(t, dict) and t.get("type") == "namespace" for t in tools)


def _responses_usage(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens or 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def _function_call_item(
    item_id: str, call: ToolCallPart | ToolCallDelta, arguments: str, status: str, namespaced: bool
) -> dict[str, Any]:
    name = call.name or ""
    item: dict[str, Any] = {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call.id,
        "name": name,
    }
    if namespaced and NAMESPACE_SEPARATOR in name:
        namespace, _, bare = name.rpartition(NAMESPACE_SEPARATOR)
        item.update(name=bare, namespace=namespace)
    return item


def _response_object(
    meta: ResponseMeta,
    response_id: str,
    model: str,
    status: str,
    output: list[dict[str, Any]],
    usage: Usage | None,
) -> dict[str, Any]:
    incomplete = {"reason": meta.stop_reason or "max_output_tokens"}
    body: dict[str, Any] = {
        "id": meta.id or response_id,
        "object": "response",
        "created_at": CREATED if meta.created is None else meta.created,
        "status": status,
        "error": None,
        "incomplete_details": incomplete if status == "incomplete" else None,
        "instructions": None,
        "model": meta.model or model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": _responses_usage(usage),
    }
    return body


def _responses_items(
    chunks: Sequence[Chunk], response_id: str, namespaced: bool, meta: ResponseMeta
) -> tuple[list[tuple[Chunk, int, str]], list[dict[str, Any]]]:
    """Each block's (start chunk, output index, item id) and the finished output items; the
    item ids as recorded, else minted from ``response_id``."""
    starts: list[tuple[Chunk, int, str]] = []
    done: list[dict[str, Any]] = []
    ids: dict[int, tuple[int, str]] = {}
    stem = response_id.removeprefix("resp_")
    recorded = meta.item_ids
    for chunk in chunks:
        if isinstance(chunk, BlockStart):
            prefix = {"text": "msg_", "reasoning": "rs_", "tool-call": "fc_"}[chunk.block_type]
            at = len(ids)
            ids[chunk.index] = (at, recorded[at] if at < len(recorded) else f"{prefix}{stem}{at}")
            starts.append((chunk, *ids[chunk.index]))
        elif isinstance(chunk, BlockEnd) and chunk.index in ids:
            _, item_id = ids[chunk.index]
            done.append(_finished_item(item_id, chunk, namespaced))
    return starts, done


def _finished_item(item_id: str, chunk: BlockEnd, namespaced: bool) -> dict[str, Any]:
    block = chunk.block
    if isinstance(block, TextPart):
        return {
            "id": item_id,
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": block.text, "annotations": []}],
        }
    if isinstance(block, ReasoningPart):
        return {
            "id": item_id,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": block.text}],
        }
    return _function_call_item(item_id, block, block.arguments, "completed", namespaced)


def _responses_status(finish: Finish) -> str:
    if finish.reason == "max-tokens":
        return "incomplete"
    if finish.reason == "error":
        return "failed"
    return "completed"


def responses_chunk_frames(
    chunks: Sequence[Chunk],
    *,
    model: str,
    response_id: str,
    namespaced: bool = False,
    meta: ResponseMeta | None = None,
) -> list[bytes]:
    """OpenAI Responses SSE frames for one recorded call: an event per recorded delta.

    ``namespaced``: the request used namespaced tools (``responses-lite``), so a tool name
    ``<namespace>.<name>`` goes out as ``name`` plus ``namespace``.
    """
    frames: list[bytes] = []

    def emit(kind: str, payload: dict[str, Any]) -> None:
        frames.append(event_frame(kind, {"type": kind, "sequence_number": len(frames), **payload}))

    usage = usage_in(chunks)
    finish = finish_in(chunks)
    meta = meta_in(chunks, meta)
    starts, done = _responses_items(chunks, response_id, namespaced, meta)
    by_block = {
        start.index: (at, item_id) for start, at, item_id in starts if isinstance(start, BlockStart)
    }
    emit(
        "response.created",
        {"response": _response_object(meta, response_id, model, "in_progress", [], None)},
    )
    emit(
        "response.in_progress",
        {"response": _response_object(meta, response_id, model, "in_progress", [], None)},
    )
    for position, chunk in enumerate(chunks):
        if isinstance(chunk, BlockStart):
            at, item_id = by_block[chunk.index]
            if chunk.block_type == "text":
                item = {
                    "id": item_id,
                    "type": "message",
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [],
                }
                emit("response.output_item.added", {"output_index": at, "item": item})
                part = {"type": "output_text", "text": "", "annotations": []}
                emit(
                    "response.content_part.added",
                    {"item_id": item_id, "output_index": at, "content_index": 0, "part": part},
                )
            elif chunk.block_type == "reasoning":
                item = {"id": item_id, "type": "reasoning", "summary": []}
                emit("response.output_item.added", {"output_index": at, "item": item})
                part = {"type": "summary_text", "text": ""}
                emit(
                    "response.reasoning_summary_part.added",
                    {"item_id": item_id, "output_index": at, "summary_index": 0, "part": part},
                )
            else:
                first = first_tool_delta(chunks, position, chunk.index)
                if first is not None:
                    item = _function_call_item(item_id, first, "", "in_progress", namespaced)
                    emit("response.output_item.added", {"output_index": at, "item": item})
        elif isinstance(chunk, TextDelta) and chunk.index in by_block:
            at, item_id = by_block[chunk.index]
            emit(
                "response.output_text.delta",
                {
                    "item_id": item_id,
                    "output_index": at,
                    "content_index": 0,
                    "delta": chunk.text,
                    "logprobs": [],
                },
            )
        elif isinstance(chunk, ReasoningDelta) and chunk.index in by_block:
            at, item_id = by_block[chunk.index]
            emit(
                "response.reasoning_summary_text.delta",
                {"item_id": item_id, "output_index": at, "summary_index": 0, "delta": chunk.text},
            )
        elif isinstance(chunk, ToolCallDelta) and chunk.index in by_block:
            at, item_id = by_block[chunk.index]
            if chunk.arguments_delta:
                emit(
                    "response.function_call_arguments.delta",
                    {"item_id": item_id, "output_index": at, "delta": chunk.arguments_delta},
                )
        elif isinstance(chunk, BlockEnd) and chunk.index in by_block:
            at, item_id = by_block[chunk.index]
            block = chunk.block
            finished = _finished_item(item_id, chunk, namespaced)
            if isinstance(block, TextPart):
                emit(
                    "response.output_text.done",
                    {
                        "item_id": item_id,
                        "output_index": at,
                        "content_index": 0,
                        "text": block.text,
                        "logprobs": [],
                    },
                )
                emit(
                    "response.content_part.done",
                    {
                        "item_id": item_id,
                        "output_index": at,
                        "content_index": 0,
                        "part": finished["content"][0],
                    },
                )
            elif isinstance(block, ReasoningPart):
                emit(
                    "response.reasoning_summary_text.done",
                    {
                        "item_id": item_id,
                        "output_index": at,
                        "summary_index": 0,
                        "text": block.text,
                    },
                )
                emit(
                    "response.reasoning_summary_part.done",
                    {
                        "item_id": item_id,
                        "output_index": at,
                        "summary_index": 0,
                        "part": finished["summary"][0],
                    },
                )
            else:
                emit(
                    "response.function_call_arguments.done",
                    {"item_id": item_id, "output_index": at, "arguments": block.arguments},
                )
            emit("response.output_item.done", {"output_index": at, "item": finished})
    status = _responses_status(finish)
    final = _response_object(meta, response_id, model, status, done, usage)
    kind = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(
        status, "response.failed"
    )
    if status == "failed":
        final["error"] = {"code": finish.code or "server_error", "message": finish.message or ""}
    emit(kind, {"response": final})
    return frames


def responses_chunk_body(
    chunks: Sequence[Chunk],
    *,
    model: str,
    response_id: str,
    namespaced: bool = False,
    meta: ResponseMeta | None = None,
) -> bytes:
    """A non-streaming ``response`` object holding one recorded call."""
    meta = meta_in(chunks, meta)
    _, done = _responses_items(chunks, response_id, namespaced, meta)
    status = _responses_status(finish_in(chunks))
    return json_bytes(_response_object(meta, response_id, model, status, done, usage_in(chunks)))


STREAM_ENDINGS = (
    b"event: response.completed",
    b"event: response.incomplete",
    b"event: response.failed",
)
"""The frames that end a Responses stream (a replayed cut or error ends otherwise)."""


class ResponsesDecoder:
    """Responses API events → chunks: output items are blocks (message text, reasoning
    summary, function call — a namespaced call named ``<namespace>.<name>``);
    ``response.completed|incomplete|failed`` bring usage and the finish. The response's
    id, model and ``created_at``, the output items' ids (in block order) and an incomplete
    response's reason are kept as the call's ``ResponseMeta``."""

    def __init__(self, upstream: str) -> None:
        self._upstream = upstream
        self._blocks: dict[str, tuple[int, str, list[str], dict[str, Any]]] = {}
        self._next = 0
        self._calls = 0
        self._done: list[Chunk] | None = None
        self._meta = MetaWatch()
        self._item_ids: list[str] = []
        self.events = 0
        self._ended = False

    def _watch(self, response: Any) -> None:
        self._meta.take(response, id="id", model="model", created="created_at")
        if isinstance(response, dict):
            self._meta.take(response.get("incomplete_details"), stop_reason="reason")

    def event(self, event: SseEvent) -> list[Chunk]:
        # ``data: [DONE]`` after the last event (OpenRouter's Responses API): the openai
        # SDK stops reading there, as it does for Chat Completions.
        if not event.data or event.data.startswith("[DONE]"):
            self._ended = self._ended or event.data.startswith("[DONE]")
            return []
        self.events += 1
        data = json.loads(event.data)
        kind = data.get("type") if isinstance(data, dict) else None
        # Responses' own ``error`` event, or the ``{"error": ...}`` frame OpenAI-compatible
        # servers send in any stream (the ``openai`` SDK raises on both).
        if kind == "error" or event.name == "error" or (kind is None and has_error(data)):
            raise UpstreamStreamError(event.data)
        if kind == "response.output_item.added":
            return self._added(data.get("item") or {})
        if kind == "response.output_text.delta" or kind in (
            "response.reasoning_summary_text.delta",
            "response.reasoning_text.delta",
        ):
            return self._text(str(data.get("item_id")), str(data.get("delta") or ""))
        if kind == "response.function_call_arguments.delta":
            return self._arguments(str(data.get("item_id")), str(data.get("delta") or ""))
        if kind == "response.output_item.done":
            return self._item_done(data.get("item") or {})
        if kind in ("response.created", "response.in_progress"):
            self._watch(data.get("response"))
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self._watch(data.get("response"))
            self._done = self._final(kind, data.get("response") or {})
        return []

    def _added(self, item: dict[str, Any]) -> list[Chunk]:
        kind = item.get("type")
        item_id = str(item.get("id"))
        index = self._next
        if kind in ("message", "reasoning", "function_call"):
            self._item_ids.append(item_id)
        if kind == "message":
            self._blocks[item_id] = (index, "text", [], item)
            self._next += 1
            return [BlockStart(index=index, block_type="text")]
        if kind == "reasoning":
            self._blocks[item_id] = (index, "reasoning", [], item)
            self._next += 1
            return [BlockStart(index=index, block_type="reasoning")]
        if kind == "function_call":
            self._blocks[item_id] = (index, "tool-call", [], item)
            self._next += 1
            self._calls += 1
            arguments = str(item.get("arguments") or "")
            return [
                BlockStart(index=index, block_type="tool-call"),
                ToolCallDelta(
                    index=index,
                    id=str(item.get("call_id") or ""),
                    name=_call_name(item),
                    arguments_delta=arguments,
                ),
            ]
        return []

    def _text(self, item_id: str, text: str) -> list[Chunk]:
        block = self._blocks.get(item_id)
        if block is None or not text:
            return []
        index, kind, parts, _ = block
        parts.append(text)
        if kind == "reasoning":
            return [ReasoningDelta(index=index, text=text)]
        return [TextDelta(index=index, text=text)]

    def _arguments(self, item_id: str, text: str) -> list[Chunk]:
        block = self._blocks.get(item_id)
        if block is None or not text:
            return []
        index, _, parts, item = block
        parts.append(text)
        return [ToolCallDelta(index=index, id=str(item.get("call_id") or ""), arguments_delta=text)]

    def _item_done(self, item: dict[str, Any]) -> list[Chunk]:
        block = self._blocks.pop(str(item.get("id")), None)
        if block is None:
            return []
        index, kind, parts, started = block
        text = "".join(parts)
        if kind == "text":
            return [BlockEnd(index=index, block=TextPart(text))]
        if kind == "reasoning":
            return [BlockEnd(index=index, block=ReasoningPart(text))]
        call_id = str(started.get("call_id") or "")
        out: list[Chunk] = []
        arguments = str(started.get("arguments") or "") + text
        if not arguments:
            arguments = "{}"
            out.append(ToolCallDelta(index=index, id=call_id, arguments_delta="{}"))
        part = ToolCallPart(id=call_id, name=_call_name(started), arguments=arguments)
        return [*out, BlockEnd(index=index, block=part)]

    def _final(self, kind: str, response: dict[str, Any]) -> list[Chunk]:
        out: list[Chunk] = []
        usage = response.get("usage")
        if isinstance(usage, dict):
            details = usage.get("input_tokens_details") or {}
            output_details = usage.get("output_tokens_details") or {}
            out.append(
                Usage(
                    input_tokens=int(usage.get("input_tokens") or 0),
                    output_tokens=int(usage.get("output_tokens") or 0),
                    cache_read_tokens=int(details.get("cached_tokens") or 0) or None,
                    reasoning_tokens=int(output_details.get("reasoning_tokens") or 0) or None,
                )
            )
        reason: FinishReason
        if kind == "response.incomplete":
            out.append(Finish(reason="max-tokens"))
        elif kind == "response.failed":
            error = response.get("error") or {}
            out.append(
                Finish(
                    reason="error",
                    code=str(error.get("code") or "failed"),
                    message=str(error.get("message") or ""),
                )
            )
        else:
            reason = "tool-calls" if self._calls else "stop"
            out.append(Finish(reason=reason))
        return out

    @property
    def ended(self) -> bool:
        """``data: [DONE]`` arrived (OpenRouter's): the stream is over, completed or not."""
        return self._ended

    def finish(self) -> list[Chunk]:
        if self._done is None:
            raise stream_cut(
                f"the upstream at {self._upstream}",
                self.events,
                "events",
                "without response.completed",
            )
        closing: list[Chunk] = []
        for item_id in list(self._blocks):
            closing += self._item_done({"id": item_id})
        return self._meta.onto(closing + self._done, self._item_ids)

    def body(self, data: dict[str, Any]) -> list[Chunk]:
        chunks: list[Chunk] = []
        for item in data.get("output") or []:
            if not isinstance(item, dict):
                continue
            chunks += self._added({**item, "arguments": ""})
            if item.get("type") == "message":
                for part in item.get("content") or []:
                    if isinstance(part, dict):
                        chunks += self._text(str(item.get("id")), str(part.get("text") or ""))
            elif item.get("type") == "reasoning":
                for part in item.get("summary") or []:
                    if isinstance(part, dict):
                        chunks += self._text(str(item.get("id")), str(part.get("text") or ""))
            elif item.get("type") == "function_call":
                chunks += self._arguments(str(item.get("id")), str(item.get("arguments") or ""))
            chunks += self._item_done(item)
        status = data.get("status")
        kind = {"incomplete": "response.incomplete", "failed": "response.failed"}.get(
            str(status), "response.completed"
        )
        self._watch(data)
        self._done = self._final(kind, data)
        return chunks + self.finish()


def _call_name(item: dict[str, Any]) -> str:
    name = str(item.get("name") or "")
    namespace = item.get("namespace")
    return f"{namespace}{NAMESPACE_SEPARATOR}{name}" if namespace else name


# -- OpenAI Responses -----------------------------------------------------------------------


def parse_responses_request(
    body: dict[str, Any], model: str = "", stream: bool = False
) -> WireRequest:
    """A request body of this API (a JSON object), parsed leniently; ``model`` and
    ``stream`` are for a path that names them (this API's body does)."""
    del model, stream
    instructions = body.get("instructions")
    system = instructions if isinstance(instructions, str) else None
    tools: list[ToolSpec] = []
    namespaced = _add_response_tools(tools, body.get("tools") or [])
    messages: list[Message] = []
    raw_input = body.get("input")
    items = [{"role": "user", "content": raw_input}] if isinstance(raw_input, str) else raw_input
    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "additional_tools":
            namespaced = _add_response_tools(tools, item.get("tools") or []) or namespaced
        elif kind == "function_call":
            name = str(item.get("name") or "")
            if item.get("namespace"):
                name = f"{item['namespace']}{NAMESPACE_SEPARATOR}{name}"
            arguments = item.get("arguments")
            call = ToolCallPart(
                id=str(item.get("call_id") or ""),
                name=name,
                arguments=arguments if isinstance(arguments, str) else canonical(arguments),
            )
            messages.append(Message(role="assistant", content=(call,)))
        elif kind == "function_call_output":
            result = ToolResultPart(
                call_id=str(item.get("call_id") or ""), content=text_of(item.get("output"))
            )
            messages.append(Message(role="tool", content=(result,)))
        elif kind == "reasoning":
            summary = text_of(item.get("summary"))
            messages.append(Message(role="assistant", content=(ReasoningPart(summary),)))
        elif kind in (None, "message"):
            role = item.get("role")
            wire_role: Role = (
                "system"
                if role in ("system", "developer")
                else "assistant"
                if role == "assistant"
                else "user"
            )
            messages.append(
                Message(role=wire_role, content=(TextPart(text_of(item.get("content"))),))
            )
        else:
            without_id = {k: v for k, v in item.items() if k != "id"}
            messages.append(Message(role="user", content=(TextPart(canonical(without_id)),)))
    text_format = body.get("text")
    return WireRequest(
        api="responses",
        model=body_model(body),
        system=system,
        messages=tuple(messages),
        tools=tuple(tools),
        stream=flag(body, "stream"),
        include_usage=True,
        namespaced=namespaced,
        structured_output=isinstance(text_format, dict)
        and format_type(text_format.get("format")) in JSON_FORMATS,
        rules=_rule_text(body),
    )


def _rule_text(body: dict[str, Any]) -> RuleText:
    """A Responses body as rules read it: ``instructions`` the system prompt, trailing
    ``function_call_output`` items the last tool result, tools offered in ``tools`` and in
    ``additional_tools`` input items (namespaces included)."""
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw or []
    offered = list(body.get("tools") or [])
    for item in items:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            offered += item.get("tools") or []
    items = [i for i in items if isinstance(i, dict) and i.get("type") != "additional_tools"]
    conversation = conversation_end(items)
    last_tool = trailing_results(conversation, "type", "function_call_output", "output")
    return RuleText(
        model=str(body.get("model", "")),
        system=rule_text_of(body.get("instructions", "")),
        texts=tuple(rule_text_of(i.get("content") or i.get("output")) for i in items),
        last_user=last_user_text(conversation) if last_tool is None else None,
        last_tool_result=last_tool,
        tools=rule_tools(offered),
    )


def _add_response_tools(tools: list[ToolSpec], raw_tools: Any, namespace: str = "") -> bool:
    """Append Responses tools (``function`` or ``namespace`` groups); True if namespaced."""
    namespaced = False
    for tool in raw_tools if isinstance(raw_tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            inner = f"{namespace}{tool.get('name') or ''}{NAMESPACE_SEPARATOR}"
            _add_response_tools(tools, tool.get("tools") or [], inner)
            namespaced = True
        elif tool.get("type") == "function":
            tools.append(
                tool_spec(
                    f"{namespace}{tool.get('name') or ''}",
                    tool.get("description"),
                    tool.get("parameters"),
                )
            )
        else:
            tools.append(tool_spec(f"{namespace}{tool.get('type') or ''}", "", tool))
    return namespaced


def _stream(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> list[bytes]:
    return responses_chunk_frames(
        chunks, model=request.model, response_id=wire_id, namespaced=request.namespaced, meta=meta
    )


def _body(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> bytes:
    return responses_chunk_body(
        chunks, model=request.model, response_id=wire_id, namespaced=request.namespaced, meta=meta
    )


RESPONSES_API = WireApiSpec(
    name="responses",
    title="OpenAI Responses",
    framing="sse",
    parse=parse_responses_request,
    decoder=ResponsesDecoder,
    encode_stream=_stream,
    encode_body=_body,
    stream_endings=STREAM_ENDINGS,
    error_body=openai_error_body,
    models_body=models_listing_body,
    response_id_prefix="resp_",
    rule_api="responses",
    auth_headers=OPENAI_AUTH_HEADERS,
    paths=openai_paths("responses", "/v1/responses"),
)
"""OpenAI Responses (``POST /v1/responses``)."""
