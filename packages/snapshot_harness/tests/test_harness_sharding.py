"""Splitting a scenario suite across CI machines with pytest-split (no home-made scheduler).

Driven through pytester as a CI matrix runs it (in process; the xdist shard in a process of
its own): the durations stored once, then ``--splits 2 --group 1`` and ``--group 2`` (one
of them under xdist). Together the two
shards must run every scenario exactly once. The committed durations file must name
exactly the committed scenarios, so a new scenario cannot silently fall back to guesses.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from agentreel.snapshot_harness import check_scenario, discover_scenarios

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

MakeScenario = Callable[..., Path]
QUIET = ("-p", "no:cacheprovider", "-p", "no:asyncio")
NAMES = ("alpha", "beta", "gamma", "delta", "epsilon")
REPO = Path(__file__).resolve().parents[3]
COMMITTED_DURATIONS = REPO / "fixtures" / ".test_durations"
# The -rA summary line, the same with and without xdist.
PASSED = re.compile(r"^PASSED \S*scenario\.toml::(\S+)$", re.MULTILINE)


@pytest.fixture
def agent_start() -> str:
    return "fork"  # five scenarios, three runs of them: the agent's imports paid once each


def ran(result: pytest.RunResult) -> list[str]:
    return PASSED.findall(result.stdout.str())


def test_two_shards_run_every_scenario_exactly_once(
    pytester: pytest.Pytester, make_scenario: MakeScenario
) -> None:
    first = make_scenario(NAMES[0])
    check_scenario(first, "record")
    for name in NAMES[1:]:
        shutil.copytree(first, first.parent / name)
    fixtures = str(first.parent)
    durations = pytester.path / "fixtures.durations"

    stored = pytester.runpytest_inprocess(
        *QUIET, fixtures, "--store-durations", f"--durations-path={durations}"
    )
    stored.assert_outcomes(passed=len(NAMES))
    assert {node.rsplit("::", 1)[1] for node in json.loads(durations.read_text())} == set(NAMES)

    # Shard 1 in this process, shard 2 as a CI job runs it under xdist: a process of its own.
    shards = [
        (pytester.runpytest_subprocess if "-n" in extra else pytester.runpytest_inprocess)(
            *QUIET,
            fixtures,
            "--splits=2",
            f"--group={group}",
            f"--durations-path={durations}",
            *extra,
        )
        for group, extra in ((1, ("-rA",)), (2, ("-rA", "-n", "2")))
    ]
    one, two = (ran(shard) for shard in shards)
    assert one, "shard 1 ran nothing"
    assert two, "shard 2 ran nothing"
    assert sorted(one + two) == sorted(NAMES)  # every scenario, none twice
    for shard, names in zip(shards, (one, two), strict=True):
        shard.assert_outcomes(passed=len(names))


def test_the_committed_durations_file_names_exactly_the_committed_scenarios() -> None:
    recorded = json.loads(COMMITTED_DURATIONS.read_text())
    expected = {
        f"fixtures/{directory.name}/scenario.toml::{directory.name}"
        for directory in discover_scenarios(REPO / "fixtures")
    }
    assert set(recorded) == expected, (
        "fixtures/.test_durations is stale; regenerate it: pytest fixtures -p no:xdist "
        "--store-durations --durations-path fixtures/.test_durations"
    )
    assert all(seconds > 0 for seconds in recorded.values())
