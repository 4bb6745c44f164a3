"""A scenario's ``[[mcp_servers]]`` end to end (SPEC 19): the harness passes them in ACP
``session/new``; a kit agent with an MCP client (``mcp_kit_agent.py``: the parent and a
delegated child each call the stdio server) records through the stub model and the shim,
replays with the server's command gone, and a changed or deleted MCP recording fails
naming the session, server and tool."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from agentreel.mcp_replay import McpSettings
from agentreel.snapshot_harness import (
    McpMismatchError,
    ScenarioError,
    check_scenario,
    load_scenario,
)
from agentreel.snapshot_harness._mcp import acp_mcp_servers, mcp_reach

AGENT = Path(__file__).with_name("mcp_kit_agent.py")
# conftest.py's MCP_SERVER (test modules cannot import conftest under importlib mode).
SERVER = Path(__file__).parents[2] / "mcp_replay" / "tests" / "mcp_test_server.py"

SCENARIO = f"""\
timeout = 90
agent = ["{{python}}", "{AGENT}"]

[[mcp_servers]]
name = "calc"
command = "{sys.executable}"
args = ["{SERVER}"]

[[steps]]
type = "initialize"

[[steps]]
type = "new_session"

[[steps]]
type = "prompt"
text = "Add two and three, and ask a helper"

[record]
provider = "stub"
model = "stub-model"
"""

RULES = """\
[[rule]]
name = "parent: add over MCP, and delegate"
match = { last_user = "Add two and three" }
tool_calls = [
  { id = "call_add", name = "add", arguments = { a = 2, b = 3 } },
  { id = "call_helper", name = "delegate", arguments = { text = "add forty and two" } },
]

[[rule]]
name = "helper: add over MCP"
match = { last_user = "add forty and two" }
tool_calls = [{ id = "call_child_add", name = "add", arguments = { a = 40, b = 2 } }]

[[rule]]
name = "helper answers"
match = { last_tool_result = "42" }
text = "forty-two"

[[rule]]
name = "parent sums up"
match = { last_tool_result = "forty-two" }
text = "5, and the helper said forty-two."
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("fixtures") / "mcp-kit"
    directory.mkdir()
    (directory / "scenario.toml").write_text(SCENARIO)
    (directory / "stub-rules.toml").write_text(RULES)
    outcome = check_scenario(directory, "record")
    assert outcome.sessions == 2
    return directory


def _copy(recorded: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "mcp-kit"
    shutil.copytree(recorded, copy)
    # Replay needs no server: its command is gone.
    toml = copy / "scenario.toml"
    toml.write_text(toml.read_text().replace(str(SERVER), "/nonexistent/calc-server.py"))
    return copy


def test_record_writes_each_sessions_mcp_connection(recorded: Path) -> None:
    names = sorted(p.name for p in (recorded / "mcp").iterdir())
    assert names == ["calc.0.jsonl", "calc.1.jsonl"]
    calls = []
    for name in names:
        for line in (recorded / "mcp" / name).read_text().splitlines()[1:]:
            message = json.loads(line)["message"]
            if message.get("method") == "tools/call":
                calls.append(message["params"]["arguments"])
    assert calls == [{"a": 2, "b": 3}, {"a": 40, "b": 2}]
    golden = (recorded / "golden" / "transcript.jsonl").read_text()
    assert "5, and the helper said forty-two." in golden


def test_replay_answers_mcp_with_the_server_gone(recorded: Path, tmp_path: Path) -> None:
    replayed = check_scenario(_copy(recorded, tmp_path), "replay")
    assert replayed.sessions == 2


def test_a_deleted_session_mcp_recording_fails_naming_server_and_tool(
    recorded: Path, tmp_path: Path
) -> None:
    copy = _copy(recorded, tmp_path)
    (copy / "mcp" / "calc.1.jsonl").unlink()
    with pytest.raises(McpMismatchError) as caught:
        check_scenario(copy, "replay")
    message = str(caught.value).split("\n--- agent stderr")[0]
    assert "MCP replay of server 'calc'" in message
    assert "tools/call 'add'" in message
    assert len(message.splitlines()) <= 20


def test_a_changed_tool_argument_fails_with_the_argument_diff(
    recorded: Path, tmp_path: Path
) -> None:
    copy = _copy(recorded, tmp_path)
    path = copy / "mcp" / "calc.1.jsonl"
    path.write_text(path.read_text().replace('"a":40', '"a":41'))
    with pytest.raises(McpMismatchError) as caught:
        check_scenario(copy, "replay")
    message = str(caught.value)
    assert "tools/call 'add'" in message
    assert "a: 41 → 40" in message


def test_mcp_servers_are_checked_when_read(tmp_path: Path) -> None:
    directory = tmp_path / "bad"
    directory.mkdir()
    (directory / "scenario.toml").write_text(
        SCENARIO.replace('args = ["', 'url = "http://127.0.0.1:1/mcp"\nargs = ["')
    )
    with pytest.raises(ScenarioError, match=r"mcp_servers\[0\].*either `command`"):
        load_scenario(directory)


@pytest.mark.parametrize(
    ("server", "error"),
    [
        ('command = "x"\nstart = ["y"]', r"mcp_servers\[0\]\.start.*belongs to an HTTP server"),
        ('url = "http://127.0.0.1:{port}/mcp"', r"mcp_servers\[0\]\.url.*\{port\}.*both"),
        ('url = "http://127.0.0.1:1/mcp"\nstart = ["s", "{port}"]', r"\{port\}.*both"),
        ('url = "http://x/mcp"\nstart = "s"', r"mcp_servers\[0\]\.start.*array"),
        (
            'url = "http://x/sse"\ntransport = "websocket"',
            r"mcp_servers\[0\]\.transport.*'websocket'.*give 'http' or 'sse'",
        ),
        ('command = "x"\ntransport = "sse"', r"mcp_servers\[0\]\.transport.*by `url`"),
    ],
)
def test_an_http_servers_start_command_is_checked_when_read(
    tmp_path: Path, server: str, error: str
) -> None:
    directory = tmp_path / "bad"
    directory.mkdir()
    (directory / "scenario.toml").write_text(
        f'[[mcp_servers]]\nname = "web"\n{server}\n\n[[steps]]\ntype = "initialize"\n'
    )
    with pytest.raises(ScenarioError, match=error):
        load_scenario(directory)


@pytest.mark.asyncio
async def test_an_sse_server_is_given_as_acp_sse_at_the_endpoints_sse_url(tmp_path: Path) -> None:
    directory = tmp_path / "legacy"
    directory.mkdir()
    (directory / "scenario.toml").write_text(
        '[[mcp_servers]]\nname = "old"\nurl = "http://127.0.0.1:9/sse"\ntransport = "sse"\n\n'
        '[[mcp_servers]]\nname = "new"\nurl = "http://127.0.0.1:9/mcp"\n\n'
        '[[steps]]\ntype = "initialize"\n'
    )
    scenario = load_scenario(directory)
    settings = McpSettings("replay", directory, tmp_path / "state", scenario="legacy")
    async with acp_mcp_servers(scenario, settings) as servers:
        given = {s.name: s.model_dump(by_alias=True) for s in servers}
    assert given["old"]["type"] == "sse"
    assert given["old"]["url"].endswith("/mcp/old/sse")
    assert given["new"]["type"] == "http"
    assert given["new"]["url"].endswith("/mcp/new")
    async with mcp_reach(scenario, settings) as reach:
        assert str(reach["old"]).endswith("/mcp/old/sse")
        assert str(reach["new"]).endswith("/mcp/new")
