"""The stub's answers on the wire: what a rule streams, as Chat Completions and Messages
SSE frames and non-streaming bodies, and as agentreel chunks (for the Responses API and
the non-streaming bodies, encoded by ``agentreel.llm.wire``)."""

from __future__ import annotations

import json
from typing import Any

from agentreel.llm._chunks import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from agentreel.llm._messages import ReasoningPart, TextPart, ToolCallPart
from agentreel.llm.stub._rules import Rule, UsageRule
from agentreel.llm.wire import (
    CHAT_FINISH_REASONS,
    CREATED,
    MESSAGES_STOP_REASONS,
    event_frame,
    json_bytes,
)
from agentreel.llm.wire._messages import message_start_frames

DEFAULT_INPUT_TOKENS = 16


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
        return b"data: " + json_bytes(chunk) + b"\n\n"

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
    frames.append(frame({}, CHAT_FINISH_REASONS[rule.finish_name]))
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
        frames.append(b"data: " + json_bytes(final) + b"\n\n")
    frames.append(b"data: [DONE]\n\n")
    return frames


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
    frames = message_start_frames(message_id, str(body.get("model", "")), start_usage)
    index = 0

    def start(block: dict[str, Any], at: int) -> bytes:
        payload = {"type": "content_block_start", "index": at, "content_block": block}
        return event_frame("content_block_start", payload)

    def delta(at: int, value: dict[str, Any]) -> bytes:
        payload = {"type": "content_block_delta", "index": at, "delta": value}
        return event_frame("content_block_delta", payload)

    def stop(at: int) -> bytes:
        return event_frame("content_block_stop", {"type": "content_block_stop", "index": at})

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
        event_frame(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": MESSAGES_STOP_REASONS[rule.finish_name],
                    "stop_sequence": None,
                },
                "usage": delta_usage,
            },
        )
    )
    frames.append(event_frame("message_stop", {"type": "message_stop"}))
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
                "finish_reason": CHAT_FINISH_REASONS[rule.finish_name],
            }
        ],
        "usage": _openai_usage(usage_for(rule)),
    }
    return json_bytes(completion)


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
        "stop_reason": MESSAGES_STOP_REASONS[rule.finish_name],
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.input_tokens,
            "cache_creation_input_tokens": usage.cache_write_tokens or 0,
            "cache_read_input_tokens": usage.cache_read_tokens or 0,
            "output_tokens": usage.output_tokens,
        },
    }
    return json_bytes(message)


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
