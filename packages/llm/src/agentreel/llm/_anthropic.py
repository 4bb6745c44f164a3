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
from collections.abc import AsyncIterator
from typing import Any, Unpack

import anthropic

from agentreel.llm._chunks import (
    Chunk,
)
from agentreel.llm._messages import Message, TextPart, ToolCallPart, ToolResultPart, ToolSpec
from agentreel.llm._options import GenerateOptions, wire_turns
from agentreel.llm._sdk_common import (
    ClientArgs,
    SdkDefaults,
    SdkProvider,
    sdk_error_types,
    stub_settings,
)
from agentreel.llm.wire._messages_mapper import AnthropicStreamMapper

__all__ = [
    "AnthropicProvider",
    "create_provider",
    "create_stub_provider",
    "to_anthropic_messages",
    "to_anthropic_tools",
]

_SDK_ERRORS = sdk_error_types(anthropic)


def to_anthropic_messages(options: GenerateOptions) -> tuple[str, list[dict[str, Any]]]:
    """(system prompt, messages): tool results become ``tool_result`` blocks in a user turn.

    System-role messages join the system prompt; consecutive user-side messages (user text
    and tool results) merge into one user turn, as the API expects. Reasoning parts are
    dropped: the API accepts thinking blocks back only with their signature.
    """
    system, wire = wire_turns(
        options, lambda role: "assistant" if role == "assistant" else "user", _blocks, "content"
    )
    for turn in wire:
        if turn["role"] == "user":  # the API wants tool results before any text in a turn
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return system, wire


def _blocks(message: Message) -> list[dict[str, Any]]:
    """One message's content blocks (reasoning dropped)."""
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
    return blocks


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


class AnthropicProvider(SdkProvider[anthropic.AsyncAnthropic]):
    """Streams Messages through ``anthropic.AsyncAnthropic`` (SDK retries off; ours on)."""

    DEFAULTS = SdkDefaults(
        "anthropic",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "https://api.anthropic.com",
        _SDK_ERRORS,
    )

    def __init__(
        self,
        *,
        max_tokens: int = 4096,
        thinking_budget: int | None = None,
        **settings: Unpack[ClientArgs],
    ) -> None:
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        super().__init__(**settings)

    def _make_client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=self.settings.api_key,
            base_url=self.base_url,
            max_retries=0,
            timeout=self._http_timeout(),
        )

    def request_body(self, options: GenerateOptions) -> dict[str, Any]:
        """The keyword arguments for ``messages.create`` (without ``stream``)."""
        system, messages = to_anthropic_messages(options)
        body: dict[str, Any] = {
            "model": self._model_for(options),
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
        extra_headers = self._identity_headers(options)

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
