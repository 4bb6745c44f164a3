"""The kit agent (``kit_agent.py``) with an MCP client: its ``add`` tool is the ``add``
tool of the MCP server the harness names ``calc`` in ``session/new``; each session,
children too, opens its own connection (the official SDK, stdio)."""

import asyncio
import os
from typing import Any

import acp
from kit_agent import TEXT, KitAgent, serve  # type: ignore[import-not-found]
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from agentreel import agent_kit as kit
from agentreel.llm import ToolSpec

NUMBERS = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
TOOLS = [
    ToolSpec(name="delegate", description="delegate", parameters=TEXT),
    ToolSpec(name="add", description="add (MCP server calc)", parameters=NUMBERS),
]


class McpKitAgent(KitAgent):  # type: ignore[misc]
    tools = TOOLS

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> acp.NewSessionResponse:
        self.mcp_servers = list(mcp_servers or [])
        return await super().new_session(cwd)  # type: ignore[no-any-return]

    async def run_tool(self, name: str, arguments: dict[str, Any]) -> str:
        if name != "add":
            return str(arguments["text"])
        calc = next(s for s in self.mcp_servers if s.name == "calc")
        env = {**os.environ, **{e.name: e.value for e in calc.env}}
        server = StdioServerParameters(command=calc.command, args=calc.args, env=env)
        async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            result = await client.call_tool("add", arguments)
            return str(result.content[0].text)  # type: ignore[union-attr]


if __name__ == "__main__":
    asyncio.run(serve(kit.take_protocol_stdout(), McpKitAgent))  # first: stdout is protocol only
