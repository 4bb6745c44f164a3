"""The HTTP endpoint on 127.0.0.1: streamable HTTP at ``/mcp/<server>`` and the legacy
HTTP+SSE transport (MCP 2024-11-05) at ``/mcp/<server>/sse``. Record: forwards each POST to
the real server and writes the exchanged messages; replay: answers them from the session's
recording with nothing listening upstream (SPEC 19).

Streamable HTTP: a connection is an MCP session (``mcp-session-id``); the standalone GET
stream is not offered (405, which the protocol allows): server messages travel on the POSTs'
answers. SSE: a connection is one GET stream; its first event names the URL the client POSTs
its messages to (``/mcp/<server>/messages?connection=<id>``, answered 202), and every server
message arrives on the stream. The calling session's identity is the
``x-agentreel-mcp-session`` header where the agent sends one (on the GET, for SSE).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import aiohttp
from aiohttp import web

from agentreel.mcp_replay._layout import SESSION_HEADER, UrlTransport
from agentreel.mcp_replay._recording import (
    ConnectionRecorder,
    Message,
    encode,
    load_recordings,
)
from agentreel.mcp_replay._replay import ConnectionReplay, RunState
from agentreel.mcp_replay._settings import McpSettings, check_server_name
from agentreel.mcp_replay.exceptions import McpConfigError, McpDriftError, McpReplayError

_SESSION_ID = "mcp-session-id"
_FORWARDED = ("content-type", "accept", _SESSION_ID, "mcp-protocol-version", "authorization")
_REPLAY_ERROR_CODE = -32603
# The legacy SSE transport: the stream's query parameter naming its connection.
_CONNECTION = "connection"
_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


def _messages(body: Any) -> list[Message]:
    if isinstance(body, list):
        return [m for m in body if isinstance(m, dict)]
    return [body] if isinstance(body, dict) else []


def _sse_messages(text: str) -> list[Message]:
    found: list[Message] = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(
            line[5:].lstrip() for line in event.split("\n") if line.startswith("data:")
        )
        if data:
            try:
                found += _messages(json.loads(data))
            except json.JSONDecodeError:
                continue
    return found


async def _sse_events(stream: aiohttp.StreamReader) -> AsyncIterator[tuple[str, str]]:
    """``(event, data)`` of each event of an SSE stream (``message`` when unnamed)."""
    event, data = "message", list[str]()
    async for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


def _event(name: str, data: str) -> bytes:
    return f"event: {name}\ndata: {data}\n\n".encode()


@dataclass
class _SseConnection:
    """One live SSE stream: where its POSTs go (record) or how they are answered (replay)."""

    stream: web.StreamResponse
    recorder: ConnectionRecorder | None = None
    upstream_post: str = ""
    replay: ConnectionReplay | None = None
    replies: asyncio.Queue[Message] = field(default_factory=asyncio.Queue)


@dataclass
class McpEndpoint:
    """A running endpoint: ``url(server)`` is what the agent is given for ``server``."""

    settings: McpSettings
    upstreams: dict[str, str]
    base_url: str = ""
    _runner: web.AppRunner | None = None
    _client: aiohttp.ClientSession | None = None
    _recorders: dict[tuple[str, str], ConnectionRecorder] = field(default_factory=dict)
    _replays: dict[tuple[str, str], ConnectionReplay] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _sse: dict[str, _SseConnection] = field(default_factory=dict)
    _streams: set[asyncio.Task[Any]] = field(default_factory=set)

    def url(self, server: str) -> str:
        """The streamable-HTTP URL the agent is given for ``server``."""
        check_server_name(server)
        return f"{self.base_url}/mcp/{server}"

    def sse_url(self, server: str) -> str:
        """The legacy SSE URL (MCP 2024-11-05) the agent is given for ``server``."""
        return f"{self.url(server)}/sse"

    def url_for(self, server: str, transport: UrlTransport) -> str:
        """The URL the agent is given for ``server`` reached over ``transport``."""
        return self.sse_url(server) if transport == "sse" else self.url(server)

    async def start(self, port: int = 0) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/mcp/{server}", self._handle)
        app.router.add_get("/mcp/{server}/sse", self._handle_sse)
        app.router.add_post("/mcp/{server}/messages", self._handle_sse_post)
        # An SSE stream's handler ends when its client goes away (and closes what it held).
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, handler_cancellation=True
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        self.base_url = f"http://127.0.0.1:{int(server.sockets[0].getsockname()[1])}"
        if self.settings.mode == "record":
            self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))

    async def close(self) -> None:
        for task in list(self._streams):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for recorder in self._recorders.values():
            recorder.close()
        for replay in self._replays.values():
            replay.close()
        self._recorders.clear()
        self._replays.clear()
        if self._client is not None:
            await self._client.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        server = request.match_info["server"]
        if request.method == "GET":
            return web.Response(status=405, headers={"Allow": "POST, DELETE"})
        if request.method not in ("POST", "DELETE"):
            return web.Response(status=405)
        if server not in self.upstreams and self.settings.mode == "record":
            return web.json_response({"error": f"no MCP server {server!r} is declared"}, status=404)
        try:
            if self.settings.mode == "record":
                return await self._record(request, server)
            return await self._replay(request, server)
        except McpReplayError as exc:
            RunState(self.settings.state).fail(server, str(exc))
            return web.json_response({"error": str(exc)}, status=502)

    # -- record -----------------------------------------------------------------------

    async def _record(self, request: web.Request, server: str) -> web.StreamResponse:
        assert self._client is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() in _FORWARDED}
        try:
            upstream = await self._client.request(
                request.method, self.upstreams[server], data=body, headers=headers
            )
        except aiohttp.ClientConnectionError as exc:
            raise McpConfigError(
                f"MCP server {server!r}: cannot reach {self.upstreams[server]} ({exc}); "
                "start it, or fix the server's url in [[mcp_servers]]"
            ) from None
        async with upstream:
            answer = await upstream.read()
        session_id = upstream.headers.get(_SESSION_ID) or request.headers.get(_SESSION_ID) or ""
        key = (server, session_id)
        if request.method == "DELETE":
            recorder = self._recorders.pop(key, None)
            if recorder is not None:
                recorder.close()
        else:
            recorder = self._recorders.get(key)
            if recorder is None:
                recorder = self._recorder(request, server, "http")
                self._recorders[key] = recorder
            for message in _messages(json.loads(body) if body else None):
                recorder.client(message)
            content_type = upstream.headers.get("content-type", "")
            text = answer.decode("utf-8", "replace")
            if "text/event-stream" in content_type:
                replies = _sse_messages(text)
            else:
                replies = _messages(json.loads(text)) if text.strip() else []
            for message in replies:
                recorder.server(message)
        kept = {
            k: v
            for k, v in upstream.headers.items()
            if k.lower() in ("content-type", _SESSION_ID, "mcp-protocol-version")
        }
        return web.Response(status=upstream.status, body=answer, headers=kept)

    # -- replay -----------------------------------------------------------------------

    async def _replay(self, request: web.Request, server: str) -> web.StreamResponse:
        session_id = request.headers.get(_SESSION_ID, "")
        if request.method == "DELETE":
            replay = self._replays.pop((server, session_id), None)
            if replay is not None:
                replay.close()
            return web.Response(status=200)
        messages = _messages(await request.json())
        replay = self._replays.get((server, session_id))
        headers: dict[str, str] = {}
        if replay is None:
            session_id = f"agentreel-{server}-{next(self._ids)}"
            headers[_SESSION_ID] = session_id
            replay = self._connection_replay(request, server)
            self._replays[(server, session_id)] = replay
        replies: list[Message] = []
        for message in messages:
            try:
                replies += replay.answer(message)
            except McpDriftError as exc:
                if "id" in message and "method" in message:
                    error = {"code": _REPLAY_ERROR_CODE, "message": str(exc)}
                    replies.append({"jsonrpc": "2.0", "id": message["id"], "error": error})
        if not replies:
            return web.Response(status=202, headers=headers)
        if len(replies) == 1:
            return web.Response(
                body=encode(replies[0]), content_type="application/json", headers=headers
            )
        events = "".join(f"event: message\ndata: {encode(r)}\n\n" for r in replies)
        return web.Response(body=events, content_type="text/event-stream", headers=headers)

    # -- the legacy SSE transport ------------------------------------------------------

    async def _handle_sse(self, request: web.Request) -> web.StreamResponse:
        server = request.match_info["server"]
        if server not in self.upstreams and self.settings.mode == "record":
            return web.json_response({"error": f"no MCP server {server!r} is declared"}, status=404)
        task = asyncio.current_task()
        assert task is not None
        self._streams.add(task)
        connection_id = f"agentreel-{server}-{next(self._ids)}"
        try:
            if self.settings.mode == "record":
                return await self._record_sse(request, server, connection_id)
            return await self._replay_sse(request, server, connection_id)
        except McpReplayError as exc:
            RunState(self.settings.state).fail(server, str(exc))
            return web.json_response({"error": str(exc)}, status=502)
        finally:
            self._streams.discard(task)
            connection = self._sse.pop(connection_id, None)
            if connection is not None and connection.recorder is not None:
                connection.recorder.close()
            if connection is not None and connection.replay is not None:
                connection.replay.close()

    def _post_url(self, server: str, connection_id: str) -> str:
        return f"/mcp/{server}/messages?{_CONNECTION}={connection_id}"

    async def _record_sse(
        self, request: web.Request, server: str, connection_id: str
    ) -> web.StreamResponse:
        assert self._client is not None
        upstream_url = self.upstreams[server]
        headers = {k: v for k, v in request.headers.items() if k.lower() == "authorization"}
        try:
            upstream = await self._client.get(
                upstream_url, headers={**headers, "Accept": "text/event-stream"}
            )
        except aiohttp.ClientConnectionError as exc:
            raise McpConfigError(
                f"MCP server {server!r}: cannot reach {upstream_url} ({exc}); "
                "start it, or fix the server's url in [[mcp_servers]]"
            ) from None
        async with upstream:
            if upstream.status != 200:
                body = await upstream.read()
                return web.Response(status=upstream.status, body=body)
            stream = web.StreamResponse(headers=_SSE_HEADERS)
            await stream.prepare(request)
            connection: _SseConnection | None = None
            async for event, data in _sse_events(upstream.content):
                if connection is None:
                    if event != "endpoint":
                        continue
                    recorder = self._recorder(request, server, "sse")
                    connection = _SseConnection(
                        stream, recorder, upstream_post=urljoin(upstream_url, data)
                    )
                    self._sse[connection_id] = connection
                    await stream.write(_event("endpoint", self._post_url(server, connection_id)))
                elif event == "message":
                    assert connection.recorder is not None
                    try:
                        message = json.loads(data)
                    except json.JSONDecodeError:
                        message = None
                    for each in _messages(message):
                        connection.recorder.server(each)
                    await stream.write(_event("message", data))
            return stream

    def _recorder(self, request: web.Request, server: str, transport: str) -> ConnectionRecorder:
        """The recorder of a new connection of ``server`` over ``transport``, bound to the
        calling session the request names."""
        return ConnectionRecorder(
            self.settings.recordings,
            server,
            transport,
            request.headers.get(SESSION_HEADER),
            self.settings.masking,
            self.settings.scan,
        )

    def _connection_replay(self, request: web.Request, server: str) -> ConnectionReplay:
        """A new connection of ``server`` answered from its recordings, bound to the calling
        session the request names (streamable HTTP's first POST, or the SSE stream's GET)."""
        masking = self.settings.masking
        return ConnectionReplay(
            server,
            load_recordings(self.settings.recordings, server, masking),
            RunState(self.settings.state),
            request.headers.get(SESSION_HEADER),
            masking,
            self.settings.scenario,
        )

    async def _replay_sse(
        self, request: web.Request, server: str, connection_id: str
    ) -> web.StreamResponse:
        replay = self._connection_replay(request, server)
        stream = web.StreamResponse(headers=_SSE_HEADERS)
        await stream.prepare(request)
        connection = _SseConnection(stream, replay=replay)
        self._sse[connection_id] = connection
        await stream.write(_event("endpoint", self._post_url(server, connection_id)))
        while True:
            await stream.write(_event("message", encode(await connection.replies.get())))

    async def _handle_sse_post(self, request: web.Request) -> web.StreamResponse:
        server = request.match_info["server"]
        connection = self._sse.get(request.query.get(_CONNECTION, ""))
        if connection is None:
            return web.json_response({"error": "no such SSE connection"}, status=404)
        body = await request.read()
        try:
            messages = _messages(json.loads(body))
        except json.JSONDecodeError:
            return web.json_response({"error": "not JSON"}, status=400)
        if connection.replay is None:
            assert self._client is not None
            assert connection.recorder is not None
            for message in messages:
                connection.recorder.client(message)
            headers = {
                k: v
                for k, v in request.headers.items()
                if k.lower() in ("content-type", "authorization")
            }
            try:
                upstream = await self._client.post(
                    connection.upstream_post, data=body, headers=headers
                )
            except aiohttp.ClientConnectionError as exc:
                unreachable = (
                    f"MCP server {server!r}: cannot reach {connection.upstream_post} ({exc}); "
                    "start it, or fix the server's url in [[mcp_servers]]"
                )
                RunState(self.settings.state).fail(server, unreachable)
                return web.json_response({"error": unreachable}, status=502)
            async with upstream:
                answer = await upstream.read()
            return web.Response(status=upstream.status, body=answer)
        for message in messages:
            try:
                replies = connection.replay.answer(message)
            except McpDriftError as exc:
                replies = []
                if "id" in message and "method" in message:
                    error = {"code": _REPLAY_ERROR_CODE, "message": str(exc)}
                    replies = [{"jsonrpc": "2.0", "id": message["id"], "error": error}]
            except McpReplayError as exc:
                RunState(self.settings.state).fail(server, str(exc))
                return web.json_response({"error": str(exc)}, status=502)
            for reply in replies:
                connection.replies.put_nowait(reply)
        return web.Response(status=202, text="Accepted")


async def start_endpoint(
    settings: McpSettings, upstreams: dict[str, str] | None = None, port: int = 0
) -> McpEndpoint:
    """Start the endpoint on 127.0.0.1 (``port`` 0: a free one). ``upstreams``: each HTTP
    server's real URL, its SSE URL for a legacy SSE server (record mode needs it; replay runs
    nothing upstream)."""
    for name in upstreams or {}:
        check_server_name(name)
    endpoint = McpEndpoint(settings, dict(upstreams or {}))
    await endpoint.start(port)
    return endpoint
