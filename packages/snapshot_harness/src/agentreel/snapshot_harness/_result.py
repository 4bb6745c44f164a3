"""What one run produced (``RunResult``): the data the runner hands to rendering and judging.

Kept apart from the runner so that the modules that consume a run (rendering goldens and
recordings, judging consumption) need not import the process supervision that made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agentreel.llm_replay import ConsumptionReport
from agentreel.session import SessionLog
from agentreel.snapshot_harness._scenario import Mode, Scenario

if TYPE_CHECKING:
    from agentreel.llm_proxy import DriftedProxy

STDERR_TAIL_LINES = 40
# How the agent process was started: spawned, or forked by a preloading fork server.
StartMethod = Literal["spawn", "fork"]


@dataclass(frozen=True, slots=True)
class RunResult:
    """Everything one run produced.

    ``transcript`` is the agent's stdout, byte for byte; ``session_logs`` are the harvested
    logs in session order (``session_log_bytes`` their raw content, same order, kept only
    when recordings can be made from the run: record mode, or ``keep_raw_logs=True``;
    empty otherwise, so a replay does not hold every log twice);
    ``run_dir`` held the run (cwd, sessions root, home, tmp; removed afterwards unless a
    ``work_dir`` was given); ``replay_report`` is what the replay provider reported from
    inside the agent process (``None`` outside replay or when it was never loaded);
    ``started_by`` says whether the agent was spawned or forked by a fork server, and
    ``fork_fallback`` why a scenario asking for the fork server was spawned instead;
    ``proxy_files`` is what a record run through the proxy kept beside its logs for the
    fixture (``wire.ndjson``, the answers replay serves byte for byte, and ``models.json``;
    name → bytes, the cwd already ``{{cwd}}``; empty otherwise); ``proxy_warnings`` what
    the recording proxy had to guess (a child numbered by arrival), each a sentence naming
    the scenario, the session and what to send — the recording stands, the CLI prints them.
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
    started_by: StartMethod = "spawn"
    fork_fallback: str | None = None
    proxy_files: dict[str, bytes] = field(default_factory=dict)
    proxy_warnings: list[str] = field(default_factory=list)
    # A record run's MCP recordings, ``mcp/<server>.<n>.jsonl`` → bytes (SPEC 19).
    mcp_files: dict[str, bytes] = field(default_factory=dict)
    # A proxied ``record --drifted`` run (SPEC 20): what drifted, merged into a copy of the
    # recording in the run's folder (``agentreel.llm_proxy.DriftedProxy``).
    drifted_proxy: DriftedProxy | None = None

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        return tail(self.stderr, lines)


def tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text``, marked when earlier lines were dropped."""
    parts = text.rstrip("\n").splitlines()
    if len(parts) <= lines:
        return "\n".join(parts)
    return f"[... {len(parts) - lines} earlier lines ...]\n" + "\n".join(parts[-lines:])
