"""The committed ``mcp-tools`` scenario (SPEC 19): the parent and a spawned child each call
a stdio server and a streamable-HTTP server. Its replay runs neither (the suite replays it
like every scenario); here a copy with one session's MCP recording deleted, or one
recorded tool argument changed, fails naming that session, server and tool in at most 20
lines, with the re-record command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentreel.session import rerecord_command
from agentreel.snapshot_harness import McpMismatchError, check_scenario, load_scenario

pytestmark = pytest.mark.slow

SCENARIO = Path(__file__).resolve().parents[3] / "fixtures" / "mcp-tools"


def copy(tmp_path: Path) -> Path:
    target = tmp_path / SCENARIO.name
    shutil.copytree(SCENARIO, target)
    return target


def recording_of(directory: Path, server: str, session: str) -> Path:
    for path in sorted((directory / "mcp").glob(f"{server}.*.jsonl")):
        if json.loads(path.read_text().splitlines()[0])["session"] == session:
            return path
    raise AssertionError(f"no {server} recording of session {session} in {directory}")


def fails(directory: Path) -> str:
    with pytest.raises(McpMismatchError) as caught:
        check_scenario(directory, "replay")
    message = str(caught.value)
    assert len(message.splitlines()) <= 20, message
    assert f"Re-record: {rerecord_command(directory.name)}" in message
    return message


def test_the_committed_scenario_records_each_session_on_each_server() -> None:
    scenario = load_scenario(SCENARIO)
    assert [(s.name, s.url is None) for s in scenario.mcp_servers] == [
        ("calc", True),
        ("web", False),
    ]
    for server in ("calc", "web"):
        for session in ("main", "main/0"):
            assert '"method":"tools/call"' in recording_of(SCENARIO, server, session).read_text()


def test_a_deleted_session_recording_fails_naming_session_server_and_tool(
    tmp_path: Path,
) -> None:
    directory = copy(tmp_path)
    recording_of(directory, "web", "main").unlink()
    message = fails(directory)
    assert "server 'web', session 'main'" in message
    assert "tools/call 'echo'" in message


def test_a_changed_tool_argument_fails_naming_session_server_and_tool(tmp_path: Path) -> None:
    directory = copy(tmp_path)
    path = recording_of(directory, "calc", "main/0")
    path.write_text(path.read_text().replace('"arguments":{"a":40,', '"arguments":{"a":41,'))
    message = fails(directory)
    assert "server 'calc', session 'main/0'" in message
    assert "tools/call 'add'" in message
    assert "a: 41 → 40" in message
