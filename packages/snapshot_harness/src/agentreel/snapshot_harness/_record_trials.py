"""Trial replays of a fresh recording under perturbations, and accepting the masks they
find (issue 39). The checks and the mask finder are ``_record_proof``'s; this module runs
the replays, so it sits above the runner (which ``_record_proof`` must not import: the
record backends report their stub servers to it)."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, tzinfo
from typing import NoReturn, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agentreel.llm_proxy import RecordTrials, Trial
from agentreel.session import MERGE_KEYS
from agentreel.snapshot_harness._diff import unified_diff
from agentreel.snapshot_harness._faketime import faketime_env
from agentreel.snapshot_harness._layout import TRANSCRIPT_FILE
from agentreel.snapshot_harness._record_proof import (
    DATE_TRIAL,
    AnyProposal,
    TranscriptRule,
    accept_masks,
    capture_proposals,
    describe_trial,
    masked_goldens_equal,
    pinned_variables,
    proposals_message,
    propose_masks,
    transcript_line_kind,
    transcript_lines_kinds,
    trial_day,
    trial_env,
    trials_wanted,
)
from agentreel.snapshot_harness._render import render_goldens
from agentreel.snapshot_harness._result import RunResult
from agentreel.snapshot_harness._runner import replay_verified, run_scenario
from agentreel.snapshot_harness._scenario import RecordConfig, Scenario
from agentreel.snapshot_harness._scenario_reader import load_scenario
from agentreel.snapshot_harness.exceptions import (
    FaketimeError,
    HarnessError,
    RecordError,
    VolatileValuesError,
)

T = TypeVar("T")


def run_trials(
    name: str,
    trial: Scenario,
    goldens: Mapping[str, bytes],
    config: RecordConfig,
    *,
    done: str = "recorded",
    notes: list[str] | None = None,
    first: RunResult | None = None,
) -> int:
    """Replay the recording in ``trial``'s directory ``trials_wanted(config)`` times, each
    under its own perturbation, and require the goldens of the first replay every time.
    Returns how many ran; raises ``RecordError`` (``VolatileValuesError`` with the masks
    found when the difference is values) naming the trial, its perturbation and the diff.
    ``done`` is what the caller did (``refresh`` proves the goldens it writes the same way).
    Trial ``DATE_TRIAL`` runs the agent on another day (libfaketime); where that cannot be
    (libfaketime missing, or an agent that does not run under it), a line in ``notes``
    says so and that trial runs on today's date."""
    wanted = trials_wanted(config)
    pinned = pinned_variables(trial)
    said = notes if notes is not None else []
    for number in range(wanted):
        env = trial_env(number, pinned)
        perturbed = dataclasses.replace(trial, env={**trial.env, **env})
        which = f"trial replay {number + 1} of {wanted} ({describe_trial(env, pinned)})"
        if number == DATE_TRIAL and _on_another_day(
            name, which, perturbed, goldens, done, said, first
        ):
            continue
        _trial(name, which, perturbed, goldens, done, first)
    if notes is None:
        for line in said:
            print(line, file=sys.stderr)
    return wanted


def _trial(
    name: str,
    which: str,
    perturbed: Scenario,
    goldens: Mapping[str, bytes],
    done: str,
    first: RunResult | None = None,
) -> None:
    """One trial replay of ``perturbed``: it replays and gives ``goldens``, else raises."""
    try:
        replayed = replay_verified(perturbed)
    except HarnessError as exc:
        raise RecordError(
            f"{name}: {done}, but {which} failed, so nothing was written:\n{exc}\n"
            "The recording replays in one environment and not in another: the agent's "
            "requests depend on the date, time zone, user or host (mask it in what it sends, "
            "or set it in [env])"
        ) from exc
    other = render_goldens(replayed)
    if other != dict(goldens):
        runs = (first, replayed) if first is not None else None
        _differs(name, which, goldens, other, perturbed, done=done, runs=runs)


