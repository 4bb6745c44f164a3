"""Judging a replay by the consumption report the agent's replay provider wrote.

The one place that decides what a report means for a run: errors and unconsumed calls
fail it (``ReplayConsumptionError``) — except in the lanes the scenario names in ``[model]
partial_lanes``, which the report marks ``partial`` and which may go unconsumed — no
report at all fails it when the recording holds model calls, and when the run itself
failed, a report with errors is the better story (drift or an unrecorded session usually
surfaces in the agent as a failed step).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from agentreel.llm import AgentEnv
from agentreel.llm_replay import ConsumptionReport, ReplayError, ReportedError, read_report
from agentreel.session import AssistantChunk, load_session_log, recording_names, rerecord_command
from agentreel.snapshot_harness._result import RunResult, tail
from agentreel.snapshot_harness._scenario import Scenario
from agentreel.snapshot_harness.exceptions import (
    NoReplayReportError,
    ReplayConsumptionError,
    RunError,
)


def replay_mismatch(
    scenario: Scenario,
    report: ConsumptionReport,
    *,
    stderr_tail: str,
    then: RunError | None = None,
) -> ReplayConsumptionError | None:
    """The error for a replay report with errors or unconsumed calls; ``None`` if clean.

    The shape a reader needs: the cause once, first (the first replay error, or what was
    left unconsumed); then one line per recorded script that was not used up; then — when
    the run failed because of it — one line naming the step, not its message again; then
    the agent's stderr tail without the lines that repeat the cause.
    """
    lines = report_problem(scenario.name, report, rerecord_command(scenario.name))
    if lines is None:
        return None
    # The agent and the proxy open the recordings by absolute path; the reader typed one.
    lines = [as_typed(scenario, line) for line in lines]
    stderr_tail = as_typed(scenario, stderr_tail)
    cause = as_typed(scenario, report.errors[0].message) if report.errors else ""
    if then is not None:
        step = then.where or "the run"
        lines.append(f"The run failed at {step} because of it ({type(then).__name__}).")
    return ReplayConsumptionError("\n".join(lines), stderr_tail=_without_cause(stderr_tail, cause))


def as_typed(scenario: Scenario, text: str) -> str:
    """``text`` with the scenario directory's absolute path written as the user typed it."""
    absolute = str(scenario.directory.resolve())
    typed = str(scenario.directory)
    return text.replace(absolute, typed) if absolute != typed else text


# What differs between two reports of one retried call: the numbered request files.
_RETRY_NUMBERING = re.compile(r"(unrecorded-)\d+")


def _again(times: int) -> list[str]:
    if times == 1:
        return []
    return [f"(met {times} times: the agent retried the same call; shown once)"]


def report_problem(name: str, report: ConsumptionReport, advice: str) -> list[str] | None:
    """What a replay report with errors or unconsumed calls says, as lines (``None``: clean):
    the first error once, first, then each recorded script not used up, then the partial
    lanes, then ``advice`` (the re-record command) unless a message named it already. A
    scenario and the pytest fixture (``name``: the test) fail with the same text."""
    unconsumed = report.unconsumed()
    if not report.errors and not unconsumed:
        return None
    if report.errors:
        # A framework retrying a failing call meets the same error again: said once, counted.
        distinct: dict[tuple[str, str], int] = {}
        for error in report.errors:
            key = (error.type, _RETRY_NUMBERING.sub(r"\1", error.message))
            distinct[key] = distinct.get(key, 0) + 1
        said = [
            (error, distinct.pop(key))
            for error in report.errors
            if (key := (error.type, _RETRY_NUMBERING.sub(r"\1", error.message))) in distinct
        ]
        first, times = said[0]
        lines = [f"{name}: {first.type}: {first.message}", *_again(times)]
        for error, times in said[1:]:
            lines += [f"(then {error.type}: {error.message})", *_again(times)]
    else:
        lines = [f"{name}: the replay ended with recorded model calls never made"]
    if unconsumed:
        lines.append("Recorded calls not used:")
        lines += [f"- {line}" for line in unconsumed]
    partial = report.partial_lines()
    if partial:
        lines.append("Partial lanes ([model] partial_lanes; not counted):")
        lines += [f"- {line}" for line in partial]
    if advice not in "\n".join(lines):
        lines.append(f"If the agent's behaviour changed on purpose, re-record: {advice}")
    return lines


