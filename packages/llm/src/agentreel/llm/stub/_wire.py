"""Wire shapes of the two streaming APIs: SSE frames and error bodies, as the real APIs send.

OpenAI Chat Completions: ``data: {chunk}\\n\\n`` frames of ``chat.completion.chunk`` objects,
a final usage-only chunk when ``stream_options.include_usage`` is set, then
``data: [DONE]``. Anthropic Messages: ``event: <type>\\ndata: {json}\\n\\n`` frames
``message_start``, ``ping``, ``content_block_start/delta/stop``, ``message_delta``,
``message_stop``. A request without ``stream: true`` gets the whole answer as one JSON
body (``chat.completion`` / ``message``) holding the same content. JSON is compact, as
both APIs send it.

Two kinds of encoder share these shapes: the stub's, from a rule (``openai_frames``,
``anthropic_frames``), and the proxy's replay, from recorded agentreel chunks
(``chat_chunk_frames``, ``messages_chunk_frames``, ``responses_chunk_frames`` and the
non-streaming ``*_chunk_body``), so a replayed stream parses, in the official SDKs, to the
chunks that were recorded: one wire event per recorded delta, tool-call ids, usage and
finish reasons kept. Where the call's ``Finish`` carries the recorded ``ResponseMeta``
(response id, model, created, fingerprint, raw stop reason and sequence, Responses item
ids) and a reasoning block its signature, those go out as recorded; without them, the
encoders mint ids from the caller's ``response_id`` and answer with the request's model.
"""

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
from agentreel.llm._messages import ReasoningPart, TextPart, ToolCallPart
from agentreel.llm.stub._rules import Rule, UsageRule

CREATED = 1_700_000_000
DEFAULT_INPUT_TOKENS = 16

_OPENAI_FINISH = {
    "stop": "stop",
    "tool-calls": "tool_calls",
    "max-tokens": "length",
    "refusal": "content_filter",
}
_ANTHROPIC_STOP = {
    "stop": "end_turn",
    "tool-calls": "tool_use",
    "max-tokens": "max_tokens",
    "refusal": "refusal",
}


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _tool_pieces(rule: Rule) -> list[list[str]]:
    return [_pieces(call.arguments_json(), rule.chunk_size) for call in rule.tool_calls]


def _interleaved(per_call: list[list[str]], interleave: bool) -> list[tuple[int, str]]:
    """(call position, piece) in wire order: call by call, or round-robin when interleaved."""
    if not interleave:
        return [(i, piece) for i, pieces in enumerate(per_call) for piece in pieces]
    order: list[tuple[int, str]] = []
    longest = max((len(p) for p in per_call), default=0)
    for step in range(longest):
        for i, pieces in enumerate(per_call):
            if step < len(pieces):
                order.append((i, pieces[step]))
    return order


def usage_for(rule: Rule) -> UsageRule:
    """The rule's usage, or a stable default computed from what it streams."""
    if rule.usage is not None:
        return rule.usage
    pieces = len(_pieces(rule.reasoning, rule.chunk_size)) + len(
        _pieces(rule.text, rule.chunk_size)
    )
    pieces += sum(len(p) for p in _tool_pieces(rule))
    return UsageRule(input_tokens=DEFAULT_INPUT_TOKENS, output_tokens=max(1, pieces))


