"""5. Suite: wall time of the replay suite over ``fixtures/``, serial and with two workers.

``nox -s replay`` runs ``agentreel replay --fixtures fixtures`` (the CLI replays one
scenario after another; it takes no ``-n``), so the suite is timed three ways, each a
fresh process from the command line:

- ``agentreel replay --fixtures fixtures`` (what the nox session runs, minus nox's own
  venv check);
- ``pytest fixtures -n 1`` and ``pytest fixtures -n 2`` (the pytest plugin under xdist).

If ``fixtures/`` holds no scenario yet, the benchmark's own recorded scenarios are used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

from agentreel.snapshot_harness import discover_scenarios
from bench._common import FIXTURES, ROOT, BenchResult, Settings, timed
from bench._scenarios import scenario_pair


def _agentreel() -> list[str]:
    script = Path(sys.executable).parent / "agentreel"
    return (
        [str(script)] if script.exists() else [sys.executable, "-m", "agentreel.snapshot_harness"]
    )


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


def run(settings: Settings) -> BenchResult:
    result = BenchResult("suite", "5. Replay suite wall time")
    repeats = settings.scaled(3, 1)
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-suite-") as tmp_text:
        fixtures = FIXTURES
        if not discover_scenarios(fixtures):
            fixtures = Path(tmp_text) / "fixtures"
            multi, plain, _ = scenario_pair(Path(tmp_text) / "recorded")
            for source in (multi, plain):
                shutil.copytree(source, fixtures / source.name)
        count = len(discover_scenarios(fixtures))
        commands = {
            "agentreel replay (nox -s replay's command)": [
                *_agentreel(),
                "replay",
                "--fixtures",
                str(fixtures),
            ],
            "pytest -n 1": [sys.executable, "-m", "pytest", "-q", "-n", "1", str(fixtures)],
            "pytest -n 2": [sys.executable, "-m", "pytest", "-q", "-n", "2", str(fixtures)],
        }
        _run(commands["pytest -n 1"])  # warm-up
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(repeats):
            for name, command in commands.items():
                samples[name].append(timed(partial(_run, command)))
    medians = {name: result.median(name, values) for name, values in samples.items()}
    for name, value in medians.items():
        result.figure(f"{name}, {count} scenarios", value, "s")
    result.figure("speed-up -n 2 over -n 1", medians["pytest -n 1"] / medians["pytest -n 2"], "x")
    result.notes.append(
        f"fixtures: {fixtures if fixtures == FIXTURES else 'bench-recorded scenarios'} "
        f"({count} scenarios); 2 CPU cores shared with other work"
    )
    return result
