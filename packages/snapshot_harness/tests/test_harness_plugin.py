"""The pytest plugin, driven through pytester: in process, and in subprocesses under xdist."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from agentreel.session import refresh_command
from agentreel.snapshot_harness import check_scenario

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

MakeScenario = Callable[..., Path]
QUIET = ("-p", "no:cacheprovider", "-p", "no:asyncio", "-q")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    if "-n" in args:  # the xdist controller and its workers: processes of their own
        return pytester.runpytest_subprocess(*QUIET, *args)
    return pytester.runpytest_inprocess(*QUIET, *args)


def recorded_fixtures(make_scenario: MakeScenario, *names: str) -> Path:
    """A fixtures directory holding ``names``: the first recorded, the others copies of it
    (recording costs two agent runs; the plugin tests need several scenarios, not several
    recordings)."""
    first = make_scenario(names[0])
    check_scenario(first, "record")
    for name in names[1:]:
        shutil.copytree(first, first.parent / name)
    return first.parent


def test_a_recorded_scenario_is_collected_and_passes(
    pytester: pytest.Pytester, make_scenario: MakeScenario
) -> None:
    directory = make_scenario()
    check_scenario(directory, "record")
    result = run(pytester, str(directory.parent), "-vv")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*scenario.toml::echo-turn PASSED*"])


def test_a_failing_scenario_shows_a_diff_per_file_and_the_stderr_tail(
    pytester: pytest.Pytester, make_scenario: MakeScenario
) -> None:
    directory = make_scenario()
    check_scenario(directory, "record")
    golden = directory / "golden" / "transcript.jsonl"
    golden.write_text(golden.read_text().replace("echo: ", "ECHO: "))
    result = run(pytester, str(directory.parent))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*replay of scenario echo-turn failed:*",
            "*differs from the goldens in 1 file(s): transcript.jsonl*",
            "--- golden/transcript.jsonl",
            "+++ live/transcript.jsonl",
            '-*"ECHO: "*',
            '+*"echo: "*',
            f"*{refresh_command('echo-turn')}*",
        ]
    )


def test_a_crash_under_the_plugin_shows_the_stderr_tail(
    pytester: pytest.Pytester, make_scenario: MakeScenario
) -> None:
    directory = make_scenario()
    check_scenario(directory, "record")
    make_scenario(env={"FAKE_BEHAVIOUR": "crash"})
    result = run(pytester, str(directory.parent))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*exit code 3*", "*agent stderr (tail)*", "*crashing on purpose*"])


def test_scenarios_run_under_xdist(pytester: pytest.Pytester, make_scenario: MakeScenario) -> None:
    fixtures = recorded_fixtures(make_scenario, "first", "second", "third")
    result = run(pytester, "-n", "2", str(fixtures))
    result.assert_outcomes(passed=3)


def test_record_then_refresh_then_replay_modes(
    pytester: pytest.Pytester, make_scenario: MakeScenario
) -> None:
    directory = make_scenario()
    fixtures = str(directory.parent)
    recording = run(pytester, fixtures, "--agentreel-mode=record")
    recording.assert_outcomes(passed=1)
    # record lists what it wrote, as the CLI does: the recording and every golden.
    written = _written_line(recording, directory.name)
    goldens = sorted(p.name for p in (directory / "golden").iterdir())
    assert "session.jsonl" in written
    for name in goldens:
        assert f"golden/{name}" in written
    golden = directory / "golden" / "transcript.jsonl"
    recorded = golden.read_bytes()
    golden.write_text("stale\n")
    run(pytester, fixtures).assert_outcomes(failed=1)
    refreshing = run(pytester, fixtures, "--agentreel-mode", "refresh")
    refreshing.assert_outcomes(passed=1)
    # refresh rewrites goldens only: the recording is not among what it lists.
    refreshed = _written_line(refreshing, directory.name)
    assert "golden/transcript.jsonl" in refreshed
    assert "session.jsonl" not in refreshed.replace("golden/session.jsonl", "")
    assert golden.read_bytes() == recorded
    replaying = run(pytester, fixtures, "--agentreel-mode=replay")
    replaying.assert_outcomes(passed=1)
    assert "files written" not in replaying.stdout.str()


def _written_line(result: pytest.RunResult, scenario: str) -> str:
    """The summary line listing what ``scenario`` wrote (the test fails if there is none)."""
    lines = result.stdout.lines
    assert any("agentreel: files written" in line for line in lines), result.stdout.str()
    (line,) = [line for line in lines if line.startswith(f"{scenario}: wrote ")]
    return line


def test_record_under_xdist_lists_every_scenarios_files(
    pytester: pytest.Pytester, make_scenario: MakeScenario
) -> None:
    fixtures = recorded_fixtures(make_scenario, "one", "two")
    result = run(pytester, "-n", "2", str(fixtures), "--agentreel-mode=refresh")
    result.assert_outcomes(passed=2)
    # Workers send their files with the test report; the controller prints them all.
    assert "golden/transcript.jsonl" in _written_line(result, "one")
    assert "golden/transcript.jsonl" in _written_line(result, "two")


def test_scenario_option_selects_by_name(
    pytester: pytest.Pytester, make_scenario: MakeScenario
) -> None:
    fixtures = str(recorded_fixtures(make_scenario, "alpha", "beta", "gamma"))
    result = run(pytester, fixtures, "--agentreel-scenario=beta,gamma", "-vv")
    result.assert_outcomes(passed=2)
    assert "alpha" not in result.stdout.str()
    result = run(pytester, fixtures, "--agentreel-scenario", "alpha")
    result.assert_outcomes(passed=1)


def test_scenario_option_refuses_a_path(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--agentreel-scenario=../etc")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*path separator*"])


def test_options_live_in_the_agentreel_group(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--help")
    result.stdout.fnmatch_lines(
        ["agentreel snapshot scenarios:", "*--agentreel-mode=*", "*--agentreel-scenario=NAME*"]
    )
