"""The ACP client side of a run: answers permission prompts FIFO and arms cancels.

It is the editor stand-in: the agent's ``session/request_permission`` calls get the
scenario's answers in order, and ``prompt_and_cancel`` sends ``session/cancel`` as soon as
the first ``agent_message_chunk`` of the prompted session arrives.
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp.interfaces import Agent
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from agentreel.snapshot_harness._scenario import PermissionKind


class HarnessClient:
    """An ACP ``Client`` driven by a scenario. Problems are collected, not raised.

    Raising inside a handler would only become a JSON-RPC error the agent sees; the run
    needs to fail with a message instead, so problems are kept in ``problems``.
    """

    def __init__(self, permissions: tuple[PermissionKind, ...]) -> None:
        self._answers = list(permissions)
        self._asked = 0
        self.problems: list[str] = []
        self.agent: Agent | None = None
        self._cancel_armed: str | None = None
        self.cancel_sent = asyncio.Event()
        self.cancel_failure: str | None = None
        self._cancel_tasks: list[asyncio.Task[None]] = []

    @property
    def unused_answers(self) -> list[PermissionKind]:
        return list(self._answers)

    def arm_cancel(self, session_id: str) -> None:
        """Cancel ``session_id`` at its next ``agent_message_chunk``."""
        self.cancel_sent.clear()
        self.cancel_failure = None
        self._cancel_armed = session_id

    def disarm_cancel(self) -> None:
        self._cancel_armed = None

    async def wait_cancel_delivered(self) -> None:
        """Wait until an armed cancel notification has actually been written."""
        if self._cancel_tasks:
            await asyncio.gather(*self._cancel_tasks, return_exceptions=True)
            self._cancel_tasks.clear()

    async def request_permission(
        self,
        options: list[PermissionOption],
        session_id: str,
        tool_call: ToolCallUpdate,
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self._asked += 1
        title = tool_call.title or tool_call.tool_call_id
        if not self._answers:
            self.problems.append(
                f"the agent asked for permission #{self._asked} ({title!r}) but scenario.toml "
                "has no answer left; add one to `permissions` (allow, reject, ...)"
            )
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        answer = self._answers.pop(0)
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        for option in options:
            if option.kind == answer:
                return RequestPermissionResponse(
                    outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
                )
        offered = ", ".join(str(o.kind) for o in options) or "none"
        self.problems.append(
            f"permission #{self._asked} ({title!r}): the scenario answers {answer!r} but the "
            f"agent offered only: {offered}; change the answer in scenario.toml `permissions`"
        )
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = getattr(update, "session_update", None)
        if kind == "agent_message_chunk" and self._cancel_armed == session_id:
            self._cancel_armed = None
            agent = self.agent
            if agent is not None:
                self._cancel_tasks.append(asyncio.create_task(self._send_cancel(agent, session_id)))

    async def _send_cancel(self, agent: Agent, session_id: str) -> None:
        try:
            await agent.cancel(session_id=session_id)
        except Exception as exc:  # kept for the step's error, not lost in a task
            self.cancel_failure = f"{type(exc).__name__}: {exc}"
            return
        self.cancel_sent.set()

    def on_connect(self, conn: Agent) -> None:
        self.agent = conn
