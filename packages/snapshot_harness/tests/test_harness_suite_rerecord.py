"""The committed scenarios can never silently drift from their stub rules.

Each stub-recorded scenario in ``fixtures/`` is recorded again through the stub model
server (the same ``record`` path as ``nox -s record -- <scenario>``, trial replay included)
into a temporary copy of its inputs, and the result must equal the committed recordings
and goldens after normalization. A rule, workspace or scenario.toml edited without
re-recording fails here, and so does an agent change that alters what it sends or prints.
Recording one must guess nothing (the end-of-record guess report is empty).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from agentreel.session import Normalizer, load_session_log
from agentreel.snapshot_harness import (
    GOLDEN_DIR,
    check_scenario,
    discover_scenarios,
    load_scenario,
    unified_diff,
)

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
EXAMPLES = FIXTURES.parent / "examples"
# Scenarios recorded through the stub; one recorded against a real model (its [record]
# names that provider) cannot be reproduced without a key and is not re-recorded here.
SCENARIOS = [
    directory.name
    for directory in discover_scenarios(FIXTURES)
    if load_scenario(directory).record.provider == "stub"
]
# What record reads: everything but the outputs (recordings and goldens).
INPUTS = ("scenario.toml", "README.md", "replay.override.json", "workspace")
# A stub fault's error message names the stub server's URL, whose port is per run.
STUB_URL = re.compile(rb"http://127\.0\.0\.1:[0-9]+")


def test_every_committed_scenario_is_checked() -> None:
    expected = {
        "plain-turn",
        "tool-call",
        "multi-turn",
        "cancel",
        "error-finish",
        "subagent-spawn",
        "subagent-multi",
        "subagent-fork",
        "subagent-mixed",
        "subagent-parallel",
        "mcp-tools",
    }
    assert expected <= set(SCENARIOS)


def copy_inputs(source: Path, target: Path) -> None:
    target.mkdir(parents=True)
    scenario = load_scenario(source)
    names = list(INPUTS)
    if scenario.record.rules is not None:
        names.append(scenario.record.rules.name)
    names += sorted(scenario.own_files())  # an agent file beside it (./script.py)
    for name in names:
        path = source / name
        if path.is_dir():
            shutil.copytree(path, target / name, symlinks=True)
        elif path.is_file():
            shutil.copy2(path, target / name)


def outputs(directory: Path) -> list[str]:
    """Recordings and goldens, relative to the scenario directory."""
    found = [p.name for p in directory.glob("session*.jsonl")]
    found += [f"{GOLDEN_DIR}/{p.name}" for p in (directory / GOLDEN_DIR).glob("*.jsonl")]
    found += [f"mcp/{p.name}" for p in (directory / "mcp").glob("*.jsonl")]
    return sorted(found)


def normalized_recordings(directory: Path) -> dict[str, bytes]:
    """Recordings with ids, times and the stub URL tokenized (they keep raw ones on disk)."""
    paths = sorted(directory.glob("session*.jsonl"))
    logs = [load_session_log(path) for path in paths]
    normalizer = Normalizer.for_logs(None, logs)
    return {
        log.path.name: STUB_URL.sub(b"{{stub}}", normalizer.session_log(log).encode())
        for log in logs
    }


@pytest.mark.parametrize("name", SCENARIOS)
def test_rerecording_through_the_stub_reproduces_the_committed_fixture(
    name: str, tmp_path: Path
) -> None:
    committed = FIXTURES / name
    # The copy keeps the repository's layout (fixtures/<name> beside examples/), so an agent
    # path relative to the scenario (../../examples/...) resolves as it does in the repo.
    fresh = tmp_path / FIXTURES.name / name
    (tmp_path / EXAMPLES.name).symlink_to(EXAMPLES, target_is_directory=True)
    copy_inputs(committed, fresh)
    outcome = check_scenario(fresh, "record")
    # The end-of-record guess report (SPEC 17): every committed scenario's lineage is
    # found from what its conversations say, nothing numbered by arrival.
    assert outcome.warnings == [], "\n".join(outcome.warnings)

    assert outputs(fresh) == outputs(committed), (
        f"re-recording {name} wrote other files than are committed; "
        f"run `nox -s record -- {name}` and commit the result"
    )
    diffs: list[str] = []
    expected = normalized_recordings(committed)
    actual = normalized_recordings(fresh)
    for recording in sorted(expected):
        if expected[recording] != actual[recording]:
            diffs.append(unified_diff(recording, expected[recording], actual[recording]))
    for path in sorted((committed / "mcp").glob("*.jsonl")):  # MCP exchanges: byte for byte
        again = (fresh / "mcp" / path.name).read_bytes()
        if path.read_bytes() != again:
            diffs.append(unified_diff(f"mcp/{path.name}", path.read_bytes(), again))
    for path in sorted((committed / GOLDEN_DIR).glob("*.jsonl")):
        golden = path.read_bytes()
        again = (fresh / GOLDEN_DIR / path.name).read_bytes()
        if golden != again:
            diffs.append(unified_diff(f"{GOLDEN_DIR}/{path.name}", golden, again))
    assert not diffs, (
        f"{name}: re-recording through its stub rules no longer reproduces the committed "
        f"fixture (a rule, the workspace or the agent changed). If intended, re-record: "
        f"nox -s record -- {name}\n" + "\n".join(diffs)
    )
