"""A reference server from PyPI, ``mcp-server-time`` (whose answers change with the clock),
recorded through the stdio shim and replayed with its command gone (SPEC 19). It is one of
the package's test dependencies, so the test runs it from the venv: nothing is fetched."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from agentreel.mcp_replay import SESSION_ENV, McpSettings, check_replayed, stdio_command

pytestmark = pytest.mark.slow

TIME_SERVER = [sys.executable, "-m", "mcp_server_time"]


async def _times(settings: McpSettings, command: list[str]) -> list[str]:
    argv = stdio_command(settings, "time", command)
    env = {**os.environ, SESSION_ENV: "main"}
    parameters = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    async with stdio_client(parameters) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        now = await client.call_tool("get_current_time", {"timezone": "UTC"})
        converted = await client.call_tool(
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
        return [str(r.content[0].text) for r in (now, converted)]  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_mcp_server_time_replays_its_recorded_clock(tmp_path: Path) -> None:
    recorded = await _times(McpSettings("record", tmp_path, tmp_path / "s1"), TIME_SERVER)
    assert '"timezone": "UTC"' in recorded[0]
    assert "Asia/Tokyo" in recorded[1]
    replay = McpSettings("replay", tmp_path, tmp_path / "s2")
    # The clock has moved on (replay runs on any day); replay answers what was recorded,
    # the time of the call as the agent got it (its model recording masks it), with the
    # server gone.
    assert await _times(replay, ["mcp-server-time-is-not-installed"]) == recorded
    check_replayed(tmp_path, replay.state)
