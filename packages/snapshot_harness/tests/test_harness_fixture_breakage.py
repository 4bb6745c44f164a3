"""A broken recording fails a proxied scenario exactly as it fails an in-process one.

The breakage real users and crashes cause — child files in the wrong order, a spawn index
changed by hand, a chunk after a call's finish, a log cut down to its header, a model name
edited — applied to a committed in-process scenario (``subagent-multi``: the replay
provider runs inside the agent and writes what it met to its report) and to a committed
proxied one (``subagent-process``: the proxy in the harness's own process opens the
recordings). Both have a main session and two children. Each breakage must end both as
the same named failure — the same exception, the same replay error named first — and
``agentreel replay`` must print it with no traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentreel.snapshot_harness import HarnessError, ScenarioFilesError, check_scenario

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
IN_PROCESS = "subagent-multi"
PROXIED = "subagent-process"


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, events: list[dict[str, Any]]) -> None:
    seq = 0
    for event in events:
        if event["type"] != "session":
            event["seq"] = seq
            seq += 1
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")


def _first_finish(events: list[dict[str, Any]]) -> int:
    return next(
        i
        for i, e in enumerate(events)
        if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == "finish"
    )


def children_swapped(scenario: Path) -> None:
    first, second = scenario / "session.1.jsonl", scenario / "session.2.jsonl"
    text = first.read_text(encoding="utf-8")
    first.write_text(second.read_text(encoding="utf-8"), encoding="utf-8")
    second.write_text(text, encoding="utf-8")


def spawn_index_changed(scenario: Path) -> None:
    events = _events(scenario / "session.1.jsonl")
    events[0]["spawn_index"] = 7
    _write(scenario / "session.1.jsonl", events)


def chunk_after_finish(scenario: Path) -> None:
    events = _events(scenario / "session.jsonl")
    finish = _first_finish(events)
    late = json.loads(json.dumps(events[finish]))
    late["data"]["chunk"] = {"type": "text-delta", "index": 0, "text": "late"}
    events.insert(finish + 1, late)
    _write(scenario / "session.jsonl", events)


def finish_removed(scenario: Path) -> None:
    events = _events(scenario / "session.jsonl")
    del events[_first_finish(events)]
    _write(scenario / "session.jsonl", events)


def header_only(scenario: Path) -> None:
    path = scenario / "session.jsonl"
    path.write_text(path.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")


def model_edited(scenario: Path) -> None:
    events = _events(scenario / "session.jsonl")
    header = next(e for e in events if e["type"] == "request/header")
    header["data"]["model"] = "an-edited-model"
    _write(scenario / "session.jsonl", events)


BREAKAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    # breakage: (how, the replay error both must name first)
    "children swapped": (children_swapped, "FixtureError"),
    "spawn index changed": (spawn_index_changed, "FixtureError"),
    "chunk after finish": (chunk_after_finish, "IncompleteCallError"),
    "finish removed": (finish_removed, "IncompleteCallError"),
    # Named by the harness before any replay binds: the file, cut short (not "unrecorded").
    "header only": (header_only, "session.jsonl: the recording holds only its header line"),
    "model edited": (model_edited, "RequestDriftError"),
}


def scenario_dir(root: Path, name: str) -> Path:
    return root / "fixtures" / name


def broken_copy(name: str, breakage: str, root: Path) -> Path:
    copy = scenario_dir(root, name)
    shutil.copytree(FIXTURES / name, copy)
    BREAKAGES[breakage][0](copy)
    return copy


def failure(scenario: Path) -> HarnessError:
    with pytest.raises(HarnessError) as caught:
        check_scenario(scenario, "replay")
    return caught.value


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_a_broken_recording_fails_proxied_as_in_process(breakage: str, tmp_path: Path) -> None:
    expected = BREAKAGES[breakage][1]
    outcomes = {}
    for name in (IN_PROCESS, PROXIED):
        error = failure(broken_copy(name, breakage, tmp_path / name))
        first_line = str(error).splitlines()[0]
        if breakage == "header only":
            assert isinstance(error, ScenarioFilesError), first_line
            assert first_line.startswith(f"{scenario_dir(tmp_path / name, name)}/{expected}")
            outcomes[name] = (type(error).__name__, expected)
            continue
        outcomes[name] = (type(error).__name__, first_line.split(": ", 2)[1])
        assert first_line.startswith(f"{name}: {expected}: "), first_line
    failed_as = "ScenarioFilesError" if breakage == "header only" else "ReplayConsumptionError"
    assert outcomes[IN_PROCESS] == outcomes[PROXIED] == (failed_as, expected)


def test_agentreel_replay_names_a_proxied_fixture_error_without_a_traceback(
    tmp_path: Path,
) -> None:
    broken_copy(PROXIED, "chunk after finish", tmp_path)
    command = [sys.executable, "-m", "agentreel.snapshot_harness", "replay"]
    run = subprocess.run(
        [*command, "--fixtures", str(tmp_path / "fixtures")],
        capture_output=True,
        text=True,
        env={**os.environ, "AGENTREEL_RERECORD_COMMAND": "nox -s record -- {scenario}"},
        timeout=300,
        check=False,
    )
    assert run.returncode == 1
    report = run.stdout.split(f"=== {PROXIED} ===\n", 1)[1]
    assert report.startswith(f"{PROXIED}: IncompleteCallError: "), report
    assert f"nox -s record -- {PROXIED}" in report
    assert "Traceback" not in run.stdout + run.stderr
    assert "unexpected" not in run.stdout
    assert "0 passed, 1 failed" in run.stdout
