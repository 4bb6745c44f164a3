"""Running one scenario: one agent subprocess driven over ACP, its output captured.

Per run: a fresh temp directory holding the cwd (workspace copied in), the sessions root,
the agent's stderr file and the replay report. The agent is started in its own process
group with an explicit environment; its stdout is captured byte-exact (the raw bytes are
the transcript) while complete JSON lines are fed to the official ACP client. When the
steps are done, stdin is closed and the exit awaited before the session logs are
harvested. At the timeout the whole process group is killed.

What the agent talks to comes from ``_backend`` (the stub server's start-up included), the
steps it is driven through from ``_steps``, and what its replay report means from
``_consumption``: this module only supervises the process and its streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from acp import Client, RequestError, connect_to_agent

from agentreel.llm import AgentEnvironment
from agentreel.llm_replay import ReplayError
from agentreel.mcp_replay import McpSettings
from agentreel.session import (
    OVERRIDE_FILE,
    RECORDING_FILE_PATTERN,
    harvest_session_logs,
    session_file_name,
)
from agentreel.snapshot_harness import _environment as envvars
from agentreel.snapshot_harness._backend import (
    DRIFTED_REPORT_NAME,
    drifted_backend,
    record_backend,
    replay_backend,
)
from agentreel.snapshot_harness._client import HarnessClient
from agentreel.snapshot_harness._command import drive_command
from agentreel.snapshot_harness._consumption import (
    explain_failed_run,
    read_run_report,
    replay_error_failure,
    verify_consumption,
)
from agentreel.snapshot_harness._forkserver import AgentProcess, started_agent
from agentreel.snapshot_harness._layout import (
    REPLAY_INPUTS,
    hang_overrides,
    write_files,
)
from agentreel.snapshot_harness._mcp import (
    AcpMcpServers,
    acp_mcp_servers,
    check_mcp,
    expand_mcp,
    mcp_reach,
    mcp_settings,
    recorded_mcp_files,
    split_mcp_files,
    write_mcp_files,
)
from agentreel.snapshot_harness._proxied import ProxiedRun, proxy_backend
from agentreel.snapshot_harness._result import RunResult, StartMethod, tail
from agentreel.snapshot_harness._scenario import (
    DEFAULT_AGENT_MODULE,
    MCP_TOKEN,
    RUN_MODES,
    WORKSPACE_DIR,
    Mode,
    RecordConfig,
    Scenario,
)
from agentreel.snapshot_harness._steps import Progress, run_steps
from agentreel.snapshot_harness.exceptions import (
    AgentCrashError,
    AgentOutputError,
    AgentTimeoutError,
    RunError,
    StepError,
)

logger = logging.getLogger("agentreel.snapshot_harness")

_READ_SIZE = 1 << 16
# Exit codes of a process ended by SIGTERM: killed by it, or exiting 128 + 15 on purpose.
_SIGTERMED = (-signal.SIGTERM, 128 + signal.SIGTERM)


class _StdoutTee:
    """Reads agent stdout: keeps every byte, feeds JSON lines to the ACP client.

    A line that is not JSON is never fed; it is remembered with its line number and the
    run is aborted, because a protocol stream with garbage in it cannot be trusted.
    """

    def __init__(self, source: asyncio.StreamReader) -> None:
        self.source = source
        self.reader = asyncio.StreamReader(limit=1 << 26)
        self.raw = bytearray()
        self.garbage: tuple[int, bytes] | None = None
        self.garbage_seen = asyncio.Event()
        self._lines = 0

    async def pump(self) -> None:
        pending = b""
        try:
            while True:
                data = await self.source.read(_READ_SIZE)
                if not data:
                    break
                self.raw += data
                # One split per read: re-slicing the rest after every line would copy a
                # read's bytes once per line it holds.
                *lines, pending = (pending + data).split(b"\n")
                for line in lines:
                    self._accept(line + b"\n")
            if pending:
                self._accept(pending)
        finally:
            self.reader.feed_eof()

    def _accept(self, line: bytes) -> None:
        self._lines += 1
        try:
            frame = json.loads(line)
        except ValueError:
            frame = None
        if not isinstance(frame, dict):
            if self.garbage is None:
                self.garbage = (self._lines, line)
                self.garbage_seen.set()
            return
        self.reader.feed_data(line if line.endswith(b"\n") else line + b"\n")


def run_scenario(
    scenario: Scenario,
    mode: Mode = "replay",
    *,
    record: RecordConfig | None = None,
    work_dir: Path | None = None,
    keep_raw_logs: bool | None = None,
) -> RunResult:
    """Run ``scenario`` once in ``mode`` and return what it produced.

    Raises a ``RunError`` subclass when the run itself fails (crash, timeout, garbage on
    stdout, a step that did not end as expected); every one carries the stderr tail.
    ``record`` overrides the scenario's ``[record]`` table. ``work_dir`` keeps the run's
    files there instead of a temp directory that is removed afterwards. ``keep_raw_logs``
    (default: only in record mode) keeps each log's raw bytes in ``session_log_bytes``,
    which ``render_recordings`` needs. Runs its own event loop: call it from synchronous
    code.
    """
    if mode not in RUN_MODES:
        raise ValueError(f"mode {mode!r} is not one of {', '.join(RUN_MODES)}")
    keep_raw = mode in ("record", "drifted") if keep_raw_logs is None else keep_raw_logs
    if work_dir is not None:
        work_dir.mkdir(parents=True, exist_ok=True)
        # A drift's full requests go beside the report there (the replay provider's default).
        return _run_in(scenario, mode, record, work_dir.resolve(), keep_raw, None)
    # A drift names the full requests it wrote: they must outlive the run's folder.
    drift_dir = Path(tempfile.mkdtemp(prefix=f"agentreel-{scenario.name}-drift-")).resolve()
    run_dir = Path(tempfile.mkdtemp(prefix=f"agentreel-{scenario.name}-")).resolve()
    try:
        return _run_in(scenario, mode, record, run_dir, keep_raw, drift_dir)
    finally:
        _remove_run_dir(scenario, run_dir)
        with contextlib.suppress(OSError):
            drift_dir.rmdir()  # kept only when a drift wrote into it


def write_recordings(directory: Path, recordings: dict[str, bytes]) -> None:
    """The session logs and proxy files beside scenario.toml, the MCP ones in ``mcp/``."""
    files, mcp = split_mcp_files(recordings)
    write_files(directory, files, keep_pattern=RECORDING_FILE_PATTERN)
    write_mcp_files(directory, mcp)


def scratch_copy(scenario: Scenario, recordings: dict[str, bytes], where: Path) -> Scenario:
    """``scenario`` as it replays from a scratch copy in ``where`` holding ``recordings``
    (its scenario.toml, override file and workspace copied beside them; the copy keeps the
    scenario's name, which replay messages name), before anything is written for real."""
    copy = where / scenario.name
    copy.mkdir(parents=True)
    for name in REPLAY_INPUTS:
        if (scenario.directory / name).is_file():
            shutil.copy2(scenario.directory / name, copy / name)
    if scenario.workspace is not None:
        shutil.copytree(scenario.workspace, copy / WORKSPACE_DIR, symlinks=True)
    write_recordings(copy, recordings)
    return dataclasses.replace(
        scenario, directory=copy, agent_root=scenario.agent_root or scenario.directory
    )


def replay_verified(scenario: Scenario) -> RunResult:
    """One keyless replay of ``scenario`` whose agent must have used the replay provider
    (its consumption report verified): what record's proofs replay. Raises the run's
    ``HarnessError``."""
    replayed = run_scenario(scenario, "replay")
    verify_consumption(scenario, replayed)
    return replayed


def _remove_run_dir(scenario: Scenario, run_dir: Path) -> None:
    """Remove a finished run's temp folder, whatever the agent left running in it.

    The agent's process group is killed when its run ends, but a process it detached (its
    own session: Codex's sandbox child) can still be writing there, and removing a folder
    that gains files fails (``Directory not empty``). Such a process is the run's: one
    working in this private folder is killed first (a cheap look at each process's
    working directory); if the removal still fails, so is any with a file open there, and
    the removal is tried again. What still cannot be removed is left in place and named in
    a warning; the run's own outcome stands (no failure of the scenario, nor of agentreel).
    """
    killed = _kill_all(_processes_using(run_dir, open_files=False))
    last: OSError | None = None
    for attempt in range(6):
        try:
            shutil.rmtree(run_dir)
            return
        except FileNotFoundError:
            return
        except OSError as error:
            last = error
        killed += _kill_all(_processes_using(run_dir, open_files=True))
        time.sleep(0.05 * (attempt + 1))
    left = sorted(str(path.relative_to(run_dir)) for path in run_dir.rglob("*"))[:5]
    logger.warning(
        "agentreel: %s: the run's temp folder %s could not be removed (%s)%s; left in it: %s. "
        "Remove it by hand; a process the agent started outside its process group may "
        "still be writing there",
        scenario.name,
        run_dir,
        last,
        f" after killing {', '.join(killed)}" if killed else "",
        ", ".join(left) or "nothing",
    )


def _kill_all(processes: list[tuple[int, str]]) -> list[str]:
    killed: list[str] = []
    for pid, command in processes:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed.append(f"pid {pid} ({command[:120]})")
    return killed


def _processes_using(folder: Path, *, open_files: bool) -> list[tuple[int, str]]:
    """Other processes whose working directory (and with ``open_files`` an open file) lies
    in ``folder``, with their command lines: from ``/proc``, none where there is none."""
    prefix = str(folder)
    found: list[tuple[int, str]] = []
    try:
        pids = [int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            links = [os.readlink(f"/proc/{pid}/cwd")]
            if open_files:
                links += [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
            if not any(link == prefix or link.startswith(prefix + "/") for link in links):
                continue
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        found.append((pid, command.decode("utf-8", "replace").strip()))
    return found


def _run_in(
    scenario: Scenario,
    mode: Mode,
    record: RecordConfig | None,
    run_dir: Path,
    keep_raw: bool,
    drift_dir: Path | None,
) -> RunResult:
    cwd = run_dir / "cwd"
    sessions_root = run_dir / "sessions"
    report = run_dir / "replay-report.json"
    stderr_path = run_dir / "agent.stderr"
    if scenario.workspace is not None:
        shutil.copytree(scenario.workspace, cwd, symlinks=True)
    else:
        cwd.mkdir()
    sessions_root.mkdir()

    env = envvars.base_environment(run_dir)
    env.update(AgentEnvironment(sessions_root=str(sessions_root)).to_environ())
    logs_root = sessions_root
    proxy_warnings: list[str] = []
    proxied: ProxiedRun | None = None
    mcp = mcp_settings(scenario, mode, run_dir, cwd)
    with contextlib.ExitStack() as stack:
        if scenario.model.proxied:
            # The proxy's logs are the run's: whatever the agent writes itself is not.
            try:
                proxied = stack.enter_context(
                    proxy_backend(
                        scenario,
                        mode,
                        record=record or scenario.record,
                        run_dir=run_dir,
                        cwd=cwd,
                        home=Path(env["HOME"]),
                        report=report,
                        drift_dir=drift_dir,
                    )
                )
            except ReplayError as error:
                # The proxy opens the recordings here, where an in-process agent's replay
                # provider would meet the same broken file and report it: the same failure.
                raise replay_error_failure(scenario, error) from None
            env.update(proxied.env)
            logs_root = proxied.sessions_root
            proxy_warnings = proxied.warnings  # filled when the proxy's run closes
        elif mode == "record":
            env.update(stack.enter_context(record_backend(record or scenario.record)))
        elif mode == "drifted":
            env.update(
                stack.enter_context(
                    drifted_backend(
                        scenario,
                        record or scenario.record,
                        cwd,
                        report,
                        run_dir / DRIFTED_REPORT_NAME,
                        drift_dir,
                    )
                )
            )
        else:
            env.update(replay_backend(scenario, cwd, report, drift_dir))
        if any(server.url is not None for server in scenario.mcp_servers):
            # The MCP endpoint listens on loopback: the agent reaches it past the closed
            # proxy (which still stops everything off this machine).
            env.update(envvars.loopback_bypass())
        env.update(scenario.env)
        env.update(
            envvars.auth_environment(
                scenario.auth_env(), record=mode in ("record", "drifted"), where=scenario.name
            )
        )
        started = time.monotonic()
        try:
            with stderr_path.open("wb") as stderr_file:
                if scenario.protocol == "command":
                    driven = asyncio.run(
                        _drive_command(scenario, env, cwd, stderr_file, stderr_path, mcp)
                    )
                else:
                    driven = asyncio.run(_drive(scenario, env, cwd, stderr_file, stderr_path, mcp))
        except RunError as failure:
            check_mcp(mcp, failures_only=True)  # an MCP drift the agent failed on: named
            mismatch = explain_failed_run(scenario, report, failure) if mode != "record" else None
            if mismatch is not None:
                raise mismatch from failure
            hang = _hang_overrides(scenario) if mode != "record" else []
            if isinstance(failure, AgentTimeoutError) and hang:
                raise AgentTimeoutError(
                    f"{failure.message}. The likely cause: {OVERRIDE_FILE} makes "
                    f"{', '.join(hang)} hang until cancelled, and only a prompt_and_cancel "
                    "step cancels; make the step that meets it prompt_and_cancel, or remove "
                    "the hang override",
                    stderr_tail=failure.stderr_tail,
                    where=failure.where,
                ) from failure
            raise
        duration = time.monotonic() - started

    check_mcp(mcp)
    stderr = stderr_path.read_text(encoding="utf-8", errors="replace")
    logs = harvest_session_logs(logs_root)
    proxy_files: dict[str, bytes] = {}
    if scenario.model.proxied and mode == "record":
        from agentreel.llm_proxy import recorded_files

        proxy_files = recorded_files(logs_root, str(cwd))
    replay_report = read_run_report(scenario, report, stderr) if mode != "record" else None
    return RunResult(
        scenario=scenario,
        mode=mode,
        cwd=cwd,
        run_dir=run_dir,
        transcript=bytes(driven.transcript),
        session_logs=logs,
        session_log_bytes=[log.path.read_bytes() for log in logs] if keep_raw else [],
        stderr=stderr,
        exit_code=driven.exit_code,
        replay_report=replay_report,
        duration=duration,
        stop_reasons=driven.stop_reasons,
        started_by=driven.started_by,
        fork_fallback=driven.fork_fallback,
        proxy_files=proxy_files,
        proxy_warnings=list(proxy_warnings),
        mcp_files=recorded_mcp_files(mcp),
        drifted_proxy=proxied.drifted[0] if proxied is not None and proxied.drifted else None,
    )


def _hang_overrides(scenario: Scenario) -> list[str]:
    """The calls ``replay.override.json`` makes hang (``session.jsonl call 2``)."""
    hung = hang_overrides(scenario.directory / OVERRIDE_FILE)
    return [f"{session_file_name(session)} call {call}" for session, call in sorted(hung)]


@dataclass(slots=True)
class _Driven:
    transcript: bytes
    exit_code: int | None
    stop_reasons: list[str]
    started_by: StartMethod
    fork_fallback: str | None


def _read_tail(path: Path) -> str:
    return tail(path.read_text(encoding="utf-8", errors="replace"))


async def _drive_command(
    scenario: Scenario,
    env: dict[str, str],
    cwd: Path,
    stderr_file: BinaryIO,
    stderr_path: Path,
    mcp: McpSettings | None = None,
) -> _Driven:
    async with mcp_reach(scenario, mcp) as reach:
        if reach:
            # {mcp:<name>} in env and in the [[model.files]] written from templates.
            env = {name: expand_mcp(value, reach) for name, value in env.items()}
            for file in scenario.model.files:
                target = Path(env["HOME"]) / file.path
                if MCP_TOKEN.search(file.text) and target.is_file():
                    target.write_text(
                        expand_mcp(target.read_text(encoding="utf-8"), reach), encoding="utf-8"
                    )
        transcript, status = await drive_command(
            scenario, env, str(cwd), stderr_file, lambda: _read_tail(stderr_path), reach
        )
    return _Driven(transcript, status, [], "spawn", None)


async def _drive(
    scenario: Scenario,
    env: dict[str, str],
    cwd: Path,
    stderr_file: BinaryIO,
    stderr_path: Path,
    mcp: McpSettings | None = None,
) -> _Driven:
    async with acp_mcp_servers(scenario, mcp) as mcp_servers:
        return await _drive_acp(scenario, env, cwd, stderr_file, stderr_path, mcp_servers)


async def _drive_acp(
    scenario: Scenario,
    env: dict[str, str],
    cwd: Path,
    stderr_file: BinaryIO,
    stderr_path: Path,
    mcp_servers: AcpMcpServers,
) -> _Driven:
    command = scenario.agent_command()
    # The one seam between supervising and starting: spawned, or forked by a fork server.
    starting = contextlib.AsyncExitStack()
    try:
        agent = await starting.enter_async_context(
            started_agent(
                command,
                env=env,
                cwd=cwd,
                stderr=stderr_file,
                fork_preload=scenario.fork_preload(),
                name=scenario.name,
            )
        )
    except OSError as exc:
        await starting.aclose()
        raise AgentCrashError(
            f"{scenario.name}: cannot start the agent {command!r}: {exc}; check `agent` "
            f"in {scenario.toml_path}"
        ) from None
    process = agent.process
    assert process.stdout is not None
    assert process.stdin is not None
    tee = _StdoutTee(process.stdout)
    client = HarnessClient(scenario.permissions)
    conn = connect_to_agent(cast(Client, client), process.stdin, tee.reader)
    pump = asyncio.create_task(tee.pump())
    progress = Progress()

    def stderr_tail() -> str:
        return _read_tail(stderr_path)

    async def steps_then_exit() -> int:
        await run_steps(scenario, conn, client, cwd, progress, mcp_servers)
        progress.current = "closing stdin and waiting for the agent to exit"
        with contextlib.suppress(OSError, RuntimeError):
            process.stdin.close()  # type: ignore[union-attr]
        if scenario.shutdown == "sigterm":
            # What ACP clients do: stdin closed and SIGTERM at once (agents that keep
            # serving after EOF are stopped the way an editor stops them).
            progress.current = "closing stdin and sending SIGTERM (shutdown = sigterm)"
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
        await pump
        return await process.wait()

    main = asyncio.create_task(steps_then_exit())
    garbage = asyncio.create_task(tee.garbage_seen.wait())
    try:
        done, _ = await asyncio.wait(
            {main, garbage}, timeout=scenario.timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:
            raise AgentTimeoutError(
                f"{scenario.name}: the agent did not finish within {scenario.timeout:g}s "
                f"(timeout in {scenario.toml_path}); it was at {progress.current}. Its whole "
                "process group was killed. Raise `timeout` if the run is legitimately slow, "
                "or find what the agent waits for in its stderr",
                stderr_tail=stderr_tail(),
            )
        if tee.garbage is not None:  # checked first: garbage explains what follows it
            number, line = tee.garbage
            shown = line[:200].decode("utf-8", errors="replace").rstrip("\n")
            raise AgentOutputError(
                f"{scenario.name}: agent stdout line {number} is not a JSON-RPC frame: "
                f"{shown!r} (during {progress.current}). stdout must carry protocol frames "
                "only; send logs and prints to stderr",
                stderr_tail=stderr_tail(),
            )
        try:
            exit_code = main.result()
        except (ConnectionError, asyncio.IncompleteReadError, BrokenPipeError) as exc:
            code = await _exit_code_soon(process)
            stderr = stderr_tail()
            hint = missing_module_hint(scenario, stderr) or "See its stderr below"
            raise AgentCrashError(
                f"{scenario.name}: the agent went away during {progress.current} "
                f"(exit code {code}; {type(exc).__name__}: {exc}). {hint}",
                stderr_tail=stderr,
            ) from None
        if client.problems:
            raise StepError(
                f"{scenario.name}: " + "; ".join(client.problems), stderr_tail=stderr_tail()
            )
        if exit_code != 0 and not (scenario.shutdown == "sigterm" and exit_code in _SIGTERMED):
            raise AgentCrashError(
                f"{scenario.name}: the agent exited with code {exit_code} after stdin was "
                "closed (an ACP agent must flush its sessions and exit 0 on stdin EOF"
                + (", or on SIGTERM" if scenario.shutdown == "sigterm" else "")
                + ")",
                stderr_tail=stderr_tail(),
            )
        return _Driven(
            bytes(tee.raw), exit_code, progress.stop_reasons, agent.method, agent.fallback_reason
        )
    except RunError as exc:
        if exc.stderr_tail:
            raise
        raise type(exc)(exc.message, stderr_tail=stderr_tail(), where=progress.current) from None
    except RequestError as exc:
        raise StepError(
            f"{scenario.name}: {progress.current} failed with JSON-RPC error {exc.code} "
            f"{exc}; if this error is intended, use an expect_error step",
            stderr_tail=stderr_tail(),
            where=progress.current,
        ) from None
    except Exception as exc:
        raise AgentOutputError(
            f"{scenario.name}: {progress.current} failed: {type(exc).__name__}: {exc}",
            stderr_tail=stderr_tail(),
        ) from exc
    finally:
        for task in (main, garbage):
            task.cancel()
        agent.kill_group()
        if process.returncode is None:
            await process.wait()
        pump.cancel()
        await asyncio.gather(main, garbage, pump, return_exceptions=True)
        with contextlib.suppress(Exception):
            await conn.close()
        await starting.aclose()


# `python -m pkg.mod` prints "No module named pkg.mod"; an import prints it quoted.
_NO_MODULE = re.compile(r"No module named '?([A-Za-z_][\w.]*)'?")
HARNESS_DISTRIBUTION = "agentreel-snapshot-harness"
AGENT_EXTRA = "agent"


def missing_module_hint(scenario: Scenario, stderr: str) -> str | None:
    """What to install when the agent died for a module it cannot import: the harness's
    ``[agent]`` extra for the reference agent, else the dependency group or extra of the
    project around the scenario that names the module's distribution (the repository's
    ``examples`` group for its example agents), else the bare module to install."""
    found = _NO_MODULE.search(stderr)
    if found is None:
        return None
    module = found.group(1)
    if module == DEFAULT_AGENT_MODULE or module.startswith(DEFAULT_AGENT_MODULE + "."):
        return (
            f"The reference agent ({DEFAULT_AGENT_MODULE}) is not installed: it comes with "
            f'the [{AGENT_EXTRA}] extra, pip install "{HARNESS_DISTRIBUTION}[{AGENT_EXTRA}]"; '
            f"or name your own agent in `agent` of {scenario.toml_path}"
        )
    where = _declared_by(scenario.directory, module.split(".")[0])
    if where is not None:
        pyproject, kind, name, requirement = where
        command = (
            f"uv sync --group {name}" if kind == "dependency group" else f"pip install '.[{name}]'"
        )
        return (
            f"The agent cannot import {module!r}: {requirement!r} brings it, in the {kind} "
            f"{name!r} of {pyproject}; install it into the harness's Python "
            f"({sys.executable}): `{command}` in {pyproject.parent}"
        )
    return (
        f"The agent cannot import {module!r}: install the package that provides it into the "
        f"Python the agent runs on ({sys.executable})"
    )


def _declared_by(start: Path, module: str) -> tuple[Path, str, str, str] | None:
    """``(pyproject, "dependency group" | "extra", its name, requirement)`` of the nearest
    ``pyproject.toml`` above ``start`` whose groups or extras require a distribution named
    like ``module`` (``pydantic_ai`` → ``pydantic-ai`` or ``pydantic-ai-slim``)."""
    wanted = re.sub(r"[-_.]+", "-", module).lower()
    for folder in [start.resolve(), *start.resolve().parents]:
        path = folder / "pyproject.toml"
        if not path.is_file():
            continue
        try:
            pyproject = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            return None
        sections = [
            ("dependency group", pyproject.get("dependency-groups", {})),
            ("extra", pyproject.get("project", {}).get("optional-dependencies", {})),
        ]
        for kind, table in sections:
            for name, requirements in table.items():
                for text in requirements:
                    if not isinstance(text, str):
                        continue
                    distribution = re.split(r"[\s\[<>=!~;@]", text.strip(), maxsplit=1)[0]
                    canonical = re.sub(r"[-_.]+", "-", distribution).lower()
                    if canonical == wanted or canonical.startswith(wanted + "-"):
                        return path, kind, str(name), text
        return None  # the nearest project is the scenario's; look no further
    return None


async def _exit_code_soon(process: AgentProcess) -> int | None:
    try:
        return await asyncio.wait_for(process.wait(), timeout=5)
    except TimeoutError:
        return None
