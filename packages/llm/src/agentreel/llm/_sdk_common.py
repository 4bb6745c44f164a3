"""What the SDK adapters share: settings, error classification, a per-loop client.

Imported only by the adapter modules. The HTTP client under an SDK is the one that SDK
release is built on (``httpx`` for openai 1-2 and anthropic 0.x, ``httpx2`` after):
``sdk_error_types`` finds it from the SDK itself, so no adapter names either.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar, Generic, Protocol, Self, TypedDict, TypeVar, Unpack

from agentreel.llm._agent_env import AgentEnv
from agentreel.llm._chunks import Chunk
from agentreel.llm._identity import identity_headers, send_identity_setting
from agentreel.llm._label import ProviderLabel
from agentreel.llm._options import GenerateOptions
from agentreel.llm._retry import Failure, RetryNotice, RetryPolicy, open_with_retries
from agentreel.llm.exceptions import (
    AuthenticationError,
    BadRequestError,
    LlmError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
)

ClientT = TypeVar("ClientT")

STUB_API_KEY = "agentreel-stub-not-a-secret"
"""The fixed key the stub providers send: the stub server ignores keys; this is no secret."""


@dataclass(frozen=True, slots=True)
class SdkErrorTypes:
    """The SDK's own exception classes (the SDKs have the same four; ``api`` is the base),
    the errors its HTTP client raises mid-stream (which the SDK passes on unwrapped), and
    that client's ``Timeout`` class (what the SDK's ``timeout=`` takes)."""

    status: type[Exception]
    timeout: type[Exception]
    connection: type[Exception]
    api: type[Exception]
    http_timeout: type[Exception]
    http_transport: type[Exception]
    timeout_type: Any


HTTP_CLIENTS = ("httpx2", "httpx")
"""The HTTP clients the SDK generations are built on: httpx2 (openai 3, anthropic 1-2),
httpx (openai 1-2, anthropic 0.x)."""


def sdk_error_types(sdk: ModuleType) -> SdkErrorTypes:
    """``SdkErrorTypes`` of an SDK module with the openai/anthropic names (``APIError``, ...,
    ``Timeout``): its HTTP client is the one of ``HTTP_CLIENTS`` (imported by the SDK) whose
    ``Timeout`` the SDK re-exports (the SDKs rename their exports' ``__module__``)."""
    http = next(
        (
            module
            for name in HTTP_CLIENTS
            if (module := sys.modules.get(name)) is not None
            and getattr(module, "Timeout", None) is sdk.Timeout
        ),
        None,
    )
    if http is None:
        raise ImportError(
            f"{sdk.__name__} {getattr(sdk, '__version__', '?')} is built on none of "
            f"{', '.join(HTTP_CLIENTS)}; agentreel-llm's adapters support the releases its "
            "extras name (pip install 'agentreel-llm[openai,anthropic]')"
        )
    return SdkErrorTypes(
        status=sdk.APIStatusError,
        timeout=sdk.APITimeoutError,
        connection=sdk.APIConnectionError,
        api=sdk.APIError,
        http_timeout=http.TimeoutException,
        http_transport=http.TransportError,
        timeout_type=sdk.Timeout,
    )


def setting_or_env(value: str | None, env_name: str) -> str | None:
    """An explicit setting wins; else the environment variable; empty counts as unset."""
    if value:
        return value
    return os.environ.get(env_name) or None


def make_policy(
    max_retries: int, initial_delay: float, max_delay: float, budget: float
) -> RetryPolicy:
    if max_retries < 0:
        raise ValueError(f"max_retries must be >= 0, got {max_retries}")
    return RetryPolicy(
        max_retries=max_retries, initial_delay=initial_delay, max_delay=max_delay, budget=budget
    )


def _error_body(exc: Exception) -> Any:
    """The error's decoded body: ``body`` (openai, anthropic) or ``details`` (google-genai)."""
    body = getattr(exc, "body", None)
    return body if body is not None else getattr(exc, "details", None)


def _status_code(exc: Exception) -> int:
    """The HTTP status: ``status_code`` (openai, anthropic) or ``code`` (google-genai)."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(exc, "code", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else 0


def _server_message(exc: Exception) -> str:
    body = _error_body(exc)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return str(getattr(exc, "message", None) or exc)


def _headers(exc: Exception) -> dict[str, str]:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return {}
    return {str(k).lower(): str(v) for k, v in headers.items()}


def classify_open_error(
    exc: Exception, sdk: SdkErrorTypes, label: ProviderLabel, model: str
) -> Failure | None:
    """Map an error raised while opening the stream; 429, 408, 5xx and network are retryable."""
    from agentreel.llm._retry import parse_retry_after

    if isinstance(exc, sdk.timeout):
        return Failure(
            ProviderTimeoutError(
                "timeout",
                None,
                f"{label.where()} did not answer in time. Raise the provider's `timeout` "
                "setting or check the server.",
            ),
            retryable=True,
        )
    if isinstance(exc, sdk.connection):
        return Failure(
            LlmError(
                "connection",
                None,
                f"could not reach {label.where()}: {exc.__cause__ or exc}. Check base_url "
                "and that the server is running.",
            ),
            retryable=True,
        )
    if not isinstance(exc, sdk.status):
        return None
    status = _status_code(exc)
    detail = _server_message(exc)
    if status in (401, 403):
        return Failure(
            AuthenticationError(
                "auth",
                status,
                f"{label.where()} rejected the credentials: {detail}. Set {label.key_env} "
                "or pass api_key=... to the provider.",
            ),
            retryable=False,
        )
    if status == 429:
        return Failure(
            RateLimitError(
                "rate_limited", status, f"{label.where()} is rate limiting calls: {detail}"
            ),
            retryable=True,
            retry_after=_retry_after(exc, parse_retry_after),
        )
    if status == 408:
        return Failure(
            ProviderTimeoutError("timeout", status, f"{label.where()} timed out: {detail}"),
            retryable=True,
            retry_after=_retry_after(exc, parse_retry_after),
        )
    if status >= 500:
        return Failure(
            ServerError("server_error", status, f"{label.where()} failed: {detail}"),
            retryable=True,
            retry_after=_retry_after(exc, parse_retry_after),
        )
    return Failure(
        BadRequestError(
            "bad_request",
            status,
            f"{label.where()} rejected the request for model {model!r}: {detail}. Check the "
            "model name and the messages and tools sent.",
        ),
        retryable=False,
    )


def _retry_after(exc: Exception, parse: Callable[[dict[str, str]], float | None]) -> float | None:
    return parse(_headers(exc))


def stream_error(
    exc: Exception, sdk: SdkErrorTypes, label: ProviderLabel, chunks_seen: int
) -> LlmError | None:
    """Map an error raised while reading an open stream (never retried)."""
    if isinstance(exc, sdk.timeout | sdk.http_timeout):
        return ProviderTimeoutError(
            "timeout",
            None,
            f"{label.where()} stopped sending mid-stream (after {chunks_seen} events) for "
            "longer than the `timeout` setting.",
        )
    if isinstance(exc, sdk.connection | sdk.http_transport):
        cause = exc.__cause__ or exc
        return StreamInterruptedError(
            "stream_cut",
            None,
            f"the stream from {label.where()} was cut after {chunks_seen} events: {cause}. "
            "The call did not finish; retry it.",
        )
    if isinstance(exc, sdk.api):
        # An error event inside the stream: Anthropic's `event: error` (an APIStatusError
        # whose body is {"type": "error", "error": {...}}) or an OpenAI-compatible
        # `data: {"error": {...}}` (an APIError whose body is the inner error object).
        body = _error_body(exc)
        error = body.get("error", body) if isinstance(body, dict) else None
        code, kind = _stream_error_code(error)
        message = (
            f"{label.where()} sent an error mid-stream (after {chunks_seen} events): "
            f"{code}: {_server_message(exc)}"
        )
        return kind(code, None, message)
    return None


# Error codes seen inside streams (OpenAI `type`/`code`, Anthropic `type`, OpenRouter's
# numeric `code`, which follows HTTP statuses) and the typed error each one means.
_STREAM_ERROR_KINDS: dict[str, type[LlmError]] = {
    "server_error": ServerError,
    "api_error": ServerError,
    "overloaded_error": ServerError,
    "internal_server_error": ServerError,
    "service_unavailable": ServerError,
    "rate_limit_error": RateLimitError,
    "rate_limit_exceeded": RateLimitError,
    "too_many_requests": RateLimitError,
    "authentication_error": AuthenticationError,
    "permission_error": AuthenticationError,
    "invalid_api_key": AuthenticationError,
    "invalid_request_error": BadRequestError,
    "not_found_error": BadRequestError,
    "model_not_found": BadRequestError,
    "context_length_exceeded": BadRequestError,
    "request_too_large": BadRequestError,
    "timeout": ProviderTimeoutError,
}


def _stream_error_code(error: object) -> tuple[str, type[LlmError]]:
    """The error's code (its ``code`` when it has one, else its ``type``) and typed error.

    ``code`` goes first: OpenAI rate limits say ``type: "tokens"``, ``code:
    "rate_limit_exceeded"``; OpenRouter sends only a numeric ``code`` such as 502.
    """
    if not isinstance(error, dict):
        return "stream_error", LlmError
    candidates = [error.get("code"), error.get("type")]
    for value in candidates:
        if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
            return str(value), _status_kind(int(value))
        if isinstance(value, str) and value in _STREAM_ERROR_KINDS:
            return value, _STREAM_ERROR_KINDS[value]
    named = next((str(v) for v in candidates if isinstance(v, str) and v), "stream_error")
    return named, LlmError


def _status_kind(status: int) -> type[LlmError]:
    if status in (401, 403):
        return AuthenticationError
    if status == 408:
        return ProviderTimeoutError
    if status == 429:
        return RateLimitError
    if status >= 500:
        return ServerError
    if 400 <= status < 500:
        return BadRequestError
    return LlmError


class LoopBoundClient(Generic[ClientT]):
    """One SDK client per event loop (an async HTTP pool must not cross loops)."""

    def __init__(self, factory: Callable[[], ClientT]) -> None:
        self._factory = factory
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: ClientT | None = None

    def get(self) -> ClientT:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = self._factory()
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            close: Any = getattr(client, "close", None)
            if close is not None:
                await close()


def notify(on_retry: Callable[[RetryNotice], None] | None) -> Callable[[RetryNotice], None]:
    """The ``on_retry`` callback, or one that logs the retry."""
    if on_retry is not None:
        return on_retry
    import logging

    log = logging.getLogger("agentreel.llm.retry")

    def log_retry(notice: RetryNotice) -> None:
        log.warning(
            "%s: attempt %d failed (%s); retrying in %.2fs",
            notice.provider,
            notice.attempt,
            notice.error,
            notice.delay,
        )

    return log_retry


class StreamMapper(Protocol):
    """Maps one SDK's stream items to agentreel chunks (see the two adapters)."""

    events: int

    @property
    def stopped(self) -> bool:
        """True once the wire said the message is complete (nothing more to read)."""
        ...

    def feed(self, item: Any) -> list[Chunk]: ...

    def salvage(self) -> list[Chunk]:
        """What a stream that failed mid-way still tells (the usage seen so far)."""
        ...

    def finish(self, label: ProviderLabel) -> list[Chunk]: ...


class ClientArgs(TypedDict, total=False):
    """The keyword settings every SDK adapter takes, each adapter's own ones aside
    (``OpenAIProvider(model=..., timeout=...)``, an entry point's ``**settings``):
    ``ClientSettings.build`` resolves and validates them once."""

    model: str | None
    base_url: str | None
    api_key: str | None
    timeout: float
    connect_timeout: float
    max_retries: int
    retry_initial_delay: float
    retry_max_delay: float
    retry_budget: float
    on_retry: Callable[[RetryNotice], None] | None
    send_identity: bool | str
    provider_name: str
    key_env: str
    base_url_env: str


_CLIENT_ARGS = ClientArgs.__optional_keys__


@dataclass(frozen=True, slots=True)
class SdkDefaults:
    """What one adapter fixes: its default name, key and URL variables, its default server
    and its SDK's error classes."""

    provider_name: str
    key_env: str
    base_url_env: str
    default_base_url: str
    errors: SdkErrorTypes


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """One adapter's client settings, resolved and validated once: the URL and key from
    the setting or its environment variable, the retry policy, the retry callback, the
    ``send_identity`` flag and the label error messages name."""

    model: str | None
    base_url: str | None
    api_key: str | None
    timeout: float
    connect_timeout: float
    policy: RetryPolicy
    on_retry: Callable[[RetryNotice], None]
    send_identity: bool
    label: ProviderLabel
    errors: SdkErrorTypes

    @classmethod
    def build(cls, args: ClientArgs, defaults: SdkDefaults, owner: str) -> ClientSettings:
        """``args`` over the adapter's ``defaults``; ``owner`` (the adapter class) names an
        unknown setting as a call with it would."""
        unknown = sorted(set(args) - _CLIENT_ARGS)
        if unknown:
            raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}")
        key_env = args.get("key_env", defaults.key_env)
        base_url = setting_or_env(
            args.get("base_url"), args.get("base_url_env", defaults.base_url_env)
        )
        return cls(
            model=args.get("model"),
            base_url=base_url,
            api_key=setting_or_env(args.get("api_key"), key_env),
            timeout=args.get("timeout", 120.0),
            connect_timeout=args.get("connect_timeout", 10.0),
            policy=make_policy(
                args.get("max_retries", 4),
                args.get("retry_initial_delay", 0.5),
                args.get("retry_max_delay", 8.0),
                args.get("retry_budget", 60.0),
            ),
            on_retry=notify(args.get("on_retry")),
            send_identity=send_identity_setting(args.get("send_identity", False)),
            label=ProviderLabel(
                args.get("provider_name", defaults.provider_name),
                base_url or defaults.default_base_url,
                key_env,
            ),
            errors=defaults.errors,
        )


