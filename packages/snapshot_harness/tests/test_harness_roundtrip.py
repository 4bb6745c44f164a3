"""Record → replay round trips through the stub model server and the real openai adapter.

The reference agent (the default command, ``python -m agentreel.acp_agent``) and the
fake agent both record through the ``stub`` provider into a temp fixture directory, replay
keylessly, and pass; then a changed request (system prompt, prompt text) is a drift
failure that says how to re-record.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentreel.session import rerecord_command
from agentreel.snapshot_harness import (
    ReplayConsumptionError,
    check_scenario,
    load_scenario,
)

pytestmark = pytest.mark.slow
MakeScenario = Callable[..., Path]

GREETING_RULES = """
[[rule]]
name = "greeting"
match = { last_user = "Say hello" }
text = "Hello from the stub model."
usage = { input_tokens = 10, output_tokens = 5 }
"""

WRITE_RULES = """
[[rule]]
name = "write the note"
match = { last_user = "Write a note" }
[[rule.tool_calls]]
name = "write_file"
id = "call_1"
arguments = { path = "note.txt", content = "hi" }

[[rule]]
name = "after the write"
match = { last_tool_result = "" }
text = "Done."
"""

GREET_STEPS = (
    {"type": "initialize"},
    {"type": "new_session"},
    {"type": "prompt", "text": "Say hello briefly."},
)


def stub_scenario(
    make_scenario: MakeScenario, rules: str, name: str = "stub-turn", **kwargs: object
) -> Path:
    kwargs.setdefault("steps", GREET_STEPS)
    directory = make_scenario(name, provider="stub", model="stub-model", **kwargs)
    (directory / "stub-rules.toml").write_text(rules)
    return directory


def test_reference_agent_round_trip_then_prompt_drift(make_scenario: MakeScenario) -> None:
    reference = ["{python}", "-m", "agentreel.acp_agent"]
    directory = stub_scenario(make_scenario, GREETING_RULES, agent=reference)
    recorded = check_scenario(directory, "record")
    assert recorded.written == [
        "session.jsonl",
        "golden/transcript.jsonl",
        "golden/session.jsonl",
    ]
    assert "Hello from the stub model." in (directory / "golden" / "session.jsonl").read_text()
    assert check_scenario(directory, "replay").sessions == 1

    changed = (*GREET_STEPS[:2], {"type": "prompt", "text": "Say hello loudly."})
    stub_scenario(make_scenario, GREETING_RULES, agent=reference, steps=changed)
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(directory, "replay")
    message = str(caught.value)
    assert "RequestDriftError" in message
    assert rerecord_command("stub-turn") in message


def test_reference_agent_answers_permission_prompts_in_order(
    make_scenario: MakeScenario,
) -> None:
    steps = (
        {"type": "initialize"},
        {"type": "new_session"},
        {"type": "prompt", "text": "Write a note please."},
    )
    directory = stub_scenario(
        make_scenario,
        WRITE_RULES,
        name="tool-write",
        agent=["{python}", "-m", "agentreel.acp_agent"],
        steps=steps,
        permissions=["allow"],
    )
    check_scenario(directory, "record")
    transcript = (directory / "golden" / "transcript.jsonl").read_text()
    assert "session/request_permission" in transcript
    check_scenario(directory, "replay")


def test_fake_agent_round_trip_then_system_prompt_drift(make_scenario: MakeScenario) -> None:
    directory = stub_scenario(make_scenario, GREETING_RULES)
    check_scenario(directory, "record")
    assert load_scenario(directory).record.provider == "stub"
    check_scenario(directory, "replay")

    stub_scenario(make_scenario, GREETING_RULES, env={"FAKE_SYSTEM_PROMPT": "Be verbose."})
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(directory, "replay")
    message = str(caught.value)
    assert "RequestDriftError" in message
    assert "system prompt differs" in message
    assert "'Be verbose.'" in message
    assert rerecord_command("stub-turn") in message


def test_record_with_a_missing_rules_file_is_named(make_scenario: MakeScenario) -> None:
    directory = make_scenario("no-rules", provider="stub", model="stub-model", steps=GREET_STEPS)
    from agentreel.snapshot_harness import FixtureInventoryError

    with pytest.raises(FixtureInventoryError) as caught:
        check_scenario(directory, "record")
    assert caught.value.missing == ["stub-rules.toml"]


STORY_RULES = """
[[rule]]
name = "story"
match = { last_user = "long story" }
text = "Once upon a time there was a very long story that never seemed to end at all."
delay_ms = 100
"""


def test_prompt_and_cancel_with_a_hang_override_replays_deterministically(
    make_scenario: MakeScenario,
) -> None:
    steps = (
        {"type": "initialize"},
        {"type": "new_session"},
        {"type": "prompt_and_cancel", "text": "Tell me a long story."},
    )
    directory = stub_scenario(
        make_scenario,
        STORY_RULES,
        name="cancel",
        agent=["{python}", "-m", "agentreel.acp_agent"],
        steps=steps,
    )
    check_scenario(directory, "record")
    (directory / "replay.override.json").write_text(
        '{"overrides": [{"action": "hang", "session": 0, "call": 1, "chunks": 2}]}'
    )
    check_scenario(directory, "refresh")
    transcript = (directory / "golden" / "transcript.jsonl").read_text()
    assert transcript.count("agent_message_chunk") == 1
    assert transcript.rstrip().endswith('{"stopReason":"cancelled"}}')
    outcome = check_scenario(directory, "replay")
    assert outcome.result is not None
    assert outcome.result.stop_reasons == ["cancelled"]


FAULT_RULES = """
[[rule]]
name = "upstream down"
match = { last_user = "Say hello" }
status = 500
error_message = "upstream died"
"""


def test_a_model_error_recorded_through_a_stub_fault_replays_as_the_same_error(
    make_scenario: MakeScenario,
) -> None:
    steps = (
        {"type": "initialize"},
        {"type": "new_session"},
        {"type": "expect_error", "method": "prompt", "text": "Say hello briefly.", "code": -32603},
    )
    directory = stub_scenario(
        make_scenario,
        FAULT_RULES,
        name="error-finish",
        agent=["{python}", "-m", "agentreel.acp_agent"],
        steps=steps,
    )
    check_scenario(directory, "record")
    transcript = (directory / "golden" / "transcript.jsonl").read_text()
    assert '"error":{"code":-32603' in transcript
    check_scenario(directory, "replay")
