"""The scenario's steps, driven through the official ACP client against a running agent.

Each step is one ACP request (or, for ``prompt_and_cancel``, a prompt plus the client's
``session/cancel`` at the first ``agent_message_chunk``); ``expect_error`` steps pass
only when the agent answers with the expected JSON-RPC error. ``Progress`` names the step
running now, so a timeout or a crash can say where the run was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import AgentCapabilities, ClientCapabilities, Implementation

from agentreel.snapshot_harness._client import HarnessClient
from agentreel.snapshot_harness._mcp import AcpMcpServers
from agentreel.snapshot_harness._scenario import (
    Authenticate,
    ExpectError,
    ForkSession,
    Initialize,
    LoadSession,
    NewSession,
    Prompt,
    PromptAndCancel,
    Scenario,
    Step,
)
from agentreel.snapshot_harness.exceptions import StepError

_UNKNOWN_SESSION = "00000000-0000-4000-8000-000000000000"


def describe_step(index: int, step: Step) -> str:
    """``step 3 (prompt 'Say hi')`` — how errors name the step that was running."""
    kind = {
        Initialize: "initialize",
        NewSession: "new_session",
        LoadSession: "load_session",
        ForkSession: "fork_session",
        Prompt: "prompt",
        PromptAndCancel: "prompt_and_cancel",
        ExpectError: "expect_error",
        Authenticate: "authenticate",
    }[type(step)]
    text = getattr(step, "text", "")
    if text:
        short = text if len(text) <= 40 else text[:37] + "..."
        return f"step {index + 1} ({kind} {short!r})"
    return f"step {index + 1} ({kind})"


@dataclass(slots=True)
class Progress:
    """Where a run is (``current``, for error messages) and the stop reasons so far."""

    current: str = "startup"
    stop_reasons: list[str] = field(default_factory=list)


async def run_steps(
    scenario: Scenario,
    conn: ClientSideConnection,
    client: HarnessClient,
    cwd: Path,
    progress: Progress,
    mcp_servers: AcpMcpServers | None = None,
) -> None:
    """``mcp_servers``: what every ``session/new``, ``session/load`` and ``session/fork``
    passes (the scenario's MCP servers as record or replay stands them in, SPEC 19)."""
    servers: AcpMcpServers = list(mcp_servers or [])
    session_id: str | None = None
    capabilities: AgentCapabilities | None = None
    for index, step in enumerate(scenario.steps):
        progress.current = describe_step(index, step)
        where = f"{scenario.name}: {progress.current}"
        if isinstance(step, Initialize):
            answer = await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="agentreel-snapshot-harness", version="0.1.0"),
            )
            capabilities = answer.agent_capabilities
            offered = [method.id for method in answer.auth_methods or []]
            if offered and scenario.authenticate is not None:
                progress.current += f" then authenticate {scenario.authenticate.method!r}"
                await authenticate(scenario.authenticate, conn, offered, f"{where}: [authenticate]")
        elif isinstance(step, Authenticate):
            await authenticate(step, conn, None, where)
        elif isinstance(step, NewSession):
            response = await conn.new_session(cwd=str(cwd), mcp_servers=list(servers))
            session_id = response.session_id
        elif isinstance(step, LoadSession):
            assert session_id is not None
            _require(capabilities, "load_session", where)
            await conn.load_session(cwd=str(cwd), session_id=session_id, mcp_servers=list(servers))
        elif isinstance(step, ForkSession):
            assert session_id is not None
            _require(capabilities, "fork_session", where)
            forked = await conn.fork_session(
                session_id=session_id, cwd=str(cwd), mcp_servers=list(servers)
            )
            session_id = forked.session_id
        elif isinstance(step, Prompt):
            assert session_id is not None
            result = await conn.prompt(session_id=session_id, prompt=[text_block(step.text)])
            progress.stop_reasons.append(str(result.stop_reason))
        elif isinstance(step, PromptAndCancel):
            assert session_id is not None
            client.arm_cancel(session_id)
            result = await conn.prompt(session_id=session_id, prompt=[text_block(step.text)])
            client.disarm_cancel()
            await client.wait_cancel_delivered()
            progress.stop_reasons.append(str(result.stop_reason))
            if client.cancel_failure is not None:
                raise StepError(
                    f"{where}: the first agent_message_chunk arrived, but sending "
                    f"session/cancel failed ({client.cancel_failure}); the agent's stderr "
                    "below says whether it was still reading"
                )
            if not client.cancel_sent.is_set():
                raise StepError(
                    f"{where}: the prompt ended (stop reason {result.stop_reason}) before any "
                    "agent_message_chunk arrived, so nothing was cancelled; the recording "
                    "needs text before the point to cancel (a `hang` override in "
                    "replay.override.json streams a little, then waits)"
                )
        else:
            await expect_error(step, conn, cwd, session_id, where, servers)
    if client.unused_answers:
        raise StepError(
            f"{scenario.name}: {len(client.unused_answers)} permission answer(s) were never "
            f"asked for ({', '.join(client.unused_answers)}); remove them from `permissions` in "
            f"{scenario.toml_path} or check why the agent asked fewer times"
        )


