"""The agent loop: a prompt is a turn of steps; a step is one model call and its tool calls.

This module knows nothing about ACP: it talks to the editor through ``ClientChannel`` (the
ACP bridge implements it; tests use fakes), so the same loop drives the main session and,
in-process, every subagent.

What a turn writes to the session log, in order::

    turn/start, user/message,
      step/start, request/header, assistant/chunk..., assistant/message,
        tool/call..., [subagent/start...], tool/result..., [subagent/end...], step/end
      ... more steps while the model calls tools ...
    turn/end{completed | max-turns | error | aborted | interrupted}

Every chunk is appended as ``assistant/chunk`` before anything else is done with it, so a
recording holds exactly what the provider streamed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from agentreel.acp_agent._config import DEFAULT_SYSTEM_PROMPT
from agentreel.acp_agent._conversation import Conversation
from agentreel.acp_agent._workspace import (
    LIST_FILES,
    READ_FILE,
    SUBAGENT,
    WRITE_FILE,
    Workspace,
    parse_arguments,
    string_argument,
)
from agentreel.acp_agent.exceptions import ClientDisconnectedError, ToolError
from agentreel.brand import SessionId
from agentreel.llm import (
    AgentreelLlmError,
    BlockEnd,
    Chunk,
    CompletedBlock,
    Finish,
    GenerateOptions,
    LlmError,
    Message,
    Provider,
    ReasoningDelta,
    StreamContractChecker,
    TextDelta,
    ToolCallPart,
    ToolSpec,
)
from agentreel.session import (
    AssistantChunkData,
    AssistantMessageData,
    EventData,
    Session,
    SessionStore,
    SubagentEndData,
    SubagentOutcome,
    SubagentStartData,
    ToolCallData,
    ToolResultData,
    TurnEndData,
    TurnEndReason,
    TurnStart,
    TurnStartData,
    UserMessageData,
    build_request_header,
)

logger = logging.getLogger("agentreel.acp_agent")

# The default lives with the configuration (``--system-prompt`` / AGENTREEL_SYSTEM_PROMPT).
SYSTEM_PROMPT = DEFAULT_SYSTEM_PROMPT
ALL_TOOLS: tuple[ToolSpec, ...] = (READ_FILE, LIST_FILES, WRITE_FILE, SUBAGENT)
DEFAULT_MAX_DEPTH = 2

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "cancelled", "error"]
ToolStatus = Literal["completed", "failed"]
ToolKindName = Literal["read", "edit", "search", "think", "other"]


class ClientChannel(Protocol):
    """What the loop tells the editor. The ACP bridge maps these to session updates."""

    async def agent_text(self, text: str) -> None:
        """A piece of assistant text, as it streams."""

    async def agent_thought(self, text: str) -> None:
        """A piece of model reasoning, as it streams."""

    async def tool_call_started(
        self, call: ToolCallPart, title: str, kind: ToolKindName, path: str | None
    ) -> None:
        """The model issued a tool call (announced when its block ends)."""

    async def tool_call_running(self, call_id: str) -> None:
        """The tool call is being carried out."""

    async def tool_call_finished(self, call_id: str, status: ToolStatus, output: str) -> None:
        """The tool call ended with ``output`` (what the model receives)."""

    async def request_permission(self, call: ToolCallPart, title: str, path: str) -> bool:
        """Ask the user to allow a write; ``False`` means rejected or cancelled."""


class SubagentChannel:
    """A child's channel: no streamed updates (children run concurrently and would
    interleave nondeterministically), but permission requests go to the editor."""

    def __init__(self, parent: ClientChannel) -> None:
        self._parent = parent

    async def agent_text(self, text: str) -> None:
        return None

    async def agent_thought(self, text: str) -> None:
        return None

    async def tool_call_started(
        self, call: ToolCallPart, title: str, kind: ToolKindName, path: str | None
    ) -> None:
        return None

    async def tool_call_running(self, call_id: str) -> None:
        return None

    async def tool_call_finished(self, call_id: str, status: ToolStatus, output: str) -> None:
        return None

    async def request_permission(self, call: ToolCallPart, title: str, path: str) -> bool:
        return await self._parent.request_permission(call, title, path)


@dataclass
class CancelScope:
    """Set ``requested`` before cancelling a turn's task: the turn then ends ``aborted``
    (a user cancel) rather than ``interrupted`` (the process shutting down)."""

    requested: bool = False


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn ended and the text the model gave last (a subagent's answer)."""

    stop_reason: StopReason
    text: str = ""
    error: str | None = None
    llm_error: LlmError | None = None


