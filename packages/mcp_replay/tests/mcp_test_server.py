"""An MCP server written with the official SDK, for the tests: ``python mcp_test_server.py``
serves stdio; ``app`` is also served over streamable HTTP in process."""

from __future__ import annotations

import os
import time
import warnings

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent

app = MCPServer("echo")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@app.tool()
def echo(text: str) -> str:
    """``text`` back, unchanged."""
    return text


@app.tool()
def whoami() -> str:
    """The calling session's identity, as this server process was started with it."""
    return os.environ.get("AGENTREEL_MCP_SESSION", "(none)")


@app.tool()
async def shout(text: str, ctx: Context) -> str:
    """Upper-case ``text``, logging a notification first."""
    with warnings.catch_warnings():  # logging is deprecated (SEP-2577), still sent
        warnings.simplefilter("ignore")
        await ctx.info(f"shouting {text}")
    return text.upper()


@app.tool()
def stamp(text: str, served_at: int = 0) -> CallToolResult:
    """``text`` back, with the time it was served under ``served_at`` (another each run;
    the argument of that name is what a client sends and is not used)."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content={"text": text, "served_at": time.time_ns()},
    )


@app.tool()
def leak() -> str:
    """A credential-shaped answer."""
    return "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


@app.resource("note://hello")
def hello() -> str:
    return "hello note"


@app.prompt()
def greet(name: str) -> str:
    return f"Hello {name}"


if __name__ == "__main__":
    app.run()