def openai_frames(
    rule: Rule, body: dict[str, Any], response_id: str, call_ids: list[str]
) -> list[bytes]:
    """Every SSE frame of an OpenAI Chat Completions stream answering ``body``."""
    model = str(body.get("model", ""))
    stream_options = body.get("stream_options") or {}
    include_usage = isinstance(stream_options, dict) and stream_options.get("include_usage") is True

    def frame(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        chunk: dict[str, Any] = {
            "id": response_id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "system_fingerprint": "fp_stub",
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if include_usage:
            chunk["usage"] = None
        return b"data: " + _json(chunk) + b"\n\n"

    frames = [frame({"role": "assistant", "content": "", "refusal": None})]
    frames += [
        frame({"reasoning_content": piece}) for piece in _pieces(rule.reasoning, rule.chunk_size)
    ]
    frames += [frame({"content": piece}) for piece in _pieces(rule.text, rule.chunk_size)]

    def tool_start(i: int) -> bytes:
        call = rule.tool_calls[i]
        entry = {
            "index": i,
            "id": call_ids[i],
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        return frame({"tool_calls": [entry]})

    def tool_piece(i: int, piece: str) -> bytes:
        return frame({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})

    per_call = _tool_pieces(rule)
    if rule.interleave:
        frames += [tool_start(i) for i in range(len(rule.tool_calls))]
        frames += [tool_piece(i, piece) for i, piece in _interleaved(per_call, True)]
    else:
        for i, pieces in enumerate(per_call):
            frames.append(tool_start(i))
            frames += [tool_piece(i, piece) for piece in pieces]
    frames.append(frame({}, _OPENAI_FINISH[rule.finish_name]))
    if include_usage:
        usage = usage_for(rule)
        usage_body = _openai_usage(usage)
        final = {
            "id": response_id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "system_fingerprint": "fp_stub",
            "choices": [],
            "usage": usage_body,
        }
        frames.append(b"data: " + _json(final) + b"\n\n")
    frames.append(b"data: [DONE]\n\n")
    return frames


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + _json(data) + b"\n\n"


def anthropic_frames(
    rule: Rule, body: dict[str, Any], message_id: str, call_ids: list[str]
) -> list[bytes]:
    """Every SSE frame of an Anthropic Messages stream answering ``body``."""
    usage = usage_for(rule)
    start_usage: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens or 0,
        "cache_read_input_tokens": usage.cache_read_tokens or 0,
        "output_tokens": 1,
    }
    message: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": str(body.get("model", "")),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    frames = [
        _event("message_start", {"type": "message_start", "message": message}),
        _event("ping", {"type": "ping"}),
    ]
    index = 0

    def start(block: dict[str, Any], at: int) -> bytes:
        payload = {"type": "content_block_start", "index": at, "content_block": block}
        return _event("content_block_start", payload)

    def delta(at: int, value: dict[str, Any]) -> bytes:
        payload = {"type": "content_block_delta", "index": at, "delta": value}
        return _event("content_block_delta", payload)

    def stop(at: int) -> bytes:
        return _event("content_block_stop", {"type": "content_block_stop", "index": at})

    if rule.reasoning:
        frames.append(start({"type": "thinking", "thinking": "", "signature": ""}, index))
        frames += [
            delta(index, {"type": "thinking_delta", "thinking": piece})
            for piece in _pieces(rule.reasoning, rule.chunk_size)
        ]
        frames.append(delta(index, {"type": "signature_delta", "signature": "stub-signature"}))
        frames.append(stop(index))
        index += 1
    if rule.text:
        frames.append(start({"type": "text", "text": ""}, index))
        frames += [
            delta(index, {"type": "text_delta", "text": piece})
            for piece in _pieces(rule.text, rule.chunk_size)
        ]
        frames.append(stop(index))
        index += 1

    def tool_start(i: int) -> bytes:
        call = rule.tool_calls[i]
        block = {"type": "tool_use", "id": call_ids[i], "name": call.name, "input": {}}
        return start(block, index + i)

    def tool_piece(i: int, piece: str) -> bytes:
        return delta(index + i, {"type": "input_json_delta", "partial_json": piece})

    per_call = _tool_pieces(rule)
    if rule.interleave:
        frames += [tool_start(i) for i in range(len(rule.tool_calls))]
        frames += [tool_piece(i, piece) for i, piece in _interleaved(per_call, True)]
        frames += [stop(index + i) for i in range(len(rule.tool_calls))]
    else:
        for i, pieces in enumerate(per_call):
            frames.append(tool_start(i))
            frames += [tool_piece(i, piece) for piece in pieces]
            frames.append(stop(index + i))
    delta_usage: dict[str, Any] = {"output_tokens": usage.output_tokens}
    frames.append(
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": _ANTHROPIC_STOP[rule.finish_name], "stop_sequence": None},
                "usage": delta_usage,
            },
        )
    )
    frames.append(_event("message_stop", {"type": "message_stop"}))
    return frames


