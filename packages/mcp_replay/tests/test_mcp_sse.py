"""The legacy HTTP+SSE transport (MCP 2024-11-05): the endpoint records a real SSE server
(the SDK's, served in process on 127.0.0.1) through the SDK's SSE client and replays it with
that server stopped, per session (SPEC 19)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType

import pytest
import uvicorn
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client

from agentreel.mcp_replay import (
    SESSION_HEADER,
    McpDriftError,
    McpSettings,
    check_replayed,
    start_endpoint,
)

pytestmark = pytest.mark.slow


def _server_module() -> ModuleType:
    path = Path(__file__).with_name("mcp_test_server.py")
    spec = importlib.util.spec_from_file_location("mcp_test_server", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@asynccontextmanager
async def real_sse_server() -> AsyncIterator[str]:
    """The test server over the legacy SSE transport, on a socket bound before it serves."""
    app = _server_module().app.sse_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on"))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{port}/sse"
    finally:
        server.should_exit = True
        server.force_exit = True  # an SSE stream the server still holds does not wait
        await task
        sock.close()


async def calls(url: str, session: str, a: int) -> list[str]:
    async with (
        sse_client(url, headers={SESSION_HEADER: session}) as (read, write),
        ClientSession(read, write) as mcp,
    ):
        await mcp.initialize()
        tools = await mcp.list_tools()
        added = await mcp.call_tool("add", {"a": a, "b": 2})
        shout = await mcp.call_tool("shout", {"text": session})
        return [
            ",".join(sorted(t.name for t in tools.tools)),
            str(added.content[0].text),  # type: ignore[union-attr]
            str(shout.content[0].text),  # type: ignore[union-attr]
        ]


async def record(folder: Path) -> dict[str, list[str]]:
    settings = McpSettings("record", folder, folder / "state", scenario="mcp-demo")
    async with real_sse_server() as upstream:
        endpoint = await start_endpoint(settings, {"legacy": upstream})
        try:
            url = endpoint.sse_url("legacy")
            return {"parent": await calls(url, "parent", 1), "child": await calls(url, "child", 40)}
        finally:
            await endpoint.close()


@pytest.mark.asyncio
async def test_sse_records_and_replays_per_session_with_the_server_stopped(
    tmp_path: Path,
) -> None:
    recorded = await record(tmp_path)
    assert recorded == {
        "parent": ["add,echo,leak,shout,stamp,whoami", "3", "PARENT"],
        "child": ["add,echo,leak,shout,stamp,whoami", "42", "CHILD"],
    }
    lines = [json.loads(x) for x in (tmp_path / "mcp/legacy.0.jsonl").read_text().splitlines()]
    assert lines[0]["transport"] == "sse"
    assert lines[0]["session"] == "parent"
    # Every message in order: each client request before the server's answer to it.
    sides = [(line["from"], line["message"].get("method")) for line in lines[1:]]
    assert sides[:2] == [("client", "initialize"), ("server", None)]
    assert ("server", "notifications/message") in sides
    assert json.loads((tmp_path / "mcp/legacy.1.jsonl").read_text().splitlines()[0])["session"] == (
        "child"
    )

    settings = McpSettings("replay", tmp_path, tmp_path / "replay-state", scenario="mcp-demo")
    endpoint = await start_endpoint(settings)  # no upstream: nothing of the server runs
    try:
        url = endpoint.sse_url("legacy")
        # The child first: each session is answered from its own recording.
        assert await calls(url, "child", 40) == recorded["child"]
        assert await calls(url, "parent", 1) == recorded["parent"]
    finally:
        await endpoint.close()
    check_replayed(tmp_path, settings.state, "mcp-demo")


@pytest.mark.asyncio
async def test_sse_a_changed_argument_fails_naming_session_server_and_tool(
    tmp_path: Path,
) -> None:
    await record(tmp_path)
    settings = McpSettings("replay", tmp_path, tmp_path / "replay-state", scenario="mcp-demo")
    endpoint = await start_endpoint(settings)
    try:
        url = endpoint.sse_url("legacy")
        await calls(url, "parent", 1)
        with pytest.raises(BaseExceptionGroup) as group:  # the SDK's error, in its task group
            await calls(url, "child", 7)
        assert "arguments differ" in repr(group.value.exceptions)
    finally:
        await endpoint.close()
    with pytest.raises(McpDriftError) as caught:
        check_replayed(tmp_path, settings.state, "mcp-demo")
    message = str(caught.value)
    assert "server 'legacy', session 'child'" in message
    assert "tools/call 'add'" in message
    assert "    a: 40 → 7" in message
    assert len(message.splitlines()) <= 20
