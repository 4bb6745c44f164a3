"""What the harness writes for a scenario's MCP exchanges (SPEC 19), with the reference
agent: the scenario's key mask (``[[golden_masks]] key``) reaches ``mcp/`` — a volatile
value in a tool result is written as its token and replayed — and the secret scan refuses
a credential in a tool result, naming the file, with nothing written."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from agentreel.snapshot_harness import RecordError, check_scenario

# conftest.py's MCP_SERVER (test modules cannot import conftest under importlib mode).
SERVER = Path(__file__).parents[2] / "mcp_replay" / "tests" / "mcp_test_server.py"

RULES = """\
[[rule]]
name = "stamp over MCP"
match = { last_user = "Stamp hi" }
tool_calls = [{ id = "call_stamp", name = "mcp__calc__stamp", arguments = { text = "hi" } }]

[[rule]]
name = "leak over MCP"
match = { last_user = "Show the token" }
tool_calls = [{ id = "call_leak", name = "mcp__calc__leak", arguments = {} }]

[[rule]]
name = "answer"
match = { last_tool_result_regex = "hi|calc" }
text = "done"
"""

SCENARIO = f"""\
timeout = 120

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

[record]
provider = "stub"
model = "stub-model"
"""


def scenario(directory: Path, prompt: str) -> Path:
    directory.mkdir(parents=True)
    (directory / "scenario.toml").write_text(SCENARIO.replace("PROMPT", prompt))
    (directory / "stub-rules.toml").write_text(RULES)
    return directory


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = scenario(tmp_path_factory.mktemp("fixtures") / "mcp-sessions", "Stamp hi")
    check_scenario(directory, "record")
    return directory


def test_a_scenario_key_mask_writes_a_volatile_tool_result_as_its_token(
    recorded: Path, tmp_path: Path
) -> None:
    (path,) = (recorded / "mcp").iterdir()
    written = path.read_text()
    assert '"structuredContent":{"text":"hi","served_at":"{{served-at}}"}' in written
    copy = tmp_path / recorded.name
    shutil.copytree(recorded, copy)
    toml = copy / "scenario.toml"
    toml.write_text(toml.read_text().replace(str(SERVER), "/nonexistent/calc-server.py"))
    assert check_scenario(copy, "replay").sessions == 1


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
