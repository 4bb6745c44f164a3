"""6. Fork server: the suite with the agent forked vs spawned, and each scenario vs its work.

Two copies of the committed scenarios that run the reference agent in process (the
SPEC 8 suite; the examples' agents and proxied scenarios have no in-process floor), one
whose ``agentreel.toml`` turns the fork server on, one without it:

- suite: ``agentreel replay --fixtures COPY`` on each, interleaved, each a fresh process
  from the command line; wall time and the CPU time of every process it waited for (the
  CLI, the fork server and the agents it reaped, or the spawned agents). Target: forked
  CPU <= 0.35x spawned CPU. ``pytest -n 2`` on each copy is reported too.
- per scenario, in this process with a warm fork server: ``check_scenario`` with the agent
  forked — CPU of this process (harness) + the child's own CPU as the server relays it
  from ``wait4`` + the fork server's own CPU share — against the floor of the scenario's
  own work: the same ``check_scenario`` with the reference agent already imported and
  served in this process (its ``serve`` on a thread, over pipes): no process start, no
  import. Target: every scenario <= 2x its floor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from agentreel.acp_agent import parse_config, serve
from agentreel.snapshot_harness import (
    DIRECTORY_CONFIG_FILE,
    _forkserver,
    _runner,
    check_scenario,
    load_scenario,
)
from bench._common import FIXTURES, ROOT, BenchResult, Settings
from bench.suite import _agentreel, _children_cpu, _replaying

EXAMPLES = ROOT / "examples"
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _timed_command(command: list[str]) -> tuple[float, float]:
    """(wall, CPU of every process the command waited for) of one run from the shell."""
    cpu_before = _children_cpu()
    started = time.perf_counter()
    completed = subprocess.run(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        check=False,
    )
    wall = time.perf_counter() - started
    if completed.returncode != 0:
        tail = completed.stdout.decode(errors="replace")[-3000:]
        raise RuntimeError(f"{' '.join(command)} failed ({completed.returncode}):\n{tail}")
    return wall, _children_cpu() - cpu_before


def _copies(root: Path, names: Sequence[str]) -> dict[str, Path]:
    """``{"fork": dir, "spawn": dir}``: the scenarios copied twice, fork server on in one."""
    copies: dict[str, Path] = {}
    # Each copy sits two levels below ``root`` as fixtures/<name> sits below the repository,
    # so an agent path relative to the scenario (../../examples/...) resolves here too.
    (root / EXAMPLES.name).symlink_to(EXAMPLES, target_is_directory=True)
    for method in ("fork", "spawn"):
        target = root / method
        target.mkdir()
        for name in names:
            shutil.copytree(FIXTURES / name, target / name)
        if method == "fork":
            (target / DIRECTORY_CONFIG_FILE).write_text("[fork_server]\nenabled = true\n")
        copies[method] = target
    return copies


class _InProcessAgent:
    """The floor's agent: the reference agent's ``serve`` on a thread of this process."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.pid = os.getpid()
        self.returncode: int | None = None
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self._done: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._config = parse_config([], environ=env)
        self._transports: list[asyncio.BaseTransport] = []

    async def start(self) -> None:
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        self.stdin, self.stdout, self._transports = await _forkserver.pipe_streams(
            stdin_w, stdout_r
        )

        def run() -> None:
            code = 1
            try:
                with (
                    os.fdopen(stdin_r, "rb", buffering=0) as agent_in,
                    os.fdopen(stdout_w, "wb", buffering=0) as agent_out,
                ):
                    asyncio.run(serve(self._config, agent_in, agent_out))
                code = 0
            finally:
                self._done.set_result(code)

        threading.Thread(target=run, name="bench-floor-agent", daemon=True).start()

    async def wait(self) -> int:
        self.returncode = await asyncio.wrap_future(self._done)
        return self.returncode

    def close(self) -> None:
        for transport in self._transports:
            if not transport.is_closing():
                transport.close()


class _InProcessStarted(_forkserver.StartedAgent):
    def kill_group(self) -> None:
        """Nothing to kill: the floor never times out, and its thread ends at stdin EOF."""


@contextlib.asynccontextmanager
async def _in_process(
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    stderr: IO[bytes],
    fork_preload: Sequence[str] | None,
    name: str = "agent",
) -> AsyncIterator[_forkserver.StartedAgent]:
    agent = _InProcessAgent(env)
    await agent.start()
    try:
        yield _InProcessStarted(agent, "spawn", "bench floor: served in process")
    finally:
        agent.close()


@contextlib.contextmanager
def _starting_with(starter: Callable[..., Any]) -> Iterator[None]:
    """Run the harness with ``starter`` behind its start-up seam (the bench's floor and
    its probe of the forked child's CPU)."""
    original = vars(_runner)["started_agent"]
    setattr(_runner, "started_agent", starter)  # noqa: B010 - a private seam, swapped on purpose
    try:
        yield
    finally:
        setattr(_runner, "started_agent", original)  # noqa: B010


