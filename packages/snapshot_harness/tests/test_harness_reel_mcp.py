"""``agentreel.mcp(name, command=...)`` on the ``agentreel`` fixture (SPEC 19), through
pytester in process: a test whose agent calls the model and a stdio MCP server records both
once, replays with the server's command gone, and a changed tool argument fails the test
naming the server and tool; an OpenAI Agents SDK agent (its own MCP client) records and
replays the same way."""

from __future__ import annotations

import socket
from pathlib import Path

# What the inner test imports, imported here once (an in-process inner run drops them).
import agents.mcp  # noqa: F401
import mcp.client.stdio  # noqa: F401
import openai  # noqa: F401
import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

QUIET = ("-p", "no:cacheprovider", "-p", "no:asyncio", "-q")

# conftest.py's MCP_SERVER (test modules cannot import conftest under importlib mode).
SERVER = Path(__file__).parents[2] / "mcp_replay" / "tests" / "mcp_test_server.py"
RULES = """
[[rule]]
match = { last_user = "Add two and three" }
text = "2 3"
"""
TESTS = """
import asyncio
import os
import sys

import openai
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def add(argv, a, b):
    server = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        result = await client.call_tool("add", {"a": a, "b": b})
        return result.content[0].text


def test_add(agentreel):
    argv = agentreel.mcp("calc", command=[sys.executable, SERVER])
    with openai.OpenAI(base_url=agentreel.base_url, api_key=agentreel.api_key) as client:
        reply = client.chat.completions.create(
            model="stub-model", messages=[{"role": "user", "content": "Add two and three"}]
        )
    a, b = (int(n) for n in reply.choices[0].message.content.split())
    assert asyncio.run(add(argv, a, b)) == "5"
"""


def closed_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every proxy variable at a port nothing listens on; loopback exempt; no keys."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{port}")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CI", "AGENTREEL_RERECORD_COMMAND"):
        monkeypatch.delenv(name, raising=False)


def write_test(pytester: pytest.Pytester, server: str) -> None:
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makepyfile(test_tools=f"SERVER = {server!r}\n{TESTS}")