@dataclass
class AgentRuntime:
    """What every session of one agent process shares."""

    store: SessionStore
    provider: Provider
    model: str
    max_steps: int = 25
    max_depth: int = DEFAULT_MAX_DEPTH
    system_prompt: str = SYSTEM_PROMPT
    tools: tuple[ToolSpec, ...] = ALL_TOOLS
    sessions: list[Session] = field(default_factory=list)

    def open_main(self, cwd: str, channel_for: Callable[[str], ClientChannel]) -> AgentSession:
        """Create a top-level session; ``channel_for(session_id)`` makes its channel."""
        session = self.store.create(cwd)
        self.sessions.append(session)
        return AgentSession(self, session, channel_for(session.header.id), depth=0)

    def close_all(self) -> None:
        """Flush and close every session this runtime opened."""
        for session in self.sessions:
            session.close()
        self.store.close_all()


class _ModelFailure(Exception):
    """The model call failed (typed LlmError, contract breach or finish{error})."""

    def __init__(self, message: str, llm_error: LlmError | None = None) -> None:
        super().__init__(message)
        self.llm_error = llm_error


class _StreamAborted(Exception):
    """The provider ended the stream with ``finish{aborted}`` (e.g. a replayed cancel)."""


class _StepResult:
    __slots__ = ("calls", "finish", "text")

    def __init__(self, text: str, calls: tuple[ToolCallPart, ...], finish: Finish) -> None:
        self.text = text
        self.calls = calls
        self.finish = finish


