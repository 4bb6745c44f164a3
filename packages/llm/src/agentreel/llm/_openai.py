"""The ``openai`` provider: Chat Completions streaming through the official ``openai`` SDK.

Works with any OpenAI-compatible server through ``base_url``; the ``stub`` provider is
this adapter pointed at the stub model server. Mapping of the wire stream to chunks:

- ``delta.content`` → one text block; ``delta.reasoning_content`` / ``delta.reasoning``
  (OpenAI-compatible servers that stream reasoning) → one reasoning block;
- ``delta.tool_calls[k]`` → one tool-call block per wire index ``k``: the first delta
  brings ``id`` and ``name``, later ones argument pieces, possibly interleaved between
  calls; a call that streamed no arguments gets ``{}``;
- ``finish_reason`` ends every open block (the wire has no per-block end), the final
  usage chunk (``stream_options.include_usage``) becomes ``usage``, then ``finish``:
  ``stop`` → stop, ``tool_calls``/``function_call`` → tool-calls, ``length`` →
  max-tokens, ``content_filter`` and anything else → error (code = the wire reason).
- ``data: [DONE]`` without any ``finish_reason`` (some OpenAI-compatible routers, e.g.
  OpenRouter-routed models) is a finished stream: ``tool-calls`` when it streamed tool
  calls, else ``stop``. A stream that ends with neither was cut (``StreamInterruptedError``).
- an error chunk mid-stream (``data: {"error": {...}}``) keeps what came before it — the
  deltas already streamed and the usage seen so far, including usage sent in the error
  chunk itself — then raises the typed error of its code (see ``stream_error``).

The SDK's stream iterator swallows ``[DONE]`` and drops the rest of an error chunk, so the
client class wraps the SDK's SSE decoder to watch for both (``WireWatch``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from typing import Any, Unpack

import openai
from openai._streaming import ServerSentEvent, SSEBytesDecoder, SSEDecoder

from agentreel.llm._chunks import (
    Chunk,
)
from agentreel.llm._messages import (
    Message,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from agentreel.llm._options import GenerateOptions
from agentreel.llm._sdk_common import (
    STUB_API_KEY,
    ClientArgs,
    SdkDefaults,
    SdkProvider,
    sdk_error_types,
    stub_settings,
)
from agentreel.llm.wire._chat_mapper import OpenAIStreamMapper, WireWatch

__all__ = [
    "STUB_API_KEY",
    "OpenAIProvider",
    "create_provider",
    "create_stub_provider",
    "to_openai_messages",
    "to_openai_tools",
]

_SDK_ERRORS = sdk_error_types(openai)


def to_openai_messages(options: GenerateOptions) -> list[dict[str, Any]]:
    """agentreel messages as Chat Completions messages (tool results → role ``tool``)."""
    wire: list[dict[str, Any]] = []
    if options.system:
        wire.append({"role": "system", "content": options.system})
    for message in options.messages:
        wire.extend(_convert_message(message))
    return wire


def _convert_message(message: Message) -> list[dict[str, Any]]:
    text = "".join(p.text for p in message.content if isinstance(p, TextPart))
    if message.role in ("system", "user"):
        out: list[dict[str, Any]] = []
        if text or not any(isinstance(p, ToolResultPart) for p in message.content):
            out.append({"role": message.role, "content": text})
        out += [_tool_result(p) for p in message.content if isinstance(p, ToolResultPart)]
        return out
    if message.role == "tool":
        results = [_tool_result(p) for p in message.content if isinstance(p, ToolResultPart)]
        return results + ([{"role": "user", "content": text}] if text else [])
    calls = [p for p in message.content if isinstance(p, ToolCallPart)]
    assistant: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        assistant["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments or "{}"},
            }
            for call in calls
        ]
    elif not text:
        assistant["content"] = ""
    return [assistant]


def _tool_result(part: ToolResultPart) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": part.call_id, "content": part.content}


def to_openai_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """Tool specs as Chat Completions ``function`` tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters or {"type": "object", "properties": {}},
            },
        }
        for tool in tools
    ]


# The watch of the stream being opened: set around ``chat.completions.create`` (which makes
# the decoder) so each stream gets its own, even with concurrent calls on one client.
_OPENING_WATCH: ContextVar[WireWatch | None] = ContextVar("agentreel_openai_watch", default=None)


