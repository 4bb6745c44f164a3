"""``agentreel record --drifted``: re-record only the sessions that drifted (SPEC 20).

The run replays the scenario's recording with the ``replay-drifted`` provider
(``agentreel.llm_replay.DriftedProvider``): a session whose request differs after masks,
or that the recording does not hold, goes to the record backend's upstream from that call
on; every other session is served as recorded. The run is then merged into the recording
(``agentreel.llm_replay.merge_drifted``, the one rule, shared with the fixture and the
proxy: kept byte for byte / re-recorded from call k / new / dropped). The
secret scan runs over what is new, the trial replay on the merged whole, and the goldens
are written as pending (``agentreel review`` shows only what changed).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentreel.llm_replay import (
    DriftedReport,
    DriftedSummary,
    LiveLog,
    Merged,
    RecordedLog,
    gap_names,
    gapless_copy,
    merge_drifted,
    read_drifted_report,
    with_recorded_names,
    write_merged,
)
from agentreel.session import (
    RECORDING_FILE_PATTERN,
    RECORDING_FORMAT,
    load_session_log,
    tokenize_cwd,
)
from agentreel.snapshot_harness import _environment as envvars
from agentreel.snapshot_harness._backend import DRIFTED_REPORT_NAME
from agentreel.snapshot_harness._diff import compare_goldens
from agentreel.snapshot_harness._layout import (
    GOLDEN_DIR,
    check_inventory,
    take_inventory,
)
from agentreel.snapshot_harness._pending import PendingGolden, review_hint, write_pending
from agentreel.snapshot_harness._prices import load_prices
from agentreel.snapshot_harness._record_trials import run_trials
from agentreel.snapshot_harness._render import render_goldens
from agentreel.snapshot_harness._result import RunResult
from agentreel.snapshot_harness._runner import replay_verified, run_scenario, scratch_copy
from agentreel.snapshot_harness._scenario import RecordConfig, Scenario
from agentreel.snapshot_harness._secrets import scan_for_secrets
from agentreel.snapshot_harness.exceptions import HarnessError, RecordError


@dataclass(frozen=True, slots=True)
class DriftedOutcome:
    """A ``--drifted`` record: the summary, the recording files written (changed ones
    only) and the pending goldens for review."""

    scenario: Scenario
    summary: DriftedSummary
    written: list[str]
    removed: list[str]
    pending: list[PendingGolden]
    duration: float
    result: RunResult | None = field(default=None, repr=False)
    trials: int = 0
    """How many perturbed trial replays the merged recording passed (``[record] trials``)."""

    def progress(self, width: int) -> str:
        """The CLI's lines for it: the progress line, what was written, the summary and
        where the pending goldens are reviewed."""
        kept = sum(fate.status != "dropped" for fate in self.summary.sessions)
        lines = [
            f"REC   {self.scenario.name:<{width}}  {f'{kept} sessions':>10}  "
            f"{self.duration:6.2f}s  (--drifted)"
        ]
        changed = [*self.written, *(f"removed {name}" for name in self.removed)]
        if changed:
            lines.append(f"      wrote {', '.join(changed)}")
        lines.append(self.summary.text())
        if self.pending:
            lines.append(
                f"      {len(self.pending)} golden(s) pending: "
                f"{review_hint(self.scenario.directory)}"
            )
        return "\n".join(lines)


# -- the scenario command ------------------------------------------------------------------


def record_drifted(
    scenario: Scenario,
    *,
    record: RecordConfig | None = None,
    work_dir: Path | None = None,
) -> DriftedOutcome:
    """``agentreel record --drifted NAME``: replay, the drifted sessions live, merge, trial
    replay, write the changed recordings and the goldens as pending (module docstring).
    Raises a ``HarnessError`` naming what failed; nothing is written then."""
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix=f"agentreel-{scenario.name}-drifted-"))
    try:
        # A deleted recording may leave a gap in the numbering: the run replays a copy
        # numbered without it (the merge numbers the result by session order anyway).
        replayed, renamed = _without_gaps(scenario, scratch / "recording")
        check_inventory(replayed, "refresh")
        recorded = _recorded_logs(replayed)
        older = sorted(
            {log.header.format for log in recorded if log.header.format < RECORDING_FORMAT}
        )
        if older:
            # Kept files stay as they are: the merged whole must be of one format.
            raise RecordError(
                f"{scenario.name}: recorded by an earlier agentreel (recording format "
                f"{', '.join(map(str, older))}; this one writes {RECORDING_FORMAT}), so "
                f"--drifted would mix formats; run `agentreel upgrade {scenario.name}` "
                "first, then record --drifted again"
            )
        run_dir = (work_dir or scratch) / "run"
        result = run_scenario(replayed, "drifted", record=record, work_dir=run_dir)
        if scenario.model.proxied:
            merged, upstream_calls, files = _proxied_merge(scenario, result)
        else:
            merged, upstream_calls = _in_process_merge(scenario, result, recorded)
            files = merged.files
        merged = with_recorded_names(merged, renamed)
        secrets = envvars.secret_values(os.environ, scenario.env, keys=scenario.auth_env())
        allow = scenario.record.settings.allow_secrets
        new = [*merged.new_files, *(name for name in files if name not in merged.files)]
        scan_for_secrets({name: files[name] for name in new}, secrets, scenario.name, allow=allow)
        trial, goldens = _trial_replay(scenario, files, scratch / "trial")
        # The same trial replays `record` proves a whole recording with (issue 39), on
        # the merged whole: a kept part and a live part that disagree fail here.
        trials = run_trials(
            scenario.name, trial, goldens, record or scenario.record, done="re-recorded"
        )
        scan_for_secrets(
            {f"{GOLDEN_DIR}/{k}": v for k, v in goldens.items()},
            secrets,
            scenario.name,
            allow=allow,
            action="write the pending goldens",
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    written, removed = write_merged(scenario.directory, files)
    diffs = compare_goldens(scenario, goldens)
    pending = write_pending(scenario.directory, goldens, diffs) if diffs else []
    summary = DriftedSummary(
        scenario.name,
        merged.fates,
        upstream_calls,
        load_prices(scenario),
    )
    return DriftedOutcome(
        scenario,
        summary,
        written,
        removed,
        pending,
        time.monotonic() - started,
        result,
        trials,
    )


def _in_process_merge(
    scenario: Scenario, result: RunResult, recorded: list[RecordedLog]
) -> tuple[Merged, int]:
    """The agent's own logs of the drifted run merged into the recording."""
    consumption = result.replay_report
    if consumption is None:
        raise RecordError(
            f"{scenario.name}: the agent never loaded the replay-drifted provider (it "
            "wrote no replay report); configure its provider from AGENTREEL_PROVIDER"
        )
    report_file = result.run_dir / DRIFTED_REPORT_NAME
    drifted = read_drifted_report(report_file) if report_file.is_file() else DriftedReport()
    live = [
        LiveLog(log.header, tokenize_cwd(raw, result.cwd))
        for log, raw in zip(result.session_logs, result.session_log_bytes, strict=True)
    ]
    return merge_drifted(recorded, live, consumption, drifted), drifted.upstream_calls


