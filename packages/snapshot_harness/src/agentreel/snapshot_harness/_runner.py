"""Running one scenario: one agent subprocess driven over ACP, its output captured.

Per run: a fresh temp directory holding the cwd (workspace copied in), the sessions root,
the agent's stderr file and the replay report. The agent is started in its own process
group with an explicit environment; its stdout is captured byte-exact (the raw bytes are
the transcript) while complete JSON lines are fed to the official ACP client. When the
steps are done, stdin is closed and the exit awaited before the session logs are
harvested. At the timeout the whole process group is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, cast

from acp import PROTOCOL_VERSION, Client, RequestError, connect_to_agent, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities, Implementation

from agentreel.llm_replay import ConsumptionReport, read_report
from agentreel.session import (
    RequestHeader,
    SessionError,
    SessionLog,
    harvest_session_logs,
    load_session_log,
)
from agentreel.snapshot_harness import _environment as envvars
from agentreel.snapshot_harness._client import HarnessClient
from agentreel.snapshot_harness._scenario import (
    DEFAULT_AGENT_MODULE,
    MODES,
    ExpectError,
    Initialize,
    Mode,
    NewSession,
    Prompt,
    PromptAndCancel,
    RecordConfig,
    Scenario,
    Step,
)
from agentreel.snapshot_harness.exceptions import (
    AgentCrashError,
    AgentOutputError,
    AgentTimeoutError,
    RecordSetupError,
    ReplayConsumptionError,
    RunError,
    StepError,
)

STDERR_TAIL_LINES = 40
_READ_SIZE = 1 << 16
_UNKNOWN_SESSION = "00000000-0000-4000-8000-000000000000"


@dataclass(frozen=True, slots=True)
class RunResult:
    """Everything one run produced.

    ``transcript`` is the agent's stdout, byte for byte; ``session_logs`` are the harvested
    logs in session order (``session_log_bytes`` their raw content, same order, kept only
    when recordings can be made from the run: record mode, or ``keep_raw_logs=True``;
    empty otherwise, so a replay does not hold every log twice);
    ``run_dir`` held the run (cwd, sessions root, home, tmp; removed afterwards unless a
    ``work_dir`` was given); ``replay_report`` is what the replay provider reported from
    inside the agent process (``None`` outside replay or when it was never loaded).
    """

    scenario: Scenario
    mode: Mode
    cwd: Path
    run_dir: Path
    transcript: bytes
    session_logs: list[SessionLog]
    session_log_bytes: list[bytes]
    stderr: str
    exit_code: int | None
    replay_report: ConsumptionReport | None
    duration: float
    stop_reasons: list[str] = field(default_factory=list)

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        return tail(self.stderr, lines)


def tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text``, marked when earlier lines were dropped."""
    parts = text.rstrip("\n").splitlines()
    if len(parts) <= lines:
        return "\n".join(parts)
    return f"[... {len(parts) - lines} earlier lines ...]\n" + "\n".join(parts[-lines:])


def describe_step(index: int, step: Step) -> str:
    """``step 3 (prompt 'Say hi')`` — how errors name the step that was running."""
    kind = {
        Initialize: "initialize",
        NewSession: "new_session",
        Prompt: "prompt",
        PromptAndCancel: "prompt_and_cancel",
        ExpectError: "expect_error",
    }[type(step)]
    text = getattr(step, "text", "")
    if text:
        short = text if len(text) <= 40 else text[:37] + "..."
        return f"step {index + 1} ({kind} {short!r})"
    return f"step {index + 1} ({kind})"


def rerecord_hint(scenario: Scenario) -> str:
    return f"nox -s record -- {scenario.name}"


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


