"""The harness's ACP client: a cancel it could not send is reported, not swallowed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from acp.interfaces import Agent

from agentreel.snapshot_harness._client import HarnessClient

_CHUNK = SimpleNamespace(session_update="agent_message_chunk")


class _CancelRecorder:
    """The agent side of the connection, as far as a cancel goes."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.failure = failure
        self.cancelled: list[str] = []

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if self.failure is not None:
            raise self.failure
        self.cancelled.append(session_id)


async def _chunk_after_arming(agent: _CancelRecorder) -> HarnessClient:
    client = HarnessClient(())
    client.on_connect(cast(Agent, agent))
    client.arm_cancel("session-a")
    await client.session_update("session-b", _CHUNK)  # another session: not cancelled
    await client.session_update("session-a", _CHUNK)
    await client.session_update("session-a", _CHUNK)  # fires once only
    await client.wait_cancel_delivered()
    return client


@pytest.mark.asyncio
async def test_the_first_chunk_of_the_armed_session_sends_one_cancel() -> None:
    agent = _CancelRecorder()
    client = await _chunk_after_arming(agent)
    assert agent.cancelled == ["session-a"]
    assert client.cancel_sent.is_set()
    assert client.cancel_failure is None


@pytest.mark.asyncio
async def test_a_cancel_that_cannot_be_sent_is_kept_for_the_step_error() -> None:
    agent = _CancelRecorder(BrokenPipeError("agent stdin closed"))
    client = await _chunk_after_arming(agent)
    assert not client.cancel_sent.is_set()
    assert client.cancel_failure == "BrokenPipeError: agent stdin closed"
    client.arm_cancel("session-a")  # the next prompt_and_cancel starts clean
    assert client.cancel_failure is None
