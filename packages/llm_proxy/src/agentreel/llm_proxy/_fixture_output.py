"""A record run's output as a fixture: the harvested session logs in session order and
the files a recording keeps beside them (``wire.ndjson``, ``models.json``), scanned for
secrets before anything is written (SPEC 5, 10, 11)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from agentreel.llm_proxy._verbatim import recorded_verbatim
from agentreel.session import (
    MODELS_FILE,
    VERBATIM_FILE,
    SecretScan,
    harvest_session_logs,
    recording_names,
    session_file_name,
    tokenize_cwd,
)


def write_fixture(
    sessions_root: Path, fixture: Path, cwd: str, *, scan: SecretScan | None = None
) -> list[Path]:
    """The harvested logs as a fixture directory (``session.jsonl``, ``session.<n>.jsonl``
    in session order, the cwd as ``{{cwd}}``); earlier ``session*.jsonl`` files go first.

    Everything is scanned first (``scan``: the run's; by default known key shapes and auth
    headers): a hit raises ``SecretFoundError`` naming file, line, event and rule, and
    nothing is written — not even the removal of the earlier files."""
    logs = harvest_session_logs(sessions_root)
    files = {
        str(fixture / session_file_name(number)): tokenize_cwd(log.path.read_bytes(), Path(cwd))
        for number, log in enumerate(logs)
    }
    (scan if scan is not None else SecretScan()).check(files)
    fixture.mkdir(parents=True, exist_ok=True)
    for stale in recording_names(fixture):
        (fixture / stale).unlink()
    written: list[Path] = []
    for name, data in files.items():
        target = Path(name)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
        written.append(target)
    return written


def recorded_files(sessions_root: Path, cwd: str) -> dict[str, bytes]:
    """What a record run kept beside its session logs in ``sessions_root`` that a fixture
    holds too, file name → bytes: ``wire.ndjson`` (the answers as sent, the cwd as
    ``{{cwd}}``) and ``models.json``, each only if the run kept one. For a writer of
    fixtures other than the proxy's own ``--fixture`` (the snapshot harness); scan the
    bytes before writing them, as ``write_fixture`` does the logs."""
    files: dict[str, bytes] = {}
    answers = recorded_verbatim(sessions_root, cwd)
    if answers:
        files[VERBATIM_FILE] = answers
    listings = sessions_root / MODELS_FILE
    if listings.is_file():
        files[MODELS_FILE] = listings.read_bytes()
    return files


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
