"""The fork server on its own: real server processes, real forked children.

Each child must look exactly like a spawned process: only its environment, its cwd, its
stdio, its own session and process group, its exit code relayed; preloaded modules
imported once in the server; whatever cannot be guaranteed becomes a named reason to
spawn instead.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import signal
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentreel.snapshot_harness._forkserver import (
    ForkPlan,
    ForkServer,
    ForkServerError,
    plan_fork,
    started_agent,
)
from agentreel.snapshot_harness._forkserver_main import _flush_own_files
from agentreel.snapshot_harness.exceptions import AgentCrashError

pytestmark = pytest.mark.slow
STARTUP = {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}

PROBE = """
import json, os, random, sys
line = sys.stdin.readline()
print(json.dumps({
    "env": dict(os.environ), "cwd": os.getcwd(), "argv": sys.argv, "pid": os.getpid(),
    "pgid": os.getpgid(0), "sid": os.getsid(0), "path0": sys.path[0],
    "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
    "preloaded": "forkprobe_lib" in sys.modules, "random": random.random(), "stdin": line,
}), flush=True)
print("probe stderr line", file=sys.stderr, flush=True)
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
"""

LIB = """
import os
with open(os.environ["FORKPROBE_COUNTER"], "a") as counter:
    counter.write("imported\\n")
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno != errno.ESRCH
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _wait_dead(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(pid)


@pytest.fixture
def libdir(tmp_path: Path) -> Path:
    directory = tmp_path / "lib"
    directory.mkdir()
    (directory / "forkprobe_lib.py").write_text(LIB)
    (directory / "probe.py").write_text(PROBE)
    package = directory / "forkprobe_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(PROBE)
    return directory


@pytest.fixture
def server(libdir: Path, tmp_path: Path) -> Iterator[ForkServer]:
    # The counter path is read at import time, in the server, from the server's own
    # environment; the children's environments never hold it (see the first test).
    counter = tmp_path / "imports.txt"
    started = ForkServer(
        ["forkprobe_lib"],
        {**STARTUP, "PYTHONPATH": str(libdir), "FORKPROBE_COUNTER": str(counter)},
    )
    started.start()
    yield started
    started.close()


async def _run(
    server: ForkServer, plan: ForkPlan, env: dict[str, str], cwd: Path, stderr: Path
) -> tuple[dict[str, object], int, ForkServer]:
    with stderr.open("wb") as err:
        process = await server.spawn(plan, env=env, cwd=cwd, stderr=err)
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(b"from the harness\n")
        await process.stdin.drain()
        process.stdin.close()
        out = await process.stdout.read()
        code = await process.wait()
        process.close()
    return json.loads(out), code, server


def test_a_child_gets_exactly_its_environment_cwd_stdio_and_own_session(
    server: ForkServer, libdir: Path, tmp_path: Path
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {**STARTUP, "PYTHONPATH": str(libdir), "ONLY_THIS": "yes", "PROBE_EXIT": "7"}
    plan = plan_fork([sys.executable, str(libdir / "probe.py"), "--flag"])
    assert isinstance(plan, ForkPlan)
    seen, code, _ = asyncio.run(_run(server, plan, env, cwd, tmp_path / "err"))
    assert code == 7
    assert seen["env"] == env  # nothing of the server's or the harness's environment
    assert seen["cwd"] == str(cwd)
    assert seen["argv"] == [str(libdir / "probe.py"), "--flag"]
    assert seen["path0"] == str(libdir)  # a script's directory, as `python FILE` sets it
    assert seen["pid"] == seen["pgid"] == seen["sid"]  # its own session and process group
    assert seen["pid"] != server.pid
    # 0-2 and the descriptor listing /proc/self/fd: no server socket, no other child's pipe.
    assert len(seen["fds"]) == 4  # type: ignore[arg-type]
    assert seen["fds"][:3] == [0, 1, 2]  # type: ignore[index]
    assert seen["stdin"] == "from the harness\n"
    assert seen["preloaded"] is True
    assert (tmp_path / "err").read_text() == "probe stderr line\n"


def test_preloaded_modules_are_imported_once_and_children_differ_in_random_state(
    server: ForkServer, libdir: Path, tmp_path: Path
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {**STARTUP, "PYTHONPATH": str(libdir)}
    plan = plan_fork([sys.executable, "-m", "forkprobe_pkg", "a"])
    assert plan == ForkPlan(module="forkprobe_pkg", path=None, args=("a",))
    first, code1, _ = asyncio.run(_run(server, plan, env, cwd, tmp_path / "err1"))
    second, code2, _ = asyncio.run(_run(server, plan, env, cwd, tmp_path / "err2"))
    assert code1 == code2 == 0
    assert first["preloaded"] is True
    assert second["preloaded"] is True
    assert (tmp_path / "imports.txt").read_text() == "imported\n"  # once, in the server
    assert first["path0"] == str(cwd)  # `python -m` puts the cwd first
    assert first["argv"] == [str(libdir / "forkprobe_pkg" / "__main__.py"), "a"]
    assert first["random"] != second["random"]  # reseeded after each fork
    assert first["pid"] != second["pid"]


AGENT_WITH_GRANDCHILD = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(os.environ["PID_FILE"], "w") as out:
    out.write(str(child.pid))
print("ready", flush=True)
time.sleep(600)
"""


def test_killing_the_childs_group_kills_its_children_and_the_signal_is_relayed(
    server: ForkServer, tmp_path: Path
) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text(AGENT_WITH_GRANDCHILD)
    pid_file = tmp_path / "grandchild.pid"
    plan = plan_fork([sys.executable, str(script)])
    assert isinstance(plan, ForkPlan)

    async def scenario() -> tuple[int, int]:
        with (tmp_path / "err").open("wb") as err:
            process = await server.spawn(
                plan, env={**STARTUP, "PID_FILE": str(pid_file)}, cwd=tmp_path, stderr=err
            )
            assert process.stdout is not None
            assert await process.stdout.readline() == b"ready\n"
            os.killpg(process.pid, signal.SIGKILL)  # what the runner does at the timeout
            code = await process.wait()
            process.close()
        return process.pid, code

    pid, code = asyncio.run(scenario())
    assert code == -signal.SIGKILL
    assert _wait_dead(int(pid_file.read_text())), "the grandchild outlived its group"
    assert not _alive(pid)


def test_closing_the_server_kills_children_still_running(libdir: Path, tmp_path: Path) -> None:
    """A harness that goes away leaves no agent behind: the server kills the groups."""
    server = ForkServer([], STARTUP)
    server.start()
    script = tmp_path / "sleeper.py"
    script.write_text(AGENT_WITH_GRANDCHILD)
    pid_file = tmp_path / "grandchild.pid"
    plan = plan_fork([sys.executable, str(script)])
    assert isinstance(plan, ForkPlan)

    async def start() -> int:
        with (tmp_path / "err").open("wb") as err:
            process = await server.spawn(
                plan, env={**STARTUP, "PID_FILE": str(pid_file)}, cwd=tmp_path, stderr=err
            )
        assert process.stdout is not None
        assert await process.stdout.readline() == b"ready\n"
        process.close()
        return process.pid

    pid = asyncio.run(start())
    server.close()
    assert _wait_dead(pid)
    assert _wait_dead(int(pid_file.read_text()))


def test_a_server_that_dies_mid_run_is_a_named_crash_and_the_child_is_killed(
    tmp_path: Path,
) -> None:
    server = ForkServer([], STARTUP)
    server.start()
    script = tmp_path / "sleeper.py"
    script.write_text(AGENT_WITH_GRANDCHILD)
    plan = plan_fork([sys.executable, str(script)])
    assert isinstance(plan, ForkPlan)

    async def scenario() -> int:
        with (tmp_path / "err").open("wb") as err:
            process = await server.spawn(
                plan,
                env={**STARTUP, "PID_FILE": str(tmp_path / "grandchild.pid")},
                cwd=tmp_path,
                stderr=err,
            )
            assert process.stdout is not None
            assert await process.stdout.readline() == b"ready\n"
            assert server.pid is not None
            os.kill(server.pid, signal.SIGKILL)
            try:
                with pytest.raises(AgentCrashError, match=r"fork server .* went away"):
                    await process.wait()
            finally:
                process.close()
        return process.pid

    pid = asyncio.run(scenario())
    assert _wait_dead(pid)
    server.close()


def test_an_uncaught_exception_exits_1_with_its_traceback(tmp_path: Path) -> None:
    server = ForkServer([], STARTUP)
    server.start()
    script = tmp_path / "boom.py"
    script.write_text("raise RuntimeError('boom on purpose')\n")
    plan = plan_fork([sys.executable, str(script)])
    assert isinstance(plan, ForkPlan)

    async def scenario() -> int:
        with (tmp_path / "err").open("wb") as err:
            process = await server.spawn(plan, env=STARTUP, cwd=tmp_path, stderr=err)
            code = await process.wait()
            process.close()
        return code

    try:
        assert asyncio.run(scenario()) == 1
    finally:
        server.close()
    stderr = (tmp_path / "err").read_text()
    assert "RuntimeError: boom on purpose" in stderr
    assert "Traceback" in stderr


@pytest.mark.parametrize(
    ("preload", "expected"),
    [
        (["forkprobe_no_such_module"], "preload failed: ModuleNotFoundError"),
        (["forkprobe_threads"], "threads alive after the preload: ['forkprobe-worker']"),
    ],
)
def test_what_a_fork_cannot_guarantee_falls_back_to_a_spawn_with_the_reason_logged(
    preload: list[str],
    expected: str,
    libdir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (libdir / "forkprobe_threads.py").write_text(
        textwrap.dedent(
            """
            import threading, time
            threading.Thread(target=time.sleep, args=(600,), name="forkprobe-worker",
                             daemon=True).start()
            """
        )
    )
    env = {**STARTUP, "PYTHONPATH": str(libdir), "FORKPROBE_COUNTER": str(tmp_path / "c")}
    server = ForkServer(preload, env)
    with pytest.raises(ForkServerError, match=expected.replace("[", r"\[")):
        server.start()

    async def scenario() -> tuple[str, str | None, int]:
        with (tmp_path / "err").open("wb") as err:
            async with started_agent(
                [sys.executable, str(libdir / "probe.py")],
                env=env,
                cwd=tmp_path,
                stderr=err,
                fork_preload=preload,
            ) as agent:
                assert agent.process.stdin is not None
                agent.process.stdin.close()
                code = await agent.process.wait()
        return agent.method, agent.fallback_reason, code

    with caplog.at_level(logging.WARNING, logger="agentreel.snapshot_harness"):
        method, reason, code = asyncio.run(scenario())
    assert method == "spawn"
    assert code == 0
    assert reason is not None
    assert expected in reason
    assert any(expected in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["{python}", "-m", "pkg.agent", "--x"], ForkPlan("pkg.agent", None, ("--x",))),
        (["{python}", "agent.py", "a"], ForkPlan(None, "agent.py", ("a",))),
        (["{python}", "-X", "importtime", "-m", "pkg"], "interpreter option '-X'"),
        (["/usr/bin/python3.9", "-m", "pkg"], "is not the harness's"),
        (["node", "agent.js"], "not started as a Python program"),
        (["{python}"], "bare interpreter"),
        (["{python}", "-m"], "no module name"),
    ],
)
def test_plan_fork_runs_modules_and_scripts_of_this_interpreter_only(
    command: list[str], expected: ForkPlan | str
) -> None:
    plan = plan_fork([part.replace("{python}", sys.executable) for part in command])
    if isinstance(expected, ForkPlan):
        assert plan == expected
    else:
        assert isinstance(plan, str)
        assert expected in plan


EXITING = """
import atexit, os, sys, threading, time
out = os.environ["OUT"]
atexit.register(lambda: open(out + ".atexit", "w").write("ran"))
def late():
    time.sleep(0.3)
    open(out + ".thread", "w").write("joined")
threading.Thread(target=late).start()
unclosed = open(out + ".buffered", "w")  # never closed: only the exit's flush saves it
unclosed.write("kept")
sys.stdout.write("no newline at the end")
value = os.environ["EXIT_WITH"]
sys.exit(int(value) if value.isdigit() else value)
"""


@pytest.mark.parametrize(("exit_with", "code"), [("message for stderr", 1), ("0", 0)])
def test_a_child_exits_like_the_interpreter_threads_atexit_and_flushes(
    tmp_path: Path, exit_with: str, code: int
) -> None:
    server = ForkServer([], STARTUP)
    server.start()
    script = tmp_path / "exiting.py"
    script.write_text(EXITING)
    plan = plan_fork([sys.executable, str(script)])
    assert isinstance(plan, ForkPlan)
    out = tmp_path / "out"

    async def scenario() -> tuple[int, bytes]:
        with (tmp_path / "err").open("wb") as err:
            process = await server.spawn(
                plan,
                env={**STARTUP, "OUT": str(out), "EXIT_WITH": exit_with},
                cwd=tmp_path,
                stderr=err,
            )
            assert process.stdin is not None
            assert process.stdout is not None
            process.stdin.close()
            stdout = await process.stdout.read()
            returned = await process.wait()
            process.close()
        return returned, stdout

    try:
        returned, stdout = asyncio.run(scenario())
    finally:
        server.close()
    assert returned == code
    assert stdout == b"no newline at the end"
    assert Path(f"{out}.atexit").read_text() == "ran"
    assert Path(f"{out}.thread").read_text() == "joined"
    assert Path(f"{out}.buffered").read_text() == "kept"
    stderr = (tmp_path / "err").read_text()
    assert stderr == ("message for stderr\n" if code else "")


def test_a_forked_agents_exit_flushes_its_files_without_waking_lazy_proxies(
    tmp_path: Path,
) -> None:
    # A lazy proxy (the openai SDK's module resources) loads what it stands for when its
    # __class__ is read; an exit that asked each object isinstance() imported the whole
    # SDK in every agent that had used it. Its own open files are still flushed.
    class LazyProxy:
        woken = 0

        @property  # type: ignore[misc]
        def __class__(self) -> type:
            LazyProxy.woken += 1
            return object

    written = (tmp_path / "out.txt").open("w")
    written.write("kept")
    _flush_own_files([LazyProxy(), written, "text", 3])
    assert LazyProxy.woken == 0
    assert (tmp_path / "out.txt").read_text() == "kept"
    written.close()
