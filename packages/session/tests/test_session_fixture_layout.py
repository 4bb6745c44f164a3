"""The fixture layout: one owner for recording names, numbering, the override file, {{cwd}}."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentreel.session import (
    CWD_TOKEN,
    MAIN_SESSION_FILE,
    OVERRIDE_FILE,
    REFRESH_COMMAND_ENV,
    RERECORD_COMMAND_ENV,
    recording_names,
    refresh_command,
    rerecord_command,
    session_file_name,
    session_file_number,
)


def test_names_and_numbers_round_trip() -> None:
    assert session_file_name(0) == MAIN_SESSION_FILE == "session.jsonl"
    assert session_file_name(12) == "session.12.jsonl"
    for number in (0, 1, 9, 10, 123):
        assert session_file_number(session_file_name(number)) == number
    with pytest.raises(ValueError, match="0 \\(main\\) or a positive n"):
        session_file_name(-1)


@pytest.mark.parametrize(
    "name",
    ["session.0.jsonl", "session.01.jsonl", "session.x.jsonl", "session.jsonl.bak", OVERRIDE_FILE],
)
def test_other_names_are_not_recordings(name: str) -> None:
    assert session_file_number(name) is None


def test_recording_names_orders_by_number_not_text(tmp_path: Path) -> None:
    for name in ("session.10.jsonl", "session.2.jsonl", "session.jsonl", "session.02.jsonl"):
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "session.3.jsonl").mkdir()  # a directory is not a recording
    assert recording_names(tmp_path) == ["session.jsonl", "session.2.jsonl", "session.10.jsonl"]


def test_tokens_and_commands() -> None:
    assert CWD_TOKEN == "{{cwd}}"


def test_hints_name_the_agentreel_cli_unless_the_caller_says_how_it_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(RERECORD_COMMAND_ENV, raising=False)
    monkeypatch.delenv(REFRESH_COMMAND_ENV, raising=False)
    # A user's project has the `agentreel` command line, not this repository's nox sessions.
    assert rerecord_command("plain-turn") == "agentreel record plain-turn"
    assert refresh_command("plain-turn") == "agentreel refresh plain-turn"

    monkeypatch.setenv(RERECORD_COMMAND_ENV, "nox -s record -- {scenario}")
    monkeypatch.setenv(REFRESH_COMMAND_ENV, "make golden SCENARIO={scenario}")
    assert rerecord_command("plain-turn") == "nox -s record -- plain-turn"
    assert refresh_command("plain-turn") == "make golden SCENARIO=plain-turn"
    # A command without the placeholder gets the name appended.
    monkeypatch.setenv(RERECORD_COMMAND_ENV, "uv run agentreel record")
    assert rerecord_command("x") == "uv run agentreel record x"