def _on_day(scenario: Scenario, when: str) -> Scenario:
    """``scenario`` with its agent started afresh under libfaketime from ``when`` (a forked
    agent keeps the fork server's clock)."""
    env = faketime_env(when, preload=scenario.env.get("LD_PRELOAD"))
    return dataclasses.replace(
        scenario,
        env={**scenario.env, **env},
        fork_server=dataclasses.replace(scenario.fork_server, enabled=False),
    )


def _on_another_day(
    name: str,
    which: str,
    perturbed: Scenario,
    goldens: Mapping[str, bytes],
    done: str,
    notes: list[str],
    first: RunResult | None = None,
) -> bool:
    """The date trial: ``perturbed`` on ``trial_day()``. True when it ran (and passed);
    False, with a line in ``notes``, when it cannot move the date — then the caller runs it
    on today's. A failure on the other day is the agent's only when the same trial under
    libfaketime on today's date passes; else the agent does not run under libfaketime."""
    day = trial_day()
    try:
        moved = _on_day(perturbed, day)
    except FaketimeError as error:
        notes.append(f"{name}: {which} ran on today's date, not another day: {error}")
        return False
    try:
        _trial(name, f"{which[:-1]}, on {day} under libfaketime)", moved, goldens, done, first)
    except RecordError as failure:
        try:
            _trial(name, which, _on_day(perturbed, _now_in(perturbed)), goldens, done, first)
        except RecordError:
            line = str(failure).splitlines()[1] if "\n" in str(failure) else str(failure)
            notes.append(
                f"{name}: its agent does not run under libfaketime (it fails under it on "
                f"today's date as on {day}: {line[:200]}), so {which} ran on today's date "
                "and no trial moved the date"
            )
            return False
        raise
    return True


def _now_in(scenario: Scenario) -> str:
    """The real moment on the agent's clock (libfaketime reads a start in the agent's
    zone): libfaketime started there changes nothing but that it is loaded."""
    return _now_in_zone(scenario.env.get("TZ"))


def _now_in_zone(zone: str | None) -> str:
    zone = zone or "UTC"
    try:
        where: tzinfo = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        where = UTC
    return f"{datetime.now(where):%Y-%m-%d %H:%M:%S}"


def proxy_trials() -> RecordTrials:
    """Record's trials for ``agentreel proxy record ... -- COMMAND`` (the proxy sits below
    the harness, so they are handed down): how many (``trials_wanted``: ``--trials``,
    ``AGENTREEL_RECORD_TRIALS``, 3) and each one's perturbation, the date trial's under
    libfaketime (started afresh: the command is a process the proxy starts)."""

    def wanted(given: int | None) -> int:
        return trials_wanted(RecordConfig(trials=given))

    def trial(number: int) -> Trial:
        env = trial_env(number)
        said = describe_trial(env)
        if number != DATE_TRIAL:
            return Trial(env, said)
        day = trial_day()
        preload = os.environ.get("LD_PRELOAD")
        try:
            moved = {**env, **faketime_env(day, preload=preload)}
            today = {**env, **faketime_env(_now_in_zone(env.get("TZ")), preload=preload)}
        except FaketimeError as error:
            return Trial(env, said, note=f"trial replay {number + 1} ran on today's date: {error}")
        return Trial(moved, f"{said}, on {day} under libfaketime", today=today, plain=env)

    return RecordTrials(wanted, trial)


