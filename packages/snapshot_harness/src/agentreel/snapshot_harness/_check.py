"""One scenario in one mode, end to end: inventory, run, consumption, compare or write.

The order of the pieces lives here; each rule lives in its module: the directory layout
(``_layout``), the run (``_runner``), what the replay report means (``_consumption``),
goldens and recordings (``_render``), diffs (``_diff``), pending goldens (``_pending``),
the secret scan (``_secrets``).

The pytest plugin, the CLI and the nox sessions all call ``check_scenario``.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentreel.session import refresh_command, rerecord_command
from agentreel.snapshot_harness import _environment as envvars
from agentreel.snapshot_harness._consumption import verify_consumption
from agentreel.snapshot_harness._diff import compare_goldens
from agentreel.snapshot_harness._layout import (
    GOLDEN_DIR,
    GOLDEN_FILE_PATTERN,
    check_inventory,
    write_files,
)
from agentreel.snapshot_harness._pending import (
    PendingGolden,
    clear_pending,
    review_hint,
    write_pending,
)
from agentreel.snapshot_harness._record_proof import (
    DEFAULT_RETRIES,
    refusals,
    run_failure,
    schedule_problems,
    watching_upstream,
)
from agentreel.snapshot_harness._record_trials import accepting_masks, compare_twice, run_trials
from agentreel.snapshot_harness._render import render_goldens, render_recordings
from agentreel.snapshot_harness._result import RunResult
from agentreel.snapshot_harness._runner import (
    replay_verified,
    run_scenario,
    scratch_copy,
    write_recordings,
)
from agentreel.snapshot_harness._scenario import (
    Mode,
    Prompt,
    PromptAndCancel,
    RecordConfig,
    Scenario,
)
from agentreel.snapshot_harness._scenario_reader import load_scenario
from agentreel.snapshot_harness._secrets import redact_secrets, scan_for_secrets
from agentreel.snapshot_harness.exceptions import (
    GoldenMismatchError,
    HarnessError,
    NoReplayReportError,
    RecordError,
    RunError,
    SecretLeakError,
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """A scenario that passed (replay) or was written (record, refresh)."""

    scenario: Scenario
    mode: Mode
    sessions: int
    duration: float
    written: list[str] = field(default_factory=list)
    result: RunResult | None = None
    notes: list[str] = field(default_factory=list)
    """What record's checks warn of (``_record_proof``: a crash on stderr)."""

    @property
    def warnings(self) -> list[str]:
        """What the recording had to guess (record through the proxy: a child numbered by
        arrival) or its checks warn of, each saying what to do; the scenario was written
        all the same."""
        if self.mode != "record" or self.result is None:
            return []
        return [*self.result.proxy_warnings, *self.notes]


