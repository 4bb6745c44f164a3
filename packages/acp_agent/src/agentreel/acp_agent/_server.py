"""The ACP side: the ``acp.Agent`` implementation and the channel that feeds the editor.

Error decisions (documented in the README):

- A model failure (``LlmError``, a broken stream, ``finish{error}``) ends the turn cleanly
  (``turn/end`` error in the log) and the ``session/prompt`` request is answered with a
  JSON-RPC error ``-32603`` whose message names the session, turn, step and the failure,
  and whose ``data`` carries ``code``/``status`` of the ``LlmError``. ACP has no "error"
  stop reason; a JSON-RPC error is how the protocol reports a failed request.
- ``session/cancel`` ends the running turn at once: ``turn/end`` aborted, stop reason
  ``cancelled``.
- The max-steps bound ends the turn with ``turn/end`` max-turns and stop reason
  ``max_turn_requests``.
- Shutting down (stdin EOF, SIGTERM, SIGINT: see ``_main``) interrupts every turn in
  flight (``turn/end`` interrupted, children included) and answers its ``session/prompt``
  with stop reason ``cancelled`` before the connection closes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    ForkSessionResponse,
    Implementation,
    PermissionOption,
    RequestPermissionResponse,
    SessionCapabilities,
    SessionForkCapabilities,
    ToolCallLocation,
    ToolCallUpdate,
)

from agentreel.acp_agent._channel import ToolKindName, ToolStatus, TurnOutcome
from agentreel.acp_agent._config import AgentConfig
from agentreel.acp_agent._loop import ALL_TOOLS, PROCESS_TOOLS, AgentRuntime, AgentSession
from agentreel.acp_agent._mcp import mcp_client
from agentreel.acp_agent.exceptions import ClientDisconnectedError
from agentreel.llm import AgentEnvironment, Provider, ToolCallPart, load_provider
from agentreel.session import AssistantMessage, SessionStore, UserMessage

logger = logging.getLogger("agentreel.acp_agent")

AGENT_NAME = "agentreel-acp-agent"
AGENT_VERSION = "0.1.0"
ALLOW_OPTION = "allow"
REJECT_OPTION = "reject"


class AcpChannel:
    """Sends one ACP session's updates to the editor over the agent-side connection."""

    def __init__(self, client: Client, acp_session_id: str, cwd: str) -> None:
        self._client = client
        self._session_id = acp_session_id
        self._cwd = cwd

    def _locations(self, path: str | None) -> list[ToolCallLocation] | None:
        if path is None:
            return None
        return [ToolCallLocation(path=os.path.normpath(os.path.join(self._cwd, path)))]

    async def _update(self, update: Any) -> None:
        try:
            await self._client.session_update(self._session_id, update)
        except ConnectionError as exc:
            raise ClientDisconnectedError(
                f"session {self._session_id}: the client connection closed ({exc})"
            ) from exc

    async def agent_text(self, text: str) -> None:
        await self._update(update_agent_message_text(text))

    async def user_text(self, text: str) -> None:
        """A user message of the session's history (``session/load`` sends it again)."""
        await self._update(update_user_message_text(text))

    async def agent_thought(self, text: str) -> None:
        await self._update(update_agent_thought_text(text))

    async def tool_call_started(
        self, call: ToolCallPart, title: str, kind: ToolKindName, path: str | None
    ) -> None:
        await self._update(
            start_tool_call(
                call.id,
                title,
                kind=kind,
                status="pending",
                locations=self._locations(path),
                raw_input=_raw_input(call.arguments),
            ),
        )

    async def tool_call_running(self, call_id: str) -> None:
        await self._update(update_tool_call(call_id, status="in_progress"))

    async def tool_call_finished(self, call_id: str, status: ToolStatus, output: str) -> None:
        await self._update(
            update_tool_call(call_id, status=status, content=[tool_content(text_block(output))])
        )

    async def request_permission(self, call: ToolCallPart, title: str, path: str) -> bool:
        try:
            response = await self._ask_permission(call, title, path)
        except ConnectionError as exc:
            raise ClientDisconnectedError(
                f"session {self._session_id}: the client connection closed while asking "
                f"permission for {call.id} ({exc})"
            ) from exc
        outcome = response.outcome
        return isinstance(outcome, AllowedOutcome) and outcome.option_id == ALLOW_OPTION

    async def _ask_permission(
        self, call: ToolCallPart, title: str, path: str
    ) -> RequestPermissionResponse:
        return await self._client.request_permission(
            session_id=self._session_id,
            tool_call=ToolCallUpdate(
                tool_call_id=call.id,
                title=title,
                kind="edit",
                status="pending",
                locations=[ToolCallLocation(path=path)],
                raw_input=_raw_input(call.arguments),
            ),
            options=[
                PermissionOption(option_id=ALLOW_OPTION, name="Allow", kind="allow_once"),
                PermissionOption(option_id=REJECT_OPTION, name="Reject", kind="reject_once"),
            ],
        )