class _WatchingDecoder:
    """The SDK's SSE decoder, showing every event to a ``WireWatch`` on the way through."""

    def __init__(self, inner: SSEDecoder | SSEBytesDecoder, watch: WireWatch) -> None:
        self._inner = inner
        self._watch = watch

    def iter_bytes(self, iterator: Iterator[bytes]) -> Iterator[ServerSentEvent]:
        for sse in self._inner.iter_bytes(iterator):
            self._watch.see_data(sse.data)
            yield sse

    async def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[ServerSentEvent]:
        async for sse in self._inner.aiter_bytes(iterator):
            self._watch.see_data(sse.data)
            yield sse


class _WatchedOpenAI(openai.AsyncOpenAI):
    """``AsyncOpenAI`` whose streams report ``[DONE]`` and error-chunk usage to their mapper.

    ``_make_sse_decoder`` is the SDK's one seam between the HTTP bytes and its iterator;
    the adapter tests (real SDK, real server) fail if an SDK release moves it.
    """

    def _make_sse_decoder(self) -> SSEDecoder | SSEBytesDecoder:
        inner = super()._make_sse_decoder()
        watch = _OPENING_WATCH.get()
        return inner if watch is None else _WatchingDecoder(inner, watch)


class OpenAIProvider(SdkProvider[openai.AsyncOpenAI]):
    """Streams Chat Completions through ``openai.AsyncOpenAI`` (SDK retries off; ours on)."""

    DEFAULTS = SdkDefaults(
        "openai", "OPENAI_API_KEY", "OPENAI_BASE_URL", "https://api.openai.com/v1", _SDK_ERRORS
    )

    def __init__(
        self,
        *,
        include_usage: bool = True,
        max_tokens_param: str = "max_completion_tokens",
        **settings: Unpack[ClientArgs],
    ) -> None:
        if max_tokens_param not in ("max_completion_tokens", "max_tokens"):
            raise ValueError(
                "max_tokens_param must be 'max_completion_tokens' or 'max_tokens', "
                f"got {max_tokens_param!r}"
            )
        self.include_usage = include_usage
        self.max_tokens_param = max_tokens_param
        super().__init__(**settings)

    def _make_client(self) -> openai.AsyncOpenAI:
        return _WatchedOpenAI(
            api_key=self.settings.api_key,
            base_url=self.base_url,
            max_retries=0,
            timeout=self._http_timeout(),
        )

    def request_body(self, options: GenerateOptions) -> dict[str, Any]:
        """The keyword arguments for ``chat.completions.create`` (without ``stream``)."""
        body: dict[str, Any] = {
            "model": self._model_for(options),
            "messages": to_openai_messages(options),
        }
        if options.tools:
            body["tools"] = to_openai_tools(options.tools)
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.max_tokens is not None:
            body[self.max_tokens_param] = options.max_tokens
        if options.stop:
            body["stop"] = list(options.stop)
        if self.include_usage:
            body["stream_options"] = {"include_usage": True}
        return body

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Chunk]:
        """Stream one call; raises a typed ``LlmError`` on failure (see module docstring)."""
        body = self.request_body(options)
        client = self._client_for_call(body)
        extra_headers = self._identity_headers(options)

        mapper = OpenAIStreamMapper()

        async def open_once() -> openai.AsyncStream[Any]:
            watching = _OPENING_WATCH.set(mapper.wire)
            try:
                created: openai.AsyncStream[Any] = await client.chat.completions.create(
                    stream=True, extra_headers=extra_headers, **body
                )
            finally:
                _OPENING_WATCH.reset(watching)
            return created

        async for chunk in self._stream_through(open_once, body["model"], mapper):
            yield chunk


def create_provider(**settings: Any) -> OpenAIProvider:
    """Entry point ``openai``: settings as ``OpenAIProvider`` keyword arguments."""
    return OpenAIProvider(**settings)


def create_stub_provider(**settings: Any) -> OpenAIProvider:
    """Entry point ``stub``: the openai adapter pointed at a running stub model server.

    ``base_url`` (or ``AGENTREEL_STUB_URL``) is the server's root URL as it prints it;
    ``/v1`` is appended when missing. The key is the fixed, non-secret ``STUB_API_KEY``.
    """
    return OpenAIProvider(
        **stub_settings(settings, "stub", lambda url: url if url.endswith("/v1") else url + "/v1")
    )
