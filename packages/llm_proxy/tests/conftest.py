"""Shared setup of the proxy tests: stub rules, SDK clients, what an SDK parsed, the
recorded session tree.

Every test starts the stub server and the proxy on 127.0.0.1 itself and stops them;
replay runs with the stub stopped (nothing listens upstream), keyless, and every test runs
with the proxy variables aimed at a closed port (``offline_proxies``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from agentreel.llm.stub import StubServer
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
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        return f"http://127.0.0.1:{port}", runner.cleanup

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
