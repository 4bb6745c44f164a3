"""Trial replays of a fresh recording under perturbations, and accepting the masks they
find (issue 39). The checks and the mask finder are ``_record_proof``'s; this module runs
the replays, so it sits above the runner (which ``_record_proof`` must not import: the
record backends report their stub servers to it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import NoReturn, TypeVar

from agentreel.snapshot_harness._consumption import verify_consumption
from agentreel.snapshot_harness._diff import unified_diff
from agentreel.snapshot_harness._record_proof import (
    accept_masks,
    describe_trial,
    masked_goldens_equal,
    pinned_variables,
    proposals_message,
    propose_masks,
    trial_env,
    trials_wanted,
)
from agentreel.snapshot_harness._render import render_goldens
from agentreel.snapshot_harness._result import RunResult
from agentreel.snapshot_harness._runner import run_scenario
from agentreel.snapshot_harness._scenario import RecordConfig, Scenario
from agentreel.snapshot_harness._scenario_reader import load_scenario
from agentreel.snapshot_harness.exceptions import HarnessError, RecordError, VolatileValuesError

T = TypeVar("T")


def run_trials(
    name: str,
    trial: Scenario,
    goldens: Mapping[str, bytes],
    config: RecordConfig,
    *,
    done: str = "recorded",
) -> int:
    """Replay the recording in ``trial``'s directory ``trials_wanted(config)`` times, each
    under its own perturbation, and require the goldens of the first replay every time.
    Returns how many ran; raises ``RecordError`` (``VolatileValuesError`` with the masks
    found when the difference is values) naming the trial, its perturbation and the diff.
    ``done`` is what the caller did (``refresh`` proves the goldens it writes the same way)."""
    wanted = trials_wanted(config)
    pinned = pinned_variables(trial)
    for number in range(wanted):
        env = trial_env(number, pinned)
        perturbed = dataclasses.replace(trial, env={**trial.env, **env})
        which = f"trial replay {number + 1} of {wanted} ({describe_trial(env, pinned)})"
        try:
            replayed = run_scenario(perturbed, "replay")
            verify_consumption(perturbed, replayed)
        except HarnessError as exc:
            raise RecordError(
                f"{name}: {done}, but {which} failed, so nothing was written:\n{exc}\n"
                "The recording replays in one environment and not in another: the agent's "
                "requests depend on the time zone, user or host (mask it in what it sends, "
                "or set it in [env])"
            ) from exc
        other = render_goldens(replayed)
        if other != dict(goldens):
            _differs(name, which, goldens, other, trial, done=done)
    return wanted


def _differs(
    name: str,
    which: str,
    goldens: Mapping[str, bytes],
    other: Mapping[str, bytes],
    scenario: Scenario,
    *,
    done: str,
) -> NoReturn:
    """Raise for goldens that differ: ``VolatileValuesError`` with the masks that make them
    equal when the difference is values, else ``RecordError`` with the diff."""
    diffs = "\n".join(
        unified_diff(f"golden/{file}", goldens[file], other.get(file, b"")).rstrip()
        for file in goldens
        if goldens[file] != other.get(file)
    )
    proposals = propose_masks(goldens, other, scenario.golden_masks)
    head = f"{name}: {done}, but {which} gave other goldens, so nothing was written"
    if proposals and masked_goldens_equal(goldens, other, proposals):
        raise VolatileValuesError(
            f"{head}:\n{diffs}\n{proposals_message(proposals)}", proposals=tuple(proposals)
        )
    raise RecordError(
        f"{head}; the difference is not a value a mask covers (an order? see "
        '[transcript] unordered / merge in docs/scenarios.md, "What record checks"):'
        f"\n{diffs}"
    )


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
        _differs(scenario.name, which, ours, theirs, scenario, done="recorded")
