"""What ``nox -s tests`` leaves behind for people and the bench: each run's JUnit report, and
one summary of the whole suite (wall time per run, test count, the slowest tests).

The noxfile writes it; ``nox -s bench -- --only suite`` reads it back, so the suite's wall
time per test is a row of every bench table and its growth shows in every note.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REPORTS_DIR = ROOT / ".nox" / "test-reports"
SUMMARY = REPORTS_DIR / "suite.json"
SLOWEST_SHOWN = 10
# The pytest plugin that times fixtures (tools/pytest_plugins/agentreel_fixture_times.py):
# its folder goes on PYTHONPATH of every run, and it writes one file per process here.
FIXTURE_PLUGIN_DIR = ROOT / "tools" / "pytest_plugins"
FIXTURE_PLUGIN = "agentreel_fixture_times"
_FIXTURE_TIMES = "fixtures-*.json"


@dataclass(frozen=True)
class CaseTime:
    seconds: float
    node: str  # as pytest names it: path/to/test_x.py::test_name[param]


def junit_report(run: str, reports_dir: Path = REPORTS_DIR) -> Path:
    """Where one run of the suite (a package's tests, or ``repository``) writes its report."""
    return reports_dir / f"{run}.xml"


def node_id(classname: str, name: str, root: Path = ROOT) -> str:
    """A JUnit test case as pytest's node id. With importlib mode the classname is dotted
    (``packages.llm.tests.test_x`` or ``...test_x.TestY``): the longest prefix that is a
    file under ``root`` is the file."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        candidate = Path(*parts[:end]).with_suffix(".py")
        if (root / candidate).is_file():
            return "::".join([candidate.as_posix(), *parts[end:], name])
    return f"{classname}::{name}"


def case_times(report: Path, root: Path = ROOT) -> list[CaseTime]:
    """Every test case of one JUnit report with its time (setup, call and teardown)."""
    return [
        CaseTime(
            float(case.get("time") or 0),
            node_id(case.get("classname", ""), case.get("name", ""), root),
        )
        for case in ET.parse(report).iter("testcase")
    ]


def fixture_plugin_args(reports_dir: Path = REPORTS_DIR) -> list[str]:
    """pytest arguments loading the fixture timer, writing into ``reports_dir``."""
    return ["-p", FIXTURE_PLUGIN, f"--fixture-times-dir={reports_dir}"]


def clear_fixture_times(reports_dir: Path = REPORTS_DIR) -> None:
    """Before a suite runs: only its own processes' fixture times are summed."""
    for path in reports_dir.glob(_FIXTURE_TIMES):
        path.unlink()


def costliest_fixtures(reports_dir: Path = REPORTS_DIR) -> list[tuple[str, float, int]]:
    """Every fixture's set-up time summed over all processes of the suite, costliest
    first: ``(fixture (scope), seconds, set-ups)``."""
    totals: dict[str, list[float]] = {}
    for path in reports_dir.glob(_FIXTURE_TIMES):
        for name, (seconds, count) in json.loads(path.read_text()).items():
            entry = totals.setdefault(name, [0.0, 0])
            entry[0] += seconds
            entry[1] += count
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])
    return [(name, seconds, int(count)) for name, (seconds, count) in ranked]


def summarize(
    runs: list[tuple[str, float]],
    wall: float,
    *,
    complete: bool,
    reports_dir: Path = REPORTS_DIR,
    root: Path = ROOT,
) -> tuple[list[str], dict[str, Any]]:
    """The lines printed at the end of ``nox -s tests`` and the summary written for the
    bench. ``runs``: each run's name and wall time, in the order they ran; ``complete``:
    the whole suite ran (no path or ``-k`` chose a part), so the bench may read it."""
    times: list[CaseTime] = []
    for run, _ in runs:
        report = junit_report(run, reports_dir)
        if report.is_file():
            times += case_times(report, root)
    times.sort(key=lambda t: -t.seconds)
    lines = [f"{run:<18} {seconds:7.1f} s" for run, seconds in runs]
    lines.append(f"{'total':<18} {wall:7.1f} s wall, {len(times)} tests")
    lines.append(f"{min(SLOWEST_SHOWN, len(times))} slowest tests:")
    lines += [f"  {t.seconds:6.1f} s  {t.node}" for t in times[:SLOWEST_SHOWN]]
    fixtures = costliest_fixtures(reports_dir)[:SLOWEST_SHOWN]
    if fixtures:
        lines.append(f"{len(fixtures)} costliest fixtures (set-up time summed over the suite):")
        lines += [f"  {sec:6.1f} s  {name}, {count} set-up(s)" for name, sec, count in fixtures]
    summary = {
        "wall_seconds": round(wall, 1),
        "tests": len(times),
        "runs": {run: round(seconds, 1) for run, seconds in runs},
        "complete": complete,
        "fixtures": {name: round(sec, 1) for name, sec, _ in fixtures},
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return lines, summary


def write_summary(summary: dict[str, Any], path: Path = SUMMARY) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2) + "\n")


def read_summary(path: Path = SUMMARY) -> dict[str, Any] | None:
    """The last complete run's summary, or None when there is none to read."""
    if not path.is_file():
        return None
    summary: dict[str, Any] = json.loads(path.read_text())
    return summary if summary.get("complete") else None
