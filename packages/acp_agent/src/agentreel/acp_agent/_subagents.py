"""Subagent orchestration: a step's ``subagent`` tool calls run as child sessions.

For each call, in call order: the arguments are checked (a bad call or the depth limit is
an error tool result), the child gets the next ``spawn_index`` and its session —
``spawn`` (fresh) or ``fork`` (seeded with the parent's history) — and the parent logs
``subagent/start``. Only when every child of the step is numbered and logged do they start,
all at once; their answers come back as tool results in call order, each followed by
``subagent/end``. A cancel reaches every child (they share the parent's cancel scope) and
each child still gets its result and ``subagent/end``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

from agentreel.acp_agent._channel import ClientChannel, TurnOutcome
from agentreel.acp_agent._workspace import parse_arguments, string_argument
from agentreel.acp_agent.exceptions import ClientDisconnectedError, ToolError
from agentreel.brand import new_session_id
from agentreel.llm import ToolCallPart
from agentreel.session import (
    EventData,
    Session,
    SessionStore,
    SubagentEndData,
    SubagentOutcome,
    SubagentStartData,
)


class ChildTurn(Protocol):
    """What orchestration needs of a child: the loop's ``AgentSession`` is one, a
    ``ProcessChild`` (a subagent in an agent process of its own) another."""

    @property
    def id(self) -> str: ...

    async def run_turn(self, prompt: str) -> TurnOutcome: ...

    def close(self) -> None: ...


RecordResult = Callable[[ToolCallPart, str, bool], None]
"""Log a call's ``tool/result``: ``(call, content, is_error)``."""


class Delegation:
    """Runs one session's subagent calls; holds the next ``spawn_index`` across its steps.

    ``open_child(session)`` wraps a new child session in a turn runner; ``opened`` is the
    runtime's list of sessions to close at shutdown; ``append`` logs an event in the
    parent.
    """

    def __init__(
        self,
        *,
        parent: Session,
        store: SessionStore,
        channel: ClientChannel,
        depth: int,
        max_depth: int,
        opened: list[Session],
        open_child: Callable[[Session], ChildTurn],
        append: Callable[[EventData], None],
        open_process: Callable[[str, int], ChildTurn] | None = None,
    ) -> None:
        self._parent = parent
        self._store = store
        self._channel = channel
        self._depth = depth
        self._max_depth = max_depth
        self._opened = opened
        self._open_child = open_child
        self._append = append
        # Set when spawned children run as processes: (child session id, spawn index).
        self._open_process = open_process
        self._next_spawn_index = 0

    def fork_for_client(self) -> Session:
        """A fork the client asked for between turns (ACP ``session/fork``): seeded with
        the parent's turns, given the next ``spawn_index`` and announced by
        ``subagent/start`` (mode fork) as a fork subagent is, so replay binds it alike; the
        caller serves it as a session of its own."""
        index = self._next_spawn_index
        self._next_spawn_index += 1
        child = self._store.fork(self._parent, index)
        self._opened.append(child)
        self._append(
            SubagentStartData(child_session=child.header.id, spawn_index=index, mode="fork")
        )
        return child

    async def run(self, calls: Sequence[ToolCallPart], record: RecordResult) -> None:
        """Run ``calls`` as concurrent children; every call gets its result via ``record``."""
        planned: list[tuple[ToolCallPart, ChildTurn, str]] = []
        for call in calls:
            try:
                prompt, mode = self._check(call)
            except ToolError as exc:
                record(call, str(exc), True)
                await self._channel.tool_call_finished(call.id, "failed", str(exc))
                continue
            planned.append((call, self._start(mode), prompt))
        if not planned:
            return
        tasks: list[asyncio.Task[TurnOutcome]] = []
        try:
            for call, _, _ in planned:
                await self._channel.tool_call_running(call.id)
            tasks = [
                asyncio.create_task(child.run_turn(prompt), name=f"subagent {child.id}")
                for _, child, prompt in planned
            ]
            outcomes = await asyncio.gather(*tasks)
        except (asyncio.CancelledError, ClientDisconnectedError):
            # gather waited for the children, which ended their own turns as cancelled;
            # children never started are closed as cancelled too.
            for position, (call, child, _) in enumerate(planned):
                outcome = (
                    _task_outcome(tasks[position])
                    if position < len(tasks)
                    else TurnOutcome("cancelled")
                )
                self._finish(call, child, outcome, record)
            raise
        for (call, child, _), outcome in zip(planned, outcomes, strict=True):
            content, is_error = self._finish(call, child, outcome, record)
            await self._channel.tool_call_finished(
                call.id, "failed" if is_error else "completed", content
            )

    def _check(self, call: ToolCallPart) -> tuple[str, str]:
        """The call's ``(prompt, mode)``; a ``ToolError`` for a call that cannot run."""
        if self._depth >= self._max_depth:
            raise ToolError(
                f"subagent: nesting is limited to depth {self._max_depth}; do the task yourself"
            )
        arguments = parse_arguments(call.name, call.arguments)
        string_argument(call.name, arguments, "description", "")
        prompt = string_argument(call.name, arguments, "prompt")
        mode = string_argument(call.name, arguments, "mode", "spawn")
        modes = ("spawn", "fork", "process") if self._open_process else ("spawn", "fork")
        if mode not in modes:
            raise ToolError(f"subagent: mode must be one of {', '.join(modes)}, got {mode!r}")
        return prompt, mode

    def _start(self, mode: str) -> ChildTurn:
        # spawn_index is assigned here, in call order, before any child starts.
        index = self._next_spawn_index
        self._next_spawn_index += 1
        if mode in ("spawn", "process") and self._open_process is not None:
            # The child's own process writes its log; this one announces it by id.
            child_id = new_session_id()
            self._append(SubagentStartData(child_session=child_id, spawn_index=index, mode="spawn"))
            return self._open_process(child_id, index)
        if mode == "fork":
            child_session = self._store.fork(self._parent, index)
        else:
            child_session = self._store.spawn(self._parent, index)
        self._opened.append(child_session)
        self._append(
            SubagentStartData(
                child_session=child_session.header.id,
                spawn_index=index,
                mode="fork" if mode == "fork" else "spawn",
            )
        )
        return self._open_child(child_session)

    def _finish(
        self, call: ToolCallPart, child: ChildTurn, outcome: TurnOutcome, record: RecordResult
    ) -> tuple[str, bool]:
        child.close()
        result: SubagentOutcome
        if outcome.stop_reason in ("end_turn", "max_tokens"):
            result = "completed"
            content = outcome.text or "(the subagent finished without a text answer)"
            is_error = False
        elif outcome.stop_reason == "cancelled":
            result = "cancelled"
            content = f"subagent {child.id} was cancelled before it finished"
            is_error = True
        else:
            result = "error"
            content = f"subagent {child.id} failed: {outcome.error or outcome.stop_reason}"
            is_error = True
        record(call, content, is_error)
        self._append(SubagentEndData(child_session=child.id, outcome=result))
        return content, is_error


def _task_outcome(task: asyncio.Task[TurnOutcome]) -> TurnOutcome:
    if not task.done() or task.cancelled():
        return TurnOutcome("cancelled")
    exc = task.exception()
    if exc is not None:
        return TurnOutcome("error", error=f"{type(exc).__name__}: {exc}")
    return task.result()
