"""Shared helpers for the harness tests: scenario directories driving the fake agent."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from agentreel.session import TRIALS_ENV

FAKE_AGENT = Path(__file__).with_name("harness_fake_agent.py")
# The MCP server the harness's MCP tests record (stdio: ``python`` it; HTTP: the
# ``mcp_http_server`` fixture): mcp_replay's test server, the one copy.
MCP_SERVER = Path(__file__).parents[2] / "mcp_replay" / "tests" / "mcp_test_server.py"
# The drifted tests' three-level tree (SPEC 20: main -> route and hotel at once, route ->
# weather), one program for every way of running it: the proxy tests' program, its stub
# rules beside it (``drifted_tree.toml``); the ``drifted_tree`` fixture gives its path.
DRIFTED_TREE = Path(__file__).parents[2] / "llm_proxy" / "tests" / "programs" / "drifted_tree.py"

ECHO_STEPS: tuple[Mapping[str, str], ...] = (
    {"type": "initialize"},
    {"type": "new_session"},
    {"type": "prompt", "text": "hello there"},
)

MakeScenario = Callable[..., Path]

# Records in these tests make no trial replays (each would cost a replay of the agent):
# only the tests of the trials themselves ask for them (test_harness_record_proof.py
# removes the variable). Set for the whole process: session-scoped recordings too.
os.environ.setdefault(TRIALS_ENV, "0")
# What the fake agent imports before it serves: the fork server's preload for it.
FAKE_AGENT_PRELOAD = ("acp", "agentreel.llm", "agentreel.session", "agentreel.llm_replay")


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def scenario_toml(
    *,
    steps: Sequence[Mapping[str, object]] = ECHO_STEPS,
    provider: str = "echo",
    model: str = "echo-model",
    env: Mapping[str, str] | None = None,
    timeout: float = 30,
    agent: Sequence[str] | None = None,
    permissions: Sequence[str] = (),
    extra: str = "",
    fork_server: bool = False,
) -> str:
    """The text of a scenario.toml running the fake agent (by default), started through
    the fork server when ``fork_server``."""
    command = list(agent) if agent is not None else ["{python}", str(FAKE_AGENT)]
    lines = [f"timeout = {timeout}", f"agent = {_toml_value(command)}"]
    if permissions:
        lines.append(f"permissions = {_toml_value(list(permissions))}")
    lines.append(extra)
    for step in steps:
        lines.append("\n[[steps]]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in step.items()]
    lines.append(f'\n[record]\nprovider = "{provider}"\nmodel = "{model}"')
    if fork_server:
        lines.append("\n[fork_server]\nenabled = true")
        lines.append(f"preload = {_toml_value(list(FAKE_AGENT_PRELOAD))}")
    if env:
        lines.append("\n[env]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in env.items()]
    return "\n".join(lines) + "\n"


# Plugins of the test venv's third-party packages that no inner pytester run uses: each
# costs every inner pytest process (and each of its xdist workers) one to two seconds of
# imports (hypothesis's whole engine, langsmith's client), which summed to about a tenth of
# the harness suite. The agentreel plugin, xdist and pytester itself still load as a user's
# pytest loads them: by entry point.
INNER_PYTEST_ADDOPTS = "-p no:hypothesispytest -p no:langsmith_plugin"


@pytest.fixture(autouse=True)
def _lean_inner_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pytest a test starts (pytester, a CLI run) skips the unused plugins."""
    outer = os.environ.get("PYTEST_ADDOPTS", "")
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{outer} {INNER_PYTEST_ADDOPTS}".strip())


@pytest.fixture(scope="session")
def scenario_text() -> Callable[..., str]:
    """``scenario_toml`` for fixtures of a wider scope than ``make_scenario``'s."""
    return scenario_toml


@pytest.fixture
def agent_start() -> str:
    """How ``make_scenario``'s scenarios start the agent: forked from the fork server's warm
    interpreter, as the committed scenarios start theirs (``fixtures/agentreel.toml``) — a
    spawned fake agent pays ~0.5 s of CPU importing acp and agentreel first, a third of what
    these tests cost. Test modules whose tests must hold both ways override it with
    ``params=["spawn", "fork"]`` (``test_harness_runs.py``: every run shape, spawned too)."""
    return "fork"


