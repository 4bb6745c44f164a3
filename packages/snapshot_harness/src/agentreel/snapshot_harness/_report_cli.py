"""``agentreel report [SCENARIO...] --html FILE [--fixtures DIR]``: replay, then one HTML page.

Each scenario is replayed exactly as ``agentreel replay`` does (pending goldens included);
the page shows each one's status, session tree, timeline, transcript and, for failures,
the diffs. Exit status 0 when every scenario passed, 1 when any failed (the page is
written either way), 2 on usage errors.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from agentreel.snapshot_harness._check import check_scenario
from agentreel.snapshot_harness._cli import (
    add_targets,
    chosen_scenarios,
    command_parser,
    fixtures_directory,
)
from agentreel.snapshot_harness._html_report import write_report
from agentreel.snapshot_harness._pending import pending_allowed
from agentreel.snapshot_harness._report_data import ScenarioResult, scenario_result
from agentreel.snapshot_harness.exceptions import HarnessError

SUMMARY = "replay scenarios and write one self-contained HTML page of the run"
_EXAMPLES = """\
examples:
  agentreel report --html report.html               # every scenario under ./fixtures
  agentreel report subagent-parallel --html report.html --fixtures path/to/fixtures
"""


def _parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "agentreel report",
        "Replay scenarios and write one self-contained HTML page: per scenario its status, "
        "session tree, model calls on a shared timeline, transcript and diffs.",
        _EXAMPLES,
    )
    add_targets(
        parser,
        "scenario names under the fixtures directory, or paths (default: every scenario)",
    )
    parser.add_argument("--html", required=True, metavar="FILE", help="the page to write")
    return parser


def main(argv: Sequence[str], out: TextIO) -> int:
    args = _parser().parse_intermixed_args(argv)
    fixtures = fixtures_directory(args.fixtures)
    directories = chosen_scenarios("agentreel report", fixtures, args.scenarios)
    if directories is None:
        return 2
    results: list[ScenarioResult] = []
    width = max(len(d.name) for d in directories)
    for directory in directories:
        begun = time.monotonic()
        error: HarnessError | None = None
        try:
            check_scenario(directory, "replay", pending=pending_allowed())
        except HarnessError as exc:
            error = exc
        result = scenario_result(directory, time.monotonic() - begun, error)
        results.append(result)
        status = "PASS" if result.status == "passed" else "FAIL"
        print(f"{status}  {directory.name:<{width}}  {result.duration:6.2f}s", file=out, flush=True)
    path = write_report(Path(args.html), results)
    failed = sum(1 for r in results if r.status == "failed")
    print(
        f"\nwrote {path}: {len(results) - failed} passed, {failed} failed (open it in a browser)",
        file=out,
    )
    return 1 if failed else 0
