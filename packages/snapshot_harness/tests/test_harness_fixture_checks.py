"""Fixture problems a diff would only confuse, named as what they are (SPEC 10)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentreel.llm_replay import ConsumptionReport, ReportedError
from agentreel.session import refresh_command
from agentreel.snapshot_harness import (
    AgentTimeoutError,
    FixtureInventoryError,
    GoldenMismatchError,
    ReplayConsumptionError,
    ScenarioError,
    ScenarioFilesError,
    check_scenario,
    load_scenario,
)
from agentreel.snapshot_harness._consumption import replay_mismatch
from agentreel.snapshot_harness._layout import take_inventory

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


def test_a_crlf_golden_is_named_as_line_endings_not_diffed(recorded_echo_turn: Path) -> None:
    golden = recorded_echo_turn / "golden" / "transcript.jsonl"
    golden.write_bytes(golden.read_bytes().replace(b"\n", b"\r\n"))
    with pytest.raises(GoldenMismatchError) as caught:
        check_scenario(recorded_echo_turn, "replay")
    message = str(caught.value)
    assert "golden/transcript.jsonl has CRLF (\\r\\n) line endings; goldens are LF" in message
    assert "otherwise it is identical to the live run" in message
    assert "+++ live/transcript.jsonl" not in message  # no diff of identical-looking lines


def test_a_crlf_golden_that_also_differs_shows_the_diff_without_the_line_endings(
    recorded_echo_turn: Path,
) -> None:
    golden = recorded_echo_turn / "golden" / "transcript.jsonl"
    text = golden.read_bytes().replace(b"echo: ", b"ECHO: ")
    golden.write_bytes(text.replace(b"\n", b"\r\n"))
    with pytest.raises(GoldenMismatchError) as caught:
        check_scenario(recorded_echo_turn, "replay")
    message = str(caught.value)
    assert "has CRLF" in message
    assert "it also differs in content" in message
    assert '-{"jsonrpc"' in message or "-" in message.split("+++ live/transcript.jsonl", 1)[1]
    assert "\r" not in message


def test_an_extra_recording_is_named_extra_not_a_missing_golden(recorded_echo_turn: Path) -> None:
    shutil.copyfile(recorded_echo_turn / "session.jsonl", recorded_echo_turn / "session.1.jsonl")
    with pytest.raises(FixtureInventoryError) as caught:
        check_scenario(recorded_echo_turn, "replay")
    message = str(caught.value)
    assert "extra recording(s): session.1.jsonl" in message
    assert "the goldens hold 1 session log(s), the recordings 2" in message
    assert refresh_command("echo-turn") in message
    assert "missing" not in message


def test_a_model_edited_in_one_request_header_is_blamed_on_that_header(tmp_path: Path) -> None:
    # The replay's model is what most recorded headers name: editing the first header's
    # model must make that call drift, not every other call against the edited one.
    committed = Path(__file__).resolve().parents[3] / "fixtures" / "subagent-multi"
    directory = tmp_path / "subagent-multi"
    shutil.copytree(committed, directory)
    main = directory / "session.jsonl"
    lines = main.read_bytes().split(b"\n")
    first = next(i for i, line in enumerate(lines) if b'"request/header"' in line)
    assert b'"model":"stub-model"' in lines[first]
    lines[first] = lines[first].replace(b'"model":"stub-model"', b'"model":"edited-model"')
    main.write_bytes(b"\n".join(lines))

    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(directory, "replay")
    cause = str(caught.value).splitlines()[0]
    assert "RequestDriftError" in cause
    assert "call 1 of session.jsonl" in cause
    assert "model: recorded 'edited-model', live 'stub-model'" in str(caught.value)


def test_a_timeout_met_at_a_hang_override_says_so(tmp_path: Path) -> None:
    # The committed cancel scenario with its prompt_and_cancel turned into a plain prompt:
    # the hang override now waits for a cancel that never comes.
    committed = Path(__file__).resolve().parents[3] / "fixtures" / "cancel"
    directory = tmp_path / "cancel"
    shutil.copytree(committed, directory)
    toml = directory / "scenario.toml"
    text = toml.read_text().replace('type = "prompt_and_cancel"', 'type = "prompt"')
    toml.write_text(text.replace("timeout = 60", "timeout = 8"))

    with pytest.raises(AgentTimeoutError) as caught:
        check_scenario(directory, "replay")
    message = str(caught.value)
    assert "did not finish within 8s" in message
    assert "replay.override.json makes session.jsonl call 1 hang until cancelled" in message
    assert "prompt_and_cancel" in message


def test_a_middle_childs_recording_deleted_is_missing_not_its_siblings_orphaned(
    tmp_path: Path,
) -> None:
    copy = tmp_path / "subagent-multi"
    shutil.copytree(FIXTURES / "subagent-multi", copy)
    (copy / "session.1.jsonl").unlink()
    with pytest.raises(FixtureInventoryError) as caught:
        check_scenario(copy, "replay")
    assert caught.value.missing == ["session.1.jsonl"]
    assert caught.value.orphans == []
    assert "missing recording(s): session.1.jsonl — the golden log of each is there" in str(
        caught.value
    )


AGENT_WITH_HELPERS = """\
import json
import helpers
from toolbox.parse import parse