def _openai_usage(usage: UsageRule) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {
            "cached_tokens": usage.cache_read_tokens or 0,
            "audio_tokens": 0,
        },
        "completion_tokens_details": {
            "reasoning_tokens": usage.reasoning_tokens or 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def openai_completion_body(
    rule: Rule, body: dict[str, Any], response_id: str, call_ids: list[str]
) -> bytes:
    """A non-streaming ``chat.completion`` answering ``body`` with the rule's content."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": rule.text or None,
        "refusal": None,
        "annotations": [],
    }
    if rule.reasoning:
        message["reasoning_content"] = rule.reasoning
    if rule.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_ids[i],
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }
            for i, call in enumerate(rule.tool_calls)
        ]
    completion = {
        "id": response_id,
        "object": "chat.completion",
        "created": CREATED,
        "model": str(body.get("model", "")),
        "system_fingerprint": "fp_stub",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _OPENAI_FINISH[rule.finish_name],
            }
        ],
        "usage": _openai_usage(usage_for(rule)),
    }
    return _json(completion)


def anthropic_message_body(
    rule: Rule, body: dict[str, Any], message_id: str, call_ids: list[str]
) -> bytes:
    """A non-streaming Messages ``message`` answering ``body`` with the rule's content."""
    usage = usage_for(rule)
    content: list[dict[str, Any]] = []
    if rule.reasoning:
        content.append(
            {"type": "thinking", "thinking": rule.reasoning, "signature": "stub-signature"}
        )
    if rule.text:
        content.append({"type": "text", "text": rule.text})
    for i, call in enumerate(rule.tool_calls):
        # Raises ValueError for raw argument text that is not JSON: a non-streaming
        # Anthropic answer carries the parsed input, so there is no faithful form of it.
        arguments = json.loads(call.arguments_json())
        content.append(
            {"type": "tool_use", "id": call_ids[i], "name": call.name, "input": arguments}
        )
    message = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": str(body.get("model", "")),
        "content": content,
        "stop_reason": _ANTHROPIC_STOP[rule.finish_name],
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.input_tokens,
            "cache_creation_input_tokens": usage.cache_write_tokens or 0,
            "cache_read_input_tokens": usage.cache_read_tokens or 0,
            "output_tokens": usage.output_tokens,
        },
    }
    return _json(message)


_OPENAI_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("not_found_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
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


def openai_stream_error_frame(message: str) -> bytes:
    """An error inside an OpenAI-style stream, as OpenAI-compatible servers send it."""
    error = {"message": message, "type": "server_error", "param": None, "code": None}
    return b"data: " + _json({"error": error}) + b"\n\n"


def anthropic_stream_error_frame(message: str) -> bytes:
    """Anthropic's in-stream ``error`` event (e.g. ``overloaded_error`` mid-response)."""
    return _event(
        "error", {"type": "error", "error": {"type": "overloaded_error", "message": message}}
    )


def models_listing_body(models: Sequence[str]) -> bytes:
    """A ``GET /v1/models`` answer naming ``models``, in a shape both SDKs parse: OpenAI's
    ``list`` of ``model`` objects, with the fields Anthropic's listing adds (``type``,
    ``display_name``, ``created_at``, ``has_more``, ``first_id``, ``last_id``)."""
    data = [
        {
            "id": model,
            "object": "model",
            "type": "model",
            "created": 0,
            "created_at": "1970-01-01T00:00:00Z",
            "display_name": model,
            "owned_by": "agentreel",
        }
        for model in models
    ]
    return _json(
        {
            "object": "list",
            "data": data,
            "has_more": False,
            "first_id": models[0] if models else None,
            "last_id": models[-1] if models else None,
        }
    )


def count_tokens_body(body: dict[str, Any]) -> bytes:
    """A ``POST /v1/messages/count_tokens`` answer: one token per word of every string in
    the request's ``system``, ``messages`` and ``tools`` (their ``role`` and ``type`` names
    aside) — deterministic, not a tokenizer."""
    words = 0

    def walk(value: Any) -> None:
        nonlocal words
        if isinstance(value, str):
            words += len(value.split())
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in ("role", "type"):
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for key in ("system", "messages", "tools"):
        walk(body.get(key))
    return _json({"input_tokens": words})


def openai_error_body(status: int, message: str, code: str | None = None) -> bytes:
    kind, default_code = _OPENAI_ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return _json(
        {"error": {"message": message, "type": kind, "param": None, "code": code or default_code}}
    )


def anthropic_error_body(status: int, message: str) -> bytes:
    kind = _ANTHROPIC_ERROR_TYPES.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )
    return _json({"type": "error", "error": {"type": kind, "message": message}})


