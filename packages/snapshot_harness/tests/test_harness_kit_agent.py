"""The agent kit's promise, end to end: a minimal ACP agent written from the kit alone
(``kit_agent.py``: one tool, one step delegating to two subagents at once) records through
the stub model server and replays keylessly under the harness, goldens and consumption
checked — and the replay still fails loudly when the agent's requests change."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentreel.session import load_session_log, recording_names
from agentreel.snapshot_harness import ReplayConsumptionError, check_scenario

KIT_AGENT = Path(__file__).with_name("kit_agent.py")
PROMPT = "Shout hello and ask two helpers"

SCENARIO = f"""\
timeout = 60
agent = ["{{python}}", "{KIT_AGENT}"]

[[steps]]
type = "initialize"

[[steps]]
type = "new_session"

[[steps]]
type = "prompt"
text = "{PROMPT}"

[record]
provider = "stub"
model = "stub-model"
"""

RULES = """\
[[rule]]
name = "parent: one tool call and two delegations in one step"
match = { last_user = "Shout hello" }
tool_calls = [
  { id = "call_shout", name = "shout", arguments = { text = "hello" } },
  { id = "call_colour", name = "delegate", arguments = { text = "name a colour" } },
  { id = "call_fruit", name = "delegate", arguments = { text = "name a fruit" } },
]
interleave = true

[[rule]]
name = "first helper"
match = { last_user = "name a colour" }
text = "blue"

[[rule]]
name = "second helper"
match = { last_user = "name a fruit" }
text = "pear"

[[rule]]
name = "parent sums up"
match = { last_tool_result = "pear", any_message = "HELLO" }
text = "HELLO; the helpers said blue and pear."
"""


def code_lines(path: Path) -> list[str]:
    """The agent's own lines: no blanks, comments, docstring or imports."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    return [
        line for line in lines if line and not line.startswith(("#", '"""', "import ", "from "))
    ]


@pytest.fixture
def kit_scenario(tmp_path: Path) -> Path:
    directory = tmp_path / "fixtures" / "kit-agent"
    directory.mkdir(parents=True)
    (directory / "scenario.toml").write_text(SCENARIO)
    (directory / "stub-rules.toml").write_text(RULES)
    return directory


def test_the_kit_agent_is_small() -> None:
    assert len(code_lines(KIT_AGENT)) < 60


def test_a_kit_agent_records_through_the_stub_and_replays_under_the_harness(
    kit_scenario: Path, tmp_path: Path
) -> None:
    recorded = check_scenario(kit_scenario, "record")
    assert recorded.sessions == 3
    names = recording_names(kit_scenario)
    assert names == ["session.jsonl", "session.1.jsonl", "session.2.jsonl"]
    main, first, second = (load_session_log(kit_scenario / name) for name in names)
    # The children are the main session's, numbered in the order of the delegating calls,
    # and each recorded its own prompt's answer.
    assert (first.header.parent_session, first.header.spawn_index) == (main.header.id, 0)
    assert (second.header.parent_session, second.header.spawn_index) == (main.header.id, 1)
    for log, answer in ((first, "blue"), (second, "pear")):
        assert any(f'"text":"{answer}"' in line for line in log.path.read_text().splitlines())
    golden = (kit_scenario / "golden" / "transcript.jsonl").read_text()
    assert "HELLO; the helpers said blue and pear." in golden

    replayed = check_scenario(kit_scenario, "replay")
    assert replayed.sessions == 3
    report = replayed.result.replay_report if replayed.result else None
    assert report is not None, "the kit agent's replay provider wrote no consumption report"
    assert report.ok
    assert [(s.calls, s.consumed) for s in report.scripts] == [(2, 2), (1, 1), (1, 1)]

    # The same recording, a different request: the kit's request/header makes it drift.
    changed = tmp_path / "changed" / "kit-agent"
    shutil.copytree(kit_scenario, changed)
    toml = changed / "scenario.toml"
    toml.write_text(toml.read_text().replace(PROMPT, PROMPT + " now"))
    with pytest.raises(ReplayConsumptionError, match="RequestDriftError"):
        check_scenario(changed, "replay")