def _differs(
    name: str,
    which: str,
    goldens: Mapping[str, bytes],
    other: Mapping[str, bytes],
    scenario: Scenario,
    *,
    done: str,
    runs: tuple[RunResult, RunResult] | None = None,
) -> NoReturn:
    """Raise for goldens that differ: ``VolatileValuesError`` with the rules that make them
    equal — masks (and, for a value a proxied answer carries back from its request, a
    capture) when the difference is values; else, with the two ``runs``, an ``unordered``
    or ``merge`` rule when it is the order or chunking of some updates — else
    ``RecordError`` with the diff."""
    diffs = "\n".join(
        unified_diff(f"golden/{file}", goldens[file], other.get(file, b"")).rstrip()
        for file in goldens
        if goldens[file] != other.get(file)
    )
    proposals = propose_masks(goldens, other, scenario.golden_masks)
    head = f"{name}: {done}, but {which} gave other goldens, so nothing was written"
    if proposals and masked_goldens_equal(goldens, other, proposals):
        found: list[AnyProposal] = [*proposals]
        if scenario.model.proxied:
            tokens = [capture.token for capture in scenario.replay.captures]
            found += capture_proposals(goldens, proposals, tokens)
        raise VolatileValuesError(
            f"{head}:\n{diffs}\n{proposals_message(found)}", proposals=tuple(found)
        )
    rules = _order_rules(*runs) if runs is not None else []
    if rules:
        raise VolatileValuesError(
            f"{head}:\n{diffs}\n{proposals_message(rules)}", proposals=tuple(rules)
        )
    raise RecordError(
        f"{head}; the difference is not a value a mask covers, nor an order an "
        '[transcript] unordered / merge rule makes equal (docs/scenarios.md, "What record '
        f'checks"):\n{diffs}'
    )


def _order_rules(first: RunResult, other: RunResult) -> list[TranscriptRule]:
    """The smallest ``[transcript]`` rule that makes the two runs' goldens equal: one
    differing kind ``unordered`` (compared as a multiset per prompt turn), else all of them,
    else ``merge`` of the mergeable ones (one thing's updates chunked otherwise)."""
    ours, theirs = render_goldens(first), render_goldens(other)
    kinds = transcript_lines_kinds(ours.get(TRANSCRIPT_FILE, b""), theirs.get(TRANSCRIPT_FILE, b""))
    scenario = first.scenario
    counts = Counter(
        kind
        for line in ours.get(TRANSCRIPT_FILE, b"").decode("utf-8", "replace").splitlines()
        if (kind := transcript_line_kind(line)) is not None
    )
    for key, candidates in (
        ("unordered", kinds),
        ("merge", tuple(kind for kind in kinds if kind in MERGE_KEYS)),
    ):
        had: tuple[str, ...] = getattr(scenario, key)
        fresh = tuple(kind for kind in candidates if kind not in had)
        # The kind with the fewest lines first: the rule that loosens the least.
        singles = sorted(fresh, key=lambda kind: counts.get(kind, 0))
        tries = [(kind,) for kind in singles] + ([fresh] if len(fresh) > 1 else [])
        for new in tries:
            rule = TranscriptRule(key, (*had, *new), new)
            if _rendered(first, key, rule.kinds) == _rendered(other, key, rule.kinds):
                return [rule]
    return []


def _rendered(result: RunResult, key: str, kinds: tuple[str, ...]) -> dict[str, bytes]:
    if key == "unordered":
        changed = dataclasses.replace(result.scenario, unordered=kinds)
    else:
        changed = dataclasses.replace(result.scenario, merge=kinds)
    return render_goldens(dataclasses.replace(result, scenario=changed))


def accepting_masks(scenario: Scenario, config: RecordConfig, record: Callable[[Scenario], T]) -> T:
    """``record(scenario)``; with ``config.accept_masks``, masks the trials found are
    written into scenario.toml and the scenario recorded again (once: what still differs
    then fails as it says)."""
    try:
        return record(scenario)
    except VolatileValuesError as error:
        if not config.accept_masks:
            raise
        accept_masks(scenario.toml_path, error.proposals)
    return record(load_scenario(scenario.directory))


def compare_twice(scenario: Scenario, record: RecordConfig | None, first: RunResult) -> None:
    """``--twice``: record ``scenario`` again through the same upstream and require the same
    normalized session logs (lane by lane) and transcript as ``first``, the first record
    run; what differs in values is named with its masks, as the trials name them."""
    second = run_scenario(scenario, "record", record=record)
    ours, theirs = render_goldens(first), render_goldens(second)
    if ours != theirs:
        which = "a second recording through the same upstream (--twice)"
        runs = (first, second)
        _differs(scenario.name, which, ours, theirs, scenario, done="recorded", runs=runs)
