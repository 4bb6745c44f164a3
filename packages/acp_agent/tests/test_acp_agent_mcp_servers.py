"""The reference agent reads ACP ``mcpServers`` of each type and hands them on as it got
them (a process subagent's ``session/new``, SPEC 19): an ``sse`` server stays ``sse``."""

from __future__ import annotations

from acp.schema import HttpMcpServer, SseMcpServer

from agentreel.acp_agent._mcp import McpServer


def test_an_sse_server_is_read_as_sse_and_handed_on_as_sse() -> None:
    given = SseMcpServer(type="sse", name="old", url="http://127.0.0.1:9/mcp/old/sse", headers=[])
    server = McpServer.from_acp(given)
    assert server.sse
    assert server.to_acp().model_dump(by_alias=True) == given.model_dump(by_alias=True)


def test_an_http_server_stays_streamable_http() -> None:
    given = HttpMcpServer(type="http", name="new", url="http://127.0.0.1:9/mcp/new", headers=[])
    server = McpServer.from_acp(given)
    assert not server.sse
    assert server.to_acp().model_dump(by_alias=True) == given.model_dump(by_alias=True)
