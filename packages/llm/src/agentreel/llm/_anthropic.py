"""The ``anthropic`` provider: Messages streaming through the official ``anthropic`` SDK.

Mapping of the raw stream events to chunks:

- ``message_start`` → input (and cache) token counts;
- ``content_block_start/delta/stop`` → one agentreel block per wire block: ``text``
  (``text_delta``), ``thinking`` → reasoning (``thinking_delta``; its ``signature_delta``
  kept as the ``ReasoningPart``'s signature),
  ``tool_use`` → tool-call (``input_json_delta`` pieces; a call that streamed no input
  gets ``{}``); other block types (server tools, redacted thinking) are skipped;
- ``message_delta`` → stop reason and output tokens; ``message_stop`` → ``usage`` then
  ``finish``: ``end_turn``/``stop_sequence``/``pause_turn`` → stop, ``tool_use`` →
  tool-calls, ``max_tokens``/``model_context_window_exceeded`` → max-tokens, ``refusal``
  and anything else → error (code = the wire reason).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic

from agentreel.llm._chunks import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    FinishReason,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from agentreel.llm._identity import identity_headers, send_identity_setting
from agentreel.llm._messages import ReasoningPart as _ReasoningPart
from agentreel.llm._messages import TextPart, ToolCallPart, ToolResultPart, ToolSpec
from agentreel.llm._options import GenerateOptions
from agentreel.llm._retry import RetryNotice
from agentreel.llm._sdk_common import (
    ProviderLabel,
    SdkErrorTypes,
    SdkProvider,
    stub_settings,
)
from agentreel.llm.exceptions import StreamInterruptedError

__all__ = [
    "AnthropicProvider",
    "create_provider",
    "create_stub_provider",
    "to_anthropic_messages",
    "to_anthropic_tools",
]

_SDK_ERRORS = SdkErrorTypes(
    status=anthropic.APIStatusError,
    timeout=anthropic.APITimeoutError,
    connection=anthropic.APIConnectionError,
    api=anthropic.APIError,
)
_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "max-tokens",
    "model_context_window_exceeded": "max-tokens",
}


def to_anthropic_messages(options: GenerateOptions) -> tuple[str, list[dict[str, Any]]]:
    """(system prompt, messages): tool results become ``tool_result`` blocks in a user turn.

    System-role messages join the system prompt; consecutive user-side messages (user text
    and tool results) merge into one user turn, as the API expects. Reasoning parts are
    dropped: the API accepts thinking blocks back only with their signature.
    """
    system_parts = [options.system] if options.system else []
    wire: list[dict[str, Any]] = []
    for message in options.messages:
        if message.role == "system":
            system_parts.append(message.text)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, TextPart):
                if part.text:
                    blocks.append({"type": "text", "text": part.text})
            elif isinstance(part, ToolCallPart):
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": part.id,
                        "name": part.name,
                        "input": _tool_input(part.arguments),
                    }
                )
            elif isinstance(part, ToolResultPart):
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": part.call_id,
                    "content": part.content,
                }
                if part.is_error:
                    result["is_error"] = True
                blocks.append(result)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    for turn in wire:
        if turn["role"] == "user":  # the API wants tool results before any text in a turn
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return "\n\n".join(system_parts), wire


def _tool_input(arguments: str) -> Any:
    if not arguments.strip():
        return {}
    try:
        return json.loads(arguments)
    except ValueError:
        return {"_raw_arguments": arguments}


def to_anthropic_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """Tool specs as Messages API tools (``input_schema``)."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.parameters or {"type": "object", "properties": {}},
        }
        for tool in tools
    ]


class _Block:
    __slots__ = ("call_id", "index", "kind", "name", "parts", "signature")

    def __init__(self, index: int, kind: str, call_id: str = "", name: str = "") -> None:
        self.index = index
        self.kind = kind
        self.call_id = call_id
        self.name = name
        self.parts: list[str] = []
        self.signature = ""


