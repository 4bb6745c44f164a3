"""A real handoff framework through the ``agentreel`` fixture (issue 40; run by
``nox -s frameworks``): llama-index's ``AgentWorkflow`` with two ``FunctionAgent``s on
``llama-index-llms-openai`` at the fixture's proxy, no identity headers. The coordinator
calls llama-index's ``handoff`` tool; the helper then gets the shared history under its own
system prompt. Recorded through the stub: the coordinator is the main session and the
helper its child with the spawn index of the handoff call (0). Replayed offline: passes as
recorded; with the helper's recording deleted, or its system prompt changed, the failure
names the helper's session and its parent.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import llama_index.core.agent.workflow  # imported once here: the inner runs reuse it
import llama_index.llms.openai  # noqa: F401
import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

COORDINATOR = "You are the coordinator. Hand every question about fruit to the helper."
# Sorting before the coordinator's prompt: a tie-break by prompt would make it the main session.
HELPER = "You are the apple counter. You count fruit."

RULES = """
[[rule]]
match = { system_contains = "You are the apple counter" }
text = "7 apples."

[[rule]]
match = { system_contains = "You are the coordinator", last_user = "How many apples?" }
tool_calls = [
  { id = "call_handoff", name = "handoff", arguments = { to_agent = "helper", reason = "Fruit." } },
]
"""
TEST = """
import asyncio

from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.llms.openai import OpenAI


def test_handoff(agentreel):
    llm = OpenAI(model="gpt-4o-mini", api_base=agentreel.base_url, api_key=agentreel.api_key)
    coordinator = FunctionAgent(
        name="coordinator",
        description="Routes questions.",
        system_prompt=COORDINATOR,
        llm=llm,
        tools=[],
        can_handoff_to=["helper"],
    )
    helper = FunctionAgent(
        name="helper",
        description="Counts fruit.",
        system_prompt=HELPER,
        llm=llm,
        tools=[],
    )

    async def run():  # the workflow's handler needs a running loop
        workflow = AgentWorkflow(agents=[coordinator, helper], root_agent="coordinator")
        return await workflow.run(user_msg="How many apples?")

    answer = asyncio.run(run())
    assert str(answer).strip() == "7 apples."
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
    for name in ("CI", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)


def _write_test(pytester: pytest.Pytester, helper: str = HELPER) -> None:
    source = f"COORDINATOR = {COORDINATOR!r}\nHELPER = {helper!r}\n" + TEST
    pytester.makepyfile(test_llama_agents=source)


def _first_system(log: Path) -> str:
    """A recorded session's system prompt (its first request)."""
    for line in log.read_text().splitlines()[1:]:
        event = json.loads(line)
        if event["type"] == "request/header":
            return str(event["data"]["system"])
    raise AssertionError(f"{log}: no request")


@pytest.fixture
def recorded(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The workflow recorded once through the stub; its recording folder."""
    closed_network(monkeypatch)
    pytester.makefile(".toml", **{"stub-rules": RULES})
    _write_test(pytester)
    pytester.runpytest_inprocess(*QUIET, "--agentreel-record=once").assert_outcomes(passed=1)
    return pytester.path / "recordings" / "test_llama_agents" / "test_handoff"


def test_the_handoff_receiver_is_the_coordinators_child_and_replays(
    pytester: pytest.Pytester, recorded: Path
) -> None:
    logs = sorted(path.name for path in recorded.glob("*.jsonl"))
    assert logs == ["session.1.jsonl", "session.jsonl"]
    main = json.loads((recorded / "session.jsonl").read_text().splitlines()[0])
    child = json.loads((recorded / "session.1.jsonl").read_text().splitlines()[0])
    assert _first_system(recorded / "session.jsonl") == COORDINATOR
    assert main.get("parent_session") is None
    assert _first_system(recorded / "session.1.jsonl") == HELPER
    assert (child["parent_session"], child["spawn_index"]) == (main["id"], 0)

    pytester.runpytest_inprocess(*QUIET).assert_outcomes(passed=1)


def test_a_deleted_or_changed_receiver_names_it_and_its_parent(
    pytester: pytest.Pytester, recorded: Path
) -> None:
    changed = HELPER.replace("You", "Now you", 1)
    _write_test(pytester, helper=changed)
    drifted = pytester.runpytest_inprocess(*QUIET)
    drifted.assert_outcomes(failed=1)
    out = drifted.stdout.str()
    assert "RequestDriftError" in out
    assert "call 1 of session.1.jsonl ({{session:1}}), child 0 of session.jsonl" in out

    _write_test(pytester)
    (recorded / "session.1.jsonl").unlink()
    deleted = pytester.runpytest_inprocess(*QUIET)
    deleted.assert_outcomes(failed=1)
    out = deleted.stdout.str()
    assert "UnrecordedSessionError" in out
    assert "(parent session.jsonl ({{session:main}}), spawn index 0)" in out
    assert 'handed on (tool handoff(\'{"to_agent":"helper"' in out
    assert "nearest recorded request" not in out
