"""Retrying the opening of a model stream: backoff, ``retry-after``, a bounded total time.

Only opening is retried (the HTTP status arrives before any chunk): once a chunk has been
handed to the caller a failure is final, because yielded chunks cannot be taken back.
Both adapters turn the SDKs' own retries off and use this, so the behaviour is the same
for every provider and observable through ``on_retry``.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from agentreel.llm.exceptions import LlmError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard to try: ``max_retries`` extra attempts, exponential backoff from
    ``initial_delay`` capped at ``max_delay`` (with jitter), a server's ``retry-after``
    honoured as given, and never past ``budget`` seconds after the first attempt."""

    max_retries: int = 4
    initial_delay: float = 0.5
    max_delay: float = 8.0
    budget: float = 60.0
    jitter: float = 0.2

    def backoff(self, retry_number: int) -> float:
        delay: float = min(self.max_delay, self.initial_delay * 2.0 ** (retry_number - 1))
        return delay * (1 - self.jitter * random.random())


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """Passed to ``on_retry`` before each wait: which attempt failed, why, how long to wait."""

    provider: str
    attempt: int
    status: int | None
    delay: float
    retry_after: float | None
    error: LlmError


@dataclass(frozen=True, slots=True)
class Failure:
    """A classified failure: the typed error to raise, whether to retry, any retry-after."""

    error: LlmError
    retryable: bool
    retry_after: float | None = None


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait per ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date)."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


async def open_with_retries(
    open_once: Callable[[], Awaitable[T]],
    *,
    classify: Callable[[Exception], Failure | None],
    policy: RetryPolicy,
    provider: str,
    on_retry: Callable[[RetryNotice], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Call ``open_once`` until it succeeds, retrying failures ``classify`` marks retryable.

    Raises the classified ``LlmError`` (chained to the SDK error) when a failure is not
    retryable, when ``max_retries`` is spent, or when the next wait would end past the
    ``budget``; the message then says how many attempts were made and what to change.
    """
    started = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return await open_once()
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            error = failure.error
            if not failure.retryable:
                raise error from exc
            if attempt > policy.max_retries:
                raise _exhausted(error, attempt, "max_retries", policy.max_retries) from exc
            delay = (
                failure.retry_after if failure.retry_after is not None else policy.backoff(attempt)
            )
            elapsed = time.monotonic() - started
            if elapsed + delay > policy.budget:
                raise _exhausted(error, attempt, "retry_budget", policy.budget) from exc
            if on_retry is not None:
                on_retry(
                    RetryNotice(
                        provider=provider,
                        attempt=attempt,
                        status=error.status,
                        delay=delay,
                        retry_after=failure.retry_after,
                        error=error,
                    )
                )
            await sleep(delay)


def _exhausted(error: LlmError, attempts: int, limit: str, value: float) -> LlmError:
    plural = "s" if attempts != 1 else ""
    message = (
        f"{error.message} (gave up after {attempts} attempt{plural}: {limit}={value:g} reached;"
        f" raise {limit} or try again later)"
    )
    return type(error)(error.code, error.status, message)
