"""A real text-protocol delegation through the ``agentreel`` fixture (issue 40; run by
``nox -s frameworks``): crewai's ``Process.hierarchical`` crew, its manager on an
OpenAI-compatible ``LLM`` at the fixture's proxy, no identity headers. The model is one
without function calling (as many local models are), so crewai drives its ReAct text
protocol: the manager writes ``Action: Ask question to coworker`` and an ``Action Input``
JSON block, and each coworker is asked in a new conversation with the question inside
crewai's task template. Recorded through the stub: the manager is the main session and
each coworker its child, numbered in the order the manager wrote the blocks. Replayed
offline: passes as recorded; a deleted coworker recording, or a coworker whose prompt
changed, fails naming that coworker's session and its parent.
"""

from __future__ import annotations

import json
import socket
import warnings
from pathlib import Path

import pytest

with warnings.catch_warnings():
    # crewai's import warns (an ImportWarning from its guarded ``crewai.rag`` module).
    warnings.simplefilter("ignore")
    import crewai  # noqa: F401  (imported once here: the inner runs reuse it)

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

CONTEXT = "The user wants to know what fruit the basket holds."


def _action(question: str, coworker: str) -> str:
    block = json.dumps({"question": question, "context": CONTEXT, "coworker": coworker})
    return (
        f"Thought: I should ask the {coworker}.\nAction: Ask question to coworker\n"
        f"Action Input: {block}"
    )


# The manager's system prompt lists its coworkers: the coworkers' rules match their own.
RULES = f"""
[[rule]]
match = {{ system_contains = "Crew Manager", any_message = "3 pears" }}
text = "Thought: I now know the final answer\\nFinal Answer: 7 apples and 3 pears."

[[rule]]
match = {{ system_contains = "Crew Manager", any_message = "7 apples" }}
text = {json.dumps(_action("How many pears are in the basket on the table?", "Pear Counter"))}

[[rule]]
match = {{ system_contains = "Crew Manager" }}
text = {json.dumps(_action("How many apples are in the basket on the table?", "Apple Counter"))}

[[rule]]
match = {{ system_contains = "You are Apple Counter" }}
text = "Thought: I now know the final answer\\nFinal Answer: 7 apples"

[[rule]]
match = {{ system_contains = "You are Pear Counter" }}
text = "Thought: I now know the final answer\\nFinal Answer: 3 pears"
"""
TEST = """
import pytest
from crewai import LLM, Agent, Crew, Process, Task

# crewai warns about its own deprecated fields (function_calling_llm, …) on every crew.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_crew(agentreel, monkeypatch):
    llm = LLM(model="openai/gpt-4o-mini", base_url=agentreel.base_url, api_key=agentreel.api_key)
    # A model without function calling: crewai drives its ReAct text protocol.
    monkeypatch.setattr(type(llm), "supports_function_calling", lambda self: False)
    apple = Agent(
        role="Apple Counter", goal="Count apples", backstory=APPLES, llm=llm,
        allow_delegation=False,
    )
    pear = Agent(
        role="Pear Counter", goal="Count pears", backstory="You count pears.", llm=llm,
        allow_delegation=False,
    )
    task = Task(description="Count the fruit.", expected_output="Both counts.")
    crew = Crew(agents=[apple, pear], tasks=[task], process=Process.hierarchical, manager_llm=llm)
    assert str(crew.kickoff()).strip() == "7 apples and 3 pears."
"""

QUIET = ("-p", "no:cacheprovider", "-q")


def closed_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every proxy variable at a port nothing listens on; loopback exempt (as
    ``test_strands_fixture``: test modules cannot import each other under importlib mode);
    crewai's telemetry and tracing off."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in ("CREWAI_DISABLE_TELEMETRY", "OTEL_SDK_DISABLED", "CREWAI_DISABLE_TRACKING"):
        monkeypatch.setenv(name, "true")
    monkeypatch.setenv("CREWAI_TRACING_ENABLED", "false")
    for name in ("CI", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def _write_test(pytester: pytest.Pytester, apples: str = "You count apples.") -> None:
    pytester.makepyfile(test_crew_agents=f"APPLES = {apples!r}\n" + TEST)


def _systems(log: Path) -> list[str]:
    """A recorded session's system prompts, one per request."""
    events = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    return [str(e["data"]["system"]) for e in events if e["type"] == "request/header"]


def _agentreel_line(result: pytest.RunResult) -> str:
    """The first line agentreel reports for the failed inner test (crewai's own log and its
    last exception follow it)."""
    node = "test_crew_agents.py::test_crew: "  # after the path pytester's folder is at
    lines = [line.split(node, 1)[1] for line in result.stdout.lines if node in line]
    assert lines, result.stdout.str()
    return lines[0]


@pytest.fixture
def recorded(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The crew recorded once through the stub; its recording folder."""
    closed_network(monkeypatch)
    pytester.makefile(".toml", **{"stub-rules": RULES})
    _write_test(pytester)
    pytester.runpytest_inprocess(*QUIET, "--agentreel-record=once").assert_outcomes(passed=1)
    return pytester.path / "recordings" / "test_crew_agents" / "test_crew"


def test_each_coworker_is_the_managers_child_in_the_order_it_was_asked(
    pytester: pytest.Pytester, recorded: Path
) -> None:
    logs = sorted(path.name for path in recorded.glob("*.jsonl"))
    assert logs == ["session.1.jsonl", "session.2.jsonl", "session.jsonl"]
    headers = {name: json.loads((recorded / name).read_text().splitlines()[0]) for name in logs}
    main_id = headers["session.jsonl"]["id"]
    assert headers["session.jsonl"]["parent_session"] is None
    assert [s.split(".")[0] for s in _systems(recorded / "session.jsonl")] == [
        "You are Crew Manager"
    ] * 3
    assert [
        (_systems(recorded / name)[0].split(".")[0], h["parent_session"], h["spawn_index"])
        for name, h in sorted(headers.items())
        if name != "session.jsonl"
    ] == [("You are Apple Counter", main_id, 0), ("You are Pear Counter", main_id, 1)]

    pytester.runpytest_inprocess(*QUIET).assert_outcomes(passed=1)


def test_a_deleted_or_changed_coworker_names_it_and_its_parent(
    pytester: pytest.Pytester, recorded: Path
) -> None:
    _write_test(pytester, apples="Now you count apples.")
    drifted = pytester.runpytest_inprocess(*QUIET)
    drifted.assert_outcomes(failed=1)
    first = _agentreel_line(drifted)
    assert first.startswith("RequestDriftError: "), first
    assert "call 1 of session.1.jsonl ({{session:1}}), child 0 of session.jsonl" in first

    _write_test(pytester)
    (recorded / "session.2.jsonl").unlink()
    deleted = pytester.runpytest_inprocess(*QUIET)
    deleted.assert_outcomes(failed=1)
    first = _agentreel_line(deleted)
    assert first.startswith("UnrecordedSessionError: "), first
    assert "(parent session.jsonl ({{session:main}}), spawn index 1)" in first
    assert "handed on (text action Ask question to coworker(" in first
    # (crewai then retries its manager from scratch: those later errors are not checked.)
    assert "nearest recorded request" not in first