# -- encoders from recorded chunks (the proxy's replay) -------------------------------------


def rule_chunks(rule: Rule, call_ids: list[str]) -> list[Chunk]:
    """What a rule answers, as the agentreel chunks an adapter would map it to (for the
    non-streaming bodies and the Responses API, which the stub encodes from chunks)."""
    chunks: list[Chunk] = []
    index = 0
    if rule.reasoning:
        chunks.append(BlockStart(index=index, block_type="reasoning"))
        chunks += [
            ReasoningDelta(index=index, text=p) for p in _pieces(rule.reasoning, rule.chunk_size)
        ]
        chunks.append(BlockEnd(index=index, block=ReasoningPart(rule.reasoning)))
        index += 1
    if rule.text:
        chunks.append(BlockStart(index=index, block_type="text"))
        chunks += [TextDelta(index=index, text=p) for p in _pieces(rule.text, rule.chunk_size)]
        chunks.append(BlockEnd(index=index, block=TextPart(rule.text)))
        index += 1
    for position, call in enumerate(rule.tool_calls):
        at = index + position
        chunks.append(BlockStart(index=at, block_type="tool-call"))
        chunks.append(
            ToolCallDelta(index=at, id=call_ids[position], name=call.name, arguments_delta="")
        )
        pieces = _pieces(call.arguments_json(), rule.chunk_size)
        chunks += [
            ToolCallDelta(index=at, id=call_ids[position], arguments_delta=p) for p in pieces
        ]
        part = ToolCallPart(id=call_ids[position], name=call.name, arguments=call.arguments_json())
        chunks.append(BlockEnd(index=at, block=part))
    usage = usage_for(rule)
    chunks.append(
        Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            reasoning_tokens=usage.reasoning_tokens,
        )
    )
    name = rule.finish_name
    if name == "refusal":
        chunks.append(Finish(reason="error", code="refusal"))
    else:
        chunks.append(Finish(reason=name))
    return chunks


def _usage_in(chunks: Sequence[Chunk]) -> Usage | None:
    for chunk in chunks:
        if isinstance(chunk, Usage):
            return chunk
    return None


def _finish_in(chunks: Sequence[Chunk]) -> Finish:
    for chunk in reversed(chunks):
        if isinstance(chunk, Finish):
            return chunk
    return Finish(reason="stop")


_NO_META = ResponseMeta()


def _meta_in(chunks: Sequence[Chunk], given: ResponseMeta | None = None) -> ResponseMeta:
    """The recorded response metadata of a call: ``given`` (a call replayed before its
    finish arrived), else its finish's, else empty (a recording without it)."""
    if given is not None:
        return given
    for chunk in reversed(chunks):
        if isinstance(chunk, Finish):
            return chunk.response or _NO_META
    return _NO_META


def _wire_reason(finish: Finish, table: dict[str, str]) -> str:
    """The wire's finish/stop reason: the recorded raw one, else an ``error`` finish's code
    (which carries the wire reason), else the table's name for the agentreel reason."""
    if finish.response is not None and finish.response.stop_reason:
        return finish.response.stop_reason
    if finish.reason == "error" and finish.code:
        return finish.code
    return table.get(finish.reason, "stop")


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
    envelope = _chat_envelope(_meta_in(chunks, meta), model, response_id)

    def frame(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        chunk: dict[str, Any] = {
            **envelope,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if include_usage:
            chunk["usage"] = None
        return b"data: " + _json(chunk) + b"\n\n"

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
            frames.append(frame({}, _wire_reason(chunk, _OPENAI_FINISH)))
    if include_usage and usage is not None:
        final = {
            **envelope,
            "choices": [],
            "usage": _openai_usage_body(usage),
        }
        frames.append(b"data: " + _json(final) + b"\n\n")
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
        **_chat_envelope(_meta_in(chunks, meta), model, response_id),
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _wire_reason(_finish_in(chunks), _OPENAI_FINISH),
            }
        ],
    }
    usage = _usage_in(chunks)
    if usage is not None:
        body["usage"] = _openai_usage_body(usage)
    return _json(body)


