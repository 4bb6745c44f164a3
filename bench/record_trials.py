"""Record with trial replays vs without (issue 39): what proving a recording costs.

Every scenario of ``fixtures/`` recorded again through its stub (a temp copy of the
folder, ``examples/`` beside it as the agent commands expect), once with ``--trials 0`` and
once with the default 3 trial replays, each a fresh ``agentreel record`` process from the
command line; wall time and the ratio. Quick mode records the two subagent scenarios only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from agentreel.session import DEFAULT_TRIALS, TRIALS_ENV
from agentreel.snapshot_harness import discover_scenarios
from bench._common import FIXTURES, ROOT, BenchResult, Settings, timed

_QUICK = ("subagent-multi", "subagent-spawn")


def _agentreel() -> list[str]:
    script = Path(sys.executable).parent / "agentreel"
    return (
        [str(script)] if script.exists() else [sys.executable, "-m", "agentreel.snapshot_harness"]
    )


def _record(fixtures: Path, names: list[str], trials: int) -> None:
    env = {k: v for k, v in os.environ.items() if k != TRIALS_ENV}
    command = [*_agentreel(), "record", "--fixtures", str(fixtures), "--trials", str(trials)]
    completed = subprocess.run(
        [*command, *names], cwd=ROOT, capture_output=True, env=env, check=False
    )
    if completed.returncode != 0:
        tail = completed.stdout.decode(errors="replace")[-3000:]
        raise RuntimeError(f"{' '.join(command)} failed ({completed.returncode}):\n{tail}")


def run(settings: Settings) -> BenchResult:
    result = BenchResult("record", "Record with trial replays vs without (issue 39)")
    names = [d.name for d in discover_scenarios(FIXTURES)]
    if settings.quick:
        names = [name for name in names if name in _QUICK]
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-record-") as tmp_text:
        root = Path(tmp_text)
        fixtures = root / "fixtures"
        shutil.copytree(FIXTURES, fixtures)
        (root / "examples").symlink_to(ROOT / "examples")
        _record(fixtures, names, 0)  # warm-up: bytecode caches, the fork server's imports
        without = timed(lambda: _record(fixtures, names, 0))
        with_trials = timed(lambda: _record(fixtures, names, DEFAULT_TRIALS))
    result.figure(f"record {len(names)} scenarios, --trials 0", without, "s")
    result.figure(f"record {len(names)} scenarios, {DEFAULT_TRIALS} trials", with_trials, "s")
    result.figure(f"{DEFAULT_TRIALS} trials / none", with_trials / without, "x")
    result.notes.append(f"recorded: {', '.join(names)}")
    return result
