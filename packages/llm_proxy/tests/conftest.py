"""Shared setup of the proxy tests: stub rules, SDK clients, what an SDK parsed, the
recorded session tree, the record-then-replay round trips of the wire tests.

Every test starts the stub server and the proxy on 127.0.0.1 itself and stops them;
replay runs with the stub stopped (nothing listens upstream), keyless, and every test runs
with the proxy variables aimed at a closed port (``offline_proxies``).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from agentreel.llm.stub import StubRequest, StubServer
from agentreel.llm.wire import WireApiName, wire_api
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import ConsumptionReport, read_report
from agentreel.session import RequestHeader, RequestHeaderData, load_session_log, recording_names

WEATHER_RULES = """
[[rule]]
name = "ask"
match.last_user = "weather"
text = "Let me check the weather."
tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }]
chunk_size = 5
usage = { input_tokens = 31, output_tokens = 12 }

[[rule]]
name = "answer"
match.last_tool_result_regex = "sunny"
text = "It is sunny in Paris today."
chunk_size = 4
usage = { input_tokens = 55, output_tokens = 7 }

[[rule]]
name = "hello"
match.last_user = "hello"
text = "Hello! How can I help?"
"""


UpstreamHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]
UpstreamAnswer = list[bytes] | dict[str, Any] | UpstreamHandler
"""What ``scripted_upstream`` answers a path with: SSE frames, a JSON body, or a handler."""

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
LOOPBACK = "127.0.0.1,localhost"


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture(autouse=True)
def offline_proxies(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Every proxy variable (both spellings) aimed at a closed loopback port, loopback
    exempt — set for the whole test, so in-process SDK clients and every child process
    reach the stub and the proxy on 127.0.0.1 and nothing else: a replay that reached for
    the network fails instead of passing unseen. Returned for a child given an environment
    of its own."""
    closed = f"http://127.0.0.1:{_closed_port()}"
    env: dict[str, str] = {}
    for name in PROXY_VARIABLES:
        env[name] = env[name.lower()] = closed
    env["NO_PROXY"] = env["no_proxy"] = LOOPBACK
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def weather_stub() -> Iterator[StubServer]:
    with StubServer.from_toml(WEATHER_RULES) as server:
        yield server


