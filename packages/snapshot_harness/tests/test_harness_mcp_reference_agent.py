"""The reference agent's MCP client under the harness (SPEC 19): the servers of
``session/new`` — one stdio, one streamable HTTP (or legacy SSE) — offered to the model as
``mcp__<server>__<tool>``; the parent and a spawned child each call both on connections of
their own, named by lineage. Recorded through the stub model, replayed with the stdio
command gone and the HTTP server stopped."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from agentreel.snapshot_harness import McpMismatchError, check_scenario

# conftest.py's MCP_SERVER (test modules cannot import conftest under importlib mode).
SERVER = Path(__file__).parents[2] / "mcp_replay" / "tests" / "mcp_test_server.py"

RULES = """\
[[rule]]
name = "parent: both servers, and a helper"
match = { last_user = "Add two and three" }
tool_calls = [
  { id = "call_add", name = "mcp__calc__add", arguments = { a = 2, b = 3 } },
  { id = "call_shout", name = "mcp__web__echo", arguments = { text = "parent" } },
  { id = "call_helper", name = "subagent", arguments = HELPER },
]

[[rule]]
name = "helper: both servers"
match = { last_user = "add forty and two" }
tool_calls = [
  { id = "call_child_add", name = "mcp__calc__add", arguments = { a = 40, b = 2 } },
  { id = "call_child_echo", name = "mcp__web__echo", arguments = { text = "child" } },
]

[[rule]]
name = "helper answers"
match = { last_tool_result = "child" }
text = "forty-two"

[[rule]]
name = "parent sums up"
match = { last_tool_result = "forty-two" }
text = "5, and the helper said forty-two."
""".replace("HELPER", '{ description = "add", prompt = "add forty and two", mode = "spawn" }')


def _scenario(url: str, transport: str = "http") -> str:
    return f"""\
timeout = 120

[[mcp_servers]]
name = "calc"
command = "{sys.executable}"
args = ["{SERVER}"]

[[mcp_servers]]
name = "web"
url = "{url}"
transport = "{transport}"

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


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, mcp_http_server: str) -> Path:
    directory = tmp_path_factory.mktemp("fixtures") / "mcp-reference"
    directory.mkdir()
    (directory / "scenario.toml").write_text(_scenario(mcp_http_server))
    (directory / "stub-rules.toml").write_text(RULES)
    assert check_scenario(directory, "record").sessions == 2
    return directory


def test_each_session_keeps_one_connection_per_server_for_its_listing_and_calls(
    recorded: Path,
) -> None:
    sessions: dict[tuple[str, str], list[object]] = {}
    connections: list[tuple[str, str]] = []
    for path in sorted((recorded / "mcp").iterdir()):
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        connections.append((header["server"], header["session"]))
        methods = [json.loads(line)["message"].get("method") for line in lines[1:]]
        # One connection per session per server: initialized once, listed once, then calls.
        assert methods.count("initialize") == 1, path.name
        assert methods.count("tools/list") == 1, path.name
        for line in lines[1:]:
            message = json.loads(line)["message"]
            if message.get("method") == "tools/call":
                key = (header["server"], header["session"])
                sessions.setdefault(key, []).append(message["params"]["arguments"])
    assert sorted(connections) == sorted(sessions)
    assert sessions == {
        ("calc", "main"): [{"a": 2, "b": 3}],
        ("calc", "main/0"): [{"a": 40, "b": 2}],
        ("web", "main"): [{"text": "parent"}],
        ("web", "main/0"): [{"text": "child"}],
    }
    texts = []
    for line in (recorded / "golden" / "transcript.jsonl").read_text().splitlines():
        update = json.loads(line).get("params", {}).get("update", {})
        if update.get("sessionUpdate") == "agent_message_chunk":
            texts.append(update["content"]["text"])
    assert "".join(texts).endswith("5, and the helper said forty-two.")


def test_replays_with_the_servers_gone(recorded: Path, tmp_path: Path) -> None:
    copy = tmp_path / "mcp-reference"
    shutil.copytree(recorded, copy)
    toml = copy / "scenario.toml"
    toml.write_text(
        toml.read_text()
        .replace(str(SERVER), "/nonexistent/calc-server.py")
        .replace("127.0.0.1:", "127.0.0.1:1")  # a port nothing listens on
    )
    assert check_scenario(copy, "replay").sessions == 2
    # The child's HTTP recording gone: its call fails, named.
    for path in (copy / "mcp").glob("web.*.jsonl"):
        if '"session":"main/0"' in path.read_text().splitlines()[0]:
            path.unlink()
    with pytest.raises(McpMismatchError, match="server 'web', session 'main/0'"):
        check_scenario(copy, "replay")


