"""5. Suite: wall time of the replay suite over ``fixtures/``, serial and with two workers.

``nox -s replay`` runs ``agentreel replay --fixtures fixtures`` (the CLI replays one
scenario after another; it takes no ``-n``), so the suite is timed three ways, each a
fresh process from the command line:

- ``agentreel replay --fixtures fixtures`` (what the nox session runs, minus nox's own
  venv check);
- ``pytest fixtures -n 1`` and ``pytest fixtures -n 2`` (the pytest plugin under xdist).

Only scenarios that replay cleanly right now are timed (the others are listed); if none
does, the benchmark's own recorded scenarios are used.

And the test suite (``nox -s tests``, the README's second command): its wall time and test
count as the last complete run left them (``tools.suite_report``; the suite takes minutes,
so the bench reads it rather than running it), against a floor measured here — one pytest
process running one empty test in the same venv — so growth per test shows in every table.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

from agentreel.snapshot_harness import HarnessError, check_scenario, discover_scenarios
from bench._common import FIXTURES, ROOT, BenchResult, Settings, timed
from bench._scenarios import scenario_pair
from tools import suite_report

# The README's test command must stay within this on two cores (issue 36).
SUITE_WALL_LIMIT_S = 8 * 60


def _agentreel() -> list[str]:
    script = Path(sys.executable).parent / "agentreel"
    return (
        [str(script)] if script.exists() else [sys.executable, "-m", "agentreel.snapshot_harness"]
    )


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(command: list[str]) -> None:
    completed = subprocess.run(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        check=False,
    )
    if completed.returncode != 0:
        tail = completed.stdout.decode(errors="replace")[-3000:]
        raise RuntimeError(f"{' '.join(command)} failed ({completed.returncode}):\n{tail}")


def _replaying(fixtures: Path) -> tuple[list[Path], list[str]]:
    """The scenarios under ``fixtures`` that replay cleanly now, and why others do not
    (scenarios still being recorded must not turn the timing into a failure)."""
    passing: list[Path] = []
    skipped: list[str] = []
    for directory in discover_scenarios(fixtures):
        try:
            check_scenario(directory, "replay")
        except HarnessError as exc:
            skipped.append(f"{directory.name} ({type(exc).__name__})")
            continue
        passing.append(directory)
    return passing, skipped


def _test_suite_rows(result: BenchResult, settings: Settings) -> None:
    """The last complete ``nox -s tests``: wall time, per test, and per test over a floor."""
    summary = suite_report.read_summary()
    if summary is None:
        result.notes.append(
            "test suite: no complete nox -s tests run to read "
            f"({suite_report.SUMMARY.relative_to(ROOT)}); run nox -s tests, then this bench"
        )
        return
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-floor-") as tmp_text:
        empty = Path(tmp_text) / "test_floor.py"
        empty.write_text("def test_nothing():\n    pass\n")
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(empty)]
        # As nox -s tests runs its pytest processes: bytecode caching on.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        floor_run = partial(subprocess.run, command, env=env, capture_output=True, check=True)
        floor_run()  # warm-up: writes the bytecode caches
        floor = result.median(
            "pytest floor", [timed(floor_run) for _ in range(settings.scaled(5, 2))]
        )
    wall, tests = float(summary["wall_seconds"]), int(summary["tests"])
    result.figure(f"nox -s tests wall time ({summary['finished']})", wall, "s")
    result.figure("nox -s tests tests", tests, "")
    result.figure("nox -s tests wall time per test", 1000 * wall / tests, "ms")
    result.figure("floor: one pytest process, one empty test", floor, "s")
    result.figure("test suite wall per test / floor", wall / tests / floor, "x")
    result.target("nox -s tests wall time / 8 min", wall / SUITE_WALL_LIMIT_S, 1.0)
    runs = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in summary["runs"].items())
    result.notes.append(f"nox -s tests runs: {runs}")


def run(settings: Settings) -> BenchResult:
    result = BenchResult("suite", "5. Replay suite and test suite wall time")
    _test_suite_rows(result, settings)
    repeats = settings.scaled(3, 1)
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-suite-") as tmp_text:
        scenarios, skipped = _replaying(FIXTURES)
        source = "fixtures/"
        if not scenarios:
            multi, plain, _ = scenario_pair(Path(tmp_text) / "recorded")
            scenarios = [multi, plain]
            source = "bench-recorded scenarios (none in fixtures/ replays yet)"
        names = [directory.name for directory in scenarios]
        paths = [str(directory) for directory in scenarios]
        fixtures_root = scenarios[0].parent
        count = len(scenarios)
        commands = {
            "agentreel replay (nox -s replay's command)": [
                *_agentreel(),
                "replay",
                *names,
                "--fixtures",
                str(fixtures_root),
            ],
            "pytest -n 1": [sys.executable, "-m", "pytest", "-q", "-n", "1", *paths],
            "pytest -n 2": [sys.executable, "-m", "pytest", "-q", "-n", "2", *paths],
        }
        _run(commands["pytest -n 1"])  # warm-up
        samples: dict[str, list[float]] = {name: [] for name in commands}
        cpu_samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(repeats):
            for name, command in commands.items():
                cpu_before = _children_cpu()
                samples[name].append(timed(partial(_run, command)))
                cpu_samples[name].append(_children_cpu() - cpu_before)
    medians = {name: result.median(name, values) for name, values in samples.items()}
    for name, value in medians.items():
        result.figure(f"{name}, {count} scenarios", value, "s")
        cpu = result.median(f"{name} cpu", cpu_samples[name])
        result.figure(f"{name}: CPU, all processes", cpu, "s")
    result.figure("speed-up -n 2 over -n 1", medians["pytest -n 1"] / medians["pytest -n 2"], "x")
    result.notes.append(f"scenarios from {source}: {', '.join(names)}")
    if skipped:
        result.notes.append(f"left out, not replaying cleanly yet: {', '.join(skipped)}")
    result.notes.append(
        "wall time, and the CPU time of the command and every process it waited for "
        "(agents, xdist workers); 2 CPU cores, shared with other work"
    )
    return result