async def _serve(app: web.Application, runners: list[web.AppRunner]) -> tuple[str, Any]:
    """``app`` served on 127.0.0.1 (a free port) until its runner is cleaned up:
    ``(base_url, stop)``; the runner joins ``runners`` (the fixture's, cleaned at
    teardown)."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    runners.append(runner)
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return f"http://127.0.0.1:{runner.addresses[0][1]}", runner.cleanup


@pytest_asyncio.fixture
async def scripted_upstream() -> AsyncIterator[Callable[..., Any]]:
    """Start a hand-written upstream on 127.0.0.1 that answers each ``POST <path>`` with
    the given SSE frames (a list of bytes) or JSON body (a dict) — what a real provider
    sends, unlike the stub — or, for an upstream that must misbehave in time (hold its
    body's end, break the connection), with an aiohttp handler; returns
    ``(base_url, stop)``. Stopped at teardown too."""
    runners: list[web.AppRunner] = []

    async def start(answers: dict[str, UpstreamAnswer]) -> tuple[str, Any]:
        async def answer(request: web.Request) -> web.StreamResponse:
            script = answers[request.path]
            if callable(script):
                return await script(request)
            if isinstance(script, dict):
                return web.json_response(script)
            response = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await response.prepare(request)
            for frame in script:
                await response.write(frame)
            await response.write_eof()
            return response

        app = web.Application()
        for path in answers:
            app.router.add_post(path, answer)
        return await _serve(app, runners)

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest_asyncio.fixture
async def cassette_upstream() -> AsyncIterator[Callable[..., Awaitable[tuple[str, Any]]]]:
    """Start a loopback upstream that answers every ``POST`` as a corpus cassette holds it:
    ``start(api, stream, status, content_type, body)``, a stream's ``body`` written frame
    by frame as its wire API (``api``) splits it; returns ``(base_url, stop)``. Stopped at
    teardown too."""
    runners: list[web.AppRunner] = []

    async def start(
        api: WireApiName, stream: bool, status: int, content_type: str, body: bytes
    ) -> tuple[str, Any]:
        headers = {"content-type": content_type}

        async def answer(request: web.Request) -> web.StreamResponse:
            await request.read()
            if not stream:
                return web.Response(status=status, body=body, headers=headers)
            out = web.StreamResponse(status=status, headers=headers)
            await out.prepare(request)
            for frame in wire_api(api).split_frames(body):
                await out.write(frame)
            await out.write_eof()
            return out

        app = web.Application()
        app.router.add_post("/{tail:.*}", answer)
        return await _serve(app, runners)

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
def fixture_dir(tmp_path: Path) -> Path:
    return tmp_path / "fixture"


ProxyCli = Callable[[list[str]], tuple["subprocess.Popen[bytes]", int]]


@pytest.fixture
def proxy_cli(tmp_path: Path) -> Iterator[ProxyCli]:
    """Start ``python -m agentreel.llm_proxy ARGS --port-file F`` (stdin, stdout and stderr
    piped); returns the process and its port once it listens. Killed at teardown if the
    test left it running."""
    started: list[subprocess.Popen[bytes]] = []

    def start(args: list[str]) -> tuple[subprocess.Popen[bytes], int]:
        port_file = tmp_path / f"port-{len(started)}"
        process = subprocess.Popen(
            [sys.executable, "-m", "agentreel.llm_proxy", *args, "--port-file", str(port_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "OPENAI_API_KEY": ""},
        )
        started.append(process)
        # Start-up on a loaded 2-core machine took > 60 s (when it imported both SDKs).
        deadline = time.monotonic() + 240
        while not port_file.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                _, err = process.communicate(timeout=10)
                raise AssertionError(f"the proxy did not start: {err.decode()}")
            time.sleep(0.05)
        return process, int(port_file.read_text())

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


RecordingTree = Callable[
    [Path, Callable[[RequestHeaderData], object]], list[tuple[object, object, int | None]]
]


@pytest.fixture
def recording_tree() -> RecordingTree:
    """``tree(fixture, name)``: each recording of ``fixture`` in session order as (its name,
    its parent's name or None, its spawn index), a recording named by ``name`` of its first
    request (its system prompt, its first user message, ...): the lineage the proxy
    recorded, free of ids."""

    def tree(
        fixture: Path, name: Callable[[RequestHeaderData], object]
    ) -> list[tuple[object, object, int | None]]:
        logs = [load_session_log(fixture / file) for file in recording_names(fixture)]
        names = {
            log.header.id: name(next(e.data for e in log.events if isinstance(e, RequestHeader)))
            for log in logs
        }
        return [
            (
                names[log.header.id],
                names[log.header.parent_session] if log.header.parent_session else None,
                log.header.spawn_index,
            )
            for log in logs
        ]

    return tree


def written(directory: Path) -> str:
    """Every file a recording wrote, as one text."""
    return "".join(path.read_text() for path in directory.rglob("*") if path.is_file())


@dataclass(frozen=True)
class RoundTrip:
    """What a record-then-replay round trip saw: what the client parsed and the bytes it
    received, recorded (equal to direct and to replayed), the requests the stub received,
    and every file the recording wrote as one text."""

    recorded: list[Any]
    recorded_bytes: bytes
    requests: list[StubRequest]
    written: str


Conversation = Callable[[str], Awaitable[list[Any]]]
RawCall = Callable[[str], Awaitable[bytes]]
WireRoundTrip = Callable[[str, Conversation, RawCall], Awaitable[RoundTrip]]


@pytest.fixture
def wire_round_trip(fixture_dir: Path, tmp_path: Path) -> WireRoundTrip:
    """``await round_trip(rules, conversation, raw)``: the conversation (what an SDK
    parsed) and the raw call (the bytes received) run straight at a stub with ``rules``,
    then recorded through the proxy, then replayed keylessly with the stub stopped; checks
    that recording is a pass-through, that replay parses alike and serves the same bytes,
    and that the replay report is clean."""

    async def round_trip(rules: str, conversation: Conversation, raw: RawCall) -> RoundTrip:
        with StubServer.from_toml(rules) as stub:
            direct = await conversation(stub.base_url)
            direct_bytes = await raw(stub.base_url)
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
                recorded = await conversation(proxy.base_url)
                recorded_bytes = await raw(proxy.base_url)
            requests = stub.requests
        assert recorded == direct  # recording is a pass-through
        assert recorded_bytes == direct_bytes
        report = tmp_path / "report.json"
        async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
            replayed = await conversation(proxy.base_url)
            replayed_bytes = await raw(proxy.base_url)
        assert replayed == recorded
        assert replayed_bytes == recorded_bytes
        replayed_report = read_report(report)
        assert replayed_report.ok, replayed_report.errors
        return RoundTrip(recorded, recorded_bytes, requests, written(fixture_dir))

    return round_trip


CountingRules = Callable[[str, str, tuple[str, ...], tuple[str, str]], str]


@pytest.fixture
def counting_rules() -> CountingRules:
    """``counting_rules(api, question, prompts, call_ids)``: the stub rules of the tree
    ``children_round_trip`` records on ``api`` — a main agent asked ``question`` delegates
    ``prompts`` to two ``task`` children (its tool calls ``call_ids``), each counting
    subagent answers its count, then the main agent sums them."""

    def rules(api: str, question: str, prompts: tuple[str, ...], call_ids: tuple[str, str]) -> str:
        return f"""
[[rule]]
match = {{ api = "{api}", system_contains = "main agent", last_user = "{question}" }}
tool_calls = [
  {{ id = "{call_ids[0]}", name = "task", arguments = {{ prompt = "{prompts[0]}" }} }},
  {{ id = "{call_ids[1]}", name = "task", arguments = {{ prompt = "{prompts[1]}" }} }},
]

[[rule]]
match = {{ api = "{api}", system_contains = "counting subagent", last_user = "{prompts[0]}" }}
text = "7 apples."

[[rule]]
match = {{ api = "{api}", system_contains = "counting subagent", last_user = "{prompts[1]}" }}
text = "3 pears."

[[rule]]
match = {{ api = "{api}", system_contains = "main agent", last_tool_result_regex = "pears" }}
text = "7 apples and 3 pears."
"""

    return rules


Agent = Callable[..., Awaitable[str]]
ChildrenRoundTrip = Callable[[str, Agent, str, tuple[str, ...]], Awaitable[ConsumptionReport]]


@pytest.fixture
def children_round_trip(tmp_path: Path, recording_tree: RecordingTree) -> ChildrenRoundTrip:
    """``await round_trip(rules, agent, question, prompts)``: ``agent(base_url)`` — a
    parent asked ``question`` that delegates ``prompts`` to two concurrent headerless
    children — recorded through the proxy (on a loop of its own in a thread, so the proxy
    and the agent do not share one), then replayed with ``children_reversed=True``. Checks
    the recorded tree (each session named by its first user message: the parent, then the
    children in spawn order) and the answer both times; returns the replay's report."""

    def first_user(request: RequestHeaderData) -> object:
        return next(m.preview for m in request.messages if m.role == "user")

    async def round_trip(
        rules: str, agent: Agent, question: str, prompts: tuple[str, ...]
    ) -> ConsumptionReport:
        fixture = tmp_path / "fixture"

        def record() -> None:
            async def run() -> None:
                with StubServer.from_toml(rules) as stub:
                    async with start_proxy(
                        "record", upstream=stub.base_url, fixture=fixture
                    ) as proxy:
                        assert await agent(proxy.base_url) == "7 apples and 3 pears."

            asyncio.run(run())

        await asyncio.to_thread(record)
        tree = {
            name: (parent, index) for name, parent, index in recording_tree(fixture, first_user)
        }
        assert tree == {
            question: (None, None),
            prompts[0]: (question, 0),
            prompts[1]: (question, 1),
        }
        report = tmp_path / "report.json"
        async with start_proxy("replay", fixture=fixture, report=report) as proxy:
            answer = await agent(proxy.base_url, children_reversed=True)
        assert answer == "7 apples and 3 pears."
        replayed = read_report(report)
        assert replayed.ok, replayed.errors
        return replayed

    return round_trip