class AgentSession:
    """One agentreel Session driven by the loop: the main session or a subagent."""

    def __init__(
        self,
        runtime: AgentRuntime,
        session: Session,
        channel: ClientChannel,
        *,
        depth: int,
        cancel_scope: CancelScope | None = None,
    ) -> None:
        self.runtime = runtime
        self.session = session
        self.channel = channel
        self.depth = depth
        self.cancel_scope = cancel_scope or CancelScope()
        self.workspace = Workspace(session.header.cwd)
        events = session.events
        # A fork child continues its seed: the conversation and the turn numbering.
        self.conversation = Conversation(events)
        self._next_turn = sum(1 for event in events if isinstance(event, TurnStart))
        self._next_spawn_index = 0
        self.running = False

    @property
    def id(self) -> str:
        return self.session.header.id

    def _append(self, data: EventData) -> None:
        self.conversation.apply(self.session.append(data))

    async def run_turn(self, prompt: str) -> TurnOutcome:
        """Run one turn to its end. Never raises for model, tool or cancellation problems:
        the outcome says how the turn ended and the log holds a matching ``turn/end``."""
        turn = self._next_turn
        self._next_turn += 1
        self.running = True
        step_open: list[int] = []
        pending: dict[str, ToolCallPart] = {}
        try:
            self._append(TurnStartData(turn=turn))
            self._append(UserMessageData(turn=turn, text=prompt))
            last_text = ""
            for step in range(self.runtime.max_steps):
                self.session.step_start(turn, step)
                step_open.append(step)
                result = await self._model_step(turn, step)
                last_text = result.text
                if not result.calls:
                    self.session.step_end(turn, step)
                    step_open.pop()
                    self._append(TurnEndData(turn=turn, reason="completed"))
                    stop: StopReason = (
                        "max_tokens" if result.finish.reason == "max-tokens" else "end_turn"
                    )
                    return TurnOutcome(stop, text=result.text)
                pending.update((call.id, call) for call in result.calls)
                await self._run_tools(turn, step, result.calls, pending)
                self.session.step_end(turn, step)
                step_open.pop()
            self._append(TurnEndData(turn=turn, reason="max-turns"))
            return TurnOutcome(
                "max_turn_requests",
                text=last_text,
                error=f"session {self.id}: turn {turn} stopped after "
                f"{self.runtime.max_steps} model calls (the max-steps bound)",
            )
        except (asyncio.CancelledError, ClientDisconnectedError):
            reason: TurnEndReason = "aborted" if self.cancel_scope.requested else "interrupted"
            self._end_abnormally(turn, step_open, pending, reason, "cancelled")
            return TurnOutcome("cancelled", error=f"session {self.id}: turn {turn} was {reason}")
        except _StreamAborted as aborted:
            self._end_abnormally(turn, step_open, pending, "aborted", "the stream was aborted")
            return TurnOutcome("cancelled", error=str(aborted))
        except _ModelFailure as failure:
            self._end_abnormally(turn, step_open, pending, "error", "the turn ended with an error")
            return TurnOutcome("error", error=str(failure), llm_error=failure.llm_error)
        except Exception as exc:  # a bug must not take the process (and the editor) down
            logger.exception("session %s: turn %d failed", self.id, turn)
            self._end_abnormally(turn, step_open, pending, "error", "the turn ended with an error")
            return TurnOutcome(
                "error", error=f"session {self.id}: turn {turn} failed: {type(exc).__name__}: {exc}"
            )
        finally:
            self.running = False

    def _end_abnormally(
        self,
        turn: int,
        step_open: list[int],
        pending: dict[str, ToolCallPart],
        reason: TurnEndReason,
        why: str,
    ) -> None:
        # Unanswered tool calls get a result so the conversation stays valid for the next turn.
        for call_id in list(pending):
            step = step_open[-1] if step_open else 0
            self._append(
                ToolResultData(
                    turn=turn, step=step, call_id=call_id, content=f"not run: {why}", is_error=True
                )
            )
            del pending[call_id]
        for step in step_open:
            self.session.step_end(turn, step)
        step_open.clear()
        self._append(TurnEndData(turn=turn, reason=reason))

    def _options(self) -> GenerateOptions:
        header = self.session.header
        return GenerateOptions(
            model=self.runtime.model,
            messages=self.conversation.messages,
            system=self.runtime.system_prompt,
            tools=self.runtime.tools,
            session_id=self.session.id,
            parent_session_id=SessionId(header.parent_session) if header.parent_session else None,
            spawn_index=header.spawn_index,
        )

    async def _model_step(self, turn: int, step: int) -> _StepResult:
        options = self._options()
        self._append(
            build_request_header(options, turn=turn, step=step, cwd=self.session.header.cwd)
        )
        checker = StreamContractChecker()
        blocks: dict[int, CompletedBlock] = {}
        finish: Finish | None = None
        where = f"session {self.id}, turn {turn}, step {step}"
        try:
            stream = self.runtime.provider.stream(options)
            async with _closing(stream):
                async for chunk in stream:
                    self._append(AssistantChunkData(turn=turn, step=step, chunk=chunk))
                    checker.feed(chunk)
                    if isinstance(chunk, TextDelta):
                        await self.channel.agent_text(chunk.text)
                    elif isinstance(chunk, ReasoningDelta):
                        await self.channel.agent_thought(chunk.text)
                    elif isinstance(chunk, BlockEnd):
                        blocks[chunk.index] = chunk.block
                        if isinstance(chunk.block, ToolCallPart):
                            await self._announce(chunk.block)
                    elif isinstance(chunk, Finish):
                        finish = chunk
            checker.close()
        except (asyncio.CancelledError, ClientDisconnectedError):
            if finish is None:
                why = "cancelled by the client" if self.cancel_scope.requested else "interrupted"
                self._seal(turn, step, Finish(reason="aborted", message=why))
            raise
        except LlmError as exc:
            if finish is None:
                self._seal(turn, step, Finish(reason="error", message=exc.message, code=exc.code))
            raise _ModelFailure(f"{where}: model call failed: {exc}", exc) from exc
        except AgentreelLlmError as exc:
            if finish is None:
                self._seal(
                    turn, step, Finish(reason="error", message=str(exc), code="invalid-stream")
                )
            raise _ModelFailure(f"{where}: the provider's stream is invalid: {exc}") from exc
        except Exception as exc:
            if finish is None:
                failure = f"{type(exc).__name__}: {exc}"
                self._seal(turn, step, Finish(reason="error", message=failure, code="agent-error"))
            raise
        assert finish is not None  # checker.close() guarantees a finish chunk
        if finish.reason == "aborted":
            raise _StreamAborted(f"{where}: the provider aborted the stream: {finish.message}")
        if finish.reason == "error":
            detail = finish.message or "no message"
            code = f" [{finish.code}]" if finish.code else ""
            raise _ModelFailure(
                f"{where}: the model stream finished with an error{code}: {detail}",
                LlmError(finish.code or "finish-error", None, detail),
            )
        content = tuple(blocks[index] for index in sorted(blocks))
        message = Message(role="assistant", content=content)
        if content:
            self._append(AssistantMessageData(turn=turn, step=step, message=message))
        return _StepResult(message.text, message.tool_calls, finish)

    def _seal(self, turn: int, step: int, finish: Finish) -> None:
        """Complete a call the provider did not finish, so every recorded call ends with
        ``finish`` (a recording stays replayable, and replays the same failure)."""
        self._append(AssistantChunkData(turn=turn, step=step, chunk=finish))

    async def _announce(self, call: ToolCallPart) -> None:
        title, kind, path = _describe(call)
        await self.channel.tool_call_started(call, title, kind, path)

    async def _run_tools(
        self,
        turn: int,
        step: int,
        calls: Sequence[ToolCallPart],
        pending: dict[str, ToolCallPart],
    ) -> None:
        for call in calls:
            self._append(
                ToolCallData(
                    turn=turn, step=step, call_id=call.id, name=call.name, arguments=call.arguments
                )
            )
        # File tools run one after another in call order (permission prompts are serial);
        # subagent calls then run together.
        for call in calls:
            if call.name != SUBAGENT.name:
                await self.channel.tool_call_running(call.id)
                content, is_error = await self._run_file_tool(call)
                self._record_result(turn, step, call, content, is_error, pending)
                await self.channel.tool_call_finished(
                    call.id, "failed" if is_error else "completed", content
                )
        delegated = [call for call in calls if call.name == SUBAGENT.name]
        if delegated:
            await self._run_subagents(turn, step, delegated, pending)

    def _record_result(
        self,
        turn: int,
        step: int,
        call: ToolCallPart,
        content: str,
        is_error: bool,
        pending: dict[str, ToolCallPart],
    ) -> None:
        self._append(
            ToolResultData(
                turn=turn, step=step, call_id=call.id, content=content, is_error=is_error
            )
        )
        pending.pop(call.id, None)

    async def _run_file_tool(self, call: ToolCallPart) -> tuple[str, bool]:
        try:
            arguments = parse_arguments(call.name, call.arguments)
            if call.name == READ_FILE.name:
                return self.workspace.read_file(
                    string_argument(call.name, arguments, "path")
                ), False
            if call.name == LIST_FILES.name:
                path = string_argument(call.name, arguments, "path", ".")
                return self.workspace.list_files(path), False
            if call.name == WRITE_FILE.name:
                path = string_argument(call.name, arguments, "path")
                content = string_argument(call.name, arguments, "content")
                target = self.workspace.check_writable(path)
                shown = self.workspace.display(target)
                allowed = await self.channel.request_permission(call, f"Write {shown}", str(target))
                if not allowed:
                    return (
                        f"write_file: the user rejected writing {shown}; the file was not "
                        "changed. Do not retry the same write unless the user asks.",
                        True,
                    )
                return self.workspace.write_file(target, content), False
            known = ", ".join(tool.name for tool in self.runtime.tools)
            return f"unknown tool {call.name!r}; the tools are: {known}", True
        except ToolError as exc:
            return str(exc), True
        except OSError as exc:
            return f"{call.name}: {exc.strerror or exc} ({exc.filename or 'no file'})", True

    async def _run_subagents(
        self,
        turn: int,
        step: int,
        calls: Sequence[ToolCallPart],
        pending: dict[str, ToolCallPart],
    ) -> None:
        planned: list[tuple[ToolCallPart, AgentSession, str]] = []
        for call in calls:
            try:
                if self.depth >= self.runtime.max_depth:
                    raise ToolError(
                        f"subagent: nesting is limited to depth {self.runtime.max_depth}; "
                        "do the task yourself"
                    )
                arguments = parse_arguments(call.name, call.arguments)
                string_argument(call.name, arguments, "description", "")
                prompt = string_argument(call.name, arguments, "prompt")
                mode = string_argument(call.name, arguments, "mode", "spawn")
                if mode not in ("spawn", "fork"):
                    raise ToolError(f"subagent: mode must be 'spawn' or 'fork', got {mode!r}")
            except ToolError as exc:
                self._record_result(turn, step, call, str(exc), True, pending)
                await self.channel.tool_call_finished(call.id, "failed", str(exc))
                continue
            # spawn_index is assigned here, in call order, before any child starts.
            index = self._next_spawn_index
            self._next_spawn_index += 1
            store = self.runtime.store
            child_session = (
                store.fork(self.session, index)
                if mode == "fork"
                else store.spawn(self.session, index)
            )
            self.runtime.sessions.append(child_session)
            self._append(
                SubagentStartData(
                    child_session=child_session.header.id,
                    spawn_index=index,
                    mode="fork" if mode == "fork" else "spawn",
                )
            )
            child = AgentSession(
                self.runtime,
                child_session,
                SubagentChannel(self.channel),
                depth=self.depth + 1,
                cancel_scope=self.cancel_scope,
            )
            planned.append((call, child, prompt))
        if not planned:
            return
        tasks: list[asyncio.Task[TurnOutcome]] = []
        try:
            for call, _, _ in planned:
                await self.channel.tool_call_running(call.id)
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
                self._finish_child(turn, step, call, child, outcome, pending)
            raise
        for (call, child, _), outcome in zip(planned, outcomes, strict=True):
            content, is_error = self._finish_child(turn, step, call, child, outcome, pending)
            await self.channel.tool_call_finished(
                call.id, "failed" if is_error else "completed", content
            )

    def _finish_child(
        self,
        turn: int,
        step: int,
        call: ToolCallPart,
        child: AgentSession,
        outcome: TurnOutcome,
        pending: dict[str, ToolCallPart],
    ) -> tuple[str, bool]:
        child.session.close()
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
        self._record_result(turn, step, call, content, is_error, pending)
        self._append(SubagentEndData(child_session=child.id, outcome=result))
        return content, is_error


