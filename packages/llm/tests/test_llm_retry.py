"""Retry policy of the SDK adapters on its own: ``retry-after`` forms, backoff, give-up rules.

The adapters' tests cover the path through a real server; these pin the header forms a
stub does not send (plain seconds, an HTTP date, garbage) and the policy arithmetic with a
recorded sleep instead of a real one.
"""

from __future__ import annotations

import email.utils
import time

import pytest

from agentreel.llm._retry import (
    Failure,
    RetryNotice,
    RetryPolicy,
    open_with_retries,
    parse_retry_after,
)
from agentreel.llm.exceptions import AuthenticationError, ServerError


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (None, None),
        ({}, None),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": "not a date"}, None),
    ],
)
def test_parse_retry_after_forms(headers: dict[str, str] | None, expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date_is_seconds_from_now() -> None:
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    seconds = parse_retry_after({"retry-after": when})
    assert seconds is not None
    assert 100 < seconds <= 120
    past = email.utils.formatdate(time.time() - 60, usegmt=True)
    assert parse_retry_after({"retry-after": past}) == 0.0


class _Flaky:
    """Fails ``failures`` times with a 503, then returns ``"opened"``."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(f"503 on call {self.calls}")
        return "opened"


def _server_error(exc: Exception) -> Failure:
    return Failure(ServerError("server_error", 503, str(exc)), retryable=True)


@pytest.mark.asyncio
async def test_backoff_doubles_up_to_the_cap_and_each_wait_is_announced() -> None:
    slept: list[float] = []
    notices: list[RetryNotice] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    policy = RetryPolicy(max_retries=4, initial_delay=1.0, max_delay=3.0, budget=100, jitter=0)
    flaky = _Flaky(failures=4)
    result = await open_with_retries(
        flaky,
        classify=_server_error,
        policy=policy,
        provider="test",
        on_retry=notices.append,
        sleep=sleep,
    )
    assert result == "opened"
    assert flaky.calls == 5
    assert slept == [1.0, 2.0, 3.0, 3.0]
    assert [(n.attempt, n.status, n.delay) for n in notices] == [
        (1, 503, 1.0),
        (2, 503, 2.0),
        (3, 503, 3.0),
        (4, 503, 3.0),
    ]


@pytest.mark.asyncio
async def test_a_non_retryable_failure_is_raised_at_once_chained_to_the_cause() -> None:
    async def sleep(seconds: float) -> None:
        raise AssertionError("must not wait")

    def refuse(exc: Exception) -> Failure:
        return Failure(AuthenticationError("auth", 401, "bad key"), retryable=False)

    flaky = _Flaky(failures=1)
    with pytest.raises(AuthenticationError) as caught:
        await open_with_retries(
            flaky, classify=refuse, policy=RetryPolicy(), provider="test", sleep=sleep
        )
    assert flaky.calls == 1
    assert caught.value.message == "bad key"
    assert isinstance(caught.value.__cause__, RuntimeError)


@pytest.mark.asyncio
async def test_an_unclassified_exception_propagates_unchanged() -> None:
    flaky = _Flaky(failures=1)
    with pytest.raises(RuntimeError, match="503 on call 1"):
        await open_with_retries(
            flaky, classify=lambda exc: None, policy=RetryPolicy(), provider="test"
        )


@pytest.mark.asyncio
async def test_max_retries_spent_names_the_setting_and_keeps_the_error_type() -> None:
    async def sleep(seconds: float) -> None:
        pass

    flaky = _Flaky(failures=10)
    with pytest.raises(ServerError) as caught:
        await open_with_retries(
            flaky,
            classify=_server_error,
            policy=RetryPolicy(max_retries=1, initial_delay=0.01, jitter=0),
            provider="test",
            sleep=sleep,
        )
    assert flaky.calls == 2
    assert caught.value.status == 503
    assert "gave up after 2 attempts: max_retries=1 reached; raise max_retries" in str(caught.value)