def check_scenario(
    scenario: Scenario | Path | str,
    mode: Mode = "replay",
    *,
    record: RecordConfig | None = None,
    work_dir: Path | None = None,
    pending: bool = False,
) -> Outcome:
    """Run one scenario in ``mode``; raise a ``HarnessError`` with a readable message on failure.

    ``replay`` compares with ``golden/`` and checks every recorded call was consumed;
    ``refresh`` replays the same way and rewrites ``golden/``; ``record`` runs against a
    real or stub model, then replays the new recording keylessly (from a scratch copy of
    the scenario) and writes recordings and goldens only if that replay is clean and the
    secret scan finds nothing. Goldens therefore always come from a replay: exactly what
    ``nox -s replay`` will compare, with nothing only the live run did (retries, where a
    slow stream happened to be cancelled).

    ``pending`` (the CLI and the pytest plugin pass it outside ``CI``): a replay whose
    goldens differ writes the live ones as ``golden/<file>.pending`` for ``agentreel
    review``; a passing replay, a refresh and a record remove the scenario's stale ones.
    """
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    started = time.monotonic()
    check_inventory(scenario, mode)
    if mode == "record":
        config = record or scenario.record
        outcome = accepting_masks(
            scenario, config, lambda chosen: _record(chosen, record, work_dir, started)
        )
        if pending:
            clear_pending(scenario.directory)
        return outcome
    result = run_scenario(scenario, mode, work_dir=work_dir)
    verify_consumption(scenario, result)
    rendered = render_goldens(result)  # no recordings: a replay keeps the committed ones
    sessions = len(result.session_logs)
    if mode == "replay":
        diffs = compare_goldens(scenario, rendered)
        if diffs:
            written: list[PendingGolden] = []
            refused = ""
            secrets = envvars.secret_values(os.environ, scenario.env, keys=scenario.auth_env())
            allow = scenario.record.settings.allow_secrets
            if pending:  # pending goldens are goldens: scanned like any before written
                try:
                    scan_for_secrets(
                        {f"{GOLDEN_DIR}/{k}": v for k, v in rendered.items() if k in diffs},
                        secrets,
                        scenario.name,
                        allow=allow,
                        action="write the pending goldens",
                    )
                    written = write_pending(scenario.directory, rendered, diffs)
                except SecretLeakError as error:
                    refused = f"\n{error}"
            # The diffs show what the goldens hold: a key there is shown redacted, not raw.
            diffs = {name: redact_secrets(diff, secrets, allow) for name, diff in diffs.items()}
            raise GoldenMismatchError(
                _mismatch_message(scenario, diffs, result, written) + refused, diffs=diffs
            )
        if pending:
            clear_pending(scenario.directory)
        return Outcome(scenario, mode, sessions, time.monotonic() - started, result=result)
    # refresh: the goldens it writes must be what every replay gives (_record_trials).
    run_trials(scenario.name, scenario, rendered, record or scenario.record, done="replayed")
    goldens = {f"{GOLDEN_DIR}/{k}": v for k, v in rendered.items()}
    scan_for_secrets(
        goldens,
        envvars.secret_values(os.environ, scenario.env, keys=scenario.auth_env()),
        scenario.name,
        allow=scenario.record.settings.allow_secrets,
        action="write the goldens",
    )
    write_files(scenario.directory / GOLDEN_DIR, rendered, keep_pattern=GOLDEN_FILE_PATTERN)
    if pending:
        clear_pending(scenario.directory)
    return Outcome(scenario, mode, sessions, time.monotonic() - started, list(goldens), result)


def _record(
    scenario: Scenario, record: RecordConfig | None, work_dir: Path | None, started: float
) -> Outcome:
    config = record or scenario.record
    retries = DEFAULT_RETRIES if config.retries is None else config.retries
    orders: list[str] = []
    for _ in range(retries + 1):
        outcome = _record_once(scenario, record, config, work_dir, started, orders)
        if outcome is not None:
            return outcome
    raise RecordError(
        f"{scenario.name}: recorded {retries + 1} time(s), nothing was written: each "
        "recording holds an order of calls the recorded schedule cannot enforce at replay "
        "(a child's call starting inside its parent's still-open call):\n"
        + "\n".join(f"- {order}" for order in orders)
        + f"\nRecord again, raise [record] retries in {scenario.toml_path}, or make the "
        "agent wait for its parent's call before the child's next one"
    )


