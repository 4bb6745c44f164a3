"""The Gemini API's wire rules, both ways: wire → agentreel chunks and chunks → wire.

One owner for everything the Gemini API (``generativelanguage`` ``v1beta``) sends, so the
``gemini`` adapter (through ``google-genai``), the proxy's record and replay, and the stub
server all speak it the same way. Standard library and msgspec only: no SDK import.

A Gemini stream (``:streamGenerateContent?alt=sse``) is ``data: {GenerateContentResponse}``
frames separated by a blank line (``\\r\\n\\r\\n``), with no end event; a non-streaming call
(``:generateContent``) answers one ``GenerateContentResponse``. Each response holds
``candidates[0].content.parts`` — the new parts of this chunk — plus, repeated and
cumulative, ``usageMetadata``, ``modelVersion`` and ``responseId``; the last one carries
``finishReason``. Parts map to blocks:

- ``{"text": ...}`` → a text block (consecutive text parts, across responses, are one block);
- ``{"text": ..., "thought": true}`` → a reasoning block (its ``thoughtSignature`` on the
  block's ``ReasoningPart.signature``);
- ``{"functionCall": {"name", "args", "id"?}}`` → one tool-call block, whole (Gemini does
  not stream arguments); its ``thoughtSignature`` — which Gemini 3 requires back with the
  call in the next request — as a reasoning block with no text before it, so a conversation
  rebuilt from chunks can send it back. A call without ``id`` (the Gemini API omits it) gets
  ``MINTED_CALL_ID_PREFIX`` + its response id and position; the encoders leave such ids out.
- other parts (inline data, executable code, a text part's own signature) are not chunks.

``usageMetadata`` → ``usage`` (input ``promptTokenCount``; output ``candidatesTokenCount`` +
``thoughtsTokenCount``, the latter also as ``reasoning_tokens``; ``cachedContentTokenCount``
as cache reads). ``finishReason`` → ``finish``: ``STOP`` is ``tool-calls`` when the answer
called a function, else ``stop``; ``MAX_TOKENS`` is ``max-tokens``; anything else
(``SAFETY``, ``RECITATION``, ``MALFORMED_FUNCTION_CALL``, …) and a prompt blocked by
``promptFeedback.blockReason`` is ``finish{reason: "error", code: <wire reason>}``. A stream
that ends without a ``finishReason`` (nor a block reason) was cut. An error inside a stream is
a ``data: {"error": {"code", "message", "status"}}`` frame; error bodies have the same shape.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from agentreel.llm._chunks import (
    BlockEnd,
    BlockStart,
    BlockType,
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
    ContentPart,
    Message,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from agentreel.llm._options import GenerateOptions, wire_turns
from agentreel.llm.wire._api import GEMINI_BASE, MODEL, WireApiSpec, WirePath, vertex_base
from agentreel.llm.wire._common import UpstreamStreamError, stopped_with, stream_cut
from agentreel.llm.wire._listing import words_in
from agentreel.llm.wire._request import (
    RuleText,
    WireRequest,
    canonical,
    rule_text_of,
    rule_tools,
    stop_list,
    text_of,
    tool_spec,
)
from agentreel.llm.wire._sse import SseEvent, bare_error_frame, json_bytes

__all__ = [
    "GEMINI_STATUS",
    "MINTED_CALL_ID_PREFIX",
    "STREAM_ENDINGS",
    "GeminiDecoder",
    "GeminiStreamMapper",
    "gemini_chunk_body",
    "gemini_chunk_frames",
    "gemini_count_tokens_body",
    "gemini_error_body",
    "gemini_models_body",
    "gemini_stream_error_frame",
    "to_gemini_contents",
    "to_gemini_tools",
]

MINTED_CALL_ID_PREFIX = "gemini-call-"
"""Tool-call ids agentreel minted for a ``functionCall`` the wire sent without one."""

FRAME_END = b"\r\n\r\n"
"""What ends a Gemini SSE frame (the API's own separator)."""
STREAM_ENDINGS = (b'data: {"candidates":[{"finishReason"', b'data: {"promptFeedback"')
"""The frames that end a Gemini stream as the encoders write it (the response with the
``finishReason``, or a blocked prompt's): a replayed cut or error ends otherwise."""

GEMINI_STATUS: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
"""HTTP status → the ``google.rpc`` status name Gemini's error bodies carry."""

_FINISH_OK: dict[str, FinishReason] = {"STOP": "stop", "MAX_TOKENS": "max-tokens"}


class Where(Protocol):
    """Names where a stream came from, for a cut's message (``ProviderLabel`` is one)."""

    def where(self) -> str: ...


_BLOCKED = "the prompt was blocked"


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class GeminiStreamMapper:
    """Turns Gemini ``GenerateContentResponse`` objects (decoded wire JSON, camelCase) into
    agentreel chunks, one response at a time; ``body`` maps a non-streaming answer."""

    def __init__(self) -> None:
        self._next_block = 0
        self._open: tuple[int, BlockType, list[str]] | None = None  # index, kind, pieces
        self._open_signature: str | None = None
        self._calls = 0
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.block_reason: str | None = None
        self.block_message: str | None = None
        self.response_id: str | None = None
        self.model_version: str | None = None
        self.events = 0
        # Gemini has no end-of-stream event: the stream simply ends.
        self.stopped = False

    def feed(self, data: Any) -> list[Chunk]:
        """Chunks completed by one response object."""
        self.events += 1
        if not isinstance(data, dict):
            return []
        if self.response_id is None:
            self.response_id = _text_or_none(data.get("responseId"))
        if self.model_version is None:
            self.model_version = _text_or_none(data.get("modelVersion"))
        usage = data.get("usageMetadata")
        if isinstance(usage, dict):
            self.usage = _usage(usage)
        feedback = data.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            self.block_reason = str(feedback["blockReason"])
            self.block_message = _text_or_none(feedback.get("blockReasonMessage"))
        out: list[Chunk] = []
        for candidate in data.get("candidates") or []:
            if not isinstance(candidate, dict) or (candidate.get("index") or 0) != 0:
                continue
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            for part in parts or []:
                if isinstance(part, dict):
                    out += self._part(part)
            if candidate.get("finishReason"):
                self.finish_reason = str(candidate["finishReason"])
        return out

    def _part(self, part: dict[str, Any]) -> list[Chunk]:
        call = part.get("functionCall")
        signature = _text_or_none(part.get("thoughtSignature"))
        if isinstance(call, dict):
            out = self._close()
            if signature is not None:
                index = self._new_block()
                out += [
                    BlockStart(index=index, block_type="reasoning"),
                    BlockEnd(index=index, block=ReasoningPart("", signature=signature)),
                ]
            return out + self._call(call)
        text = part.get("text")
        if not isinstance(text, str):
            return []
        kind: BlockType = "reasoning" if part.get("thought") is True else "text"
        if not text and not (kind == "reasoning" and signature):
            return []
        out = []
        if self._open is None or self._open[1] != kind:
            out += self._close()
            self._open = (self._new_block(), kind, [])
            out.append(BlockStart(index=self._open[0], block_type=kind))
        index, _, pieces = self._open
        if kind == "reasoning" and signature is not None:
            self._open_signature = signature
        if text:
            pieces.append(text)
            out.append(
                ReasoningDelta(index=index, text=text)
                if kind == "reasoning"
                else TextDelta(index=index, text=text)
            )
        return out

    def _new_block(self) -> int:
        index = self._next_block
        self._next_block += 1
        return index

    def _call(self, call: dict[str, Any]) -> list[Chunk]:
        index = self._new_block()
        position = self._calls
        self._calls += 1
        call_id = _text_or_none(call.get("id")) or (
            f"{MINTED_CALL_ID_PREFIX}{self.response_id or 'call'}-{position}"
        )
        name = str(call.get("name") or "")
        args = call.get("args")
        arguments = json.dumps(
            args if isinstance(args, dict) else {}, separators=(",", ":"), ensure_ascii=False
        )
        return [
            BlockStart(index=index, block_type="tool-call"),
            ToolCallDelta(index=index, id=call_id, name=name, arguments_delta=arguments),
            BlockEnd(index=index, block=ToolCallPart(id=call_id, name=name, arguments=arguments)),
        ]

    def _close(self) -> list[Chunk]:
        if self._open is None:
            return []
        index, kind, pieces = self._open
        text = "".join(pieces)
        signature, self._open_signature = self._open_signature, None
        self._open = None
        if kind == "reasoning":
            return [BlockEnd(index=index, block=ReasoningPart(text, signature=signature))]
        return [BlockEnd(index=index, block=TextPart(text))]

    def meta(self) -> ResponseMeta | None:
        """The response's wire metadata: ``responseId``, ``modelVersion``, raw finish reason."""
        meta = ResponseMeta(
            id=self.response_id,
            model=self.model_version,
            stop_reason=self.finish_reason or self.block_reason,
        )
        return None if meta == ResponseMeta() else meta

    def salvage(self) -> list[Chunk]:
        """What a stream that failed mid-way still tells: the usage seen so far."""
        return [self.usage] if self.usage is not None else []

    def finish(self, label: Where | None = None) -> list[Chunk]:
        """The closing chunks; a stream without a ``finishReason`` (or block reason) was cut.

        ``label`` (a ``ProviderLabel``) names where the stream came from in that error.
        """
        if self.finish_reason is None and self.block_reason is None:
            where = label.where() if label is not None else "the Gemini API"
            raise stream_cut(
                where,
                self.events,
                "responses",
                "without a finishReason: the connection closed before the answer finished",
            )
        out = self._close()
        if self.usage is not None:
            out.append(self.usage)
        reason = self.finish_reason
        if reason is None:
            detail = f": {self.block_message}" if self.block_message else ""
            out.append(
                Finish(
                    reason="error",
                    code=self.block_reason,
                    message=f"{_BLOCKED} ({self.block_reason}){detail}",
                )
            )
        elif reason == "STOP" and self._calls:
            out.append(Finish(reason="tool-calls"))
        elif reason in _FINISH_OK:
            out.append(Finish(reason=_FINISH_OK[reason]))
        else:
            out.append(stopped_with("finishReason", reason))
        return out

    def body(self, data: Any, label: Where | None = None) -> list[Chunk]:
        """Every chunk of a non-streaming ``generateContent`` answer."""
        return self.feed(data) + self.finish(label)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(usage: dict[str, Any]) -> Usage:
    thoughts = _int(usage.get("thoughtsTokenCount"))
    cached = _int(usage.get("cachedContentTokenCount"))
    return Usage(
        input_tokens=_int(usage.get("promptTokenCount")),
        output_tokens=_int(usage.get("candidatesTokenCount")) + thoughts,
        cache_read_tokens=cached or None,
        reasoning_tokens=thoughts or None,
    )


# -- messages → wire (the adapter's request) -------------------------------------------------


def to_gemini_contents(options: GenerateOptions) -> tuple[str, list[dict[str, Any]]]:
    """(system instruction, ``contents``) in wire form: assistant turns are ``role: model``,
    tool results ``functionResponse`` parts of a user turn (named after the call they answer,
    ``{"output": ...}`` or ``{"error": ...}``), consecutive same-role turns merged.

    System-role messages join the system instruction. Reasoning text is not sent back; a
    reasoning part that only carries a signature goes back as the ``thoughtSignature`` of
    the function call after it (Gemini 3 requires it).
    """
    names: dict[str, str] = {}  # a call's name by id, for the result answering it
    return wire_turns(
        options,
        lambda role: "model" if role == "assistant" else "user",
        lambda message: _message_parts(message, names),
        "parts",
    )


def _message_parts(message: Message, names: dict[str, str]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    signature: str | None = None
    for part in message.content:
        if isinstance(part, TextPart):
            if part.text:
                parts.append({"text": part.text})
        elif isinstance(part, ReasoningPart):
            signature = part.signature if not part.text else None
            continue
        elif isinstance(part, ToolCallPart):
            names[part.id] = part.name
            parts.append(_call_part(part, signature))
        elif isinstance(part, ToolResultPart):
            response: dict[str, Any] = {"functionResponse": {}}
            if part.call_id and not part.call_id.startswith(MINTED_CALL_ID_PREFIX):
                response["functionResponse"]["id"] = part.call_id
            response["functionResponse"]["name"] = names.get(part.call_id, part.call_id)
            key = "error" if part.is_error else "output"
            response["functionResponse"]["response"] = {key: part.content}
            parts.append(response)
        signature = None
    return parts


def to_gemini_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """Tool specs as one Gemini ``tools`` entry of ``functionDeclarations`` (JSON schema)."""
    if not tools:
        return []
    declarations = [
        {
            "name": tool.name,
            "description": tool.description,
            "parametersJsonSchema": tool.parameters or {"type": "object", "properties": {}},
        }
        for tool in tools
    ]
    return [{"functionDeclarations": declarations}]


# -- chunks → wire (the proxy's replay of an overridden call; the stub server) ---------------


def _usage_body(usage: Usage) -> dict[str, Any]:
    reasoning = usage.reasoning_tokens or 0
    body: dict[str, Any] = {
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": max(0, usage.output_tokens - reasoning),
        "totalTokenCount": usage.input_tokens + usage.output_tokens,
    }
    if usage.cache_read_tokens:
        body["cachedContentTokenCount"] = usage.cache_read_tokens
    if reasoning:
        body["thoughtsTokenCount"] = reasoning
    return body


def _wire_finish(finish: Finish, meta: ResponseMeta) -> str | None:
    """The ``finishReason`` to send: as recorded, else the agentreel reason's wire name
    (an ``error`` finish carries the wire reason as its code); None for a blocked prompt."""
    if meta.stop_reason:
        return meta.stop_reason
    if finish.reason == "error":
        return finish.code or "OTHER"
    return "MAX_TOKENS" if finish.reason == "max-tokens" else "STOP"


def _call_part(part: ToolCallPart, signature: str | None) -> dict[str, Any]:
    try:
        args = json.loads(part.arguments) if part.arguments.strip() else {}
    except ValueError:
        args = {"_raw_arguments": part.arguments}
    call: dict[str, Any] = {"name": part.name, "args": args}
    if part.id and not part.id.startswith(MINTED_CALL_ID_PREFIX):
        call["id"] = part.id
    wire: dict[str, Any] = {"functionCall": call}
    if signature:
        wire["thoughtSignature"] = signature
    return wire


class _Plan:
    """What the encoders need to know ahead of the deltas: each reasoning block's signature
    and which reasoning blocks only carry the next call's signature."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.signatures: dict[int, str] = {}
        self.last_delta: dict[int, int] = {}
        self.carriers: set[int] = set()
        self.usage: Usage | None = None
        self.finish: Finish | None = None
        starts: list[tuple[int, str]] = []
        for position, chunk in enumerate(chunks):
            if isinstance(chunk, BlockStart):
                starts.append((chunk.index, chunk.block_type))
            elif isinstance(chunk, ReasoningDelta | TextDelta):
                self.last_delta[chunk.index] = position
            elif isinstance(chunk, BlockEnd) and isinstance(chunk.block, ReasoningPart):
                if chunk.block.signature:
                    self.signatures[chunk.index] = chunk.block.signature
            elif isinstance(chunk, Usage):
                self.usage = chunk
            elif isinstance(chunk, Finish):
                self.finish = chunk
        for position, (index, kind) in enumerate(starts):
            following = starts[position + 1] if position + 1 < len(starts) else (-1, "")
            if (
                kind == "reasoning"
                and index in self.signatures
                and index not in self.last_delta
                and following[1] == "tool-call"
            ):
                self.carriers.add(index)


def _envelope(
    parts: list[dict[str, Any]],
    *,
    finish_reason: str | None,
    usage: Usage | None,
    model: str,
    response_id: str,
    meta: ResponseMeta,
) -> dict[str, Any]:
    # The finishReason first: the frame that ends a stream is then told by its prefix
    # (``STREAM_ENDINGS``); JSON key order means nothing to a client.
    candidate: dict[str, Any] = {} if finish_reason is None else {"finishReason": finish_reason}
    candidate["content"] = {"parts": parts, "role": "model"}
    candidate["index"] = 0
    response: dict[str, Any] = {"candidates": [candidate]}
    if usage is not None:
        response["usageMetadata"] = _usage_body(usage)
    response["modelVersion"] = meta.model or model
    response["responseId"] = meta.id or response_id
    return response


def _wire_parts(chunks: Sequence[Chunk], plan: _Plan) -> list[list[dict[str, Any]]]:
    """The parts of each frame, one frame per recorded delta or call (in chunk order)."""
    frames: list[list[dict[str, Any]]] = []
    pending_signature: str | None = None
    for position, chunk in enumerate(chunks):
        if isinstance(chunk, TextDelta):
            frames.append([{"text": chunk.text}])
        elif isinstance(chunk, ReasoningDelta):
            part: dict[str, Any] = {"text": chunk.text, "thought": True}
            signature = plan.signatures.get(chunk.index)
            if signature and plan.last_delta.get(chunk.index) == position:
                part["thoughtSignature"] = signature
            frames.append([part])
        elif isinstance(chunk, BlockEnd) and isinstance(chunk.block, ReasoningPart):
            if chunk.index in plan.carriers:
                pending_signature = plan.signatures[chunk.index]
            elif chunk.index not in plan.last_delta and chunk.block.signature:
                frames.append(
                    [{"text": "", "thought": True, "thoughtSignature": chunk.block.signature}]
                )
        elif isinstance(chunk, BlockEnd) and isinstance(chunk.block, ToolCallPart):
            frames.append([_call_part(chunk.block, pending_signature)])
            pending_signature = None
    return frames


def gemini_chunk_frames(
    chunks: Sequence[Chunk],
    *,
    model: str,
    response_id: str,
    meta: ResponseMeta | None = None,
) -> list[bytes]:
    """SSE frames of a ``streamGenerateContent?alt=sse`` answer for one recorded call: a
    response per recorded delta (a whole one per function call), each repeating the usage
    (as Gemini repeats it), then one with the ``finishReason``. A call without ``finish``
    (an override replayed chunk by chunk, cut short) ends without the last frame."""
    plan = _Plan(chunks)
    given = meta or (plan.finish.response if plan.finish is not None else None) or ResponseMeta()

    def frame(parts: list[dict[str, Any]], finish_reason: str | None = None) -> bytes:
        response = _envelope(
            parts,
            finish_reason=finish_reason,
            usage=plan.usage,
            model=model,
            response_id=response_id,
            meta=given,
        )
        return b"data: " + json_bytes(response) + FRAME_END

    frames = [frame(parts) for parts in _wire_parts(chunks, plan)]
    if plan.finish is not None:
        frames.append(_last_frame(plan.finish, given, frame, plan, model, response_id))
    return frames


def _last_frame(
    finish: Finish,
    meta: ResponseMeta,
    frame: Any,
    plan: _Plan,
    model: str,
    response_id: str,
) -> bytes:
    reason = _wire_finish(finish, meta)
    blocked = _blocked_response(finish, plan, meta, model, response_id)
    if blocked is not None:
        return b"data: " + json_bytes(blocked) + FRAME_END
    result: bytes = frame([{"text": ""}], reason)
    return result


def _blocked_response(
    finish: Finish, plan: _Plan, meta: ResponseMeta, model: str, response_id: str
) -> dict[str, Any] | None:
    """The answer of a call the prompt feedback blocked (its ``blockReason``, the usage,
    model and id, no candidates), or ``None`` for any other finish: the last stream frame
    and the whole body alike."""
    if not (finish.reason == "error" and finish.code and _is_block_reason(finish)):
        return None
    blocked: dict[str, Any] = {"promptFeedback": {"blockReason": finish.code}}
    if plan.usage is not None:
        blocked["usageMetadata"] = _usage_body(plan.usage)
    blocked["modelVersion"] = meta.model or model
    blocked["responseId"] = meta.id or response_id
    return blocked


def _is_block_reason(finish: Finish) -> bool:
    return bool(finish.message and finish.message.startswith(_BLOCKED))


def gemini_chunk_body(
    chunks: Sequence[Chunk],
    *,
    model: str,
    response_id: str,
    meta: ResponseMeta | None = None,
) -> bytes:
    """A non-streaming ``generateContent`` answer holding one recorded call's content."""
    plan = _Plan(chunks)
    given = meta or (plan.finish.response if plan.finish is not None else None) or ResponseMeta()
    parts: list[dict[str, Any]] = []
    for frame_parts in _wire_parts(chunks, plan):
        for part in frame_parts:
            previous = parts[-1] if parts else None
            if (
                previous is not None
                and "text" in part
                and "text" in previous
                and previous.get("thought") == part.get("thought")
                and "thoughtSignature" not in previous
            ):
                previous["text"] += part["text"]
                if "thoughtSignature" in part:
                    previous["thoughtSignature"] = part["thoughtSignature"]
            else:
                parts.append(dict(part))
    finish = plan.finish or Finish(reason="stop")
    blocked = _blocked_response(finish, plan, given, model, response_id)
    if blocked is not None:
        return json_bytes(blocked)
    response = _envelope(
        parts,
        finish_reason=_wire_finish(finish, given),
        usage=plan.usage,
        model=model,
        response_id=response_id,
        meta=given,
    )
    return json_bytes(response)


def gemini_error_body(status: int, message: str, code: str | None = None) -> bytes:
    """Gemini's error body: ``{"error": {"code", "message", "status"}}`` (its ``status``
    names the error: a ``code`` given is not written)."""
    del code
    name = GEMINI_STATUS.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
    return json_bytes({"error": {"code": status, "message": message, "status": name}})


def gemini_stream_error_frame(message: str, status: int = 500) -> bytes:
    """An error inside a Gemini stream: a ``data:`` frame holding an error body."""
    return b"data: " + gemini_error_body(status, message) + FRAME_END


def gemini_models_body(models: Sequence[str]) -> bytes:
    """A ``GET /v1beta/models`` answer naming ``models`` (``models/<name>`` resources)."""
    listed = [
        {
            "name": model if model.startswith("models/") else f"models/{model}",
            "displayName": model.removeprefix("models/"),
            "supportedGenerationMethods": ["generateContent", "countTokens"],
        }
        for model in models
    ]
    return json_bytes({"models": listed})


def gemini_count_tokens_body(body: dict[str, Any]) -> bytes:
    """A ``:countTokens`` answer: one token per word of every text in the request's
    ``contents`` (or its ``generateContentRequest``'s contents and system instruction) —
    deterministic, not a tokenizer."""
    inner = body.get("generateContentRequest")
    source = inner if isinstance(inner, dict) else body
    parts = [source.get(key) for key in ("contents", "systemInstruction", "tools")]
    words = words_in(parts, ("role", "thoughtSignature"))
    return json_bytes({"totalTokens": words})


class _Upstream:
    def __init__(self, url: str) -> None:
        self.url = url

    def where(self) -> str:
        return f"the upstream at {self.url}"


class GeminiDecoder:
    """The proxy's record side: one upstream Gemini call, SSE frame by frame (or one body),
    into chunks, its ``responseId``, ``modelVersion`` and raw finish reason kept as the
    call's ``ResponseMeta``; an ``{"error": ...}`` frame is an ``UpstreamStreamError``."""

    def __init__(self, upstream: str) -> None:
        self._mapper = GeminiStreamMapper()
        self._upstream = upstream

    def event(self, event: SseEvent) -> list[Chunk]:
        if not event.data:
            return []
        data = json.loads(event.data)
        if isinstance(data, dict) and "error" in data and not data.get("candidates"):
            raise UpstreamStreamError(event.data)
        return self._mapper.feed(data)

    def finish(self) -> list[Chunk]:
        chunks = self._mapper.finish(_Upstream(self._upstream))
        meta = self._mapper.meta()
        last = chunks[-1]
        if meta is None or not isinstance(last, Finish):
            return chunks
        return [
            *chunks[:-1],
            Finish(reason=last.reason, message=last.message, code=last.code, response=meta),
        ]

    @property
    def ended(self) -> bool:
        """Never before the body's end: a Gemini stream has no terminal event."""
        return False

    def body(self, data: dict[str, Any]) -> list[Chunk]:
        return self._mapper.feed(data) + self.finish()


# -- Gemini generateContent -----------------------------------------------------------------


def parse_gemini_request(
    body: dict[str, Any], model: str = "", stream: bool = False
) -> WireRequest:
    """A Gemini ``generateContent`` body: ``systemInstruction``, ``contents`` (``role:
    model`` turns are the assistant's), ``tools[].functionDeclarations``."""
    raw_system = body.get("systemInstruction")
    system: str | None = None
    if isinstance(raw_system, dict):
        system = text_of(raw_system.get("parts"))
    elif isinstance(raw_system, str):
        system = raw_system
    messages: list[Message] = []
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        role: Role = "assistant" if content.get("role") == "model" else "user"
        parts = tuple(
            _gemini_part(part) for part in content.get("parts") or [] if isinstance(part, dict)
        )
        if parts and all(isinstance(part, ToolResultPart) for part in parts):
            role = "tool"
        messages.append(Message(role=role, content=parts or (TextPart(""),)))
    tools: list[ToolSpec] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        for declaration in tool.get("functionDeclarations") or []:
            if isinstance(declaration, dict):
                schema = declaration.get(
                    "parametersJsonSchema",
                    declaration.get("parameters_json_schema", declaration.get("parameters")),
                )
                tools.append(
                    tool_spec(declaration.get("name"), declaration.get("description"), schema)
                )
        for kind, value in tool.items():
            if kind != "functionDeclarations":  # built-in tools: googleSearch, codeExecution, …
                tools.append(tool_spec(kind, "", value if isinstance(value, dict) else {}))
    config = body.get("generationConfig")
    config = config if isinstance(config, dict) else {}
    return WireRequest(
        api="gemini",
        model=model,
        system=system,
        messages=tuple(messages),
        tools=tuple(tools),
        stream=stream,
        include_usage=True,
        namespaced=False,
        structured_output=config.get("responseMimeType") == "application/json"
        or any(key in config for key in ("responseSchema", "responseJsonSchema")),
        stop_sequences=stop_list(config.get("stopSequences")),
        rules=_rule_text(body, model),
    )


def _rule_text(body: dict[str, Any], model: str) -> RuleText:
    """A ``generateContent`` body as rules read it: ``systemInstruction``'s text, a user
    turn of ``functionResponse`` parts the last tool result (``_result_text``), a
    content's text its text parts' and its results' (so ``any_message`` sees tool results
    here as in the other APIs), ``functionDeclarations`` the tools."""
    contents = [c for c in body.get("contents", []) or [] if isinstance(c, dict)]
    last_user: str | None = None
    last_tool: str | None = None
    if contents and contents[-1].get("role", "user") == "user":
        parts = [p for p in contents[-1].get("parts", []) or [] if isinstance(p, dict)]
        results = [
            p["functionResponse"] for p in parts if isinstance(p.get("functionResponse"), dict)
        ]
        if results:
            last_tool = "\n".join(_result_text(r) for r in results)
        else:
            last_user = rule_text_of(parts)
    declarations = [
        declaration
        for tool in body.get("tools", []) or []
        if isinstance(tool, dict)
        for declaration in tool.get("functionDeclarations", []) or []
        if isinstance(declaration, dict)
    ]
    tools = rule_tools(
        [
            {
                **declaration,
                # One JSON schema, whichever spelling the client used (google-genai 3 sends
                # the snake_case one).
                "parameters": declaration.get(
                    "parametersJsonSchema",
                    declaration.get("parameters_json_schema", declaration.get("parameters")),
                ),
            }
            for declaration in declarations
        ]
    )
    raw_system = body.get("systemInstruction")
    return RuleText(
        model=model,
        system=rule_text_of(raw_system.get("parts", [])) if isinstance(raw_system, dict) else "",
        texts=tuple(_parts_text(c.get("parts", [])) for c in contents),
        last_user=last_user,
        last_tool_result=last_tool,
        tools=tools,
    )


def _parts_text(parts: Any) -> str:
    """A content's text parts and its ``functionResponse`` parts' texts."""
    results = [
        _result_text(p["functionResponse"])
        for p in (parts if isinstance(parts, list) else [])
        if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
    ]
    return "\n".join(text for text in (rule_text_of(parts), *results) if text)


def _result_text(result: dict[str, Any]) -> str:
    """A ``functionResponse``'s text as rules read it: its ``output`` / ``error`` /
    ``content`` / ``result`` string, else its JSON (the header keeps ``output`` or the
    canonical JSON)."""
    response = result.get("response")
    if isinstance(response, dict):
        for key in ("output", "error", "content", "result"):
            if isinstance(response.get(key), str):
                return str(response[key])
    return json.dumps(response, sort_keys=True, ensure_ascii=False)


def _gemini_part(part: dict[str, Any]) -> ContentPart:
    call = part.get("functionCall")
    if isinstance(call, dict):
        return ToolCallPart(
            id=str(call.get("id") or ""),
            name=str(call.get("name") or ""),
            arguments=canonical(call.get("args") or {}),
        )
    result = part.get("functionResponse")
    if isinstance(result, dict):
        response = result.get("response")
        output = response.get("output") if isinstance(response, dict) else None
        return ToolResultPart(
            call_id=str(result.get("id") or result.get("name") or ""),
            content=output if isinstance(output, str) else canonical(response),
            is_error=isinstance(response, dict)
            and "error" in response
            and "output" not in response,
        )
    text = part.get("text")
    if isinstance(text, str):
        return ReasoningPart(text) if part.get("thought") is True else TextPart(text)
    # Inline data, files, executable code: compared by their JSON.
    return TextPart(canonical(part))


def _stream(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> list[bytes]:
    return gemini_chunk_frames(chunks, model=request.model, response_id=wire_id, meta=meta)


STREAM_METHOD = "streamGenerateContent"
"""The path method asking for a stream (``?alt=sse``)."""
_GENERATE = rf":(?P<method>{STREAM_METHOD}|generateContent)"


def _body(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> bytes:
    return gemini_chunk_body(chunks, model=request.model, response_id=wire_id, meta=meta)


GEMINI_API = WireApiSpec(
    name="gemini",
    title="Gemini",
    framing="sse",
    parse=parse_gemini_request,
    decoder=GeminiDecoder,
    encode_stream=_stream,
    encode_body=_body,
    stream_endings=STREAM_ENDINGS,
    error_body=gemini_error_body,
    models_body=gemini_models_body,
    rule_api="gemini",
    error_frame=bare_error_frame,
    auth_headers=("x-goog-api-key",),
    paths=(
        WirePath(
            GEMINI_BASE + "/" + MODEL + _GENERATE,
            "POST /v1beta/models/<model>:streamGenerateContent|generateContent",
            streaming_methods=(STREAM_METHOD,),
        ),
        WirePath(
            rf"{GEMINI_BASE}/{MODEL}:(?P<method>countTokens)",
            "POST /v1beta/models/<model>:countTokens",
            kind="count_tokens",
        ),
        WirePath(GEMINI_BASE, "GET /v1beta/models", "GET", kind="models"),
        WirePath(
            vertex_base("google") + "/" + MODEL + _GENERATE,
            "POST /v1/projects/<p>/locations/<l>/publishers/google/models/<model>"
            ":streamGenerateContent|generateContent (Vertex AI)",
            streaming_methods=(STREAM_METHOD,),
        ),
        WirePath(
            rf"{vertex_base('google')}/{MODEL}:(?P<method>countTokens)",
            "POST …/publishers/google/models/<model>:countTokens (Vertex AI)",
            kind="count_tokens",
        ),
    ),
    count_tokens_key="totalTokens",
)
"""Gemini (``POST /v1beta/models/<model>:streamGenerateContent|generateContent``; its key
also in ``?key=``, which nothing written keeps)."""