def test_mcp_calls_are_recorded_beside_the_model_calls_and_replayed_without_the_server(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed_network(monkeypatch)
    write_test(pytester, str(SERVER))
    pytester.runpytest_inprocess(*QUIET, "--agentreel-record=once").assert_outcomes(passed=1)
    folder = pytester.path / "recordings" / "test_tools" / "test_add"
    assert (folder / "session.jsonl").is_file()
    assert sorted(p.name for p in (folder / "mcp").iterdir()) == ["calc.0.jsonl"]
    assert '"a":2' in (folder / "mcp" / "calc.0.jsonl").read_text()

    write_test(pytester, "/nonexistent/calc-server.py")  # replay runs no server
    pytester.runpytest_inprocess(*QUIET).assert_outcomes(passed=1)

    recording = folder / "mcp" / "calc.0.jsonl"
    recording.write_text(recording.read_text().replace('"a":2', '"a":7'))
    result = pytester.runpytest_inprocess(*QUIET)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "MCP replay of server 'calc'" in output
    assert "tools/call 'add'" in output
    assert "a: 7 → 2" in output
    assert "pytest test_tools.py::test_add --agentreel-record=all" in output


def test_mcp_needs_exactly_one_of_command_and_url(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed_network(monkeypatch)
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makepyfile(test_bad="def test_bad(agentreel):\n    agentreel.mcp('calc')\n")
    result = pytester.runpytest_inprocess(*QUIET, "--agentreel-record=once")
    result.assert_outcomes(failed=1)
    said = "agentreel.mcp('calc'): give either command=[[]...[]] (a stdio server's argv)"
    result.stdout.fnmatch_lines([f"*(ReelError: test_bad.py::test_bad: {said}*"])


def test_mcp_transport_is_http_or_sse_with_a_url(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed_network(monkeypatch)
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makepyfile(
        test_bad="def test_bad(agentreel):\n"
        "    agentreel.mcp('web', url='http://127.0.0.1:9/sse', transport='websocket')\n"
    )
    result = pytester.runpytest_inprocess(*QUIET, "--agentreel-record=once")
    result.assert_outcomes(failed=1)
    said = "agentreel.mcp('web'): transport='websocket': give 'http' or 'sse'"
    result.stdout.fnmatch_lines([f"*(ReelError: test_bad.py::test_bad: {said}*"])


HTTP_TEST = """
import asyncio

import openai
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def add(url, a, b):
    async with streamable_http_client(url) as (read, write, *_), ClientSession(
        read, write
    ) as client:
        await client.initialize()
        result = await client.call_tool("add", {"a": a, "b": b})
        return result.content[0].text


def test_add_over_http(agentreel):
    url = agentreel.mcp("calc", url=SERVER_URL)
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp/calc")
    with openai.OpenAI(base_url=agentreel.base_url, api_key=agentreel.api_key) as client:
        reply = client.chat.completions.create(
            model="stub-model", messages=[{"role": "user", "content": "Add two and three"}]
        )
    a, b = (int(n) for n in reply.choices[0].message.content.split())
    assert asyncio.run(add(url, a, b)) == "5"
"""


def test_an_http_server_is_recorded_and_replayed_with_nothing_listening(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mcp_http_server: str
) -> None:
    closed_network(monkeypatch)
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makepyfile(test_web=f"SERVER_URL = {mcp_http_server!r}\n{HTTP_TEST}")
    pytester.runpytest_inprocess(*QUIET, "--agentreel-record=once").assert_outcomes(passed=1)
    folder = pytester.path / "recordings" / "test_web" / "test_add_over_http" / "mcp"
    assert [p.name for p in folder.iterdir()] == ["calc.0.jsonl"]
    assert '"transport":"http"' in (folder / "calc.0.jsonl").read_text()

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    pytester.makepyfile(test_web=f"SERVER_URL = {dead!r}\n{HTTP_TEST}")
    pytester.runpytest_inprocess(*QUIET).assert_outcomes(passed=1)


MASKED_TEST = """
import asyncio
import os
import secrets
import sys

import openai
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


@pytest.fixture
def agentreel_config():
    return {"masks": [r"run-[0-9a-f]{8}"]}


async def echo(argv, text):
    server = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        result = await client.call_tool("echo", {"text": text})
        return result.content[0].text


def test_echo(agentreel):
    argv = agentreel.mcp("calc", command=[sys.executable, SERVER])
    with openai.OpenAI(base_url=agentreel.base_url, api_key=agentreel.api_key) as client:
        client.chat.completions.create(
            model="stub-model", messages=[{"role": "user", "content": "Add two and three"}]
        )
    token = "run-" + secrets.token_hex(4)  # another on every run
    assert asyncio.run(echo(argv, token + " done")).endswith(" done")
"""


def test_the_fixture_masks_apply_to_mcp_recordings(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agentreel_config``'s masks reach the MCP recording: an argument that differs on
    every run is written masked and replays (without them it would drift)."""
    closed_network(monkeypatch)
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makepyfile(test_masked=f"SERVER = {str(SERVER)!r}\n{MASKED_TEST}")
    pytester.runpytest_inprocess(*QUIET, "--agentreel-record=once").assert_outcomes(passed=1)
    recording = pytester.path / "recordings" / "test_masked" / "test_echo" / "mcp" / "calc.0.jsonl"
    (call,) = [line for line in recording.read_text().splitlines() if "tools/call" in line]
    assert '"text":"{{mask-1}} done"' in call
    assert "run-" not in call
    pytester.runpytest_inprocess(*QUIET).assert_outcomes(passed=1)


SDK_RULES = """
[[rule]]
name = "the agent adds with the MCP tool"
match = { last_user = "What is two plus three?" }
tool_calls = [{ id = "call_add", name = "add", arguments = { a = 2, b = 3 } }]

[[rule]]
name = "the agent answers from the tool's result"
match = { last_tool_result = "5" }
text = "Two plus three is 5."
"""
SDK_TESTS = """
import asyncio
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner
from agents.mcp import MCPServerStdio
from openai import AsyncOpenAI


async def run(argv, base_url, api_key):
    params = {"command": argv[0], "args": argv[1:]}
    async with (
        MCPServerStdio(params, name="calc", cache_tools_list=True) as calc,
        AsyncOpenAI(base_url=base_url, api_key=api_key) as client,
    ):
        agent = Agent(
            name="Calculator",
            instructions="Use the add tool for sums.",
            model=OpenAIChatCompletionsModel(model="stub-model", openai_client=client),
            mcp_servers=[calc],
        )
        result = await Runner.run(agent, "What is two plus three?")
        return result.final_output


def test_agent_adds(agentreel):
    argv = agentreel.mcp("calc", command=[sys.executable, SERVER])
    answer = asyncio.run(run(argv, agentreel.base_url, agentreel.api_key))
    assert answer == "Two plus three is 5."
"""


def write_sdk_test(pytester: pytest.Pytester, server: str) -> None:
    pytester.makefile(".toml", **{"stub-rules": SDK_RULES})
    pytester.makepyfile(test_sdk=f"SERVER = {server!r}\n{SDK_TESTS}")


def test_an_agents_sdk_agent_with_mcp_tools_records_and_replays(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A framework agent: the OpenAI Agents SDK's own MCP client (``MCPServerStdio``)
    starts the shim; its model is the fixture's proxy. ``--assert=plain``: rewriting the
    inner module's asserts in process hit CPython 3.11's "AST constructor recursion depth
    mismatch" now and then."""
    closed_network(monkeypatch)
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")  # its exporter would go online
    write_sdk_test(pytester, str(SERVER))
    pytester.runpytest_inprocess(
        *QUIET, "--assert=plain", "--agentreel-record=once"
    ).assert_outcomes(passed=1)
    folder = pytester.path / "recordings" / "test_sdk" / "test_agent_adds"
    recording = folder / "mcp" / "calc.0.jsonl"
    assert '"arguments":{"a":2,"b":3}' in recording.read_text()

    write_sdk_test(pytester, "/nonexistent/calc-server.py")  # replay runs no server
    pytester.runpytest_inprocess(*QUIET, "--assert=plain").assert_outcomes(passed=1)
    # (A drifted argument's failure is the fixture's, whatever the client:
    # test_mcp_calls_are_recorded_beside_the_model_calls_and_replayed_without_the_server.)