def _record_once(
    scenario: Scenario,
    record: RecordConfig | None,
    config: RecordConfig,
    work_dir: Path | None,
    started: float,
    orders: list[str],
) -> Outcome | None:
    """One recording, proved (``_record_proof``); ``None`` when its order of calls cannot
    be held (named in ``orders``), to record again."""
    with watching_upstream() as stubs:
        try:
            recorded = run_scenario(scenario, "record", record=record, work_dir=work_dir)
        except RunError as error:
            refused = run_failure(scenario.name, stubs)
            if refused is not None:
                raise refused from error
            raise
    notes = refusals(
        scenario.name,
        recorded.session_logs,
        recorded.stderr,
        stubs,
        strict=config.strict,
        strict_where=str(scenario.toml_path),
    )
    prompts = sum(isinstance(step, Prompt | PromptAndCancel) for step in scenario.steps)
    if prompts and not recorded.session_logs:
        raise RecordError(
            f"{scenario.name}: the agent answered {prompts} prompt(s) but wrote no session "
            "log, so there is nothing to record and nothing was written: the agent never "
            "used agentreel's provider layer (agentreel.llm with agentreel.session logging, "
            "configured from AGENTREEL_PROVIDER / AGENTREEL_SESSIONS_ROOT) or the proxy "
            '([model] via = "proxy" in scenario.toml). See its stderr with --keep-runs DIR.'
        )
    recordings = render_recordings(recorded)
    secrets = envvars.secret_values(os.environ, scenario.env, keys=scenario.auth_env())
    allow = scenario.record.settings.allow_secrets
    scan_for_secrets(recordings, secrets, scenario.name, allow=allow)

    with tempfile.TemporaryDirectory(prefix="agentreel-record-") as scratch:
        trial = scratch_copy(scenario, recordings, Path(scratch))
        unheld = schedule_problems(trial.directory, scenario.replay.schedule)
        if unheld:
            orders.extend(unheld)
            return None
        try:
            replayed = replay_verified(trial)
        except NoReplayReportError as exc:
            raise RecordError(
                f"{scenario.name}: recorded, but nothing was written: replaying the new "
                "recording, the agent never loaded agentreel's replay provider (it wrote no "
                "consumption report), so it would call a real model in every replay. Configure "
                "the agent's provider from AGENTREEL_PROVIDER (replay mode sets it to "
                f"'replay'), or route it through the proxy.\n{exc}"
            ) from exc
        except HarnessError as exc:
            raise RecordError(
                f"{scenario.name}: recorded, but the new recording does not replay, so nothing "
                f"was written:\n{exc}\nAn agent must make the same requests on every run "
                "for its recording to replay (check for randomness, time or ordering in "
                "what it sends)"
            ) from exc
        goldens = render_goldens(replayed)
        run_trials(scenario.name, trial, goldens, config, notes=notes, first=replayed)
        if config.twice:
            compare_twice(scenario, record, recorded)

    scan_for_secrets(
        {f"{GOLDEN_DIR}/{k}": v for k, v in goldens.items()}, secrets, scenario.name, allow=allow
    )
    write_recordings(scenario.directory, recordings)
    write_files(scenario.directory / GOLDEN_DIR, goldens, keep_pattern=GOLDEN_FILE_PATTERN)
    written = [*recordings, *(f"{GOLDEN_DIR}/{name}" for name in goldens)]
    return Outcome(
        scenario,
        "record",
        len(recorded.session_logs),
        time.monotonic() - started,
        written,
        recorded,
        notes,
    )


def _mismatch_message(
    scenario: Scenario, diffs: dict[str, str], result: RunResult, pending: list[PendingGolden]
) -> str:
    parts = [
        f"{scenario.name}: the live run differs from the goldens in {len(diffs)} file(s): "
        f"{', '.join(diffs)}"
    ]
    for name, diff in diffs.items():
        parts.append(f"--- {name} ---\n{diff.rstrip()}")
    parts.append(
        f"If the change is intended: `{refresh_command(scenario.name)}` rewrites the goldens "
        "from the same recording; if the model calls changed, re-record: "
        f"{rerecord_command(scenario.name)}"
    )
    if pending:
        parts.append(
            f"The live goldens are pending beside the committed ones "
            f"({', '.join(p.pending.name for p in pending)}): accept or reject them one by "
            f"one with {review_hint(scenario.directory)}"
        )
    stderr = result.stderr_tail()
    if stderr:
        parts.append("--- agent stderr (tail) ---\n" + stderr)
    return "\n".join(parts)