def _raw_input(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


@dataclass
class _AcpSession:
    agent: AgentSession
    turn_task: asyncio.Task[Any] | None = None
    # Resolved when the running session/prompt call returns its answer (to the SDK, which
    # queues the response frame in the same step).
    answered: asyncio.Future[None] | None = None


class ReferenceAgent:
    """agentreel's reference coding agent, served with ``acp.run_agent``.

    The provider is created on the first ``session/new`` (so the replay provider can learn
    the live cwd), then shared by every session and subagent of the process.
    """

    def __init__(self, config: AgentConfig, provider: Provider | None = None) -> None:
        self.config = config
        self._client: Client | None = None
        self._provider = provider
        self._runtime: AgentRuntime | None = None
        self._sessions: dict[str, _AcpSession] = {}

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    # -- ACP methods -------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        capabilities = AgentCapabilities(load_session=False)
        if self.config.load_and_fork:
            capabilities = AgentCapabilities(
                load_session=True,
                session_capabilities=SessionCapabilities(fork=SessionForkCapabilities()),
            )
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=capabilities,
            agent_info=Implementation(name=AGENT_NAME, title="agentreel", version=AGENT_VERSION),
        )

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        if not os.path.isabs(cwd) or not os.path.isdir(cwd):  # noqa: ASYNC240 (one stat)
            raise RequestError.invalid_params(
                {
                    "cwd": cwd,
                    "details": "session/new needs an absolute path to an existing directory",
                }
            )
        runtime = self._ensure_runtime(cwd)
        client = self._require_client()
        session_cwd = str(Path(cwd))
        # The ACP session id is the agentreel main session's id.
        agent = runtime.open_main(
            session_cwd,
            lambda session_id: AcpChannel(client, session_id, session_cwd),
            mcp_servers,
        )
        self._sessions[agent.id] = _AcpSession(agent)
        logger.info("session %s opened in %s (%s)", agent.id, session_cwd, agent.session.path)
        return NewSessionResponse(session_id=agent.id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any
    ) -> LoadSessionResponse:
        """ACP ``session/load`` of a session this process holds (``--load-and-fork``):
        its MCP connections reopened on the servers given now (the same lineage), its
        history sent to the client again (user and agent messages), then the session goes
        on with its conversation."""
        state = self._idle(session_id, "session/load")
        agent = state.agent
        if str(Path(cwd)) != agent.session.header.cwd:
            raise RequestError.invalid_params(
                {
                    "cwd": cwd,
                    "details": f"session {session_id} works in {agent.session.header.cwd}; "
                    "load it with that cwd",
                }
            )
        if agent.mcp is not None:
            agent.mcp = agent.mcp.reconnected(mcp_servers)
        else:
            agent.mcp = mcp_client(mcp_servers, agent.lineage)
        channel = agent.channel
        assert isinstance(channel, AcpChannel)
        for event in agent.session.events:
            if isinstance(event, UserMessage):
                await channel.user_text(event.data.text)
            elif isinstance(event, AssistantMessage) and event.data.message.text:
                await channel.agent_text(event.data.message.text)
        return LoadSessionResponse()

    async def fork_session(
        self, session_id: str, cwd: str, mcp_servers: Any = None, **kwargs: Any
    ) -> ForkSessionResponse:
        """ACP ``session/fork`` (``--load-and-fork``): a new session carrying this one's
        conversation — a fork child in the logs (spawn index and ``subagent/start`` in the
        parent's), a session of its own to the client, with the servers given now."""
        parent = self._idle(session_id, "session/fork")
        client = self._require_client()
        session_cwd = parent.agent.session.header.cwd
        agent = parent.agent.fork_for_client(
            lambda forked_id: AcpChannel(client, forked_id, session_cwd), mcp_servers
        )
        self._sessions[agent.id] = _AcpSession(agent)
        logger.info("session %s forked from %s", agent.id, session_id)
        return ForkSessionResponse(session_id=agent.id)

    def _idle(self, session_id: str, method: str) -> _AcpSession:
        """The session ``method`` acts on: offered, known to this process, between turns."""
        if not self.config.load_and_fork:
            raise RequestError.method_not_found(method)
        state = self._sessions.get(session_id)
        if state is None:
            raise RequestError.invalid_params(
                {
                    "sessionId": session_id,
                    "details": f"unknown session; {method} takes a session this agent process "
                    "opened (its logs are not read back)",
                }
            )
        if state.turn_task is not None:
            raise RequestError.invalid_request(
                {"sessionId": session_id, "details": f"a prompt is running; {method} waits"}
            )
        return state

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        state = self._sessions.get(session_id)
        if state is None:
            raise RequestError.invalid_params(
                {"sessionId": session_id, "details": "unknown session; call session/new first"}
            )
        if state.turn_task is not None:
            raise RequestError.invalid_request(
                {
                    "sessionId": session_id,
                    "details": "a prompt is already running in this session; wait for its "
                    "response or send session/cancel",
                }
            )
        text = _prompt_text(prompt)
        state.agent.cancel_scope.requested = False
        task = asyncio.create_task(state.agent.run_turn(text), name=f"turn {session_id}")
        state.turn_task = task
        state.answered = asyncio.get_running_loop().create_future()
        current = asyncio.current_task()
        try:
            outcome = await task
        except asyncio.CancelledError:
            if current is not None and current.cancelling():
                raise
            # session/cancel landed before the turn task ever ran: nothing was logged.
            outcome = TurnOutcome("cancelled", error="cancelled before the turn started")
        finally:
            state.turn_task = None
            if not state.answered.done():
                state.answered.set_result(None)
        if current is not None and current.cancelling():
            raise asyncio.CancelledError  # shutting down: no response to send
        if outcome.stop_reason == "error":
            data: dict[str, Any] = {"sessionId": session_id, "details": outcome.error}
            if outcome.llm_error is not None:
                data["code"] = outcome.llm_error.code
                data["status"] = outcome.llm_error.status
            # The turn's error already says what failed and where; said once.
            raise RequestError(-32603, outcome.error or "model call failed", data)
        return PromptResponse(stop_reason=outcome.stop_reason)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        state = self._sessions.get(session_id)
        if state is None or state.turn_task is None:
            logger.info("session/cancel for %s: no turn running", session_id)
            return
        state.agent.cancel_scope.requested = True
        state.turn_task.cancel()

    # -- lifecycle ---------------------------------------------------------------------

    async def interrupt(self, grace: float) -> None:
        """Interrupt every turn in flight and wait (up to ``grace`` seconds) until each
        ``session/prompt`` has its answer: what shutting down does before closing."""
        running = [state for state in self._sessions.values() if state.turn_task is not None]
        for state in running:
            assert state.turn_task is not None
            state.turn_task.cancel()  # cancel_scope not requested: the turn ends interrupted
        answers = [state.answered for state in running if state.answered is not None]
        if not answers:
            return
        _, late = await asyncio.wait(answers, timeout=grace)
        if late:
            logger.warning(
                "%d turn(s) did not end within %.0fs of the interruption; closing anyway",
                len(late),
                grace,
            )

    def close(self) -> None:
        """Flush and close every session; close the provider (replay writes its report)."""
        for state in self._sessions.values():
            if state.agent.mcp is not None:
                state.agent.mcp.close()
        if self._runtime is not None:
            self._runtime.close_all()
        close = getattr(self._provider, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                logger.exception("closing the %r provider failed", self.config.provider)

    async def aclose(self) -> None:
        """``close``, then release an async provider's resources (the SDK adapters' HTTP
        pool lives behind ``aclose``; a sync ``close`` alone would leave it open)."""
        self.close()
        for state in self._sessions.values():
            if state.agent.mcp is not None:
                # Its connections and its children's: each stdio server's process ended.
                await state.agent.mcp.aclose()
        aclose = getattr(self._provider, "aclose", None)
        if callable(aclose):
            try:
                await aclose()
            except Exception:
                logger.exception(
                    "closing the %r provider's connections failed", self.config.provider
                )

    def _require_client(self) -> Client:
        if self._client is None:
            raise RequestError.internal_error({"details": "agent is not connected to a client"})
        return self._client

    def _ensure_runtime(self, cwd: str) -> AgentRuntime:
        if self._runtime is None:
            if self._provider is None:
                self._provider = self._load_provider(cwd)
            self._runtime = AgentRuntime(
                store=SessionStore(self.config.sessions_root),
                provider=self._provider,
                model=self.config.model,
                max_steps=self.config.max_steps,
                system_prompt=self.config.system_prompt,
                max_depth=self.config.max_depth,
                tools=PROCESS_TOOLS if self.config.subagent_runner == "process" else ALL_TOOLS,
                subagent_runner=self.config.subagent_runner,
                identity=self.config.child,
            )
        return self._runtime

    def _load_provider(self, cwd: str) -> Provider:
        # The kit's rule, for any provider: one that takes a live cwd gets the configured
        # one, else this first session's cwd.
        live = self.config.replay_live_cwd
        contract = AgentEnvironment(
            provider=self.config.provider,
            settings=dict(self.config.provider_settings),
            live_cwd=str(live) if live is not None else None,
        )
        settings = contract.settings
        try:
            settings = contract.provider_settings(self.config.provider, cwd=cwd)
            return load_provider(self.config.provider, **settings)
        except Exception as exc:
            # Usually expected (a broken recording, a missing setting): its message says what
            # to do, so one line; the traceback only at debug level.
            cause = f"{type(exc).__name__}: {exc}"
            logger.error("the %r provider could not start: %s", self.config.provider, cause)
            logger.debug("loading provider %r failed", self.config.provider, exc_info=True)
            # The cause goes in the JSON-RPC message itself: clients show the message, and
            # "Internal error" with the cause hidden in `data` told the user nothing.
            raise RequestError(
                -32603,
                f"the {self.config.provider!r} provider could not start: {cause}",
                {
                    "provider": self.config.provider,
                    "settings": sorted(settings),
                    "details": cause,
                },
            ) from exc


def _prompt_text(blocks: list[Any]) -> str:
    """The prompt's text: text blocks and embedded text resources, in order."""
    parts: list[str] = []
    for block in blocks:
        text = getattr(block, "text", None)
        if isinstance(text, str):
            parts.append(text)
            continue
        resource = getattr(block, "resource", None)
        resource_text = getattr(resource, "text", None)
        if isinstance(resource_text, str):
            parts.append(resource_text)
    return "\n".join(parts)
