"""Running a command scenario (``protocol = "command"``, SPEC 14): an agent that is no ACP
server — a headless CLI (``claude -p``, ``opencode run``, ``codex exec``) or a script.

Each prompt step runs the command once, in the run's cwd and environment (the proxy's base
URL and keys, as for an ACP agent), with the step's text in its argv where ``{prompt}``
stands, else written to its stdin. Its transcript is what it printed on stdout, line by line,
and its exit status, as JSON lines the one normalizer masks like an ACP transcript::

    {"type": "command/start", "step": 0, "prompt": "..."}
    {"type": "stdout", "json": {...}}          a line that is a JSON value
    {"type": "stdout", "text": "..."}          any other line
    {"type": "command/exit", "step": 0, "status": 0}

stderr goes to the run's stderr file (kept apart, never in a golden). A step that exits
non-zero fails the run, its stderr tail shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from typing import BinaryIO

from agentreel.snapshot_harness._mcp import McpReach, expand_mcp_argv
from agentreel.snapshot_harness._scenario import PROMPT_PLACEHOLDER, Prompt, Scenario
from agentreel.snapshot_harness.exceptions import AgentCrashError, AgentTimeoutError


def command_for(
    scenario: Scenario, prompt: str, mcp: McpReach | None = None
) -> tuple[list[str], bytes | None]:
    """The argv for one step and what goes to its stdin (``None``: the prompt is in argv);
    ``mcp``: what each ``{mcp:<name>}`` expands to."""
    command = expand_mcp_argv(scenario.agent_command(), mcp or {})
    if any(PROMPT_PLACEHOLDER in part for part in command):
        return [part.replace(PROMPT_PLACEHOLDER, prompt) for part in command], None
    return command, prompt.encode("utf-8")


def transcript_lines(step: int, prompt: str, stdout: bytes, status: int) -> list[bytes]:
    lines = [_line({"type": "command/start", "step": step, "prompt": prompt})]
    for raw in stdout.decode("utf-8", errors="replace").splitlines():
        try:
            value = json.loads(raw)
        except ValueError:
            lines.append(_line({"type": "stdout", "text": raw}))
        else:
            lines.append(_line({"type": "stdout", "json": value}))
    lines.append(_line({"type": "command/exit", "step": step, "status": status}))
    return lines


def _line(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


async def drive_command(
    scenario: Scenario,
    env: dict[str, str],
    cwd: str,
    stderr_file: BinaryIO,
    tail: Callable[[], str],
    mcp: McpReach | None = None,
) -> tuple[bytes, int]:
    """Every prompt step, one command run each, in order; returns (transcript, last status)."""
    deadline = time.monotonic() + scenario.timeout
    transcript = bytearray()
    status = 0
    prompts = [step.text for step in scenario.steps if isinstance(step, Prompt)]
    for number, prompt in enumerate(prompts):
        argv, stdin = command_for(scenario, prompt, mcp)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr_file,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise AgentCrashError(
                f"{scenario.name}: cannot start the command {argv[0]!r} (step {number}): "
                f"{exc}; check `agent` in {scenario.toml_path}"
            ) from None
        try:
            stdout, _ = await asyncio.wait_for(
                process.communicate(stdin), max(0.0, deadline - time.monotonic())
            )
        except TimeoutError:
            raise AgentTimeoutError(
                f"{scenario.name}: the command did not finish within {scenario.timeout:g}s "
                f"(timeout in {scenario.toml_path}); it was at prompt step {number} "
                f"({prompt[:60]!r}). Its whole process group was killed",
                stderr_tail=tail(),
                where=f"prompt step {number}",
            ) from None
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            if process.returncode is None:
                await process.wait()
        status = process.returncode if process.returncode is not None else -1
        transcript += b"".join(transcript_lines(number, prompt, stdout, status))
        if status != 0:
            raise AgentCrashError(
                f"{scenario.name}: the command exited with status {status} at prompt step "
                f"{number} ({prompt[:60]!r}); a command scenario's every step must exit 0",
                stderr_tail=tail(),
                where=f"prompt step {number}",
            )
    return bytes(transcript), status
