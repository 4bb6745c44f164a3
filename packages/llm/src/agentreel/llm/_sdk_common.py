"""What the two SDK adapters share: settings, error classification, a per-loop client.

Imported only by the adapter modules (it imports ``httpx2``, the SDKs' HTTP client).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx2

from agentreel.llm._retry import Failure, RetryNotice, RetryPolicy
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
    """The SDK's own exception classes (both SDKs have the same four; ``api`` is the base)."""

    status: type[Exception]
    timeout: type[Exception]
    connection: type[Exception]
    api: type[Exception]


@dataclass(frozen=True, slots=True)
class ProviderLabel:
    """Names used in error messages: provider, where it points, the key's variable."""

    name: str
    base_url: str
    key_env: str

    def where(self) -> str:
        return f"the {self.name} provider at {self.base_url}"


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


def _server_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
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
    status = int(getattr(exc, "status_code", 0))
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
    if isinstance(exc, sdk.timeout | httpx2.TimeoutException):
        return ProviderTimeoutError(
            "timeout",
            None,
            f"{label.where()} stopped sending mid-stream (after {chunks_seen} events) for "
            "longer than the `timeout` setting.",
        )
    if isinstance(exc, sdk.connection | httpx2.TransportError):
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
        body = getattr(exc, "body", None)
        error = body.get("error", body) if isinstance(body, dict) else None
        kind = "stream_error"
        if isinstance(error, dict) and (error.get("type") or error.get("code")):
            kind = str(error.get("type") or error.get("code"))
        message = (
            f"{label.where()} sent an error mid-stream (after {chunks_seen} events): "
            f"{kind}: {_server_message(exc)}"
        )
        if kind in ("overloaded_error", "api_error", "server_error"):
            return ServerError(kind, None, message)
        if kind == "rate_limit_error":
            return RateLimitError(kind, None, message)
        return LlmError(kind, None, message)
    return None


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
