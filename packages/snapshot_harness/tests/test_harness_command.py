"""Command scenarios (``protocol = "command"``, SPEC 14): agents that are not ACP servers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentreel.snapshot_harness import HarnessError, check_scenario, load_scenario
from agentreel.snapshot_harness._command import command_for, transcript_lines
from agentreel.snapshot_harness.exceptions import (
    AgentCrashError,
    ReplayConsumptionError,
    ScenarioError,
)

COMMITTED = Path(__file__).resolve().parents[3] / "fixtures" / "command-sdk-script"


def scenario_dir(tmp_path: Path, toml: str, name: str = "cmd") -> Path:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "scenario.toml").write_text(toml)
    return directory


def test_the_prompt_goes_into_argv_where_the_placeholder_stands_else_to_stdin(
    tmp_path: Path,
) -> None:
    argv = scenario_dir(
        tmp_path,
        'protocol = "command"\nagent = ["tool", "-p", "say {prompt}!"]\n'
        '[[steps]]\ntype = "prompt"\ntext = "hi"\n',
    )
    assert command_for(load_scenario(argv), "it's me") == (["tool", "-p", "say it's me!"], None)
    stdin = scenario_dir(
        tmp_path,
        'protocol = "command"\nagent = ["tool", "run"]\n[[steps]]\ntype = "prompt"\ntext = "hi"\n',
        name="cmd2",
    )
    assert command_for(load_scenario(stdin), "héllo") == (["tool", "run"], "héllo".encode())


def test_the_transcript_is_stdout_line_by_line_and_the_exit_status() -> None:
    lines = transcript_lines(1, "go", b'{"type": "result", "n": 1}\nplain text\n', 3)
    assert [json.loads(line) for line in lines] == [
        {"type": "command/start", "step": 1, "prompt": "go"},
        {"type": "stdout", "json": {"type": "result", "n": 1}},
        {"type": "stdout", "text": "plain text"},
        {"type": "command/exit", "step": 1, "status": 3},
    ]


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ('protocol = "comand"\nagent = ["x"]\n', "key 'protocol'"),
        ('protocol = "command"\n', "key 'agent'"),
        ('protocol = "command"\nagent = ["x"]\n[[steps]]\ntype = "initialize"\n', "steps[0].type"),
    ],
)
def test_a_wrong_command_scenario_is_named(tmp_path: Path, toml: str, named: str) -> None:
    if "[[steps]]" not in toml:
        toml += '[[steps]]\ntype = "prompt"\ntext = "hi"\n'
    with pytest.raises(ScenarioError, match=r"scenario\.toml") as caught:
        load_scenario(scenario_dir(tmp_path, toml))
    assert named in str(caught.value)


@pytest.mark.slow
def test_a_deleted_child_recording_names_the_missing_session(tmp_path: Path) -> None:
    copy = tmp_path / COMMITTED.name
    shutil.copytree(COMMITTED, copy)
    header = json.loads((copy / "session.3.jsonl").read_text().splitlines()[0])
    assert header["parent_session"] is not None  # a reviewer: the second step's child
    (copy / "session.3.jsonl").unlink()
    (copy / "golden" / "session.3.jsonl").unlink()
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(copy, "replay")
    message = str(caught.value)
    assert message.startswith("command-sdk-script: UnrecordedSessionError: live session ")
    assert "spawn index 0" in message
    assert "system prompt 'You review a draft in one line.'" in message
    assert "The run failed at prompt step 1 because of it (AgentCrashError)." in message


@pytest.mark.slow
def test_stdin_prompts_stderr_kept_apart_and_a_failing_step(tmp_path: Path) -> None:
    """Record through the stub with the prompt on stdin; stderr never reaches a golden; a
    step exiting non-zero fails the run with its stderr."""
    directory = scenario_dir(
        tmp_path,
        'protocol = "command"\ntimeout = 240\nagent = ["{python}", "./script.py"]\n'
        '[[steps]]\ntype = "prompt"\ntext = "How do I brew tea?"\n'
        '[model]\nvia = "proxy"\nenv = { EXAMPLE_MODEL = "stub-model" }\n',
    )
    script = (COMMITTED / "script.py").read_text()
    (directory / "script.py").write_text(script.replace("sys.argv[1]", "sys.stdin.read()"))
    shutil.copy2(COMMITTED / "stub-rules.toml", directory)
    check_scenario(directory, "record")
    transcript = (directory / "golden" / "transcript.jsonl").read_text()
    assert '"draft: Steep the leaves in hot water for three minutes."' in transcript
    assert "working on" not in transcript  # the script's stderr line
    check_scenario(directory, "replay")

    (directory / "script.py").write_text(script.replace("sys.argv[1]", "sys.exit('no way')"))
    with pytest.raises(AgentCrashError) as caught:
        check_scenario(directory, "replay")
    assert "exited with status 1 at prompt step 0 ('How do I brew tea?')" in str(caught.value)
    assert "no way" in caught.value.stderr_tail


# A client on an API the proxy does not speak (issue 41): its call reaches the proxy, so the
# scenario names it — never "no model call reached the proxy".
UNSPOKEN_SCRIPT = """
import os, sys, urllib.error, urllib.request

base = os.environ["OPENAI_BASE_URL"].removesuffix("/v1")
request = urllib.request.Request(
    base + "/v2/chat",
    data=b'{"model": "command-r", "messages": [{"role": "user", "content": "tea"}]}',
    method="POST",
    headers={"content-type": "application/json"},
)
try:
    urllib.request.urlopen(request)
except urllib.error.HTTPError as exc:
    print("status", exc.code)
"""


@pytest.mark.slow
def test_a_scenario_whose_client_speaks_an_unspoken_api_names_the_call(tmp_path: Path) -> None:
    directory = scenario_dir(
        tmp_path,
        'protocol = "command"\ntimeout = 60\nagent = ["{python}", "./script.py"]\n'
        '[[steps]]\ntype = "prompt"\ntext = "chat tea"\n[model]\nvia = "proxy"\n',
    )
    (directory / "script.py").write_text(UNSPOKEN_SCRIPT)
    shutil.copy2(COMMITTED / "stub-rules.toml", directory)
    with pytest.raises(HarnessError) as caught:
        check_scenario(directory, "record")
    said = str(caught.value)
    assert "1 request on paths agentreel does not speak" in said
    assert "`POST /v2/chat` looks like Cohere" in said
    assert "no model call reached the proxy" not in said
    assert not (directory / "golden").exists()
