"""The proxied scenarios bind each session by a mechanism, and fail loudly without it.

Two mechanisms tell the proxy who is calling (SPEC 11): identity headers (``x-agentreel-*``)
and, where a request carries none, conversation chaining and content (the request is
another call of a lane, or the first call of a recorded session). Each committed scenario
with concurrent children is replayed with one or both switched off, as a user would run
it — the real agent processes and the real proxy, through the harness:

- headers off, chaining on: every session still binds (same goldens, every call used);
- headers on, chaining off: the headers alone bind (the control: the switch is only that);
- both off: a loud failure, never a child served another's script;
- a process child's recording deleted: ``UnrecordedSessionError`` in the scenario's failure,
  as ``agentreel replay`` prints it.

Headers go off through the agents' own settings (the reference agent's ``send_identity``
provider setting, the pydantic example's ``EXAMPLE_IDENTITY_HEADERS=0``); chaining goes off
through the test hook below, the proxy's replay provider built without content binding.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentreel.llm_replay import ReplayProvider
from agentreel.session import rerecord_command
from agentreel.snapshot_harness import (
    Outcome,
    ReplayConsumptionError,
    Scenario,
    check_scenario,
    load_scenario,
)

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
EXAMPLES = FIXTURES.parent / "examples"
PROCESS = "subagent-process"
PYDANTIC = "example-pydantic-ai"
BINDING_FAILURES = ("UnrecordedSessionError", "RequestDriftError")


def committed(name: str) -> Scenario:
    return load_scenario(FIXTURES / name)


def replay(scenario: Scenario, **changes: Any) -> Outcome:
    return check_scenario(dataclasses.replace(scenario, **changes), "replay")


def without_headers(scenario: Scenario) -> dict[str, Any]:
    """The scenario's agent with identity headers off, by the agent's own setting."""
    if scenario.name == PROCESS:
        assert scenario.agent is not None
        agent = tuple(
            "send_identity=false" if part == "send_identity=true" else part
            for part in scenario.agent
        )
        assert agent != scenario.agent, "the scenario no longer turns send_identity on"
        return {"agent": agent}
    return {"env": {**scenario.env, "EXAMPLE_IDENTITY_HEADERS": "0"}}


@pytest.fixture
def no_chaining(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy's replay binds by identity and first-call order only: no lanes, no
    chaining, no content binding (the proxy runs in this process, in the harness)."""
    from agentreel.llm_proxy import _run

    def provider(*args: Any, **kwargs: Any) -> ReplayProvider:
        assert kwargs.get("content_binding") is True, "the proxy no longer binds by content"
        return ReplayProvider(*args, **{**kwargs, "content_binding": False})

    monkeypatch.setattr(_run, "ReplayProvider", provider)


@pytest.mark.parametrize("name", [PROCESS, PYDANTIC])
def test_concurrent_children_bind_by_chaining_without_identity_headers(name: str) -> None:
    scenario = committed(name)
    outcome = replay(scenario, **without_headers(scenario))
    assert outcome.sessions == 3


@pytest.mark.usefixtures("no_chaining")
def test_process_children_bind_by_identity_headers_alone() -> None:
    assert replay(committed(PROCESS)).sessions == 3


@pytest.mark.usefixtures("no_chaining")
@pytest.mark.parametrize("name", [PROCESS, PYDANTIC])
def test_concurrent_children_without_headers_or_chaining_fail_loudly(name: str) -> None:
    scenario = committed(name)
    with pytest.raises(ReplayConsumptionError) as caught:
        replay(scenario, **without_headers(scenario))
    failure = caught.value
    # The cause comes first and is a binding failure; never a pass with swapped scripts.
    first_line = failure.message.splitlines()[0]
    assert first_line.startswith(f"{name}: "), first_line
    assert any(kind in first_line for kind in BINDING_FAILURES), first_line
    assert rerecord_command(name) in failure.message


def copy_scenario(name: str, root: Path) -> Path:
    """A scratch copy in the repository's layout (fixtures/<name> beside examples/)."""
    copy = root / FIXTURES.name / name
    shutil.copytree(FIXTURES / name, copy)
    (root / EXAMPLES.name).symlink_to(EXAMPLES, target_is_directory=True)
    return copy


def agentreel_replay(fixtures: Path) -> subprocess.CompletedProcess[str]:
    """``agentreel replay --fixtures DIR``, as a user runs it."""
    env = {**os.environ, "AGENTREEL_RERECORD_COMMAND": "nox -s record -- {scenario}"}
    return subprocess.run(
        [sys.executable, "-m", "agentreel.snapshot_harness", "replay", "--fixtures", str(fixtures)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


def test_a_deleted_process_child_recording_fails_as_an_unrecorded_session(
    tmp_path: Path,
) -> None:
    copy = copy_scenario(PROCESS, tmp_path)
    # The child with spawn index 1 removed from the fixture: its recording and its golden.
    (copy / "session.2.jsonl").unlink()
    (copy / "golden" / "session.2.jsonl").unlink()
    run = agentreel_replay(copy.parent)
    assert run.returncode != 0
    report = run.stdout.split(f"=== {PROCESS} ===\n", 1)[1]
    cause = report.splitlines()[0]
    assert cause.startswith(f"{PROCESS}: UnrecordedSessionError: "), cause
    assert "spawn index 1" in cause
    assert "recorded spawn indexes: [0]" in cause
    assert f"re-record: nox -s record -- {PROCESS}" in cause
    assert "0 passed, 1 failed" in run.stdout


def test_a_process_child_recording_deleted_alone_is_named_missing_not_its_golden_orphaned(
    tmp_path: Path,
) -> None:
    # Before any agent runs: the child's golden is there, so its recording is what is gone.
    copy = copy_scenario(PROCESS, tmp_path)
    (copy / "session.2.jsonl").unlink()
    run = agentreel_replay(copy.parent)
    assert run.returncode != 0
    assert "missing recording(s): session.2.jsonl — the golden log of each is there" in run.stdout
    assert "orphans" not in run.stdout
