"""Record → replay → system-prompt drift, with the reference agent (SPEC section 7).

A scenario is recorded through the stub model server into a temp fixture directory with
the reference agent (``python -m agentreel.acp_agent``, the default command), replayed
keylessly to a pass, then replayed with ``AGENTREEL_SYSTEM_PROMPT`` set in the agent's
environment: the live requests no longer match the recorded headers, and the failure is
a ``RequestDriftError`` showing the changed prompt and the command that re-records. The
fake-agent twin of this test lives in ``test_harness_roundtrip.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from agentreel.acp_agent import SYSTEM_PROMPT
from agentreel.session import RERECORD_COMMAND_ENV, rerecord_command
from agentreel.snapshot_harness import ReplayConsumptionError, check_scenario, load_scenario

pytestmark = pytest.mark.slow
MakeScenario = Callable[..., Path]

NAME = "reference-prompt"
RULES = """
[[rule]]
name = "greeting"
match = { last_user = "Say hello" }
text = "Hello from the stub model."
"""
STEPS = (
    {"type": "initialize"},
    {"type": "new_session"},
    {"type": "prompt", "text": "Say hello briefly."},
)
CHANGED_PROMPT = "You are a pirate. Answer in rhyme."


def test_reference_agent_round_trip_then_system_prompt_drift(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = make_scenario(
        NAME,
        agent=["{python}", "-m", "agentreel.acp_agent"],
        provider="stub",
        model="stub-model",
        steps=STEPS,
    )
    (directory / "stub-rules.toml").write_text(RULES)

    check_scenario(directory, "record")
    recording = (directory / "session.jsonl").read_text()
    assert SYSTEM_PROMPT in recording, "the recording holds the built-in prompt"
    assert CHANGED_PROMPT not in recording
    assert check_scenario(directory, "replay").sessions == 1

    scenario = load_scenario(directory)
    changed = dataclasses.replace(
        scenario, env={**scenario.env, "AGENTREEL_SYSTEM_PROMPT": CHANGED_PROMPT}
    )
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(changed, "replay")
    message = str(caught.value)
    assert "RequestDriftError" in message
    assert "system prompt differs" in message
    assert "recorded \"You are agentreel's reference coding agent." in message
    assert f"live {CHANGED_PROMPT!r}" in message
    assert rerecord_command(NAME) in message

    # The re-record hint comes from the layer that knows how the user runs agentreel: the
    # harness hands it to the agent, whose replay provider names it in its error.
    monkeypatch.setenv(RERECORD_COMMAND_ENV, "make rerecord SCENARIO={scenario}")
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(changed, "replay")
    first_line = str(caught.value).splitlines()[0]
    assert first_line.startswith(f"{NAME}: RequestDriftError:")
    assert f"re-record: make rerecord SCENARIO={NAME}" in str(caught.value)
    assert "nox -s record" not in str(caught.value)
    monkeypatch.undo()

    # The scenario on disk is untouched: it still replays with the built-in prompt.
    assert check_scenario(directory, "replay").sessions == 1