@contextlib.contextmanager
def _record_backend(config: RecordConfig) -> Iterator[dict[str, str]]:
    """Environment for recording; for ``stub`` the stub server runs for the block's life."""
    if config.provider != "stub":
        env = envvars.record_passthrough(os.environ)
        env[envvars.PROVIDER] = config.provider
        env[envvars.MODEL] = config.model
        if config.base_url:
            env[envvars.PROVIDER_SETTINGS] = json.dumps({"base_url": config.base_url})
        yield env
        return
    rules = config.rules
    if rules is None or not rules.is_file():
        raise RecordSetupError(
            f"record provider 'stub' needs its rules file {rules}; create it (rules format: "
            "packages/llm/README.md) or set [record] provider to a real one"
        )
    from agentreel.llm.exceptions import StubRulesError
    from agentreel.llm.stub import StubServer

    try:
        server = StubServer(rules)
    except StubRulesError as exc:
        raise RecordSetupError(f"cannot start the stub model server: {exc}") from None
    with server:
        # The `stub` provider is the real openai adapter pointed at the stub server, with
        # a fixed non-secret key: recording goes through the real wire protocol.
        env = envvars.loopback_bypass()
        env[envvars.PROVIDER] = "stub"
        env[envvars.MODEL] = config.model
        env[envvars.PROVIDER_SETTINGS] = json.dumps({"base_url": server.base_url})
        env["AGENTREEL_STUB_URL"] = server.base_url
        yield env


def replay_mismatch(
    scenario: Scenario,
    report: ConsumptionReport,
    *,
    stderr_tail: str,
    then: str | None = None,
) -> ReplayConsumptionError | None:
    """The error for a replay report with errors or unconsumed calls; ``None`` if clean."""
    problems = [f"{error.type}: {error.message}" for error in report.errors]
    problems += report.unconsumed()
    if not problems:
        return None
    listing = "\n".join(f"- {problem}" for problem in problems)
    advice = f"nox -s record -- {scenario.name}"
    if advice not in listing:
        listing += f"\nIf the agent's behaviour changed on purpose, re-record: {advice}"
    if then:
        listing += f"\nThe run then failed: {then}"
    return ReplayConsumptionError(
        f"{scenario.name}: the replay did not match its recording:\n{listing}",
        stderr_tail=stderr_tail,
    )


def recorded_model(scenario: Scenario) -> str | None:
    """The model the main recording asked for (its first ``request/header``), if any.

    Replay runs the agent with this model so the request headers match even when the
    scenario was recorded with ``--model`` overriding ``[record] model``.
    """
    path = scenario.directory / "session.jsonl"
    if not path.is_file():
        return None
    try:
        log = load_session_log(path)
    except SessionError:
        return None  # the inventory / replay provider report the broken file by name
    for event in log.events:
        if isinstance(event, RequestHeader):
            return event.data.model
    return None


def _replay_environment(scenario: Scenario, cwd: Path, report: Path) -> dict[str, str]:
    """Replay and refresh: the replay provider, no key, proxies at a closed port."""
    env = envvars.offline_proxies()
    env[envvars.PROVIDER] = "replay"
    env[envvars.MODEL] = recorded_model(scenario) or scenario.record.model
    env[envvars.REPLAY_DIR] = str(scenario.directory.resolve())
    env[envvars.REPLAY_LIVE_CWD] = str(cwd)
    env[envvars.REPLAY_REPORT] = str(report)
    return env


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
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    if scenario.model.proxied:
        # Never run a proxy scenario as an in-process one: its agent would get no model.
        raise RecordSetupError(
            f'{scenario.name}: [model] via = "proxy" in {scenario.toml_path} needs the '
            "runner's proxy support (agentreel-llm-proxy), which this harness version does "
            'not have yet; use via = "provider" or a newer agentreel-snapshot-harness'
        )
    keep_raw = mode == "record" if keep_raw_logs is None else keep_raw_logs
    if work_dir is not None:
        work_dir.mkdir(parents=True, exist_ok=True)
        return _run_in(scenario, mode, record, work_dir.resolve(), keep_raw)
    with tempfile.TemporaryDirectory(prefix=f"agentreel-{scenario.name}-") as tmp:
        return _run_in(scenario, mode, record, Path(tmp).resolve(), keep_raw)


