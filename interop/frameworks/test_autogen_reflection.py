"""A real reflection call through the ``agentreel`` fixture (issue 40; run by
``nox -s frameworks``): autogen-agentchat's ``AssistantAgent(reflect_on_tool_use=True)``
with one ``AgentTool`` child, on autogen-ext's ``OpenAIChatCompletionClient`` at the
fixture's proxy, no identity headers. The agent's first call offers the tool; after the
tool ran, autogen asks the model again with the whole conversation and no tools
(``_reflect_on_tool_use_flow``). Recorded through the stub: the child is the lead's child
(spawn index 0) and the reflection is call 2 of the lead's session, not a new lane;
replayed offline it passes.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import autogen_agentchat.agents  # noqa: F401  (imported once here: the inner runs reuse it)
import autogen_ext.models.openai  # noqa: F401
import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

LEAD = "You are the lead. Count fruit with your tools."
COUNTER = "You are the apple counter."

RULES = """
[[rule]]
match = { system_contains = "You are the lead", last_user = "How many apples?", has_tools = true }
tool_calls = [
  { id = "call_apples", name = "apple_counter", arguments = { task = "Count the apples." } },
]

[[rule]]
match = { system_contains = "You are the apple counter", last_user = "Count the apples." }
text = "7 apples."

[[rule]]
match = { system_contains = "You are the lead", last_tool_result = "7 apples", has_tools = false }
text = "There are 7 apples."
"""
TEST = """
import asyncio

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.tools import AgentTool
from autogen_ext.models.openai import OpenAIChatCompletionClient
import pytest

# autogen compares the reply's model (the stub's dated name) with the one asked for.
pytestmark = pytest.mark.filterwarnings("ignore:Resolved model mismatch:UserWarning")


def test_reflection(agentreel):
    async def run():
        client = OpenAIChatCompletionClient(
            model="gpt-4o-mini", base_url=agentreel.base_url, api_key=agentreel.api_key
        )
        counter = AssistantAgent(
            "apple_counter",
            description="Counts apples.",
            model_client=client,
            system_message=COUNTER,
        )
        lead = AssistantAgent(
            "lead",
            model_client=client,
            system_message=LEAD,
            tools=[AgentTool(counter)],
            reflect_on_tool_use=True,
        )
        result = await lead.run(task="How many apples?")
        await client.close()
        return result.messages[-1].content

    assert asyncio.run(run()) == "There are 7 apples."
"""

QUIET = ("-p", "no:cacheprovider", "-q")


def closed_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every proxy variable at a port nothing listens on; loopback exempt (as
    ``test_strands_fixture``: test modules cannot import each other under importlib mode)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in ("CI", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def _requests(log: Path) -> list[dict[str, object]]:
    """A recorded session's requests, in order."""
    events = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    return [event["data"] for event in events if event["type"] == "request/header"]


def test_the_reflection_call_is_the_agents_second_call_and_replays(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed_network(monkeypatch)
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makepyfile(test_autogen_lead=f"LEAD = {LEAD!r}\nCOUNTER = {COUNTER!r}\n" + TEST)
    pytester.runpytest_inprocess(*QUIET, "--agentreel-record=once").assert_outcomes(passed=1)
    folder = pytester.path / "recordings" / "test_autogen_lead" / "test_reflection"
    assert sorted(path.name for path in folder.glob("*.jsonl")) == [
        "session.1.jsonl",
        "session.jsonl",
    ]
    main = json.loads((folder / "session.jsonl").read_text().splitlines()[0])
    child = json.loads((folder / "session.1.jsonl").read_text().splitlines()[0])
    assert (child["parent_session"], child["spawn_index"]) == (main["id"], 0)
    assert [request["system"] for request in _requests(folder / "session.1.jsonl")] == [COUNTER]
    requests = _requests(folder / "session.jsonl")
    assert [request["system"] for request in requests] == [LEAD, LEAD]
    assert [bool(request.get("tools")) for request in requests] == [True, False]

    pytester.runpytest_inprocess(*QUIET).assert_outcomes(passed=1)
