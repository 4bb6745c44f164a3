"""Anthropic Messages stream events → agentreel chunks: the rules the ``anthropic`` adapter
and the proxy's record side share (the mapping is in ``agentreel.llm._anthropic``'s
docstring).

SDK-free: the adapter feeds it the SDK's raw stream events, the proxy the decoded wire
JSON wrapped for attribute access.
"""

from __future__ import annotations

import json
from typing import Any

from agentreel.llm._chunks import (
    BlockStart,
    Chunk,
    FinishReason,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from agentreel.llm._label import ProviderLabel
from agentreel.llm.wire._common import OpenBlock, finish_for, stream_cut

__all__ = ["AnthropicStreamMapper"]

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "max-tokens",
    "model_context_window_exceeded": "max-tokens",
}


class AnthropicStreamMapper:
    """Turns raw Messages stream events into agentreel chunks, one at a time."""

    def __init__(self) -> None:
        self._next_block = 0
        self._blocks: dict[int, OpenBlock] = {}
        self._skipped: set[int] = set()
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read: int | None = None
        self.cache_write: int | None = None
        self.stop_reason: str | None = None
        self.stopped = False
        self.events = 0

    def feed(self, event: Any) -> list[Chunk]:
        self.events += 1
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self._take_usage(getattr(event.message, "usage", None))
            return []
        if kind == "content_block_start":
            return self._start(int(event.index), event.content_block)
        if kind == "content_block_delta":
            return self._delta(int(event.index), event.delta)
        if kind == "content_block_stop":
            return self._stop(int(event.index))
        if kind == "message_delta":
            reason = getattr(event.delta, "stop_reason", None)
            if reason is not None:
                self.stop_reason = str(reason)
            self._take_usage(getattr(event, "usage", None))
            return []
        if kind == "message_stop":
            self.stopped = True
        return []

    def _take_usage(self, usage: Any) -> None:
        if usage is None:
            return
        if getattr(usage, "input_tokens", None) is not None:
            self.input_tokens = int(usage.input_tokens)
        if getattr(usage, "output_tokens", None) is not None:
            self.output_tokens = int(usage.output_tokens)
        read = getattr(usage, "cache_read_input_tokens", None)
        if read:
            self.cache_read = int(read)
        write = getattr(usage, "cache_creation_input_tokens", None)
        if write:
            self.cache_write = int(write)

    def _start(self, wire_index: int, content: Any) -> list[Chunk]:
        kind = getattr(content, "type", None)
        index = self._next_block
        if kind == "text":
            block = OpenBlock(index, "text")
            out: list[Chunk] = [BlockStart(index=index, block_type="text")]
            if content.text:
                block.parts.append(content.text)
                out.append(TextDelta(index=index, text=content.text))
        elif kind == "thinking":
            block = OpenBlock(index, "reasoning")
            out = [BlockStart(index=index, block_type="reasoning")]
            if content.thinking:
                block.parts.append(content.thinking)
                out.append(ReasoningDelta(index=index, text=content.thinking))
            block.signature = str(getattr(content, "signature", None) or "")
        elif kind == "tool_use":
            block = OpenBlock(index, "tool-call", str(content.id), str(content.name))
            initial = getattr(content, "input", None)
            arguments = json.dumps(initial, separators=(",", ":")) if initial else ""
            if arguments:
                block.parts.append(arguments)
            out = [
                BlockStart(index=index, block_type="tool-call"),
                ToolCallDelta(
                    index=index, id=block.call_id, name=block.name, arguments_delta=arguments
                ),
            ]
        else:
            self._skipped.add(wire_index)
            return []
        self._next_block += 1
        self._blocks[wire_index] = block
        return out

    def _delta(self, wire_index: int, delta: Any) -> list[Chunk]:
        block = self._blocks.get(wire_index)
        if block is None:
            return []
        kind = getattr(delta, "type", None)
        if kind == "text_delta" and block.kind == "text" and delta.text:
            block.parts.append(delta.text)
            return [TextDelta(index=block.index, text=delta.text)]
        if kind == "thinking_delta" and block.kind == "reasoning" and delta.thinking:
            block.parts.append(delta.thinking)
            return [ReasoningDelta(index=block.index, text=delta.thinking)]
        if kind == "signature_delta" and block.kind == "reasoning":
            block.signature += str(delta.signature or "")
            return []
        if kind == "input_json_delta" and block.kind == "tool-call" and delta.partial_json:
            block.parts.append(delta.partial_json)
            return [
                ToolCallDelta(
                    index=block.index, id=block.call_id, arguments_delta=delta.partial_json
                )
            ]
        return []

    def _stop(self, wire_index: int) -> list[Chunk]:
        block = self._blocks.pop(wire_index, None)
        return [] if block is None else block.end()

    def salvage(self) -> list[Chunk]:
        """What a stream that failed mid-way still tells: the usage seen so far."""
        if not (self.input_tokens or self.output_tokens):
            return []
        return [self._usage()]

    def _usage(self) -> Usage:
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read,
            cache_write_tokens=self.cache_write,
        )

    def finish(self, label: ProviderLabel) -> list[Chunk]:
        """The closing ``usage`` and ``finish``; a stream without message_stop was cut."""
        if not self.stopped or self.stop_reason is None:
            raise stream_cut(label.where(), self.events, "events", "without message_stop")
        out: list[Chunk] = []
        for wire_index in sorted(self._blocks, key=lambda k: self._blocks[k].index):
            out += self._stop(wire_index)  # blocks the server never stopped
        out.append(self._usage())
        out.append(finish_for(self.stop_reason, _FINISH, "stop_reason"))
        return out
