"""``agentreel check-secrets [PATH...]``: the secret scan over committed fixtures.

A recording made with an older release (before a key shape was known) or by hand is
caught before it is pushed: every file under each PATH (default: the fixtures directory)
is scanned by the one scan (``agentreel.session.SecretScan``: auth headers and known key
shapes), less the ``[record] allow_secrets`` of the scenario the file belongs to. Each
hit is named (file, line, event, rule, the value's sha256) — never the value. Exit status
0 when nothing was found, 1 when something was, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from agentreel.session import SecretScan
from agentreel.snapshot_harness._cli import (
    add_targets,
    command_parser,
    fixtures_directory,
)
from agentreel.snapshot_harness._scenario import SCENARIO_FILE
from agentreel.snapshot_harness._scenario_reader import load_scenario
from agentreel.snapshot_harness.exceptions import HarnessError

SUMMARY = "scan committed fixtures for credentials (auth headers, known key shapes)"
EXAMPLE = """example:
  agentreel check-secrets                       # every file under ./fixtures
  agentreel check-secrets fixtures interop/fixtures tests/recordings
"""


def _parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "agentreel check-secrets",
        "Scan committed fixtures (recordings, goldens, workspaces) for credentials: auth "
        "headers and known key shapes (OpenAI, Anthropic, AWS, GitHub, GitLab, Slack, Stripe, "
        "private-key blocks, ...). A deliberate fake key is allowed by its sha256 in its "
        "scenario's [record] allow_secrets.",
        EXAMPLE,
    )
    add_targets(
        parser,
        "files or directories to scan (default: the fixtures directory)",
        name="paths",
        metavar="PATH",
    )
    return parser


def main(argv: Sequence[str], out: TextIO) -> int:
    args = _parser().parse_args(list(argv))
    paths = [Path(p) for p in args.paths] or [fixtures_directory(args.fixtures)]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(
            f"agentreel check-secrets: no such file or directory: {', '.join(missing)}",
            file=sys.stderr,
        )
        return 2
    scans: dict[Path | None, SecretScan] = {}
    hits: list[str] = []
    files = 0
    try:
        for path in paths:
            for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
                if not file.is_file():
                    continue
                files += 1
                scenario = _scenario_of(file)
                scan = scans.get(scenario)
                if scan is None:
                    allow = (
                        load_scenario(scenario).record.settings.allow_secrets if scenario else ()
                    )
                    scan = scans[scenario] = SecretScan(allow=allow)
                hits += [hit.describe() for hit in scan.scan(str(file), file.read_bytes())]
    except (HarnessError, OSError) as error:
        print(f"agentreel check-secrets: {error}", file=sys.stderr)
        return 2
    for hit in hits:
        print(hit, file=out)
    if hits:
        print(
            f"\n{len(hits)} credential(s) found in {files} file(s) (values not shown). Remove "
            "each from the recording and record the scenario again (agentreel record "
            "SCENARIO); a deliberate fake key of a test is allowed by its sha256 (shown "
            "above) in its scenario's [record] allow_secrets",
            file=out,
        )
        return 1
    print(f"no credentials in {files} file(s)", file=out)
    return 0


def _scenario_of(file: Path) -> Path | None:
    """The scenario directory ``file`` belongs to (the nearest with a scenario.toml)."""
    for directory in file.resolve().parents:
        if (directory / SCENARIO_FILE).is_file():
            return directory
    return None
