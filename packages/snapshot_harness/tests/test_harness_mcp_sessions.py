"""A scenario's MCP servers across the ACP session lifecycle and what is written for them
(SPEC 19), with the reference agent (``--load-and-fork``): ``session/load`` and
``session/fork`` steps pass the servers as ``mcpServers`` like ``session/new`` — the loaded
session reconnects under its own name, the fork opens connections of its own (``main/0``)
— recorded and replayed with the server's command gone; the scenario's key mask
(``[[golden_masks]] key``) reaches ``mcp/`` (a volatile value in a tool result is written
as its token and replayed); the secret scan refuses a credential in a tool result, naming
the file, with nothing written."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from agentreel.snapshot_harness import McpMismatchError, RecordError, StepError, check_scenario

# conftest.py's MCP_SERVER (test modules cannot import conftest under importlib mode).
SERVER = Path(__file__).parents[2] / "mcp_replay" / "tests" / "mcp_test_server.py"

RULES = """\
[[rule]]
name = "stamp over MCP"
match = { last_user = "Stamp hi" }
tool_calls = [{ id = "call_stamp", name = "mcp__calc__stamp", arguments = { text = "hi" } }]

[[rule]]
name = "stamped"
match = { last_tool_result = "hi" }
text = "stamped"

[[rule]]
name = "after load: add over MCP"
match = { last_user = "Add two and three" }
tool_calls = [{ id = "call_add", name = "mcp__calc__add", arguments = { a = 2, b = 3 } }]

[[rule]]
name = "five"
match = { last_tool_result = "5" }
text = "five"

[[rule]]
name = "in the fork: add over MCP"
match = { last_user = "Forked: add forty and two" }
tool_calls = [{ id = "call_fork_add", name = "mcp__calc__add", arguments = { a = 40, b = 2 } }]

[[rule]]
name = "forty-two"
match = { last_tool_result = "42" }
text = "forty-two"

[[rule]]
name = "leak over MCP"
match = { last_user = "Show the token" }
tool_calls = [{ id = "call_leak", name = "mcp__calc__leak", arguments = {} }]

[[rule]]
name = "leaked"
match = { last_tool_result = "calc" }
text = "done"
"""

SCENARIO = f"""\
timeout = 120
env = {{ AGENTREEL_LOAD_AND_FORK = "1" }}

[[mcp_servers]]
name = "calc"
command = "{sys.executable}"
args = ["{SERVER}"]

[[golden_masks]]
key = "served_at"
token = "served-at"

[[steps]]
type = "initialize"

[[steps]]
type = "new_session"

[[steps]]
type = "prompt"
text = "PROMPT"
MORE
[record]
provider = "stub"
model = "stub-model"
"""


LOAD_AND_FORK = """
[[steps]]
type = "load_session"

[[steps]]
type = "prompt"
text = "Add two and three"

[[steps]]
type = "fork_session"

[[steps]]
type = "prompt"
text = "Forked: add forty and two"
"""


def scenario(directory: Path, prompt: str, more: str = "") -> Path:
    directory.mkdir(parents=True)
    (directory / "scenario.toml").write_text(
        SCENARIO.replace("PROMPT", prompt).replace("MORE", more)
    )
    (directory / "stub-rules.toml").write_text(RULES)
    return directory


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = scenario(
        tmp_path_factory.mktemp("fixtures") / "mcp-sessions", "Stamp hi", LOAD_AND_FORK
    )
    assert check_scenario(directory, "record").sessions == 2
    return directory


def connections(directory: Path) -> list[tuple[str | None, list[object]]]:
    """Each recorded connection in opening order: its session and its calls' arguments."""
    found = []
    for path in sorted((directory / "mcp").iterdir(), key=lambda p: int(p.name.split(".")[1])):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        calls = [
            line["message"]["params"]["arguments"]
            for line in lines[1:]
            if line["message"].get("method") == "tools/call"
        ]
        found.append((lines[0]["session"], calls))
    return found


def replayable(recorded: Path, tmp_path: Path) -> Path:
    copy = tmp_path / recorded.name
    shutil.copytree(recorded, copy)
    toml = copy / "scenario.toml"
    toml.write_text(toml.read_text().replace(str(SERVER), "/nonexistent/calc-server.py"))
    return copy


def test_load_and_fork_pass_the_servers_and_each_connection_is_its_sessions(
    recorded: Path, tmp_path: Path
) -> None:
    assert connections(recorded) == [
        ("main", [{"text": "hi"}]),  # session/new's servers
        ("main", [{"a": 2, "b": 3}]),  # session/load's: the same session reconnected
        ("main/0", [{"a": 40, "b": 2}]),  # session/fork's: the fork's own connection
    ]
    transcript = (recorded / "golden" / "transcript.jsonl").read_text()
    # session/load sent the history again before its answer.
    assert '"sessionUpdate":"user_message_chunk"' in transcript
    assert check_scenario(replayable(recorded, tmp_path), "replay").sessions == 2


def test_a_load_whose_recording_is_gone_fails_naming_session_server_and_tool(
    recorded: Path, tmp_path: Path
) -> None:
    copy = replayable(recorded, tmp_path)
    (copy / "mcp" / "calc.1.jsonl").unlink()
    with pytest.raises(McpMismatchError) as caught:
        check_scenario(copy, "replay")
    message = str(caught.value).split("\n--- agent stderr")[0]
    assert "server 'calc', session 'main'" in message
    assert "tools/call 'add'" in message
    assert len(message.splitlines()) <= 20


@pytest.mark.parametrize(
    ("step", "capability"),
    [
        ("load_session", r"agentCapabilities\.loadSession"),
        ("fork_session", r"agentCapabilities\.sessionCapabilities\.fork"),
    ],
)
def test_a_load_or_fork_step_needs_the_agent_to_advertise_it(
    tmp_path: Path, step: str, capability: str
) -> None:
    """The reference agent without ``--load-and-fork`` (its default) advertises neither:
    the step fails naming the capability, before anything is sent."""
    directory = tmp_path / "no-load"
    directory.mkdir()
    (directory / "scenario.toml").write_text(
        'timeout = 60\n\n[[steps]]\ntype = "initialize"\n\n[[steps]]\ntype = "new_session"\n'
        f'\n[[steps]]\ntype = "{step}"\n\n[record]\nprovider = "stub"\nmodel = "stub-model"\n'
    )
    (directory / "stub-rules.toml").write_text(RULES)
    with pytest.raises(
        StepError, match=rf"step 3 \({step}\).*does not advertise {capability}.*--load-and-fork"
    ):
        check_scenario(directory, "record")


def test_a_scenario_key_mask_writes_a_volatile_tool_result_as_its_token(
    recorded: Path, tmp_path: Path
) -> None:
    written = (recorded / "mcp" / "calc.0.jsonl").read_text()
    assert '"structuredContent":{"text":"hi","served_at":"{{served-at}}"}' in written


def test_a_credential_in_a_tool_result_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    directory = scenario(tmp_path / "mcp-leak", "Show the token")
    with pytest.raises(RecordError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert "mcp-leak: recording its MCP servers failed, nothing was written" in message
    assert "refusing to write a credential to mcp/calc.0.jsonl" in message
    assert "[record] allow_secrets" in message
    assert sorted(p.name for p in directory.iterdir()) == ["scenario.toml", "stub-rules.toml"]