def replay_error_failure(
    scenario: Scenario, error: ReplayError, *, stderr_tail: str = ""
) -> ReplayConsumptionError:
    """A replay error raised in the harness's own process — the proxy of a ``[model] via =
    "proxy"`` scenario opening its recordings (``FixtureError``, ``IncompleteCallError``,
    ``OverrideError``) — as the same failure it is when the replay provider inside an
    in-process agent raises it and writes it to its report: the one mapping from replay
    errors to a scenario's outcome, whichever process met the error."""
    report = ConsumptionReport(
        fixture_dir=str(scenario.directory),
        scenario=scenario.name,
        scripts=[],
        errors=[ReportedError(type=type(error).__name__, message=str(error))],
    )
    failure = replay_mismatch(scenario, report, stderr_tail=stderr_tail)
    assert failure is not None  # a report with an error always fails
    return failure


def _without_cause(stderr_tail: str, cause: str) -> str:
    """The stderr tail minus the lines that only repeat ``cause`` (the agent logs it too)."""
    first = cause.splitlines()[0][:80] if cause.strip() else ""
    if not first:
        return stderr_tail
    kept = [line for line in stderr_tail.splitlines() if first not in line]
    dropped = len(stderr_tail.splitlines()) - len(kept)
    if dropped:
        kept.append(f"[{dropped} line(s) repeating the error above left out]")
    return "\n".join(kept)


def read_run_report(scenario: Scenario, path: Path, stderr: str) -> ConsumptionReport | None:
    """The report a run's agent wrote at ``path`` (``None`` if it wrote none); an unreadable
    one fails the run, named."""
    if not path.exists():
        return None
    try:
        return read_report(path)
    except (OSError, ValueError) as exc:
        raise ReplayConsumptionError(
            f"{scenario.name}: cannot read the agent's replay report: {exc}",
            stderr_tail=tail(stderr),
        ) from None


def explain_failed_run(
    scenario: Scenario, path: Path, failure: RunError
) -> ReplayConsumptionError | None:
    """For a replay whose run failed: the report's errors as the failure, if it has any.

    A replay error inside the agent (drift, an unrecorded session, ...) usually surfaces
    as a failed step; the replay report says what really went wrong. Without errors in the
    report (or without a readable report) the run failure itself is the story: ``None``.
    """
    if not path.exists():
        return None
    with contextlib.suppress(OSError, ValueError):
        reported = read_report(path)
        if reported.errors:
            return replay_mismatch(
                scenario, reported, stderr_tail=failure.stderr_tail, then=failure
            )
    return None


def _recorded_calls(scenario: Scenario) -> int:
    calls = 0
    for name in recording_names(scenario.directory):
        log = load_session_log(scenario.directory / name)
        calls += sum(1 for event in log.own_events if isinstance(event, AssistantChunk))
    return calls


def verify_consumption(scenario: Scenario, result: RunResult) -> None:
    """Every replay: the agent's replay report must show no error and nothing unconsumed."""
    stderr = tail(result.stderr)
    report = result.replay_report
    if report is None:
        if _recorded_calls(scenario):
            raise NoReplayReportError(
                f"{scenario.name}: the agent wrote no replay consumption report, yet the "
                "recording holds model calls: the agent never loaded the replay provider "
                f"(is it configured from {AgentEnv.PROVIDER} / {AgentEnv.REPLAY_REPORT}?) or "
                f"exited without closing it. If the agent no longer calls the model, "
                f"re-record: {rerecord_command(scenario.name)}",
                stderr_tail=stderr,
            )
        return
    failure = replay_mismatch(scenario, report, stderr_tail=stderr)
    if failure is not None:
        raise failure
