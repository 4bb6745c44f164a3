"""The ``gemini`` provider: Gemini API streaming through the official ``google-genai`` SDK.

``client.aio.models.generate_content_stream`` (``:streamGenerateContent?alt=sse``) with the
SDK's own retries off (ours on, as for the other adapters), on an ``httpx2`` client of our
own (the SDK would take aiohttp when it is installed, with retries of its own). The wire
rules — messages → ``contents``, responses → chunks — are ``agentreel.llm.wire``'s (``_gemini``)
(the proxy and the stub server use the same); each SDK response is mapped from its wire
form (``model_dump(by_alias=True)``). The ``stub-gemini`` provider is this adapter pointed
at the stub model server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

import httpx2
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from agentreel.llm._chunks import Chunk
from agentreel.llm._options import GenerateOptions
from agentreel.llm._sdk_common import SdkDefaults, SdkErrorTypes, SdkProvider, stub_settings
from agentreel.llm.wire import GeminiStreamMapper, to_gemini_contents, to_gemini_tools

__all__ = ["GeminiProvider", "create_provider", "create_stub_provider"]

_SDK_ERRORS = SdkErrorTypes(
    status=genai_errors.APIError,
    timeout=httpx2.TimeoutException,
    connection=httpx2.TransportError,
    api=genai_errors.APIError,
    http_timeout=httpx2.TimeoutException,
    http_transport=httpx2.TransportError,
    timeout_type=httpx2.Timeout,
)


# The HTTP responses of the stream being opened: the SDK never closes a response whose
# stream the consumer left early (its generators are only finalized by the garbage
# collector), so the adapter closes them itself. Set around the open, like the openai
# adapter's SSE watch, so concurrent calls on one client each see their own.
_OPENING: ContextVar[list[httpx2.Response] | None] = ContextVar(
    "agentreel_gemini_opening", default=None
)


async def _seen_response(response: httpx2.Response) -> None:
    opened = _OPENING.get()
    if opened is not None:
        opened.append(response)


class _Opened:
    """An SDK stream whose first response was already read (so that an HTTP error, which
    the SDK raises only when the stream is first read, is an error of opening: retried),
    closing its HTTP responses when closed."""

    def __init__(
        self, first: Any, rest: AsyncIterator[Any] | None, responses: list[httpx2.Response]
    ) -> None:
        self._first: list[Any] = [first] if rest is not None else []
        self._rest = rest
        self._responses = responses

    def __aiter__(self) -> _Opened:
        return self

    async def __anext__(self) -> Any:
        if self._first:
            return self._first.pop()
        if self._rest is None:
            raise StopAsyncIteration
        return await self._rest.__anext__()

    async def close(self) -> None:
        for response in self._responses:
            await response.aclose()
        close = getattr(self._rest, "aclose", None)
        if close is not None:
            await close()


class _Client:
    """The SDK client and the httpx2 client under it (closed together)."""

    def __init__(self, sdk: genai.Client, http: httpx2.AsyncClient) -> None:
        self.sdk = sdk
        self.http = http

    async def close(self) -> None:
        await self.http.aclose()


class GeminiProvider(SdkProvider[_Client]):
    """Streams ``generateContent`` through ``google.genai.Client`` (SDK retries off; ours on)."""

    DEFAULTS = SdkDefaults(
        "gemini",
        "GEMINI_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        "https://generativelanguage.googleapis.com",
        _SDK_ERRORS,
    )

    def _make_client(self) -> _Client:
        timeout = self._http_timeout()

        async def keep_timeout(request: httpx2.Request) -> None:
            # The SDK sends every request with its own timeout (none unless HttpOptions
            # sets one, in whole milliseconds for all phases): ours (read and connect) wins.
            request.extensions["timeout"] = timeout.as_dict()

        http = httpx2.AsyncClient(
            timeout=timeout,
            event_hooks={"request": [keep_timeout], "response": [_seen_response]},
        )
        options = types.HttpOptions(
            base_url=self.base_url,
            api_version="v1beta",
            httpx_async_client=http,
            retry_options=None,
        )
        return _Client(genai.Client(api_key=self.settings.api_key, http_options=options), http)

    def request_body(self, options: GenerateOptions) -> dict[str, Any]:
        """The call in wire form: ``model``, ``contents``, ``systemInstruction``, ``tools``,
        ``generationConfig`` (what ``generate_content_stream`` is given, validated)."""
        system, contents = to_gemini_contents(options)
        body: dict[str, Any] = {"model": self._model_for(options), "contents": contents}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        if options.tools:
            body["tools"] = to_gemini_tools(options.tools)
        config: dict[str, Any] = {}
        if options.temperature is not None:
            config["temperature"] = options.temperature
        if options.max_tokens is not None:
            config["maxOutputTokens"] = options.max_tokens
        if options.stop:
            config["stopSequences"] = list(options.stop)
        if config:
            body["generationConfig"] = config
        return body

    def _config(self, body: dict[str, Any], headers: dict[str, str] | None) -> Any:
        generation = body.get("generationConfig", {})
        system = body.get("systemInstruction")
        return types.GenerateContentConfig(
            system_instruction=types.Content.model_validate(system) if system else None,
            tools=[types.Tool.model_validate(tool) for tool in body.get("tools", [])] or None,
            temperature=generation.get("temperature"),
            max_output_tokens=generation.get("maxOutputTokens"),
            stop_sequences=generation.get("stopSequences"),
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            http_options=types.HttpOptions(headers=headers) if headers else None,
        )

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Chunk]:
        """Stream one call; raises a typed ``LlmError`` on failure (see the package README)."""
        body = self.request_body(options)
        client = self._client_for_call(body)
        headers = self._identity_headers(options)
        contents = [types.Content.model_validate(content) for content in body["contents"]]
        config = self._config(body, headers)

        async def open_once() -> _Opened:
            responses: list[httpx2.Response] = []
            opening = _OPENING.set(responses)
            try:
                stream = await client.sdk.aio.models.generate_content_stream(
                    model=body["model"], contents=contents, config=config
                )
                iterator = stream.__aiter__()
                try:
                    first = await iterator.__anext__()
                except StopAsyncIteration:
                    return _Opened(None, None, responses)
                return _Opened(first, iterator, responses)
            except BaseException:
                for response in responses:
                    await response.aclose()
                raise
            finally:
                _OPENING.reset(opening)

        mapper = _SdkMapper()
        async for chunk in self._stream_through(open_once, body["model"], mapper):
            yield chunk


class _SdkMapper(GeminiStreamMapper):
    """The wire mapper fed SDK response objects, through their wire (camelCase) form."""

    def feed(self, data: Any) -> list[Chunk]:
        if isinstance(data, types.GenerateContentResponse):
            data = data.model_dump(mode="json", by_alias=True, exclude_none=True)
        return super().feed(data)


def create_provider(**settings: Any) -> GeminiProvider:
    """Entry point ``gemini``: settings as ``GeminiProvider`` keyword arguments."""
    return GeminiProvider(**settings)


def create_stub_provider(**settings: Any) -> GeminiProvider:
    """Entry point ``stub-gemini``: the gemini adapter pointed at the stub model server."""
    return GeminiProvider(
        **stub_settings(settings, "stub-gemini", lambda url: url.removesuffix("/v1beta"))
    )
