"""Record refuses what replay would reject, with the real diagnosis; record and refresh
say which files they wrote."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from agentreel.snapshot_harness import RecordError, check_scenario
from agentreel.snapshot_harness._cli import main

MakeScenario = Callable[..., Path]
pytestmark = pytest.mark.slow


def test_an_agent_that_writes_no_session_log_is_refused_not_recorded(
    make_scenario: MakeScenario, tmp_path: Path
) -> None:
    # The agent answers the prompt but logs its sessions somewhere the harness never sees:
    # it is not using agentreel's session layer as the harness configures it.
    elsewhere = tmp_path / "elsewhere"
    directory = make_scenario(env={"AGENTREEL_SESSIONS_ROOT": str(elsewhere)})
    with pytest.raises(RecordError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert "answered 1 prompt(s) but wrote no session log" in message
    assert "never used agentreel's provider layer" in message
    assert "or the proxy" in message
    assert sorted(p.name for p in directory.iterdir()) == ["scenario.toml"]


def test_an_agent_that_never_loads_the_replay_provider_is_told_so_when_recording(
    make_scenario: MakeScenario,
) -> None:
    # Its own provider wins over the harness's replay setting: the trial replay writes no
    # consumption report. Randomness is not the problem, and the message must not say so.
    directory = make_scenario(env={"AGENTREEL_PROVIDER": "echo"})
    with pytest.raises(RecordError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert "never loaded agentreel's replay provider" in message
    assert "randomness" not in message
    assert sorted(p.name for p in directory.iterdir()) == ["scenario.toml"]


def test_record_and_refresh_list_the_files_they_wrote(make_scenario: MakeScenario) -> None:
    directory = make_scenario(env={"FAKE_SUBAGENTS": "1"})
    out = io.StringIO()
    assert main(["record", str(directory)], out=out) == 0, out.getvalue()
    wrote = re.search(r"^      wrote (.*)$", out.getvalue(), re.M)
    assert wrote is not None, out.getvalue()
    assert wrote.group(1).split(", ") == [
        "session.jsonl",
        "session.1.jsonl",
        "golden/transcript.jsonl",
        "golden/session.jsonl",
        "golden/session.1.jsonl",
    ]

    out = io.StringIO()
    assert main(["refresh", str(directory)], out=out) == 0, out.getvalue()
    wrote = re.search(r"^      wrote (.*)$", out.getvalue(), re.M)
    assert wrote is not None, out.getvalue()
    assert wrote.group(1).split(", ") == [
        "golden/transcript.jsonl",
        "golden/session.jsonl",
        "golden/session.1.jsonl",
    ]
