"""A real framework on its default model through the ``agentreel`` fixture (issue 42; run by
``nox -s frameworks``, which installs strands-agents over the workspace):
strands-agents' ``Agent`` on its default Bedrock model (``ConverseStream``, binary AWS
event-stream, SigV4-signed by boto3 with fake credentials), with two agents-as-tools
children the parent calls in one turn (strands runs them concurrently, no identity
headers). Recorded through the stub, then replayed with the network closed: the parent
is the main session and each child its own session under it, numbered as the parent
asked for them, whichever child's request arrived first.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import strands  # noqa: F401  (imported once here: the in-process inner runs reuse it)

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

RULES = """
[[rule]]
match = { system_contains = "main agent", last_user = "How many apples and pears?" }
tool_calls = [
  { id = "t_apples", name = "apple_counter", arguments = { query = "Count the apples." } },
  { id = "t_pears", name = "pear_counter", arguments = { query = "Count the pears." } },
]

[[rule]]
match = { system_contains = "apple counter", last_user = "Count the apples." }
text = "7 apples."

[[rule]]
match = { system_contains = "pear counter", last_user = "Count the pears." }
text = "3 pears."

[[rule]]
match = { system_contains = "main agent", last_tool_result_regex = "pears" }
text = "7 apples and 3 pears."
"""
TEST = """
from strands import Agent, tool


def test_counting(agentreel, monkeypatch):
    # boto3 reads Bedrock's endpoint from the environment: the fixture's proxy.
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", agentreel.anthropic_base_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASTRANDSFIXTURE01")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "strandsFixtureSecret0123456789abcdefghij")
    monkeypatch.setenv("AWS_REGION", "us-east-1")

    @tool
    def apple_counter(query: str) -> str:
        \"\"\"Counts apples.\"\"\"
        child = Agent(system_prompt="You are the apple counter.", callback_handler=None)
        return str(child(query))

    @tool
    def pear_counter(query: str) -> str:
        \"\"\"Counts pears.\"\"\"
        child = Agent(system_prompt="You are the pear counter.", callback_handler=None)
        return str(child(query))

    main = Agent(
        system_prompt="You are the main agent.",
        tools=[apple_counter, pear_counter],
        callback_handler=None,
    )
    assert str(main("How many apples and pears?")).strip() == "7 apples and 3 pears."
"""


QUIET = ("-p", "no:cacheprovider", "-q")


def closed_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every proxy variable at a port nothing listens on; loopback exempt (as
    ``test_harness_reel``: test modules cannot import each other under importlib mode)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in ("CI", "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def _first_request(log: Path) -> tuple[str, str]:
    """A recorded session's system prompt and model (its first request)."""
    for line in log.read_text().splitlines()[1:]:
        event = json.loads(line)
        if event["type"] == "request/header":
            return event["data"]["system"], event["data"]["model"]
    raise AssertionError(f"{log}: no request")


def test_strands_on_its_default_bedrock_model_records_and_replays_its_children(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed_network(monkeypatch)
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makepyfile(test_strands_agent=TEST)
    pytester.runpytest_inprocess(*QUIET, "--agentreel-record=once").assert_outcomes(passed=1)
    folder = pytester.path / "recordings" / "test_strands_agent" / "test_counting"
    logs = sorted(path.name for path in folder.glob("*.jsonl"))
    assert logs == ["session.1.jsonl", "session.2.jsonl", "session.jsonl"]
    headers = {name: json.loads((folder / name).read_text().splitlines()[0]) for name in logs}
    main_id = headers["session.jsonl"]["id"]
    # The children in the order the parent asked for them (apples first), under the parent.
    assert [
        (_first_request(folder / name)[0], headers[name]["parent_session"])
        for name in ("session.1.jsonl", "session.2.jsonl")
    ] == [("You are the apple counter.", main_id), ("You are the pear counter.", main_id)]
    system, model = _first_request(folder / "session.jsonl")
    assert system == "You are the main agent."
    assert "anthropic" in model  # strands' default Bedrock model, as its path named it
    written = "".join(path.read_text() for path in folder.rglob("*") if path.is_file())
    assert '"api":"bedrock-converse"' in written
    assert "AKIASTRANDSFIXTURE01" not in written
    assert "strandsFixtureSecret" not in written

    replayed = pytester.runpytest_inprocess(*QUIET)  # offline: proxies at a closed port
    replayed.assert_outcomes(passed=1)