def _proxied_merge(scenario: Scenario, result: RunResult) -> tuple[Merged, int, dict[str, bytes]]:
    """Through the proxy: what the drifted runs merged into a copy of the recording; every
    recording file of that copy (session logs, ``wire.ndjson``, ``models.json``)."""
    drifted = result.drifted_proxy
    if drifted is None or drifted.errors or drifted.merged is None:
        errors = drifted.errors if drifted is not None else ["the drifted proxy never ran"]
        raise RecordError(
            f"{scenario.name}: recording what drifted through the proxy failed, so nothing "
            "was written:\n  " + "\n  ".join(errors)
        )
    files = {
        path.name: path.read_bytes()
        for path in sorted(drifted.fixture.iterdir())
        if path.is_file() and RECORDING_FILE_PATTERN.fullmatch(path.name)
    }
    return drifted.merged, drifted.upstream_calls, files


def _without_gaps(scenario: Scenario, where: Path) -> tuple[Scenario, dict[str, str]]:
    """``scenario`` itself when its recordings are numbered without a gap; else a copy in
    ``where`` (every other entry but the goldens linked) whose recordings are renumbered
    in order, and each copy's name → the name it has in the scenario."""
    renamed = gap_names(scenario.directory)
    if not renamed:
        return scenario, {}
    # The run writes no golden: the copy holds none.
    copy = gapless_copy(scenario.directory, where / scenario.name, leave_out={GOLDEN_DIR})
    moved = dataclasses.replace(
        scenario, directory=copy, agent_root=scenario.agent_root or scenario.directory
    )
    return moved, renamed


def _recorded_logs(scenario: Scenario) -> list[RecordedLog]:
    logs: list[RecordedLog] = []
    for name in take_inventory(scenario).recordings:
        path = scenario.directory / name
        logs.append(RecordedLog(name, load_session_log(path).header, path.read_bytes()))
    return logs


def _trial_replay(
    scenario: Scenario, files: dict[str, bytes], where: Path
) -> tuple[Scenario, dict[str, bytes]]:
    """The merged recording replayed keylessly from a scratch copy: that copy's scenario
    and the goldens."""
    trial = scratch_copy(scenario, files, where)
    try:
        replayed = replay_verified(trial)
    except HarnessError as exc:
        raise RecordError(
            f"{scenario.name}: re-recorded what drifted, but the merged recording does not "
            f"replay, so nothing was written:\n{exc}\nRe-record it whole: "
            f"agentreel record {scenario.name}"
        ) from exc
    return trial, render_goldens(replayed)
