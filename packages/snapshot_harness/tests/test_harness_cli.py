"""The ``agentreel`` CLI: progress lines, summary, exit codes, argument checks."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agentreel.llm import SPAWN_INDEX_HEADER
from agentreel.snapshot_harness import _cli
from agentreel.snapshot_harness._cli import main
from agentreel.snapshot_harness._scenario import MODES

MakeScenario = Callable[..., Path]


def run_cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(args), out=out)
    return code, out.getvalue()


@pytest.mark.slow
def test_record_then_replay_prints_one_line_per_scenario_and_a_summary(
    make_scenario: MakeScenario,
) -> None:
    first = make_scenario("first")
    make_scenario("second", env={"FAKE_SUBAGENTS": "1"})
    fixtures = str(first.parent)
    code, text = run_cli("record", "first", "second", "--fixtures", fixtures)
    assert code == 0, text
    assert re.search(r"^REC   first\s+1 session\s+\d+\.\d\ds$", text, re.M)
    assert re.search(r"^REC   second\s+2 sessions\s+\d+\.\d\ds$", text, re.M)
    assert "2 recorded, 0 failed" in text

    code, text = run_cli("replay", "--fixtures", fixtures)
    assert code == 0, text
    assert re.search(r"^PASS  first\s+1 session", text, re.M)
    assert re.search(r"^PASS  second\s+2 sessions", text, re.M)
    assert "2 passed, 0 failed" in text


@pytest.mark.slow
def test_a_failure_is_marked_detailed_and_sets_the_exit_code(make_scenario: MakeScenario) -> None:
    good = make_scenario("good")
    bad = make_scenario("bad")
    fixtures = str(good.parent)
    assert run_cli("record", "good", "bad", "--fixtures", fixtures)[0] == 0
    golden = bad / "golden" / "transcript.jsonl"
    golden.write_text(golden.read_text().replace("echo", "ECHO"))
    code, text = run_cli("replay", "--fixtures", fixtures)
    assert code == 1
    assert re.search(r"^FAIL  bad\s+-\s+\d+\.\d\ds$", text, re.M)
    assert re.search(r"^PASS  good", text, re.M)
    assert "=== bad ===" in text
    assert "+++ live/transcript.jsonl" in text
    assert "1 passed, 1 failed" in text


@pytest.mark.slow
def test_refresh_rewrites_goldens(make_scenario: MakeScenario) -> None:
    directory = make_scenario()
    assert run_cli("record", str(directory))[0] == 0
    golden = directory / "golden" / "transcript.jsonl"
    golden.write_text("stale\n")
    code, text = run_cli("refresh", str(directory))
    assert code == 0, text
    assert "REFR  echo-turn" in text
    assert "stale" not in golden.read_text()


def test_record_needs_a_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("record")[0] == 2
    assert "record needs the scenario(s)" in capsys.readouterr().err


def test_provider_flags_only_apply_to_record(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("replay", "--provider", "openai")[0] == 2
    assert "only apply to record" in capsys.readouterr().err


def test_a_path_separator_name_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("replay", "../evil", "--fixtures", str(tmp_path))[0] == 2
    assert "path separator" in capsys.readouterr().err


def test_no_scenarios_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("replay", "--fixtures", str(tmp_path))[0] == 2
    assert "no scenarios" in capsys.readouterr().err


def test_an_invalid_scenario_fails_its_line(
    make_scenario: MakeScenario, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = make_scenario("broken")
    (directory / "scenario.toml").write_text("steps = 3\n")
    code, text = run_cli("replay", "--fixtures", str(directory.parent))
    assert code == 1
    assert re.search(r"^FAIL  broken", text, re.M)
    assert "key 'steps'" in text


@pytest.mark.slow
def test_keep_runs_keeps_the_run_directory(make_scenario: MakeScenario, tmp_path: Path) -> None:
    directory = make_scenario()
    keep = tmp_path / "runs"
    code, text = run_cli("record", str(directory), "--keep-runs", str(keep))
    assert code == 0, text
    assert (keep / "echo-turn" / "agent.stderr").is_file()
    assert any((keep / "echo-turn" / "sessions").glob("*/*.jsonl"))


def test_proxy_subcommand_is_the_proxy_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-fixture"
    code, _ = run_cli("proxy", "replay", "--fixture", str(missing))
    assert code == 2
    assert f"replay fixture directory {missing} does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        run_cli("proxy", "record", "--fixture", str(missing))  # no --upstream
    assert usage.value.code == 2
    assert "--upstream" in capsys.readouterr().err


def agentreel(*args: str) -> subprocess.CompletedProcess[str]:
    """The ``agentreel`` console script, as a user runs it."""
    script = Path(sys.executable).with_name("agentreel")
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, timeout=120, check=False
    )


def listed_commands(help_text: str) -> dict[str, str]:
    block = help_text.split("\ncommands:\n", 1)[1].split("\n\n", 1)[0]
    rows = [re.match(r"  (\S+)\s{2,}(\S.*)$", line) for line in block.splitlines()]
    assert all(rows), block  # one line per command: no wrapped continuation lines
    return {row.group(1): row.group(2) for row in rows if row}


def dispatched_commands() -> set[str]:
    """Every first word ``agentreel`` runs: its modes, its command modules and ``proxy``."""
    return {*MODES, *_cli._COMMANDS, "proxy"}


def test_help_lists_every_command_with_one_line() -> None:
    shown = agentreel("--help")
    assert shown.returncode == 0, shown.stderr
    commands = listed_commands(shown.stdout)
    assert set(commands) == dispatched_commands()
    assert {"replay", "record", "refresh", "proxy", "review", "report"} <= set(commands)
    assert all(len(f"  {name}  {line}") <= 100 for name, line in commands.items()), commands
    bare = agentreel()  # no command at all: the same list, as a usage error
    assert bare.returncode == 2
    assert listed_commands(bare.stderr) == commands


def test_an_unknown_command_is_named_with_the_list() -> None:
    shown = agentreel("replya")
    assert shown.returncode == 2
    assert "agentreel: 'replya' is no command" in shown.stderr
    assert set(listed_commands(shown.stderr)) == dispatched_commands()


@pytest.mark.parametrize(
    "command",
    [*sorted(dispatched_commands()), "proxy record", "proxy replay"],
)
def test_every_commands_help_ends_with_an_example_of_it(command: str) -> None:
    shown = agentreel(*command.split(), "--help")
    assert shown.returncode == 0, shown.stderr
    examples = re.split(r"\n(?:examples?):\n", shown.stdout)
    assert len(examples) >= 2, shown.stdout
    assert f"  agentreel {command} " in "\n".join(examples[1:]), shown.stdout


SDK_SCRIPT = Path(__file__).resolve().parents[3] / "fixtures" / "command-sdk-script"


@pytest.mark.slow
@pytest.mark.parametrize("sent", ["parent only", "parent and spawn index"])
def test_a_child_numbered_by_arrival_is_named_at_the_end_of_agentreel_record(
    sent: str, tmp_path: Path
) -> None:
    """`agentreel record` of a proxied scenario whose reviewer child names its parent by
    header but not its spawn index (and the writer issued no delegating call): the scenario
    is recorded (exit 0), and the output ends by naming the child, its parent, the scenario
    and the header to send, once. Sending the spawn index: no such line."""
    directory = tmp_path / "fixtures" / "reviewed"
    directory.mkdir(parents=True)
    shutil.copy2(SDK_SCRIPT / "stub-rules.toml", directory)
    script = (SDK_SCRIPT / "script.py").read_text()
    spawn_index = '                "x-agentreel-spawn-index": "0",\n'
    assert spawn_index in script
    if sent == "parent only":
        script = script.replace(spawn_index, "")
    (directory / "script.py").write_text(script)
    (directory / "scenario.toml").write_text(
        'protocol = "command"\nagent = ["{python}", "./script.py", "{prompt}"]\n'
        'timeout = 240\n[[steps]]\ntype = "prompt"\ntext = "How do I brew tea?"\n'
        '[model]\nvia = "proxy"\napi = "openai"\nenv = { EXAMPLE_MODEL = "stub-model" }\n'
    )
    done = agentreel("record", "reviewed", "--fixtures", str(directory.parent))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (directory / "session.1.jsonl").is_file()
    lines = done.stdout.splitlines()
    guesses = [line for line in lines if "numbered by arrival" in line]
    if sent == "parent and spawn index":
        assert guesses == [], done.stdout
        assert SPAWN_INDEX_HEADER not in done.stdout + done.stderr
        assert lines[-1].startswith("1 recorded, 0 failed in ")
        return
    (guess,) = guesses
    assert guess.startswith("- record (scenario reviewed): session.1.jsonl "), guess
    assert "x-agentreel-session-id" in guess  # the child's caller, as its header named it
    parent = json.loads((directory / "session.jsonl").read_text().splitlines()[0])["id"]
    assert f"its parent (session.jsonl, recorded session {parent})" in guess
    assert f"the header {SPAWN_INDEX_HEADER}: N" in guess
    assert "=== reviewed: recorded with 1 guess(es) or warning(s) ===" in done.stdout
    assert "The recording was written and is valid" in done.stdout
    assert lines[-1].startswith("1 recorded, 0 failed in "), lines[-1]
    assert lines[-1].endswith("; 1 recorded with a guess or warning (named above)"), lines[-1]
    assert "numbered by arrival" not in done.stderr  # said once, in the output's end
