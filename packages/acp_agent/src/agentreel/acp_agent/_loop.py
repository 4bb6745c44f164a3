"""The agent loop: a prompt is a turn of steps; a step is one model call and its tool calls.

This module knows nothing about ACP: it talks to the editor through ``ClientChannel`` (the
ACP bridge implements it; tests use fakes), so the same loop drives the main session and,
in-process, every subagent. It holds the turn loop and the model step; the file tools
live in ``_tools`` and subagent orchestration (spawn indexes, concurrent children) in
``_subagents``.

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
from typing import Any

from agentreel.acp_agent._channel import (
    CancelScope,
    ClientChannel,
    StopReason,
    SubagentChannel,
    TurnOutcome,
)
from agentreel.acp_agent._config import DEFAULT_MAX_DEPTH, DEFAULT_SYSTEM_PROMPT, ChildIdentity
from agentreel.acp_agent._mcp import McpClient, mcp_client
from agentreel.acp_agent._process import ProcessChild
from agentreel.acp_agent._subagents import Delegation
from agentreel.acp_agent._tools import describe_call, run_file_tool
from agentreel.acp_agent._workspace import (
    LIST_FILES,
    READ_FILE,
    SUBAGENT,
    SUBAGENT_WITH_PROCESS,
    WRITE_FILE,
    Workspace,
)
from agentreel.acp_agent.exceptions import ClientDisconnectedError
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
    AssistantMessageData,
    CallRecorder,
    Conversation,
    EventData,
    Session,
    SessionStore,
    ToolCallData,
    ToolResultData,
    TurnEndData,
    TurnEndReason,
    TurnStart,
    TurnStartData,
    UserMessageData,
    call_options,
)

# TurnOutcome is re-exported: code that wraps ``AgentSession.run_turn`` names its result.
__all__ = [
    "ALL_TOOLS",
    "DEFAULT_MAX_DEPTH",
    "SYSTEM_PROMPT",
    "AgentRuntime",
    "AgentSession",
    "Conversation",
    "TurnOutcome",
]

logger = logging.getLogger("agentreel.acp_agent")

# The default lives with the configuration (``--system-prompt`` / AGENTREEL_SYSTEM_PROMPT).
SYSTEM_PROMPT = DEFAULT_SYSTEM_PROMPT
ALL_TOOLS: tuple[ToolSpec, ...] = (READ_FILE, LIST_FILES, WRITE_FILE, SUBAGENT)
# With process subagents the model is offered mode "process" too. Only then: the tool schema
# is part of every recorded request header, so the default agent's must not change.
PROCESS_TOOLS: tuple[ToolSpec, ...] = (READ_FILE, LIST_FILES, WRITE_FILE, SUBAGENT_WITH_PROCESS)


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
    # "process": spawned subagents run as agent processes of their own (ProcessChild).
    subagent_runner: str = "in-process"
    # Set in a process subagent: its one session is the child its parent announced.
    identity: ChildIdentity | None = None

    def open_main(
        self,
        cwd: str,
        channel_for: Callable[[str], ClientChannel],
        mcp_servers: Sequence[Any] | None = None,
    ) -> AgentSession:
        """Create a top-level session; ``channel_for(session_id)`` makes its channel, its
        MCP client connects to ``mcp_servers`` (ACP ``mcpServers``).

        In a process subagent the first session is the parent's announced child: the id,
        parent, spawn index and MCP lineage it was given, one level deeper.
        """
        identity, self.identity = self.identity, None
        lineage = "main"
        if identity is None:
            session = self.store.create(cwd)
            depth = 0
        else:
            lineage = identity.lineage
            session = self.store.adopt(
                cwd,
                session_id=SessionId(identity.session_id),
                parent_session=SessionId(identity.parent_session_id),
                spawn_index=identity.spawn_index,
            )
            depth = identity.depth
        self.sessions.append(session)
        return AgentSession(
            self,
            session,
            channel_for(session.header.id),
            depth=depth,
            mcp=mcp_client(mcp_servers, lineage),
            lineage=lineage,
        )

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
        mcp: McpClient | None = None,
        lineage: str = "main",
    ) -> None:
        self.runtime = runtime
        # ``main``, ``main/0`` for its first child: how its MCP connections name it.
        self.lineage = lineage
        # The session's MCP tools (the servers of session/new), its own connections.
        self.mcp = mcp
        self._mcp_tools: tuple[ToolSpec, ...] = ()
        self.session = session
        self.channel = channel
        self.depth = depth
        self.cancel_scope = cancel_scope or CancelScope()
        self.workspace = Workspace(session.header.cwd)
        events = session.events
        # A fork child continues its seed: the conversation and the turn numbering.
        self.conversation = Conversation(events)
        self._next_turn = sum(1 for event in events if isinstance(event, TurnStart))
        self._delegation = Delegation(
            parent=session,
            store=runtime.store,
            channel=channel,
            depth=depth,
            max_depth=runtime.max_depth,
            opened=runtime.sessions,
            open_child=self._open_child,
            append=self._append,
            open_process=self._open_process_child if runtime.subagent_runner == "process" else None,
        )
        self.running = False

    @property
    def id(self) -> str:
        return self.session.header.id

    def _append(self, data: EventData) -> None:
        self.conversation.apply(self.session.append(data))

    def close(self) -> None:
        self.session.close()
        if self.mcp is not None:
            self.mcp.close()  # the session's MCP connections end with it

    def _open_process_child(self, child_id: str, spawn_index: int) -> ProcessChild:
        """A spawned child as its own agent process, one level deeper."""
        return ProcessChild(
            child_id=child_id,
            parent_id=self.id,
            spawn_index=spawn_index,
            depth=self.depth + 1,
            cwd=self.session.header.cwd,
            channel=self.channel,
            lineage=f"{self.lineage}/{spawn_index}",
            mcp_servers=self.mcp.servers if self.mcp is not None else (),
        )

    def _open_child(self, session: Session) -> AgentSession:
        """A child session's loop: one level deeper, the editor reached only for permission,
        cancelled with its parent."""
        spawn_index = session.header.spawn_index or 0
        return AgentSession(
            self.runtime,
            session,
            SubagentChannel(self.channel),
            depth=self.depth + 1,
            cancel_scope=self.cancel_scope,
            mcp=self.mcp.child(spawn_index) if self.mcp is not None else None,
            lineage=f"{self.lineage}/{spawn_index}",
        )

    def fork_for_client(
        self, channel_for: Callable[[str], ClientChannel], mcp_servers: Sequence[Any] | None
    ) -> AgentSession:
        """ACP ``session/fork`` of this session (between its turns): a fork child carrying
        its conversation, served to the client as a session of its own on ``channel_for``,
        with the fork request's MCP servers on connections of its own (lineage
        ``<this>/<spawn index>``)."""
        session = self._delegation.fork_for_client()  # closed with the runtime's sessions
        index = session.header.spawn_index or 0
        lineage = f"{self.lineage}/{index}"
        mcp: McpClient | None
        if self.mcp is not None:
            mcp = self.mcp.child(index, mcp_servers or ())
        else:
            mcp = mcp_client(mcp_servers, lineage)
        return AgentSession(
            self.runtime,
            session,
            channel_for(session.header.id),
            depth=self.depth,
            mcp=mcp,
            lineage=lineage,
        )

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
        return call_options(
            self.session,
            model=self.runtime.model,
            system=self.runtime.system_prompt,
            tools=(*self.runtime.tools, *self._mcp_tools),
            messages=self.conversation.messages,
        )

    def _abort_reason(self) -> str:
        return "cancelled by the client" if self.cancel_scope.requested else "interrupted"

    async def _model_step(self, turn: int, step: int) -> _StepResult:
        if self.mcp is not None:
            self._mcp_tools = await self.mcp.tool_specs()
        options = self._options()
        # The kit's recorder: request/header now, every chunk appended before it reaches
        # this loop, and a call that ends without finish sealed with one.
        call = CallRecorder(self.session, turn=turn, step=step, request=options)
        checker = StreamContractChecker()
        blocks: dict[int, CompletedBlock] = {}
        finish: Finish | None = None
        where = f"session {self.id}, turn {turn}, step {step}"
        try:
            stream = call.record(self.runtime.provider.stream(options), aborted=self._abort_reason)
            async with _closing(stream):
                async for chunk in stream:
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
            call.seal(Finish(reason="aborted", message=self._abort_reason()))
            raise
        except LlmError as exc:
            call.seal_for(exc)
            raise _ModelFailure(f"{where}: model call failed: {exc}", exc) from exc
        except AgentreelLlmError as exc:
            call.seal_for(exc)
            raise _ModelFailure(
                f"{where}: model call failed: the provider's stream is invalid: {exc}"
            ) from exc
        except Exception as exc:
            failure = f"{type(exc).__name__}: {exc}"
            call.seal_for(exc)
            # A provider's own error (a replay mismatch, a misconfiguration) explains itself:
            # one line in the log, the whole message in the prompt's JSON-RPC error, the
            # traceback only at debug level.
            logger.error("%s: model call failed: %s", where, failure.splitlines()[0])
            logger.debug("%s: model call failed", where, exc_info=True)
            raise _ModelFailure(f"{where}: model call failed: {failure}") from exc
        assert finish is not None  # checker.close() guarantees a finish chunk
        if finish.reason == "aborted":
            raise _StreamAborted(f"{where}: the provider aborted the stream: {finish.message}")
        if finish.reason == "error":
            detail = finish.message or "no message"
            code = f" [{finish.code}]" if finish.code else ""
            raise _ModelFailure(
                # "model call failed" like the raised-error path above: a prompt's error says
                # it once (the server no longer prefixes it), whichever way the call failed.
                f"{where}: model call failed: the model stream finished with an error{code}: "
                f"{detail}",
                LlmError(finish.code or "finish-error", None, detail),
            )
        content = tuple(blocks[index] for index in sorted(blocks))
        message = Message(role="assistant", content=content)
        if content:
            self._append(AssistantMessageData(turn=turn, step=step, message=message))
        return _StepResult(message.text, message.tool_calls, finish)

    async def _announce(self, call: ToolCallPart) -> None:
        title, kind, path = describe_call(call)
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
                if self.mcp is not None and self.mcp.handles(call.name):
                    content, is_error = await self.mcp.call(call)
                else:
                    content, is_error = await run_file_tool(
                        call, self.workspace, self.channel, self.runtime.tools
                    )
                self._record_result(turn, step, call, content, is_error, pending)
                await self.channel.tool_call_finished(
                    call.id, "failed" if is_error else "completed", content
                )
        delegated = [call for call in calls if call.name == SUBAGENT.name]
        if delegated:

            def record(call: ToolCallPart, content: str, is_error: bool) -> None:
                self._record_result(turn, step, call, content, is_error, pending)

            await self._delegation.run(delegated, record)

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