@pytest.fixture
def make_scenario(tmp_path: Path, agent_start: str) -> MakeScenario:
    """``make_scenario(name, **scenario_toml kwargs)`` → a scenario dir under tmp_path/fixtures."""

    def make(name: str = "echo-turn", **kwargs: object) -> Path:
        directory = tmp_path / "fixtures" / name
        directory.mkdir(parents=True, exist_ok=True)
        kwargs.setdefault("fork_server", agent_start == "fork")
        (directory / "scenario.toml").write_text(scenario_toml(**kwargs))  # type: ignore[arg-type]
        return directory

    return make


@pytest.fixture
def python() -> str:
    return sys.executable


@pytest.fixture(scope="session")
def echo_turn_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default echo-turn scenario recorded once per test session (per xdist worker)."""
    from agentreel import snapshot_harness as harness

    directory = tmp_path_factory.mktemp("template") / "echo-turn"
    directory.mkdir()
    (directory / "scenario.toml").write_text(scenario_toml())
    harness.check_scenario(directory, "record")
    return directory


@pytest.fixture
def recorded_echo_turn(echo_turn_template: Path, make_scenario: MakeScenario) -> Path:
    """A fresh copy of the recorded default echo-turn scenario at ``fixtures/echo-turn``
    (the same files as recording it, without the two agent runs a recording costs)."""
    directory = make_scenario("echo-turn")
    # The recording and goldens; scenario.toml stays make_scenario's (same steps, and
    # the [fork_server] table of the test's agent_start).
    shutil.copytree(
        echo_turn_template,
        directory,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("scenario.toml"),
    )
    return directory


# CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: what lets root read a file whatever its mode.
_DAC_CAPABILITIES = (1, 2)
_PR_CAPBSET_DROP = 24


def _drop_file_permission_override() -> None:
    """In a child about to exec: drop root's file-permission override from the capability
    bounding set, so the exec'd program is held to file modes like any other user."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in _DAC_CAPABILITIES:
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


@pytest.fixture
def unprivileged(tmp_path: Path) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes a subprocess (and everything it starts) meet file
    permissions as a non-root user would; ``None`` when the tests already run as one.

    CI runs as root, which reads a mode-000 file. Switching to uid 65534 is not enough
    here: the interpreter lives under /root (mode 0700). Dropping the two capabilities
    keeps every path the run needs reachable while making modes count. The fixture proves
    the effect before any test relies on it, so a test can never pass by reading as root.
    """
    import os
    import subprocess

    if os.geteuid() != 0:
        return None
    probe = tmp_path / "unreadable-probe"
    probe.write_text("secret")
    probe.chmod(0)
    check = subprocess.run(
        [sys.executable, "-c", f"open({str(probe)!r}).read()"],
        preexec_fn=_drop_file_permission_override,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "PermissionError" in check.stderr, "the unprivileged child could read a 000 file"
    probe.unlink()
    return _drop_file_permission_override


def _served_mcp(transport: str) -> Iterator[str]:
    """``MCP_SERVER`` over ``transport`` ("http": streamable HTTP; "sse": the legacy HTTP+SSE
    transport), in a thread, on a socket bound before: its URL."""
    import asyncio
    import importlib.util
    import socket
    import threading

    import uvicorn

    spec = importlib.util.spec_from_file_location("mcp_test_server", MCP_SERVER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    app = module.app.sse_app() if transport == "sse" else module.app.streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="error"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
    thread.start()
    try:
        path = "/sse" if transport == "sse" else "/mcp"
        yield f"http://127.0.0.1:{sock.getsockname()[1]}{path}"
    finally:
        server.should_exit = True
        server.force_exit = True  # an SSE stream still open does not hold the thread
        thread.join()
        sock.close()


@pytest.fixture(scope="module")
def mcp_http_server() -> Iterator[str]:
    """``MCP_SERVER`` over streamable HTTP: its URL."""
    yield from _served_mcp("http")


@pytest.fixture(scope="module")
def mcp_sse_server() -> Iterator[str]:
    """``MCP_SERVER`` over the legacy HTTP+SSE transport: its SSE URL."""
    yield from _served_mcp("sse")


@pytest.fixture(scope="session")
def drifted_tree() -> Path:
    """``DRIFTED_TREE``: the drifted tests' tree program (its rules: ``.with_suffix(".toml")``)."""
    return DRIFTED_TREE
