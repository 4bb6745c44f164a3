"""The reference agent's MCP client (the official ``mcp`` SDK): the servers the client
gives in ``session/new`` (stdio, streamable HTTP or the legacy HTTP+SSE transport), their
tools offered to the model as ``mcp__<server>__<tool>``, each call made on a connection of
the calling session's own.

Every session — the main one and each subagent — opens its own connections and names
itself on them by its lineage (``main``, ``main/0`` for its first spawned child), a name
the same on every run: ``AGENTREEL_MCP_SESSION`` for a stdio server, the
``x-agentreel-mcp-session`` header for HTTP (what agentreel's MCP record and replay bind by,
SPEC 19). A session opens one connection per server, on its first listing, and keeps it
until the session closes. The SDK's transports must be entered and left in one task, so
each connection lives in a task of its own (``_Connection``) that the session's calls use
and ``close`` ends.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from agentreel.llm import MCP_SESSION_ENV, MCP_SESSION_HEADER, ToolCallPart, ToolSpec

TOOL_PREFIX = "mcp__"
_SEPARATOR = "__"


@dataclass(frozen=True, slots=True)
class McpServer:
    """One server from ``session/new``: ``command``/``args``/``env`` (stdio) or ``url``
    (streamable HTTP, or the legacy HTTP+SSE transport where ``sse``: ACP's type ``sse``)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    sse: bool = False

    @classmethod
    def from_acp(cls, server: Any) -> McpServer:
        url = getattr(server, "url", None)
        if url is not None:
            return cls(
                name=server.name,
                url=url,
                headers=_pairs(getattr(server, "headers", ())),
                sse=getattr(server, "type", None) == "sse",
            )
        return cls(
            name=server.name,
            command=server.command,
            args=tuple(server.args or ()),
            env=_pairs(server.env),
        )

    def to_acp(self) -> Any:
        """This server as ACP ``mcpServers`` gives it: what a parent hands the
        ``session/new`` of a process subagent (SPEC 19)."""
        from acp.schema import (
            EnvVariable,
            HttpHeader,
            HttpMcpServer,
            McpServerStdio,
            SseMcpServer,
        )

        if self.url is not None:
            headers = [HttpHeader(name=name, value=value) for name, value in self.headers]
            if self.sse:
                return SseMcpServer(type="sse", name=self.name, url=self.url, headers=headers)
            return HttpMcpServer(type="http", name=self.name, url=self.url, headers=headers)
        assert self.command is not None
        env = [EnvVariable(name=name, value=value) for name, value in self.env]
        return McpServerStdio(name=self.name, command=self.command, args=list(self.args), env=env)


class _Connection:
    """One server's connection of one session: opened in a task of its own (the SDK's
    transports must be entered and left in one task), used by the session's calls from any
    task, left when ``close`` is called."""

    def __init__(self, client: McpClient, server: McpServer) -> None:
        loop = asyncio.get_running_loop()
        self._ready: asyncio.Future[Any] = loop.create_future()
        self._closing = asyncio.Event()
        self.task = asyncio.create_task(
            self._hold(client, server), name=f"mcp {server.name} {client.lineage}"
        )

    async def _hold(self, client: McpClient, server: McpServer) -> None:
        try:
            async with client.connect(server) as session:
                self._ready.set_result(session)
                await self._closing.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
                self._ready.exception()  # retrieved here too: a closed session may never ask
            if not isinstance(exc, Exception):
                raise

    async def session(self) -> Any:
        return await asyncio.shield(self._ready)

    def close(self) -> None:
        self._closing.set()


@dataclass
class McpClient:
    """A session's MCP tools: listed once (lazily), one connection per server kept until
    ``close``."""

    servers: tuple[McpServer, ...]
    lineage: str = "main"
    _tools: dict[str, tuple[McpServer, str]] = field(default_factory=dict)
    _specs: tuple[ToolSpec, ...] | None = None
    _connections: dict[str, _Connection] = field(default_factory=dict)
    # Every connection task of this client and of its children: what ``aclose`` awaits.
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def child(self, spawn_index: int, servers: Sequence[Any] | None = None) -> McpClient:
        """The client of a child session: its own connections to the same servers, or to
        ``servers`` (ACP ``mcpServers``: what a client's ``session/fork`` gives)."""
        chosen = self.servers if servers is None else _servers(servers)
        return McpClient(chosen, f"{self.lineage}/{spawn_index}", _tasks=self._tasks)

    def reconnected(self, servers: Sequence[Any] | None) -> McpClient:
        """This session's client with ``servers`` (ACP ``session/load``'s): these
        connections end, the session's next calls open new ones under the same lineage."""
        self.close()
        return McpClient(_servers(servers or ()), self.lineage, _tasks=self._tasks)

    async def tool_specs(self) -> tuple[ToolSpec, ...]:
        if self._specs is None:
            specs: list[ToolSpec] = []
            for server in self.servers:
                session = await self._session(server)
                listed = await session.list_tools()
                for tool in listed.tools:
                    name = f"{TOOL_PREFIX}{server.name}{_SEPARATOR}{tool.name}"
                    self._tools[name] = (server, tool.name)
                    specs.append(
                        ToolSpec(
                            name=name,
                            description=tool.description or tool.name,
                            parameters=dict(tool.input_schema),
                        )
                    )
            self._specs = tuple(specs)
        return self._specs

    def handles(self, name: str) -> bool:
        return name in self._tools

    async def call(self, call: ToolCallPart) -> tuple[str, bool]:
        """``(content, is_error)`` of one tool call; a failure is an error result."""
        server, tool = self._tools[call.name]
        try:
            arguments = json.loads(call.arguments or "{}")
            session = await self._session(server)
            result = await session.call_tool(tool, arguments)
        except Exception as exc:  # the model sees the failure; the turn goes on
            return f"{call.name}: MCP server {server.name!r} failed: {_first_error(exc)}", True
        texts = [str(getattr(block, "text", "")) for block in result.content]
        return "\n".join(texts), bool(result.is_error)

    def close(self) -> None:
        """End this session's connections (their tasks leave the transports)."""
        for connection in self._connections.values():
            connection.close()

    async def aclose(self) -> None:
        """``close``, then wait until every connection of this client and its children is
        left (the stdio servers' processes ended)."""
        self.close()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _session(self, server: McpServer) -> Any:
        connection = self._connections.get(server.name)
        if connection is None:
            connection = self._connections[server.name] = _Connection(self, server)
            self._tasks.append(connection.task)
        return await connection.session()

    @asynccontextmanager
    async def connect(self, server: McpServer) -> AsyncIterator[Any]:
        """An initialized ``ClientSession`` on ``server``, named by this session's lineage."""
        from mcp.client.session import ClientSession

        if server.url is not None and server.sse:
            from mcp.client.sse import sse_client

            headers = {**dict(server.headers), MCP_SESSION_HEADER: self.lineage}
            async with (
                sse_client(server.url, headers=headers) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield session
            return
        if server.url is not None:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            headers = {**dict(server.headers), MCP_SESSION_HEADER: self.lineage}
            async with (
                create_mcp_http_client(headers=headers) as http,
                streamable_http_client(server.url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield session
            return
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert server.command is not None
        env = {**os.environ, **dict(server.env), MCP_SESSION_ENV: self.lineage}
        parameters = StdioServerParameters(command=server.command, args=list(server.args), env=env)
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def _pairs(items: Sequence[Any] | None) -> tuple[tuple[str, str], ...]:
    return tuple((str(item.name), str(item.value)) for item in items or ())


def _first_error(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _servers(servers: Sequence[Any]) -> tuple[McpServer, ...]:
    return tuple(McpServer.from_acp(server) for server in servers)


def mcp_client(servers: Sequence[Any] | None, lineage: str = "main") -> McpClient | None:
    """A top-level session's client for ACP ``mcpServers``, or None when there are none."""
    if not servers:
        return None
    return McpClient(_servers(servers), lineage)
