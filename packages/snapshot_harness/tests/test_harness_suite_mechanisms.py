"""Each committed scenario fails when the mechanism it exists to prove is switched off.

A scenario that still passes with its mechanism removed proves nothing. Every check here
replays a committed scenario from ``fixtures/`` with one thing switched off through a
test-only hook — a replay provider setting (``AGENTREEL_PROVIDER_SETTINGS``, read by the
agent), a changed step or permission answer, or ``harness_suite_agent.py`` (the reference
agent with one tweak) — by ``dataclasses.replace`` on the loaded scenario. The committed
files are never edited; ``error-finish`` is replayed from a scratch copy without its
override file because the replay provider has no switch for overrides.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentreel.session import RequestHeader, rerecord_command
from agentreel.snapshot_harness import (
    AgentTimeoutError,
    GoldenMismatchError,
    HarnessError,
    Initialize,
    NewSession,
    Outcome,
    Prompt,
    PromptAndCancel,
    ReplayConsumptionError,
    Scenario,
    ScenarioFilesError,
    check_scenario,
    load_scenario,
)

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
SUITE_AGENT = Path(__file__).with_name("harness_suite_agent.py")


def committed(name: str) -> Scenario:
    return load_scenario(FIXTURES / name)


def with_env(scenario: Scenario, **env: str) -> dict[str, Any]:
    return {"env": {**scenario.env, **env}}


def provider_settings(scenario: Scenario, **settings: object) -> dict[str, Any]:
    """Replay provider settings for the agent, e.g. the test hooks ``lineage_binding``."""
    return with_env(scenario, AGENTREEL_PROVIDER_SETTINGS=json.dumps(settings))


def tweaked_agent(scenario: Scenario, tweak: str) -> dict[str, Any]:
    return {
        "agent": ("{python}", str(SUITE_AGENT)),
        **with_env(scenario, AGENTREEL_SUITE_TWEAK=tweak),
    }


def replay(scenario: Scenario, **changes: Any) -> Outcome:
    return check_scenario(dataclasses.replace(scenario, **changes), "replay")


def replay_fails(scenario: Scenario, error: type[HarnessError], **changes: Any) -> str:
    with pytest.raises(error) as caught:
        replay(scenario, **changes)
    return str(caught.value)


# -- routing: per-session scripts, lineage, the fork seed ---------------------------------


def test_subagent_parallel_needs_lineage_binding_when_children_call_out_of_spawn_order() -> None:
    # The reference agent starts concurrent children in spawn order, so first-call order
    # alone happens to route them; the tweak makes child 0 call last. Lineage binding
    # (parent + spawn_index) still routes each child to its own script...
    scenario = committed("subagent-parallel")
    outcome = replay(scenario, **tweaked_agent(scenario, "late-first-child"))
    assert outcome.result is not None
    first_call = {
        log.header.spawn_index: next(e.time for e in log.events if isinstance(e, RequestHeader))
        for log in outcome.result.session_logs[1:]
    }
    assert first_call[1] < first_call[0], "the tweak must make child 1 call the model first"

    # ...while first-call order alone hands child 1 (TODOs in beta.py) the script of
    # child 0 (summarize alpha.py): a drift, never a silent misroute.
    changes = tweaked_agent(scenario, "late-first-child")
    changes["env"] = {
        **changes["env"],
        "AGENTREEL_PROVIDER_SETTINGS": json.dumps({"lineage_binding": False}),
    }
    message = replay_fails(scenario, ReplayConsumptionError, **changes)
    assert "RequestDriftError" in message
    assert "List the TODO comments in beta.py" in message


@pytest.mark.parametrize("name", ["subagent-fork", "subagent-mixed"])
def test_fork_scenarios_need_the_seed_slice(name: str) -> None:
    # respect_seed_length=False: the fork child's seed (the parent's first turn) is taken
    # as the child's own calls, so its first live call is served the parent's turn 0.
    scenario = committed(name)
    message = replay_fails(
        scenario, ReplayConsumptionError, **provider_settings(scenario, respect_seed_length=False)
    )
    assert "RequestDriftError" in message


@pytest.mark.parametrize("name", ["subagent-spawn", "subagent-multi", "subagent-mixed"])
def test_subagent_scenarios_need_the_callers_identity(name: str) -> None:
    # Without session ids every call is the anonymous caller, so the child's first call
    # is served the parent's next recorded call (a drift).
    scenario = committed(name)
    message = replay_fails(scenario, ReplayConsumptionError, **tweaked_agent(scenario, "anonymous"))
    assert "RequestDriftError" in message
    # The likely cause gets its own hint, not only "the agent sends a different request".
    assert "The agent sent no session_id: pass GenerateOptions.session_id" in message


def test_a_single_session_replays_without_the_callers_identity() -> None:
    # The control for the check above: one session is the anonymous caller's main script.
    scenario = committed("plain-turn")
    assert replay(scenario, **tweaked_agent(scenario, "anonymous")).sessions == 1


# -- requests, permissions, turns ---------------------------------------------------------


def test_plain_turn_fails_when_the_request_changes() -> None:
    scenario = committed("plain-turn")
    steps = (Initialize(), NewSession(), Prompt("Say goodbye in one short sentence."))
    message = replay_fails(scenario, ReplayConsumptionError, steps=steps)
    assert "RequestDriftError" in message
    assert rerecord_command("plain-turn") in message


def test_tool_call_fails_when_the_permission_answer_is_flipped() -> None:
    scenario = committed("tool-call")
    assert scenario.permissions == ("allow_once",)
    message = replay_fails(scenario, ReplayConsumptionError, permissions=("reject_once",))
    assert "RequestDriftError" in message  # the model's next request holds the rejection


def test_multi_turn_fails_without_its_first_turn() -> None:
    scenario = committed("multi-turn")
    first_prompt = next(i for i, step in enumerate(scenario.steps) if isinstance(step, Prompt))
    steps = scenario.steps[:first_prompt] + scenario.steps[first_prompt + 1 :]
    message = replay_fails(scenario, ReplayConsumptionError, steps=steps)
    assert "RequestDriftError" in message


# -- overrides: cancel and error ----------------------------------------------------------


def test_cancel_needs_the_session_cancel() -> None:
    # The hang override holds the first call open until the client cancels; a plain
    # prompt never cancels, so the run hangs and is killed at the (shortened) timeout.
    scenario = committed("cancel")
    steps = tuple(
        Prompt(step.text) if isinstance(step, PromptAndCancel) else step for step in scenario.steps
    )
    assert steps != scenario.steps
    message = replay_fails(scenario, AgentTimeoutError, steps=steps, timeout=4.0)
    assert "did not finish within 4s" in message


def test_cancel_needs_its_hang_override(tmp_path: Path) -> None:
    # Without the hang, the recorded abort would replay by itself and end the turn whether
    # or not the live session/cancel came (a race the suite's load decides): refused, named,
    # before any agent runs, with the override to add.
    scenario = committed("cancel")
    copy = tmp_path / scenario.name
    shutil.copytree(scenario.directory, copy)
    (copy / "replay.override.json").unlink()
    with pytest.raises(ScenarioFilesError) as caught:
        check_scenario(copy, "replay")
    message = str(caught.value)
    assert "session.jsonl call 1 ended aborted when recorded" in message
    assert '{"action": "hang", "session": 0, "call": 1, "chunks": 2}' in message
    assert str(copy / "replay.override.json") in message


def test_a_hang_override_elsewhere_does_not_stand_in_for_the_cancelled_call(
    tmp_path: Path,
) -> None:
    scenario = committed("cancel")
    copy = tmp_path / scenario.name
    shutil.copytree(scenario.directory, copy)
    (copy / "replay.override.json").write_text(
        '{"overrides": [{"action": "hang", "session": 0, "call": 2, "chunks": 1}]}'
    )
    with pytest.raises(ScenarioFilesError, match=r"session\.jsonl call 1 ended aborted"):
        check_scenario(copy, "replay")


def test_error_finish_needs_its_throw_override(tmp_path: Path) -> None:
    # Without the override the recorded stub fault replays instead of the overridden
    # failure: another error and prefix reach the editor, so the transcript differs.
    scenario = committed("error-finish")
    copy = tmp_path / scenario.name
    shutil.copytree(scenario.directory, copy)
    (copy / "replay.override.json").unlink()
    message = replay_fails(scenario, GoldenMismatchError, directory=copy)
    assert "transcript.jsonl" in message
    assert "replayed outage" in message
