"""``[replay] schedule = "recorded"`` reaches both replay paths of the harness (SPEC 13).

In process (the reference agent, the replay provider in its process) and proxied (the
harness's proxy run) alike, a scenario that asks for the recorded schedule replays its
committed recording as before, and a call that waits past ``schedule_timeout`` for one
the recording put before it fails the replay, naming both calls.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentreel.snapshot_harness import ReplayConsumptionError, check_scenario, load_scenario

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
SCHEDULED = '[replay]\nschedule = "recorded"\nschedule_timeout = 0.5\n'


def _copy(tmp_path: Path, name: str) -> Path:
    copy = tmp_path / "fixtures" / name
    shutil.copytree(FIXTURES / name, copy)
    # The agent command's relative paths (../../examples/...) resolve as in the repository.
    examples = tmp_path / "examples"
    if not examples.exists():
        examples.symlink_to(FIXTURES.parent / "examples")
    toml = copy / "scenario.toml"
    toml.write_text(toml.read_text() + "\n" + SCHEDULED)
    return copy


TINY_AGENT = Path(__file__).with_name("harness_proxy_agent.py")
TINY = """
timeout = 90
agent = ["{python}", "./agent.py"]

[env]
TINY_TITLE = "1"

[[steps]]
type = "initialize"

[[steps]]
type = "new_session"

[[steps]]
type = "prompt"
text = "say hello"

[model]
via = "proxy"
api = "openai"
base_url_env = []
key_env = ["TINY_KEY"]

[[model.files]]
path = ".config/tiny-agent/config.json"
text = '{"base_url": "{base_url}", "home": "{home}"}'
"""
TINY_RULES = """
[[rule]]
match.model = "tiny-title-model"
text = "A greeting"

[[rule]]
match = { last_user = "say hello", system_contains = "You are tiny" }
text = "hello from the stub"
"""


def _tiny_with_title(tmp_path: Path) -> Path:
    """A proxied agent that asks for a title, then answers: two lanes of one caller,
    the title (``session.1.jsonl``, a side lane) ended before the answer started."""
    directory = tmp_path / "fixtures" / "tiny"
    directory.mkdir(parents=True)
    (directory / "scenario.toml").write_text(TINY + "\n" + SCHEDULED)
    (directory / "stub-rules.toml").write_text(TINY_RULES)
    shutil.copy(TINY_AGENT, directory / "agent.py")
    assert check_scenario(load_scenario(directory), "record").sessions == 2
    return directory


def _end_before(directory: Path, ends: str, starts: str) -> None:
    """The first call of ``ends`` made to start and end, on the recording's clock, before
    the first call of ``starts`` started: an order no live run can keep (there, ``starts`` came
    first and ``ends`` followed from it)."""
    lines = (directory / starts).read_text().splitlines()
    first_start = next(
        e["time"] for e in map(json.loads, lines) if e.get("type") == "request/header"
    )
    path = directory / ends
    lines = path.read_text().splitlines()
    # Its whole first call, start to end (a lane's times never go back).
    for position, event in enumerate(map(json.loads, lines)):
        if position == 0:
            continue
        event["time"] = first_start - 2 if event["type"] != "assistant/chunk" else first_start - 1
        lines[position] = json.dumps(event, separators=(",", ":"))
        if event["type"] == "assistant/chunk" and event["data"]["chunk"]["type"] == "finish":
            break
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_in_process_replay_keeps_the_recorded_schedule(tmp_path: Path) -> None:
    """The reference agent and its spawned child, the replay provider in its process."""
    directory = _copy(tmp_path, "subagent-spawn")
    assert check_scenario(load_scenario(directory), "replay").sessions == 2
    _end_before(directory, "session.1.jsonl", starts="session.jsonl")
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(load_scenario(directory), "replay")
    message = str(caught.value)
    assert "schedule divergence in subagent-spawn: call 1 of session.jsonl" in message
    assert "before its first frame for call 1 of session.1.jsonl ({{session:1}})" in message
    assert "ended before it started in the recording" in message


@pytest.mark.slow
def test_proxied_replay_keeps_the_recorded_schedule(tmp_path: Path) -> None:
    """A title lane and the conversation of one proxied caller, through the run's proxy."""
    directory = _tiny_with_title(tmp_path)
    assert check_scenario(load_scenario(directory), "replay").sessions == 2
    _end_before(directory, "session.jsonl", starts="session.1.jsonl")
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(load_scenario(directory), "replay")
    message = str(caught.value)
    assert "schedule divergence in tiny: call 1 of session.1.jsonl ({{session:1}}, side lane)" in (
        message
    )
    assert "before its first frame for call 1 of session.jsonl ({{session:main}})" in message