class SdkProvider(Generic[ClientT]):
    """What the SDK adapters share: settings, one client per loop, the streaming loop.

    Subclasses set ``DEFAULTS``, supply ``_make_client`` (the SDK client, its own retries
    off) and call ``_stream_through`` with a coroutine that opens the SDK stream and a
    fresh mapper. An adapter with settings of its own takes them before ``**settings``.
    """

    DEFAULTS: ClassVar[SdkDefaults]

    def __init__(self, **settings: Unpack[ClientArgs]) -> None:
        self.settings = ClientSettings.build(settings, self.DEFAULTS, type(self).__name__)
        self._client = LoopBoundClient(self._make_client)

    @property
    def model(self) -> str | None:
        return self.settings.model

    @property
    def base_url(self) -> str | None:
        return self.settings.base_url

    @property
    def label(self) -> ProviderLabel:
        return self.settings.label

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.label.name!r}, base_url={self.label.base_url!r})"

    def _make_client(self) -> ClientT:
        raise NotImplementedError

    def _http_timeout(self) -> Any:
        """The read and connect timeouts, in the SDK's HTTP client's ``Timeout``."""
        settings = self.settings
        return settings.errors.timeout_type(settings.timeout, connect=settings.connect_timeout)

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _model_for(self, options: GenerateOptions) -> str:
        """The call's model: its own, else the ``model`` setting (empty when neither)."""
        return options.model or self.settings.model or ""

    def _identity_headers(self, options: GenerateOptions) -> dict[str, str] | None:
        """The caller identity headers when ``send_identity`` is on."""
        return identity_headers(options) if self.settings.send_identity else None

    def _client_for_call(self, body: dict[str, Any]) -> ClientT:
        """The loop's client, after checking the call has a key and a model."""
        if not self.settings.api_key:
            raise AuthenticationError(
                "auth",
                None,
                f"no API key for {self.label.where()}: set {self.label.key_env} or pass "
                "api_key=... to the provider.",
            )
        if not body["model"]:
            raise ValueError(
                f"{self.label.name} provider: no model; set GenerateOptions.model or the "
                "provider's `model` setting"
            )
        return self._client.get()

    async def _stream_through(
        self,
        open_once: Callable[[], Awaitable[Any]],
        model: str,
        mapper: StreamMapper,
    ) -> AsyncIterator[Chunk]:
        """Open with retries, map every wire item, and always close the HTTP stream."""
        sdk_stream = await open_with_retries(
            open_once,
            classify=lambda exc: classify_open_error(exc, self.settings.errors, self.label, model),
            policy=self.settings.policy,
            provider=self.label.name,
            on_retry=self.settings.on_retry,
        )
        try:
            iterator = sdk_stream.__aiter__()
            while not mapper.stopped:
                try:
                    item = await iterator.__anext__()
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    error = stream_error(exc, self.settings.errors, self.label, mapper.events)
                    if error is None:
                        raise
                    # Usage already paid for is kept in the log before the failure.
                    for chunk in mapper.salvage():
                        yield chunk
                    raise error from exc
                for chunk in mapper.feed(item):
                    yield chunk
            for chunk in mapper.finish(self.label):
                yield chunk
        finally:
            await sdk_stream.close()


