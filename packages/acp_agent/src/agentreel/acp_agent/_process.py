"""A subagent in an agent process of its own, driven over ACP by its parent (SPEC 6).

The parent starts ``python -m agentreel.acp_agent`` with its own flags and environment (the
same configuration) plus the child's identity: the child session id it announced in
``subagent/start``, its own session id as parent, the spawn index and the depth. The child
writes its own session log with that lineage under the shared sessions root, and its model
calls carry the identity in ``GenerateOptions`` — so an adapter with identity headers on
tells a proxy who is calling, and replay binds the child by parent and spawn index however
the processes interleave. The parent's MCP servers go down in the child's
``session/new`` and its lineage (``main/0``) in the environment, so the child's own
connections are named as an in-process child's are (SPEC 19). The parent is the child's
ACP client: it opens one session, sends the task as one prompt, collects the answer text,
forwards permission requests to its own editor, and sends ``session/cancel`` when its turn
is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from agentreel.acp_agent._channel import ClientChannel, TurnOutcome
from agentreel.acp_agent._config import (
    CHILD_SESSION_ENV,
    DEPTH_ENV,
    LINEAGE_ENV,
    PARENT_SESSION_ENV,
    SPAWN_INDEX_ENV,
)
from agentreel.acp_agent._mcp import McpServer
from agentreel.llm import ToolCallPart

logger = logging.getLogger("agentreel.acp_agent")

AGENT_MODULE = "agentreel.acp_agent"
_STOP_REASONS = ("end_turn", "max_tokens", "max_turn_requests", "cancelled")


class ProcessChild:
    """One process subagent: ``run_turn(prompt)`` runs the child process to its answer."""

    def __init__(
        self,
        *,
        child_id: str,
        parent_id: str,
        spawn_index: int,
        depth: int,
        cwd: str,
        channel: ClientChannel,
        lineage: str,
        mcp_servers: Sequence[McpServer] = (),
    ) -> None:
        self._id = child_id
        self._parent_id = parent_id
        self._spawn_index = spawn_index
        self._depth = depth
        self._cwd = cwd
        self._channel = channel
        self._lineage = lineage
        self._mcp_servers = tuple(mcp_servers)

    @property
    def id(self) -> str:
        return self._id

    def close(self) -> None:
        """Nothing to flush here: the child process wrote and closed its own log."""

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env[CHILD_SESSION_ENV] = self._id
        env[PARENT_SESSION_ENV] = self._parent_id
        env[SPAWN_INDEX_ENV] = str(self._spawn_index)
        env[DEPTH_ENV] = str(self._depth)
        env[LINEAGE_ENV] = self._lineage
        return env

    async def run_turn(self, prompt: str) -> TurnOutcome:
        import acp
        from acp import PROTOCOL_VERSION, RequestError, text_block
        from acp.schema import ClientCapabilities, Implementation

        client = _ParentClient(self._channel)
        where = f"process subagent {self._id} (spawn index {self._spawn_index})"
        try:
            async with (
                acp.spawn_agent_process(
                    client,  # type: ignore[arg-type]
                    sys.executable,
                    "-m",
                    AGENT_MODULE,
                    # The parent's own flags: the child is configured exactly like it.
                    *sys.argv[1:],
                    env=self._environment(),
                    cwd=self._cwd,
                    # On exit: stdin closed, then SIGTERM after the timeout (the agent flushes
                    # its log on either).
                    transport_kwargs={
                        "stderr": sys.stderr,
                        "limit": 50 * 1024 * 1024,
                        "shutdown_timeout": 10.0,
                    },
                ) as (conn, _process)
            ):
                await conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(),
                    client_info=Implementation(name="agentreel-parent", version="0.1.0"),
                )
                # The parent's MCP servers (the shims' command lines, the endpoints' URLs
                # the harness gave it): the child opens connections of its own to them,
                # named by its lineage.
                opened = await conn.new_session(
                    cwd=self._cwd, mcp_servers=[server.to_acp() for server in self._mcp_servers]
                )
                if opened.session_id != self._id:
                    return TurnOutcome(
                        "error",
                        error=f"{where} opened session {opened.session_id}, not the announced "
                        f"{self._id}: is {AGENT_MODULE} the agent on this PATH?",
                    )
                try:
                    result = await conn.prompt(
                        session_id=opened.session_id, prompt=[text_block(prompt)]
                    )
                except asyncio.CancelledError:
                    # The parent's turn was cancelled: the child ends its turn as aborted
                    # (and flushes its log) before the process is closed.
                    with contextlib.suppress(Exception):
                        await asyncio.shield(conn.cancel(session_id=opened.session_id))
                    raise
        except RequestError as exc:
            return TurnOutcome("error", error=f"{where} failed: {exc}")
        except (OSError, ConnectionError, asyncio.IncompleteReadError) as exc:
            return TurnOutcome("error", error=f"{where} went away: {type(exc).__name__}: {exc}")
        stop = str(result.stop_reason)
        if stop not in _STOP_REASONS:
            return TurnOutcome("error", error=f"{where} stopped with {stop!r}", text=client.text)
        return TurnOutcome(stop, text=client.text)  # type: ignore[arg-type]


class _ParentClient:
    """The parent's ACP client for one child: keeps its answer, forwards permissions."""

    def __init__(self, channel: ClientChannel) -> None:
        self._channel = channel
        self.text = ""

    def on_connect(self, conn: Any) -> None:
        return None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        # Frames are recorded before anything awaits: handlers may run out of order.
        if getattr(update, "session_update", None) == "agent_message_chunk":
            self.text += getattr(getattr(update, "content", None), "text", "") or ""

    async def request_permission(
        self, options: Any, session_id: str, tool_call: Any, **kwargs: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        raw = getattr(tool_call, "raw_input", None)
        call = ToolCallPart(
            id=str(getattr(tool_call, "tool_call_id", "")),
            name="write_file",
            arguments=json.dumps(raw) if raw is not None else "{}",
        )
        title = str(getattr(tool_call, "title", None) or "a subagent's write")
        locations = getattr(tool_call, "locations", None) or []
        path = str(getattr(locations[0], "path", "")) if locations else ""
        allowed = await self._channel.request_permission(call, title, path)
        kinds = ("allow_once", "allow_always") if allowed else ("reject_once", "reject_always")
        chosen = next((o for o in options if str(getattr(o, "kind", "")) in kinds), None)
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )
