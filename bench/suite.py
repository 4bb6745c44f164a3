"""5. Suite: wall time of the replay suite over ``fixtures/``, serial and with two workers.

``nox -s replay`` runs ``agentreel replay --fixtures fixtures`` (the CLI replays one
scenario after another; it takes no ``-n``), so the suite is timed three ways, each a
fresh process from the command line:

- ``agentreel replay --fixtures fixtures`` (what the nox session runs, minus nox's own
  venv check);
- ``pytest fixtures -n 1`` and ``pytest fixtures -n 2`` (the pytest plugin under xdist).

Only scenarios that replay cleanly right now are timed (the others are listed); if none
does, the benchmark's own recorded scenarios are used.
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


def run(settings: Settings) -> BenchResult:
    result = BenchResult("suite", "5. Replay suite wall time")
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