def _run_in(
    scenario: Scenario, mode: Mode, record: RecordConfig | None, run_dir: Path, keep_raw: bool
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
    env[envvars.SESSIONS_ROOT] = str(sessions_root)
    with contextlib.ExitStack() as stack:
        if mode == "record":
            env.update(stack.enter_context(_record_backend(record or scenario.record)))
        else:
            env.update(_replay_environment(scenario, cwd, report))
        env.update(scenario.env)
        started = time.monotonic()
        try:
            with stderr_path.open("wb") as stderr_file:
                driven = asyncio.run(_drive(scenario, env, cwd, stderr_file, stderr_path))
        except RunError as failure:
            # A replay error inside the agent (drift, an unrecorded session, ...) usually
            # surfaces as a failed step; the replay report says what really went wrong.
            if mode != "record" and report.exists():
                mismatch: ReplayConsumptionError | None = None
                with contextlib.suppress(OSError, ValueError):
                    reported = read_report(report)
                    if reported.errors:  # else the run failure itself is the story
                        mismatch = replay_mismatch(
                            scenario,
                            reported,
                            stderr_tail=failure.stderr_tail,
                            then=str(failure).split("\n--- agent stderr", 1)[0],
                        )
                if mismatch is not None:
                    raise mismatch from failure
            raise
        duration = time.monotonic() - started

    stderr = stderr_path.read_text(encoding="utf-8", errors="replace")
    logs = harvest_session_logs(sessions_root)
    replay_report: ConsumptionReport | None = None
    if mode != "record" and report.exists():
        try:
            replay_report = read_report(report)
        except (OSError, ValueError) as exc:
            raise ReplayConsumptionError(
                f"{scenario.name}: cannot read the agent's replay report: {exc}",
                stderr_tail=tail(stderr),
            ) from None
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
    )


@dataclass(slots=True)
class _Driven:
    transcript: bytes
    exit_code: int | None
    stop_reasons: list[str]


def _read_tail(path: Path) -> str:
    return tail(path.read_text(encoding="utf-8", errors="replace"))


async def _drive(
    scenario: Scenario,
    env: dict[str, str],
    cwd: Path,
    stderr_file: BinaryIO,
    stderr_path: Path,
) -> _Driven:
    command = scenario.agent_command()
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr_file,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        raise AgentCrashError(
            f"{scenario.name}: cannot start the agent {command!r}: {exc}; check `agent` "
            f"in {scenario.toml_path}"
        ) from None
    assert process.stdout is not None
    assert process.stdin is not None
    tee = _StdoutTee(process.stdout)
    client = HarnessClient(scenario.permissions)
    conn = connect_to_agent(cast(Client, client), process.stdin, tee.reader)
    pump = asyncio.create_task(tee.pump())
    progress = _Progress()

    def stderr_tail() -> str:
        return _read_tail(stderr_path)

    async def steps_then_exit() -> int:
        await _run_steps(scenario, conn, client, cwd, progress)
        progress.current = "closing stdin and waiting for the agent to exit"
        with contextlib.suppress(OSError, RuntimeError):
            process.stdin.close()  # type: ignore[union-attr]
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
            hint = "See its stderr below"
            if scenario.agent is None and f"No module named '{DEFAULT_AGENT_MODULE}" in stderr:
                hint = (
                    "The default agent is not installed: install "
                    "agentreel-snapshot-harness[agent] (the reference agent) or set `agent` "
                    f"in {scenario.toml_path}"
                )
            raise AgentCrashError(
                f"{scenario.name}: the agent went away during {progress.current} "
                f"(exit code {code}; {type(exc).__name__}: {exc}). {hint}",
                stderr_tail=stderr,
            ) from None
        if client.problems:
            raise StepError(
                f"{scenario.name}: " + "; ".join(client.problems), stderr_tail=stderr_tail()
            )
        if exit_code != 0:
            raise AgentCrashError(
                f"{scenario.name}: the agent exited with code {exit_code} after stdin was "
                "closed (an ACP agent must flush its sessions and exit 0 on stdin EOF)",
                stderr_tail=stderr_tail(),
            )
        return _Driven(bytes(tee.raw), exit_code, progress.stop_reasons)
    except RunError as exc:
        if exc.stderr_tail:
            raise
        raise type(exc)(str(exc), stderr_tail=stderr_tail()) from None
    except RequestError as exc:
        raise StepError(
            f"{scenario.name}: {progress.current} failed with JSON-RPC error {exc.code} "
            f"{exc}; if this error is intended, use an expect_error step",
            stderr_tail=stderr_tail(),
        ) from None
    except Exception as exc:
        raise AgentOutputError(
            f"{scenario.name}: {progress.current} failed: {type(exc).__name__}: {exc}",
            stderr_tail=stderr_tail(),
        ) from exc
    finally:
        for task in (main, garbage):
            task.cancel()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if process.returncode is None:
            await process.wait()
        pump.cancel()
        await asyncio.gather(main, garbage, pump, return_exceptions=True)
        with contextlib.suppress(Exception):
            await conn.close()


