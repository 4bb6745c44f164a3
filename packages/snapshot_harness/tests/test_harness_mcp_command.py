"""``{mcp:<name>}`` in a command scenario (SPEC 19): the agent command, ``env`` and
``[[model.files]]`` get what reaches the ``[[mcp_servers]]`` server through agentreel; a
script with an MCP client records, replays with the server's command gone, and a changed
tool argument fails naming the session, server and tool."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest

from agentreel.snapshot_harness import (
    McpMismatchError,
    ScenarioError,
    check_scenario,
    load_scenario,
)
from agentreel.snapshot_harness._command import command_for
from agentreel.snapshot_harness._mcp import expand_mcp

SCRIPT = Path(__file__).with_name("mcp_command_script.py")
# conftest.py's MCP_SERVER (test modules cannot import conftest under importlib mode).
SERVER = Path(__file__).parents[2] / "mcp_replay" / "tests" / "mcp_test_server.py"

SCENARIO = f"""\
protocol = "command"
timeout = 90
agent = ["{{python}}", "{SCRIPT}", "{{prompt}}"]
env = {{ CALC_CMD = "{{mcp:calc}}" }}

[[mcp_servers]]
name = "calc"
command = "{sys.executable}"
args = ["{SERVER}"]

[[steps]]
type = "prompt"
text = "Add two and three"

[model]
via = "proxy"

[[model.files]]
path = "calc.conf"
text = "{{mcp:calc}}"
"""

RULES = """\
[[rule]]
name = "the numbers"
match = { last_user = "Add two and three" }
text = "2 3"
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("fixtures") / "mcp-command"
    directory.mkdir()
    (directory / "scenario.toml").write_text(SCENARIO)
    (directory / "stub-rules.toml").write_text(RULES)
    check_scenario(directory, "record")
    return directory


def _copy(recorded: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "mcp-command"
    shutil.copytree(recorded, copy)
    toml = copy / "scenario.toml"  # replay needs no server: its command is gone
    toml.write_text(toml.read_text().replace(str(SERVER), "/nonexistent/calc-server.py"))
    return copy


def test_a_command_scenario_records_its_mcp_calls(recorded: Path) -> None:
    assert sorted(p.name for p in (recorded / "mcp").iterdir()) == ["calc.0.jsonl"]
    assert '"a":2' in (recorded / "mcp" / "calc.0.jsonl").read_text()
    assert "sum: 5" in (recorded / "golden" / "transcript.jsonl").read_text()


def test_a_command_scenario_replays_mcp_with_the_server_gone(
    recorded: Path, tmp_path: Path
) -> None:
    copy = _copy(recorded, tmp_path)
    check_scenario(copy, "replay")
    assert "sum: 5" in (copy / "golden" / "transcript.jsonl").read_text()


def test_a_changed_tool_argument_fails_naming_session_server_and_tool(
    recorded: Path, tmp_path: Path
) -> None:
    copy = _copy(recorded, tmp_path)
    path = copy / "mcp" / "calc.0.jsonl"
    path.write_text(path.read_text().replace('"a":2', '"a":7'))
    with pytest.raises(McpMismatchError) as caught:
        check_scenario(copy, "replay")
    message = str(caught.value).split("\n--- agent stderr")[0]
    assert "MCP replay of server 'calc'" in message
    assert "mcp/calc.0.jsonl" in message
    assert "tools/call 'add'" in message
    assert "a: 7 → 2" in message
    assert len(message.splitlines()) <= 20


def test_the_placeholder_is_the_shims_argv_or_one_quoted_string(tmp_path: Path) -> None:
    directory = tmp_path / "placeholder"
    directory.mkdir()
    toml = SCENARIO.replace('"{prompt}"]', '"{mcp:calc}", "--calc={mcp:calc}", "{prompt}"]')
    (directory / "scenario.toml").write_text(toml)
    reach: dict[str, list[str] | str] = {
        "calc": ["py", "-m", "shim", "--", "my server"],
        "web": "http://127.0.0.1:9/mcp/web",
    }
    argv, stdin = command_for(load_scenario(directory), "go", reach)
    assert argv[2:] == [
        "py",
        "-m",
        "shim",
        "--",
        "my server",
        "--calc=py -m shim -- 'my server'",
        "go",
    ]
    assert stdin is None
    assert shlex.split(expand_mcp("{mcp:calc}", reach)) == reach["calc"]
    assert expand_mcp("url={mcp:web}", reach) == "url=http://127.0.0.1:9/mcp/web"


@pytest.mark.parametrize(
    ("before", "after", "key"),
    [
        ('"{prompt}"]', '"{mcp:calk}", "{prompt}"]', "key 'agent[2]'"),
        ('CALC_CMD = "{mcp:calc}"', 'CALC_CMD = "{mcp:calk}"', "key 'env.CALC_CMD'"),
        ('text = "{mcp:calc}"', 'text = "{mcp:calk}"', "key 'model.files[0] (calc.conf)'"),
    ],
)
def test_an_unknown_server_name_is_named_with_file_and_key(
    tmp_path: Path, before: str, after: str, key: str
) -> None:
    directory = tmp_path / "unknown"
    directory.mkdir()
    (directory / "scenario.toml").write_text(SCENARIO.replace(before, after))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(directory)
    message = str(caught.value)
    assert str(directory / "scenario.toml") in message
    assert key in message
    assert "{mcp:calk} names no MCP server of this scenario (declared: calc)" in message