def _task_outcome(task: asyncio.Task[TurnOutcome]) -> TurnOutcome:
    if not task.done() or task.cancelled():
        return TurnOutcome("cancelled")
    exc = task.exception()
    if exc is not None:
        return TurnOutcome("error", error=f"{type(exc).__name__}: {exc}")
    return task.result()


def _describe(call: ToolCallPart) -> tuple[str, ToolKindName, str | None]:
    """Title, ACP tool kind and path of a tool call, for the editor."""
    try:
        arguments = parse_arguments(call.name, call.arguments)
    except ToolError:
        arguments = {}
    path = arguments.get("path")
    path = path if isinstance(path, str) else None
    if call.name == READ_FILE.name:
        return f"Read {path or '?'}", "read", path
    if call.name == LIST_FILES.name:
        return f"List {path or '.'}", "search", path or "."
    if call.name == WRITE_FILE.name:
        return f"Write {path or '?'}", "edit", path
    if call.name == SUBAGENT.name:
        description = arguments.get("description")
        mode = arguments.get("mode", "spawn")
        label = description if isinstance(description, str) and description else "task"
        return f"Subagent ({mode}): {label}", "think", None
    return call.name, "other", None


@contextlib.asynccontextmanager
async def _closing(stream: AsyncIterator[Chunk]) -> AsyncIterator[None]:
    """Close an async-generator stream promptly (on cancel too), if it can be closed."""
    try:
        yield
    finally:
        aclose: Callable[[], object] | None = getattr(stream, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                result = aclose()
                if asyncio.iscoroutine(result):
                    await result
