"""Pending goldens: what a failing local replay produced, kept for ``agentreel review``.

A replay whose goldens differ writes each differing live golden beside the committed one as
``golden/<name>.pending`` (``pending_name``); an empty pending file says the live run did
not produce ``<name>`` at all, so accepting it deletes that golden (a replay treats a
missing golden and an empty live output alike). A passing replay removes the scenario's
pending files: they are stale. Under ``CI`` (any non-empty value, as CI runners set
``CI=true``) nothing is written or removed: CI reports, it never edits a checkout.

Only goldens ever become pending, so accepting rewrites goldens and never a recording:
recordings change only through ``record``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agentreel.snapshot_harness._layout import (
    GOLDEN_DIR,
    GOLDEN_FILE_PATTERN,
    PENDING_SUFFIX,
    golden_sort_key,
    is_pending_name,
    pending_name,
)

CI_ENV = "CI"


def pending_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """Whether pending goldens may be written: not under ``CI`` (any non-empty value)."""
    return not (os.environ if environ is None else environ).get(CI_ENV)


def review_hint(scenario_directory: Path) -> str:
    """How to review one scenario's pending goldens, in backticks: the CLI, and for the
    repository's own ``./fixtures`` also the nox session (where ``agentreel`` is installed).
    Any other fixtures directory is repeated as the user gave it (``--fixtures`` as typed,
    absolute or relative: scenario directories keep the spelling they were found by)."""
    fixtures = scenario_directory.parent
    name = scenario_directory.name
    if is_default_fixtures(fixtures):
        return f"`agentreel review {name}` (or `nox -s review -- {name}`)"
    return f"`agentreel review --fixtures {shlex.quote(str(fixtures))} {name}`"


def is_default_fixtures(fixtures: Path) -> bool:
    """Whether ``fixtures`` is ``./fixtures``, where ``agentreel`` looks without ``--fixtures``."""
    try:
        return fixtures.resolve() == (Path.cwd() / "fixtures").resolve()
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class PendingGolden:
    """One pending file: ``golden`` is the committed file it would replace."""

    scenario: str
    golden: Path
    pending: Path

    @property
    def name(self) -> str:
        """``golden/<name>``, as diffs and summaries show it."""
        return f"{GOLDEN_DIR}/{self.golden.name}"

    @property
    def removes_golden(self) -> bool:
        """An empty pending file: the live run did not produce this golden."""
        return self.pending.stat().st_size == 0


def list_pending(scenario_directory: Path) -> list[PendingGolden]:
    """The scenario's pending goldens in golden order (transcript first, then sessions)."""
    golden_dir = scenario_directory / GOLDEN_DIR
    if not golden_dir.is_dir():
        return []
    found: list[PendingGolden] = []
    for path in golden_dir.iterdir():
        name = path.name
        if not (is_pending_name(name) and path.is_file()):
            continue
        golden_name = name[: -len(PENDING_SUFFIX)]
        if not GOLDEN_FILE_PATTERN.fullmatch(golden_name):
            continue  # not ours to review: only golden files ever become pending
        found.append(PendingGolden(scenario_directory.name, golden_dir / golden_name, path))
    return sorted(found, key=lambda p: golden_sort_key(p.golden.name))


def write_pending(
    scenario_directory: Path, live: Mapping[str, bytes], differing: Iterable[str]
) -> list[PendingGolden]:
    """Write ``golden/<name>.pending`` for each differing golden, drop the other pending files.

    ``live`` maps golden names to the live run's bytes; a differing name it lacks gets an
    empty pending file (accepting it deletes the golden).
    """
    golden_dir = scenario_directory / GOLDEN_DIR
    golden_dir.mkdir(parents=True, exist_ok=True)
    wanted = {pending_name(name): live.get(name, b"") for name in differing}
    for stale in list_pending(scenario_directory):
        if stale.pending.name not in wanted:
            stale.pending.unlink(missing_ok=True)
    for name, data in wanted.items():
        _write_atomically(golden_dir / name, data)
    return list_pending(scenario_directory)


def clear_pending(scenario_directory: Path) -> list[PendingGolden]:
    """Remove every pending golden of the scenario; returns what was removed."""
    removed = list_pending(scenario_directory)
    for pending in removed:
        pending.pending.unlink(missing_ok=True)
    return removed


def accept(pending: PendingGolden) -> None:
    """The pending content becomes the golden (an empty one deletes it); the pending file goes."""
    if pending.removes_golden:
        pending.golden.unlink(missing_ok=True)
    else:
        _write_atomically(pending.golden, pending.pending.read_bytes())
    pending.pending.unlink()


def reject(pending: PendingGolden) -> None:
    """Drop the pending file; the committed golden stays as it is."""
    pending.pending.unlink()


def _write_atomically(target: Path, data: bytes) -> None:
    # A reader (a replay in another xdist worker, an editor) sees the old or the new file.
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    temporary.replace(target)