def stub_settings(
    settings: dict[str, Any], provider_name: str, normalize_url: Callable[[str], str]
) -> dict[str, Any]:
    """Settings for an adapter pointed at the stub model server (``stub``, ``stub-anthropic``).

    ``base_url`` (or ``AGENTREEL_STUB_URL``) is the server's root URL as it prints it; the
    key is the fixed, non-secret ``STUB_API_KEY``.
    """
    base_url = settings.pop("base_url", None) or os.environ.get(AgentEnv.STUB_URL)
    if not base_url:
        raise ValueError(
            f"the {provider_name} provider needs the stub server's URL: pass base_url=... or "
            f"set {AgentEnv.STUB_URL} (python -m agentreel.llm.stub --rules FILE prints it)"
        )
    if "api_key" in settings:
        raise ValueError(
            f"the {provider_name} provider takes no api_key: it always sends STUB_API_KEY"
        )
    settings.setdefault("model", "stub-model")
    settings.setdefault("provider_name", provider_name)
    settings.setdefault("max_retries", 2)
    settings.setdefault("retry_budget", 10.0)
    return {
        **settings,
        "base_url": normalize_url(base_url.rstrip("/")),
        "api_key": STUB_API_KEY,
        "key_env": "AGENTREEL_STUB_API_KEY",
    }