def _first_tool_delta(chunks: Sequence[Chunk], start: int, index: int) -> ToolCallDelta | None:
    for chunk in chunks[start:]:
        if isinstance(chunk, ToolCallDelta) and chunk.index == index:
            return chunk
    return None


def _anthropic_usage(usage: Usage | None) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens if usage else 0,
        "cache_creation_input_tokens": (usage.cache_write_tokens or 0) if usage else 0,
        "cache_read_input_tokens": (usage.cache_read_tokens or 0) if usage else 0,
        "output_tokens": usage.output_tokens if usage else 0,
    }


def messages_chunk_frames(
    chunks: Sequence[Chunk], *, model: str, message_id: str, meta: ResponseMeta | None = None
) -> list[bytes]:
    """Anthropic Messages SSE frames for one recorded call: a frame per recorded delta."""
    usage = _usage_in(chunks)
    meta = _meta_in(chunks, meta)
    start_usage = {**_anthropic_usage(usage), "output_tokens": 1}
    message: dict[str, Any] = {
        "id": meta.id or message_id,
        "type": "message",
        "role": "assistant",
        "model": meta.model or model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    frames = [
        _event("message_start", {"type": "message_start", "message": message}),
        _event("ping", {"type": "ping"}),
    ]

    def delta(at: int, value: dict[str, Any]) -> bytes:
        payload = {"type": "content_block_delta", "index": at, "delta": value}
        return _event("content_block_delta", payload)

    for position, chunk in enumerate(chunks):
        if isinstance(chunk, BlockStart):
            block: dict[str, Any]
            if chunk.block_type == "text":
                block = {"type": "text", "text": ""}
            elif chunk.block_type == "reasoning":
                block = {"type": "thinking", "thinking": "", "signature": ""}
            else:
                first = _first_tool_delta(chunks, position, chunk.index)
                block = {
                    "type": "tool_use",
                    "id": first.id if first else "",
                    "name": (first.name or "") if first else "",
                    "input": {},
                }
            payload = {"type": "content_block_start", "index": chunk.index, "content_block": block}
            frames.append(_event("content_block_start", payload))
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
            frames.append(_event("content_block_stop", stop))
        elif isinstance(chunk, Finish):
            reason = _wire_reason(chunk, _ANTHROPIC_STOP)
            payload = {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": meta.stop_sequence},
                "usage": {"output_tokens": usage.output_tokens if usage else 0},
            }
            frames.append(_event("message_delta", payload))
            frames.append(_event("message_stop", {"type": "message_stop"}))
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
    meta = _meta_in(chunks, meta)
    body = {
        "id": meta.id or message_id,
        "type": "message",
        "role": "assistant",
        "model": meta.model or model,
        "content": content,
        "stop_reason": _wire_reason(_finish_in(chunks), _ANTHROPIC_STOP),
        "stop_sequence": meta.stop_sequence,
        "usage": _anthropic_usage(_usage_in(chunks)),
    }
    return _json(body)


# -- OpenAI Responses ---------------------------------------------------------------------

NAMESPACE_SEPARATOR = "."
"""How a namespaced Responses tool (``responses-lite``) is named in agentreel chunks:
``<namespace>.<name>``; the Responses encoder splits it back into both fields."""


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
        frames.append(_event(kind, {"type": kind, "sequence_number": len(frames), **payload}))

    usage = _usage_in(chunks)
    finish = _finish_in(chunks)
    meta = _meta_in(chunks, meta)
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
                first = _first_tool_delta(chunks, position, chunk.index)
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
    meta = _meta_in(chunks, meta)
    _, done = _responses_items(chunks, response_id, namespaced, meta)
    status = _responses_status(_finish_in(chunks))
    return _json(_response_object(meta, response_id, model, status, done, _usage_in(chunks)))