class _ForkProbe:
    """The real seam, recording each forked child so its relayed CPU time can be read."""

    def __init__(self) -> None:
        self.children: list[_forkserver.ForkedProcess] = []

    @contextlib.asynccontextmanager
    async def __call__(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with _forkserver.started_agent(*args, **kwargs) as started:
            if isinstance(started.process, _forkserver.ForkedProcess):
                self.children.append(started.process)
            yield started


def _server_cpu(pid: int) -> float:
    """The fork server's own CPU seconds (clock ticks from /proc: coarse, summed over runs)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _per_scenario(
    result: BenchResult, copies: dict[str, Path], names: Sequence[str], repeats: int
) -> None:
    probe = _ForkProbe()
    fork_cpu: dict[str, list[float]] = {name: [] for name in names}
    fork_wall: dict[str, list[float]] = {name: [] for name in names}
    floor_cpu: dict[str, list[float]] = {name: [] for name in names}
    floor_wall: dict[str, list[float]] = {name: [] for name in names}
    with _starting_with(probe):
        outcome = check_scenario(copies["fork"] / names[0], "replay")  # warm: server starts
        assert outcome.result is not None
        assert outcome.result.started_by == "fork"
    servers = [
        s
        for s in _forkserver.SERVERS._servers.values()
        if isinstance(s, _forkserver.ForkServer) and s.pid is not None
    ]
    server_before = sum(_server_cpu(s.pid) for s in servers if s.pid is not None)
    forked_runs = 0
    for _ in range(repeats):
        for name in names:  # interleaved: drift hits both sides alike
            with _starting_with(probe):
                start_cpu, start_wall = time.process_time(), time.perf_counter()
                check_scenario(copies["fork"] / name, "replay")
                wall = time.perf_counter() - start_wall
                harness = time.process_time() - start_cpu
            child = probe.children[-1].cpu_seconds or 0.0
            fork_cpu[name].append(harness + child)
            fork_wall[name].append(wall)
            forked_runs += 1
            with _starting_with(_in_process):
                start_cpu, start_wall = time.process_time(), time.perf_counter()
                check_scenario(copies["spawn"] / name, "replay")
                floor_wall[name].append(time.perf_counter() - start_wall)
                floor_cpu[name].append(time.process_time() - start_cpu)
    server_share = (
        sum(_server_cpu(s.pid) for s in servers if s.pid is not None) - server_before
    ) / max(forked_runs, 1)
    ratios: dict[str, float] = {}
    for name in names:
        forked = result.median(f"{name}: forked cpu_s", fork_cpu[name]) + server_share
        floor = result.median(f"{name}: floor cpu_s", floor_cpu[name])
        result.median(f"{name}: forked wall_s", fork_wall[name])
        result.median(f"{name}: floor wall_s", floor_wall[name])
        ratios[name] = forked / floor
        result.figure(
            f"{name}: forked / own work (CPU)",
            ratios[name],
            "x",
            f"{forked * 1e3:.0f} ms vs {floor * 1e3:.0f} ms",
        )
    result.figure("fork server's own CPU per forked run", server_share, "s")
    worst = max(ratios, key=lambda name: ratios[name])
    result.figure("per scenario: median forked / own work", statistics.median(ratios.values()), "x")
    result.target(f"per scenario: worst forked / own work ({worst})", ratios[worst], 2.0)


def _reference_agent_in_process(directory: Path) -> bool:
    """Whether the scenario runs the reference agent on the provider layer in process — what
    the floor serves on a thread. Other agents (the examples' programs, process subagents,
    anything behind the proxy) have no in-process floor here: served that way they wait for
    a proxy that is not there."""
    scenario = load_scenario(directory)
    return scenario.agent is None and not scenario.model.proxied


def run(settings: Settings) -> BenchResult:
    result = BenchResult("fork", "6. Fork server: suite and per scenario, forked vs spawned")
    replaying, skipped = _replaying(FIXTURES)
    names = [d.name for d in replaying if _reference_agent_in_process(d)]
    if skipped:
        result.notes.append(f"left out, not replaying cleanly: {', '.join(skipped)}")
    other_agents = [d.name for d in replaying if d.name not in names]
    if other_agents:
        result.notes.append(
            "left out, not the reference agent in process (no in-process floor): "
            + ", ".join(other_agents)
        )
    suite_repeats = settings.scaled(3, 1)
    per_repeats = settings.scaled(5, 2)
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-fork-") as tmp_text:
        copies = _copies(Path(tmp_text), names)
        commands: dict[str, list[str]] = {}
        for method, directory in copies.items():
            commands[f"agentreel replay, {method}"] = [
                *_agentreel(),
                "replay",
                "--fixtures",
                str(directory),
            ]
            commands[f"pytest -n 2, {method}"] = [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-n",
                "2",
                str(directory),
            ]
        _timed_command(commands["agentreel replay, spawn"])  # warm-up: page cache, bytecode
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(suite_repeats):
            for name, command in commands.items():
                wall, cpu = _timed_command(command)
                walls[name].append(wall)
                cpus[name].append(cpu)
        medians: dict[str, tuple[float, float]] = {}
        for name in commands:
            wall = result.median(f"{name} wall_s", walls[name])
            cpu = result.median(f"{name} cpu_s", cpus[name])
            medians[name] = (wall, cpu)
            result.figure(f"{name}: wall, {len(names)} scenarios", wall, "s")
            result.figure(f"{name}: CPU, all processes", cpu, "s")
        for runner in ("agentreel replay", "pytest -n 2"):
            fork_wall, fork_cpu = medians[f"{runner}, fork"]
            spawn_wall, spawn_cpu = medians[f"{runner}, spawn"]
            result.figure(f"{runner}: forked / spawned wall", fork_wall / spawn_wall, "x")
            if runner == "agentreel replay":
                result.target(
                    f"{runner}: forked / spawned CPU ({len(names)} scenarios)",
                    fork_cpu / spawn_cpu,
                    0.35,
                )
            else:
                result.figure(f"{runner}: forked / spawned CPU", fork_cpu / spawn_cpu, "x")
        _per_scenario(result, copies, names, per_repeats)
    result.notes.append(
        "suite CPU = the command and every process it waited for (fork server and the "
        "children it reaped included); per scenario: forked = harness CPU + the child's "
        "CPU relayed from wait4 + the server's share; own work = the same replay with the "
        "agent already imported and served on a thread of the harness process"
    )
    result.notes.append(f"scenarios: {', '.join(names)}")
    return result
