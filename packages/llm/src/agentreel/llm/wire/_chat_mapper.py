"""Chat Completions stream objects → agentreel chunks: the rules the ``openai`` adapter and
the proxy's record side share (the mapping is in ``agentreel.llm._openai``'s docstring).

SDK-free: the adapter feeds it the SDK's ``ChatCompletionChunk`` objects, the proxy the
decoded wire JSON wrapped for attribute access; both show it each event's raw ``data``
(``WireWatch``) for what the SDK's iterator does not pass on.
"""

from __future__ import annotations

import json
from typing import Any

from agentreel.llm._chunks import (
    BlockEnd,
    BlockStart,
    Chunk,
    FinishReason,
    ToolCallDelta,
    Usage,
)
from agentreel.llm._label import ProviderLabel
from agentreel.llm._messages import ReasoningPart, TextPart, ToolCallPart
from agentreel.llm.wire._common import finish_for, grow, stream_cut, wrap

__all__ = ["OpenAIStreamMapper", "WireWatch"]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "length": "max-tokens",
}


class _ToolState:
    __slots__ = ("arguments", "block", "id", "name")

    def __init__(self, block: int, call_id: str, name: str) -> None:
        self.block = block
        self.id = call_id
        self.name = name
        self.arguments: list[str] = []


class WireWatch:
    """What the SDK's stream iterator does not pass on: whether ``data: [DONE]`` arrived
    (a finished stream, even without a ``finish_reason``) and the usage of an error chunk."""

    __slots__ = ("done", "error_usage")

    def __init__(self) -> None:
        self.done = False
        self.error_usage: Usage | None = None

    def see_data(self, data: str) -> None:
        """What one event's ``data`` tells (the adapter's SSE decoder and the proxy's
        record side both show it the raw SSE data)."""
        if data.startswith("[DONE]"):
            self.done = True
        elif '"error"' in data and '"usage"' in data:
            try:
                usage = json.loads(data).get("usage")
                if isinstance(usage, dict):
                    self.error_usage = _usage(wrap(usage))
            except (ValueError, AttributeError, TypeError):
                pass  # the SDK raises for the error chunk itself; its usage is a bonus


class OpenAIStreamMapper:
    """Turns ``ChatCompletionChunk`` objects into agentreel chunks, one at a time."""

    def __init__(self) -> None:
        self.wire = WireWatch()
        self._next_block = 0
        self._text: tuple[int, list[str]] | None = None
        self._reasoning: tuple[int, list[str]] | None = None
        self._tools: dict[int, _ToolState] = {}
        self._ended = False
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.events = 0
        # Chat Completions has no end-of-message event: the stream simply ends.
        self.stopped = False

    def _new_block(self) -> int:
        block = self._next_block
        self._next_block += 1
        return block

    def feed(self, chunk: Any) -> list[Chunk]:
        self.events += 1
        out: list[Chunk] = []
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = _usage(usage)
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) != 0:
                continue
            delta = choice.delta
            if delta is not None and not self._ended:
                out += self._delta(delta)
            if choice.finish_reason is not None and self.finish_reason is None:
                self.finish_reason = str(choice.finish_reason)
                out += self._end_blocks()
        return out

    def _delta(self, delta: Any) -> list[Chunk]:
        out: list[Chunk] = []
        reasoning = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
        if isinstance(reasoning, str) and reasoning:
            self._reasoning, grown = grow(self._reasoning, "reasoning", reasoning, self._new_block)
            out += grown
        for text in (getattr(delta, "content", None), getattr(delta, "refusal", None)):
            if isinstance(text, str) and text:
                self._text, grown = grow(self._text, "text", text, self._new_block)
                out += grown
        for call in getattr(delta, "tool_calls", None) or []:
            wire_index = int(call.index) if call.index is not None else len(self._tools)
            function = call.function
            name = function.name if function is not None else None
            arguments = (function.arguments if function is not None else None) or ""
            state = self._tools.get(wire_index)
            if state is None:
                block = self._new_block()
                state = _ToolState(block, call.id or f"call_{wire_index}", name or "")
                self._tools[wire_index] = state
                out.append(BlockStart(index=block, block_type="tool-call"))
                out.append(
                    ToolCallDelta(
                        index=block, id=state.id, name=state.name, arguments_delta=arguments
                    )
                )
                if arguments:
                    state.arguments.append(arguments)
                continue
            if name and not state.name:
                state.name = name
            if arguments:
                state.arguments.append(arguments)
                out.append(ToolCallDelta(index=state.block, id=state.id, arguments_delta=arguments))
        return out

    def _end_blocks(self) -> list[Chunk]:
        self._ended = True
        ends: list[tuple[int, list[Chunk]]] = []
        if self._reasoning is not None:
            block, parts = self._reasoning
            ends.append((block, [BlockEnd(index=block, block=ReasoningPart("".join(parts)))]))
        if self._text is not None:
            block, parts = self._text
            ends.append((block, [BlockEnd(index=block, block=TextPart("".join(parts)))]))
        for state in self._tools.values():
            closing: list[Chunk] = []
            arguments = "".join(state.arguments)
            if not arguments:
                arguments = "{}"
                closing.append(ToolCallDelta(index=state.block, id=state.id, arguments_delta="{}"))
            part = ToolCallPart(id=state.id, name=state.name, arguments=arguments)
            closing.append(BlockEnd(index=state.block, block=part))
            ends.append((state.block, closing))
        return [chunk for _, group in sorted(ends, key=lambda e: e[0]) for chunk in group]

    def salvage(self) -> list[Chunk]:
        """What a stream that failed mid-way still tells: the usage seen so far."""
        usage = self.usage or self.wire.error_usage
        return [usage] if usage is not None else []

    def finish(self, label: ProviderLabel) -> list[Chunk]:
        """The closing ``usage`` and ``finish``; a stream with neither a finish_reason nor
        ``[DONE]`` was cut."""
        closing: list[Chunk] = []
        if self.finish_reason is None:
            if not self.wire.done:
                raise stream_cut(
                    label.where(),
                    self.events,
                    "events",
                    "with neither a finish_reason nor `data: [DONE]`: the connection closed "
                    "before the stream finished",
                )
            # [DONE] is the server saying the stream is complete: it just named no reason.
            self.finish_reason = "tool_calls" if self._tools else "stop"
            closing = self._end_blocks()
        out: list[Chunk] = closing + ([self.usage] if self.usage is not None else [])
        out.append(finish_for(self.finish_reason, _FINISH, "finish_reason"))
        return out


def _usage(usage: Any) -> Usage:
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    cached = getattr(prompt_details, "cached_tokens", None) if prompt_details else None
    reasoning = (
        getattr(completion_details, "reasoning_tokens", None) if completion_details else None
    )
    return Usage(
        input_tokens=int(usage.prompt_tokens or 0),
        output_tokens=int(usage.completion_tokens or 0),
        cache_read_tokens=int(cached) if cached else None,
        reasoning_tokens=int(reasoning) if reasoning else None,
    )