PROMPTS = "prompts.txt"
"""


def test_files_the_scenarios_agent_imports_or_names_are_inputs_not_orphans(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "own-agent"
    directory.mkdir()
    (directory / "scenario.toml").write_text(
        'agent = ["{python}", "./agent.py"]\n\n[[steps]]\ntype = "initialize"\n'
    )
    (directory / "agent.py").write_text(AGENT_WITH_HELPERS)
    (directory / "helpers.py").write_text("from . import x\nimport more\n")
    (directory / "more.py").write_text("")  # imported by helpers.py, not by agent.py
    (directory / "toolbox").mkdir()
    (directory / "toolbox" / "parse.py").write_text("def parse(): ...\n")
    (directory / "prompts.txt").write_text("hello\n")
    (directory / "stray.txt").write_text("nobody uses me\n")
    (directory / "session.jsonl").write_text("")  # a recording, never an input by a string
    inventory = take_inventory(load_scenario(directory))
    assert inventory.orphans == ["stray.txt"]
    assert inventory.recordings == ["session.jsonl"]


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ('{"overrides": [', "cancel/replay.override.json: invalid override file"),
        (
            '{"overrides": [{"action": "hang", "session": 0, "call": 99, "chunks": 2}]}',
            "cancel/replay.override.json: $.overrides[0]: session 0 has no call 99",
        ),
    ],
    ids=["malformed", "no-such-call"],
)
def test_a_broken_override_is_named_broken_not_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, override: str, named: str
) -> None:
    # cancel needs a hang override: a broken one is that file's error, not "add {…hang…}".
    shutil.copytree(FIXTURES / "cancel", tmp_path / "cancel")
    (tmp_path / "cancel" / "replay.override.json").write_text(override)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScenarioFilesError) as caught:
        check_scenario(Path("cancel"), "replay")
    message = str(caught.value)
    assert message.startswith(f"cancel: OverrideError: {named}")
    assert "add {" not in message
    assert str(tmp_path) not in message


@pytest.mark.parametrize("name", ["plain-turn", "subagent-multi", "command-sdk-script"])
def test_a_recording_cut_to_its_header_is_named_not_a_drift_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # In process (only recording; a parent of children) and proxied (command-sdk-script
    # bound the live "tea" session to session.2.jsonl and blamed a drift instead).
    shutil.copytree(FIXTURES / name, tmp_path / name)
    main = tmp_path / name / "session.jsonl"
    main.write_text(main.read_text().splitlines()[0] + "\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScenarioFilesError) as caught:
        check_scenario(Path(name), "replay")
    message = str(caught.value)
    assert message.startswith(
        f"{name}/session.jsonl: the recording holds only its header line, no events"
    )
    assert "Drift" not in message
    assert "already bound" not in message


def test_a_replay_error_met_by_absolute_path_prints_the_path_as_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent and the proxy open the recordings by absolute path; the user typed another.
    shutil.copytree(FIXTURES / "plain-turn", tmp_path / "plain-turn")
    monkeypatch.chdir(tmp_path)
    scenario = load_scenario(Path("plain-turn"))
    absolute = tmp_path / "plain-turn" / "replay.override.json"
    report = ConsumptionReport(
        fixture_dir=str(tmp_path / "plain-turn"),
        scenario="plain-turn",
        scripts=[],
        errors=[ReportedError(type="OverrideError", message=f"{absolute}: invalid")],
    )
    failure = replay_mismatch(scenario, report, stderr_tail=f"OverrideError: {absolute}: x")
    assert failure is not None
    assert str(failure).splitlines()[0] == (
        "plain-turn: OverrideError: plain-turn/replay.override.json: invalid"
    )
    assert str(tmp_path) not in str(failure)


def _own_agent(directory: Path, toml: str) -> Path:
    directory.mkdir()
    (directory / "scenario.toml").write_text(toml + '\n[[steps]]\ntype = "initialize"\n')
    (directory / "agent.py").write_text("print('hi')\n")
    return directory


@pytest.mark.parametrize(
    "agent",
    ['["{python}", "agent.py", "{prompt}"]', '["{python}", "./agent.py", "{prompt}"]'],
    ids=["bare", "dot-slash"],
)
def test_an_agent_named_with_or_without_dot_slash_is_an_input(tmp_path: Path, agent: str) -> None:
    directory = _own_agent(tmp_path / "own-agent", f"agent = {agent}")
    (directory / "config.json").write_text("{}")
    toml = directory / "scenario.toml"
    toml.write_text(toml.read_text() + '\n[env]\nAGENT_CONFIG = "config.json"\n')
    assert take_inventory(load_scenario(directory)).orphans == []
    assert {"agent.py", "config.json"} <= load_scenario(directory).own_files()


def test_a_declared_fixture_input_is_an_input_and_a_missing_one_is_missing(
    tmp_path: Path,
) -> None:
    directory = _own_agent(
        tmp_path / "wrapped",
        'agent = ["sh", "-c", "exec sh \\"$0\\"/run.sh", "{scenario}"]\n\n'
        '[fixture]\ninputs = ["./run.sh", "agent.py", "prompts/"]',
    )
    (directory / "run.sh").write_text("exec python3 agent.py\n")
    assert "run.sh" in load_scenario(directory).own_files()
    assert take_inventory(load_scenario(directory)).orphans == []
    with pytest.raises(FixtureInventoryError) as caught:
        check_scenario(directory, "record")
    assert "prompts" in caught.value.missing


def test_an_orphan_the_scenario_mentions_is_never_called_one_to_delete(tmp_path: Path) -> None:
    directory = _own_agent(
        tmp_path / "mentions",
        '# the agent reads notes.md (found by its own config)\nagent = ["{python}", "./agent.py"]',
    )
    (directory / "notes.md").write_text("n\n")
    (directory / "stray.txt").write_text("s\n")
    with pytest.raises(FixtureInventoryError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert caught.value.orphans == ["notes.md", "stray.txt"]
    mentioned = next(line for line in message.splitlines() if "notes.md" in line)
    assert "delete" not in mentioned
    assert "[fixture] inputs" in mentioned
    unmentioned = next(line for line in message.splitlines() if "stray.txt" in line)
    assert "delete them" in unmentioned


def test_fixture_inputs_outside_the_directory_are_refused(tmp_path: Path) -> None:
    directory = _own_agent(
        tmp_path / "outside", 'agent = ["{python}", "./agent.py"]\n[fixture]\ninputs = ["../x"]'
    )
    with pytest.raises(ScenarioError, match=r"fixture\.inputs\[0\]"):
        load_scenario(directory)


def test_a_retried_failing_call_is_reported_once(tmp_path: Path) -> None:
    # crewai retries a failed call: three reports of one error, their request files numbered.
    scenario = load_scenario(FIXTURES / "plain-turn")
    message = "live session <anonymous> ... full masked request: /d/unrecorded-{k}.live.txt"
    report = ConsumptionReport(
        fixture_dir=str(scenario.directory),
        scenario=scenario.name,
        scripts=[],
        errors=[
            *(
                ReportedError(type="UnrecordedSessionError", message=message.format(k=k))
                for k in (1, 2, 3)
            ),
            ReportedError(type="RequestDriftError", message="another"),
        ],
    )
    failure = replay_mismatch(scenario, report, stderr_tail="")
    assert failure is not None
    text = str(failure)
    assert text.count("UnrecordedSessionError") == 1
    assert text.splitlines()[1] == "(met 3 times: the agent retried the same call; shown once)"
    assert "(then RequestDriftError: another)" in text