class AnthropicStreamMapper:
    """Turns raw Messages stream events into agentreel chunks, one at a time."""

    def __init__(self) -> None:
        self._next_block = 0
        self._blocks: dict[int, _Block] = {}
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
            block = _Block(index, "text")
            out: list[Chunk] = [BlockStart(index=index, block_type="text")]
            if content.text:
                block.parts.append(content.text)
                out.append(TextDelta(index=index, text=content.text))
        elif kind == "thinking":
            block = _Block(index, "reasoning")
            out = [BlockStart(index=index, block_type="reasoning")]
            if content.thinking:
                block.parts.append(content.thinking)
                out.append(ReasoningDelta(index=index, text=content.thinking))
            block.signature = str(getattr(content, "signature", None) or "")
        elif kind == "tool_use":
            block = _Block(index, "tool-call", str(content.id), str(content.name))
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
        if block is None:
            return []
        text = "".join(block.parts)
        if block.kind == "text":
            return [BlockEnd(index=block.index, block=TextPart(text))]
        if block.kind == "reasoning":
            signed = _ReasoningPart(text, signature=block.signature or None)
            return [BlockEnd(index=block.index, block=signed)]
        out: list[Chunk] = []
        if not text:
            text = "{}"
            out.append(ToolCallDelta(index=block.index, id=block.call_id, arguments_delta="{}"))
        out.append(
            BlockEnd(
                index=block.index,
                block=ToolCallPart(id=block.call_id, name=block.name, arguments=text),
            )
        )
        return out

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
            raise StreamInterruptedError(
                "stream_cut",
                None,
                f"the stream from {label.where()} ended after {self.events} events without "
                "message_stop. The call did not finish; retry it.",
            )
        out: list[Chunk] = []
        for wire_index in sorted(self._blocks, key=lambda k: self._blocks[k].index):
            out += self._stop(wire_index)  # blocks the server never stopped
        out.append(self._usage())
        reason = _FINISH.get(self.stop_reason)
        if reason is None:
            out.append(
                Finish(
                    reason="error",
                    code=self.stop_reason,
                    message=f"the model stopped with stop_reason {self.stop_reason!r}",
                )
            )
        else:
            out.append(Finish(reason=reason))
        return out


class AnthropicProvider(SdkProvider[anthropic.AsyncAnthropic]):
    """Streams Messages through ``anthropic.AsyncAnthropic`` (SDK retries off; ours on)."""

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        thinking_budget: int | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_retries: int = 4,
        retry_initial_delay: float = 0.5,
        retry_max_delay: float = 8.0,
        retry_budget: float = 60.0,
        on_retry: Callable[[RetryNotice], None] | None = None,
        send_identity: bool | str = False,
        provider_name: str = "anthropic",
        key_env: str = "ANTHROPIC_API_KEY",
        base_url_env: str = "ANTHROPIC_BASE_URL",
    ) -> None:
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self.send_identity = send_identity_setting(send_identity)
        super().__init__(
            model=model,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_retries=max_retries,
            retry_initial_delay=retry_initial_delay,
            retry_max_delay=retry_max_delay,
            retry_budget=retry_budget,
            on_retry=on_retry,
            provider_name=provider_name,
            key_env=key_env,
            base_url_env=base_url_env,
            default_base_url="https://api.anthropic.com",
            errors=_SDK_ERRORS,
        )

    def _make_client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=self._api_key,
            base_url=self.base_url,
            max_retries=0,
            timeout=self._http_timeout(),
        )

    def request_body(self, options: GenerateOptions) -> dict[str, Any]:
        """The keyword arguments for ``messages.create`` (without ``stream``)."""
        system, messages = to_anthropic_messages(options)
        body: dict[str, Any] = {
            "model": options.model or self.model or "",
            "messages": messages,
            "max_tokens": options.max_tokens or self.max_tokens,
        }
        if system:
            body["system"] = system
        if options.tools:
            body["tools"] = to_anthropic_tools(options.tools)
        if options.temperature is not None:
            # This SDK generation has no `temperature` parameter; send it as a raw field.
            body["extra_body"] = {"temperature": options.temperature}
        if options.stop:
            body["stop_sequences"] = list(options.stop)
        if self.thinking_budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        return body

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Chunk]:
        """Stream one call; raises a typed ``LlmError`` on failure (see module docstring)."""
        body = self.request_body(options)
        client = self._client_for_call(body)
        extra_headers = identity_headers(options) if self.send_identity else None

        async def open_once() -> anthropic.AsyncStream[Any]:
            created: anthropic.AsyncStream[Any] = await client.messages.create(
                stream=True, extra_headers=extra_headers, **body
            )
            return created

        mapper = AnthropicStreamMapper()
        async for chunk in self._stream_through(open_once, body["model"], mapper):
            yield chunk


def create_provider(**settings: Any) -> AnthropicProvider:
    """Entry point ``anthropic``: settings as ``AnthropicProvider`` keyword arguments."""
    return AnthropicProvider(**settings)


def create_stub_provider(**settings: Any) -> AnthropicProvider:
    """Entry point ``stub-anthropic``: the anthropic adapter pointed at the stub server."""
    return AnthropicProvider(
        **stub_settings(settings, "stub-anthropic", lambda url: url.removesuffix("/v1"))
    )