async def _exit_code_soon(process: asyncio.subprocess.Process) -> int | None:
    try:
        return await asyncio.wait_for(process.wait(), timeout=5)
    except TimeoutError:
        return None


@dataclass(slots=True)
class _Progress:
    current: str = "startup"
    stop_reasons: list[str] = field(default_factory=list)


async def _run_steps(
    scenario: Scenario,
    conn: ClientSideConnection,
    client: HarnessClient,
    cwd: Path,
    progress: _Progress,
) -> None:
    session_id: str | None = None
    for index, step in enumerate(scenario.steps):
        progress.current = describe_step(index, step)
        where = f"{scenario.name}: {progress.current}"
        if isinstance(step, Initialize):
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="agentreel-snapshot-harness", version="0.1.0"),
            )
        elif isinstance(step, NewSession):
            response = await conn.new_session(cwd=str(cwd), mcp_servers=[])
            session_id = response.session_id
        elif isinstance(step, Prompt):
            assert session_id is not None
            result = await conn.prompt(session_id=session_id, prompt=[text_block(step.text)])
            progress.stop_reasons.append(str(result.stop_reason))
        elif isinstance(step, PromptAndCancel):
            assert session_id is not None
            client.arm_cancel(session_id)
            result = await conn.prompt(session_id=session_id, prompt=[text_block(step.text)])
            client.disarm_cancel()
            await client.wait_cancel_delivered()
            progress.stop_reasons.append(str(result.stop_reason))
            if client.cancel_failure is not None:
                raise StepError(
                    f"{where}: the first agent_message_chunk arrived, but sending "
                    f"session/cancel failed ({client.cancel_failure}); the agent's stderr "
                    "below says whether it was still reading"
                )
            if not client.cancel_sent.is_set():
                raise StepError(
                    f"{where}: the prompt ended (stop reason {result.stop_reason}) before any "
                    "agent_message_chunk arrived, so nothing was cancelled; the recording "
                    "needs text before the point to cancel (a `hang` override in "
                    "replay.override.json streams a little, then waits)"
                )
        else:
            await _expect_error(step, conn, cwd, session_id, where)
    if client.unused_answers:
        raise StepError(
            f"{scenario.name}: {len(client.unused_answers)} permission answer(s) were never "
            f"asked for ({', '.join(client.unused_answers)}); remove them from `permissions` in "
            f"{scenario.toml_path} or check why the agent asked fewer times"
        )


async def _expect_error(
    step: ExpectError, conn: ClientSideConnection, cwd: Path, session_id: str | None, where: str
) -> None:
    try:
        if step.method == "initialize":
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
        elif step.method == "new_session":
            await conn.new_session(cwd=step.text or str(cwd), mcp_servers=[])
        else:
            target = session_id if step.session == "current" and session_id else _UNKNOWN_SESSION
            await conn.prompt(session_id=target, prompt=[text_block(step.text)])
    except RequestError as exc:
        if step.code is not None and exc.code != step.code:
            raise StepError(
                f"{where}: expected JSON-RPC error code {step.code}, got {exc.code} ({exc}); "
                "fix `code` in scenario.toml or the agent"
            ) from None
        text = f"{exc} {exc.data!r}" if exc.data is not None else str(exc)
        if step.message is not None and step.message not in text:
            raise StepError(
                f"{where}: expected an error message containing {step.message!r}, got "
                f"{text!r}; fix `message` in scenario.toml or the agent"
            ) from None
        return
    raise StepError(
        f"{where}: expected a JSON-RPC error from {step.method}, but the request succeeded"
    )