def test_an_sse_server_is_recorded_and_replayed_per_session(
    tmp_path: Path, mcp_sse_server: str
) -> None:
    """``transport = "sse"``: the agent is given ACP's ``sse`` type and reaches the server
    over the legacy SSE transport, each session on its own stream; replay with it stopped
    (a port nothing listens on) answers both (drift over SSE: mcp_replay's
    test_mcp_sse.py)."""
    directory = tmp_path / "mcp-sse"
    directory.mkdir()
    (directory / "scenario.toml").write_text(_scenario(mcp_sse_server, "sse"))
    (directory / "stub-rules.toml").write_text(RULES)
    assert check_scenario(directory, "record").sessions == 2
    headers = [json.loads(p.read_text().splitlines()[0]) for p in (directory / "mcp").glob("web.*")]
    assert sorted((h["transport"], h["session"]) for h in headers) == [
        ("sse", "main"),
        ("sse", "main/0"),
    ]
    toml = directory / "scenario.toml"
    toml.write_text(toml.read_text().replace("127.0.0.1:", "127.0.0.1:1"))
    assert check_scenario(directory, "replay").sessions == 2


@pytest.fixture(scope="module")
def recorded_process(tmp_path_factory: pytest.TempPathFactory, mcp_http_server: str) -> Path:
    """The same scenario with ``--subagent-runner process``: the helper is an agent process
    of its own, handed the parent's servers in its ``session/new`` and its lineage. Its
    model calls go through the proxy with identity headers (as ``fixtures/subagent-process``
    does), which binds each process's session by parent and spawn index."""
    directory = tmp_path_factory.mktemp("fixtures") / "mcp-process"
    directory.mkdir()
    agent = f'agent = ["{sys.executable}", "-m", "agentreel.acp_agent", "--provider", "openai", '
    agent += '"--model", "stub-model", "--subagent-runner", "process", '
    agent += '"--provider-setting", "send_identity=true"]\n'
    text = _scenario(mcp_http_server).replace(
        '[record]\nprovider = "stub"\nmodel = "stub-model"\n',
        '[model]\nvia = "proxy"\napi = "openai"\n',
    )
    assert "[model]" in text
    (directory / "scenario.toml").write_text(agent + text)
    (directory / "stub-rules.toml").write_text(RULES)
    assert check_scenario(directory, "record").sessions == 2
    return directory


def test_a_process_subagent_opens_its_own_connections_recorded_and_replayed(
    recorded_process: Path, tmp_path: Path
) -> None:
    calls: dict[tuple[str, str], list[object]] = {}
    for path in sorted((recorded_process / "mcp").iterdir()):
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        for line in lines[1:]:
            message = json.loads(line)["message"]
            if message.get("method") == "tools/call":
                key = (header["server"], header["session"])
                calls.setdefault(key, []).append(message["params"]["arguments"])
    # The child process's calls on connections named by its lineage, as an in-process
    # child's are (without the servers handed down it had no MCP tools at all).
    assert calls == {
        ("calc", "main"): [{"a": 2, "b": 3}],
        ("calc", "main/0"): [{"a": 40, "b": 2}],
        ("web", "main"): [{"text": "parent"}],
        ("web", "main/0"): [{"text": "child"}],
    }
    copy = tmp_path / "mcp-process"
    shutil.copytree(recorded_process, copy)
    toml = copy / "scenario.toml"
    toml.write_text(
        toml.read_text()
        .replace(str(SERVER), "/nonexistent/calc-server.py")
        .replace("127.0.0.1:", "127.0.0.1:1")  # a port nothing listens on
    )
    # Record's trial replay replayed it whole; here with no server running and the child's
    # stdio recording gone: its call fails, named by session, server and tool, while the
    # parent's connections and the child's HTTP one are answered from their recordings.
    for path in (copy / "mcp").glob("calc.*.jsonl"):
        if '"session":"main/0"' in path.read_text().splitlines()[0]:
            path.unlink()
    with pytest.raises(McpMismatchError) as failed:
        check_scenario(copy, "replay")
    message = str(failed.value)
    assert "server 'calc', session 'main/0'" in message
    assert "add" in message
    assert "session 'main'," not in message
    assert "server 'web'" not in message
