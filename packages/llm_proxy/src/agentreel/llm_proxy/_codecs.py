"""One codec per wire API: upstream wire → agentreel chunks (record), chunks → wire (replay).

Decoding reuses the SDK adapters' own mappers (``agentreel.llm.wire``) on the decoded JSON,
so a proxied stream is recorded exactly as the in-process adapters would record it (they
live in the SDK adapter modules, so they are imported when record mode first decodes —
replay never imports a provider SDK); the
Responses API, which no adapter speaks, has its mapper here. Each decoder also keeps what
the chunks do not say — the response's id, model, created time, fingerprint, raw stop
reason and stop sequence, Responses item ids — as the call's ``Finish.response``
(``ResponseMeta``), so replay answers with them as recorded. Encoding is the stub server's
wire encoders (``agentreel.llm.stub``): one wire event per recorded chunk.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from agentreel.llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    FinishReason,
    ReasoningDelta,
    ReasoningPart,
    ResponseMeta,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    Usage,
)
from agentreel.llm.stub import (
    NAMESPACE_SEPARATOR,
    chat_chunk_body,
    chat_chunk_frames,
    messages_chunk_body,
    messages_chunk_frames,
    responses_chunk_body,
    responses_chunk_frames,
)
from agentreel.llm_proxy._requests import ParsedRequest
from agentreel.llm_proxy._routes import Api
from agentreel.llm_proxy._sse import SseEvent


class _Wire(dict[str, Any]):
    """Decoded JSON with attribute access, as the SDKs' models offer it (missing → None);
    still the dict it was, so ``json.dumps`` of a tool's initial ``input`` works."""

    def __getattr__(self, name: str) -> Any:
        return _wrap(self.get(name))


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return _Wire(value)
    if isinstance(value, list):
        return [_wrap(item) for item in value]
    return value


class WireDecoder(Protocol):
    """Turns one upstream call, event by event, into agentreel chunks."""

    def event(self, event: SseEvent) -> list[Chunk]:
        """Chunks completed by one SSE event; raises ``UpstreamStreamError`` on an error event."""
        ...

    def finish(self) -> list[Chunk]:
        """The closing chunks; raises ``StreamInterruptedError`` when the stream was cut."""
        ...

    def body(self, data: dict[str, Any]) -> list[Chunk]:
        """Every chunk of a non-streaming response body."""
        ...


class UpstreamStreamError(Exception):
    """The upstream sent an error event inside a stream; ``raw`` is its SSE data."""

    def __init__(self, raw: str) -> None:
        super().__init__(raw)
        self.raw = raw


class _MetaWatch:
    """The response metadata seen so far in one call's wire objects (first value wins, as
    every Chat Completions chunk repeats them)."""

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}

    def take(self, data: Any, **names: str) -> None:
        """Keep ``data[wire_name]`` as field ``name`` for each ``name=wire_name`` given."""
        if not isinstance(data, dict):
            return
        for name, wire_name in names.items():
            value = data.get(wire_name)
            if value is not None and name not in self.fields:
                self.fields[name] = value

    def onto(self, chunks: list[Chunk], item_ids: Sequence[str] = ()) -> list[Chunk]:
        """``chunks`` with their closing ``Finish`` carrying the metadata seen."""
        if not chunks or not isinstance(chunks[-1], Finish):
            return chunks
        meta = ResponseMeta(
            id=_text_or_none(self.fields.get("id")),
            model=_text_or_none(self.fields.get("model")),
            created=_int_or_none(self.fields.get("created")),
            system_fingerprint=_text_or_none(self.fields.get("system_fingerprint")),
            stop_reason=_text_or_none(self.fields.get("stop_reason")),
            stop_sequence=_text_or_none(self.fields.get("stop_sequence")),
            item_ids=tuple(item_ids),
        )
        if meta == ResponseMeta():
            return chunks
        return [*chunks[:-1], msgspec.structs.replace(chunks[-1], response=meta)]


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _label(upstream: str) -> Any:
    from agentreel.llm.wire import ProviderLabel

    return ProviderLabel("upstream", upstream, "the client's key")


def _has_error(data: Any) -> bool:
    return isinstance(data, dict) and bool(data.get("error"))


class _ChatDecoder:
    def __init__(self, upstream: str) -> None:
        from agentreel.llm.wire import OpenAIStreamMapper

        self._mapper = OpenAIStreamMapper()
        self._label = _label(upstream)
        self._meta = _MetaWatch()

    def event(self, event: SseEvent) -> list[Chunk]:
        if event.data == "[DONE]" or not event.data:
            return []
        data = json.loads(event.data)
        if isinstance(data, dict) and "error" in data and not data.get("choices"):
            raise UpstreamStreamError(event.data)
        self._watch(data)
        return self._mapper.feed(_wrap(data))

    def _watch(self, data: Any) -> None:
        self._meta.take(
            data, id="id", model="model", created="created", system_fingerprint="system_fingerprint"
        )
        for choice in (data.get("choices") if isinstance(data, dict) else None) or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._meta.take(choice, stop_reason="finish_reason")

    def finish(self) -> list[Chunk]:
        return self._meta.onto(self._mapper.finish(self._label))

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
        chunks = self._mapper.feed(_wrap({"choices": choices, "usage": data.get("usage")}))
        return chunks + self.finish()


class _MessagesDecoder:
    def __init__(self, upstream: str) -> None:
        from agentreel.llm.wire import AnthropicStreamMapper

        self._mapper = AnthropicStreamMapper()
        self._label = _label(upstream)
        self._meta = _MetaWatch()

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
        return self._mapper.feed(_wrap(data))

    def finish(self) -> list[Chunk]:
        return self._meta.onto(self._mapper.finish(self._label))

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


class _ResponsesDecoder:
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
        self._meta = _MetaWatch()
        self._item_ids: list[str] = []
        self.events = 0

    def _watch(self, response: Any) -> None:
        self._meta.take(response, id="id", model="model", created="created_at")
        if isinstance(response, dict):
            self._meta.take(response.get("incomplete_details"), stop_reason="reason")

    def event(self, event: SseEvent) -> list[Chunk]:
        if not event.data:
            return []
        self.events += 1
        data = json.loads(event.data)
        kind = data.get("type") if isinstance(data, dict) else None
        # Responses' own ``error`` event, or the ``{"error": ...}`` frame OpenAI-compatible
        # servers send in any stream (the ``openai`` SDK raises on both).
        if kind == "error" or event.name == "error" or (kind is None and _has_error(data)):
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

    def finish(self) -> list[Chunk]:
        from agentreel.llm.exceptions import StreamInterruptedError

        if self._done is None:
            raise StreamInterruptedError(
                "stream_cut",
                None,
                f"the stream from the upstream at {self._upstream} ended after {self.events} "
                "events without response.completed. The call did not finish; retry it.",
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


def decoder(api: Api, upstream: str) -> WireDecoder:
    """A fresh decoder for one call of ``api``."""
    if api == "chat":
        return _ChatDecoder(upstream)
    if api == "messages":
        return _MessagesDecoder(upstream)
    return _ResponsesDecoder(upstream)


def response_id(api: Api, seed: str) -> str:
    """A stable wire id for a replayed response (``chatcmpl-…``, ``msg_…``, ``resp_…``)."""
    digest = hashlib.sha256(seed.encode()).hexdigest()[:24]
    return {"chat": "chatcmpl-", "messages": "msg_", "responses": "resp_"}[api] + digest


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
    return responses_chunk_body(
        chunks, model=request.model, response_id=wire_id, namespaced=request.namespaced, meta=meta
    )