def _require(capabilities: AgentCapabilities | None, step: str, where: str) -> None:
    """``step`` needs the agent to advertise it in ``initialize``: ``loadSession``, or
    ``sessionCapabilities.fork``."""
    if step == "load_session":
        offered = capabilities is not None and bool(capabilities.load_session)
        what, method = "agentCapabilities.loadSession", "session/load"
    else:
        session = capabilities.session_capabilities if capabilities is not None else None
        offered = session is not None and session.fork is not None
        what, method = "agentCapabilities.sessionCapabilities.fork", "session/fork"
    if not offered:
        raise StepError(
            f"{where}: the agent's initialize does not advertise {what}, so it takes no "
            f"{method}; remove the {step} step, or give the agent the option that offers "
            "it (the reference agent: --load-and-fork)"
        )


async def authenticate(
    step: Authenticate, conn: ClientSideConnection, offered: list[str] | None, where: str
) -> None:
    """ACP ``authenticate`` with ``step.method``; ``offered``: the ids ``initialize`` listed
    (``None``: not known here), which must include it."""
    if offered is not None and step.method not in offered:
        raise StepError(
            f"{where}: the agent's initialize offers auth methods {', '.join(offered)}, not "
            f"{step.method!r}; set `method` to one of them in scenario.toml"
        )
    try:
        await conn.authenticate(method_id=step.method)
    except RequestError as exc:
        needs = f" (it reads {', '.join(step.env)})" if step.env else ""
        raise StepError(
            f"{where}: the agent refused authenticate with method {step.method!r}{needs}: "
            f"{exc}; check the method id and that the variables it needs are set when "
            "recording"
        ) from None


async def expect_error(
    step: ExpectError,
    conn: ClientSideConnection,
    cwd: Path,
    session_id: str | None,
    where: str,
    mcp_servers: AcpMcpServers | None = None,
) -> None:
    try:
        if step.method == "initialize":
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
        elif step.method == "new_session":
            await conn.new_session(cwd=step.text or str(cwd), mcp_servers=list(mcp_servers or []))
        else:
            target = session_id if step.session == "current" and session_id else _UNKNOWN_SESSION
            await conn.prompt(session_id=target, prompt=[text_block(step.text)])
    except RequestError as exc:
        if step.code is not None and exc.code != step.code:
            raise StepError(
                f"{where}: expected JSON-RPC error code {step.code}, got {exc.code} ({exc}); "
                "fix `code` in scenario.toml or the agent"
            ) from None
        text = f"{exc} {exc.data!r}" if exc.data is not None else str(exc)
        if step.message is not None and step.message not in text:
            raise StepError(
                f"{where}: expected an error message containing {step.message!r}, got "
                f"{text!r}; fix `message` in scenario.toml or the agent"
            ) from None
        return
    raise StepError(
        f"{where}: expected a JSON-RPC error from {step.method}, but the request succeeded"
    )
