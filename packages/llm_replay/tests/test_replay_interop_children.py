"""Deleting one child's recording of each committed interop subagent scenario is an
``UnrecordedSessionError`` naming that child and its parent, first, in at most 20 lines.

No npm and no agent here: the committed recordings (``interop/fixtures/*``, every scenario
with a recorded child, whatever is added later) are opened as replay does, the child's
session log deleted, the parent's first call made, and then the child's, under the lineage
the proxy gives a child (its parent and its spawn index). The child must not be served
another session's script (a side lane, a sibling): only its own recording could answer it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentreel.llm_replay import ReplayProvider, UnrecordedSessionError, read_report
from agentreel.llm_replay.testing import collect, options_for
from agentreel.session import rerecord_command

ROOT = Path(__file__).resolve().parents[3]
INTEROP = ROOT / "interop" / "fixtures"


def _header(log: Path) -> dict[str, object]:
    with log.open(encoding="utf-8") as lines:
        header = json.loads(lines.readline())
    assert isinstance(header, dict)
    return header


def _children() -> list[tuple[Path, Path]]:
    """(scenario, the log of its first recorded child) for each scenario with children."""
    found = []
    for scenario in sorted(p.parent for p in INTEROP.glob("*/scenario.toml")):
        children = [
            log
            for log in sorted(scenario.glob("session.*.jsonl"))
            if _header(log).get("spawn_index") is not None
        ]
        if children:
            found.append((scenario, children[0]))
    return found


CHILDREN = _children()


def test_the_interop_subagent_scenarios_are_found() -> None:
    # The test below is generic over interop/fixtures/*: it must have something to read.
    assert {scenario.name for scenario, _ in CHILDREN} >= {"opencode-subagents", "fast-agent-tools"}


def _without_child(scenario: Path, child: Path, tmp_path: Path) -> tuple[Path, int]:
    """A copy of ``scenario``'s recording without ``child``, and the child's spawn index."""
    header = _header(child)
    spawn_index = header["spawn_index"]
    assert isinstance(spawn_index, int)
    # The parent is the first script in session order, which the first caller binds to.
    assert _header(scenario / "session.jsonl")["id"] == header["parent_session"]
    fixture = tmp_path / scenario.name
    shutil.copytree(scenario, fixture, ignore=shutil.ignore_patterns("golden", "workspace"))
    # The recording without that child — its own side lanes with it (Gemini CLI's child
    # routes each turn: a router lane under the child) — and the logs after them
    # renumbered, so the fixture is whole (a gap is its own error, FixtureError "missing
    # session.N.jsonl").
    gone = {header["id"]}
    logs = sorted(fixture.glob("session.*.jsonl"), key=lambda p: int(p.name.split(".")[1]))
    for log in logs:
        if log.name == child.name or _header(log).get("parent_session") in gone:
            gone.add(str(_header(log)["id"]))
            log.unlink()
    left = sorted(fixture.glob("session.*.jsonl"), key=lambda p: int(p.name.split(".")[1]))
    for number, log in enumerate(left, 1):
        log.rename(fixture / f"session.{number}.jsonl")
    return fixture, spawn_index


@pytest.mark.asyncio
@pytest.mark.parametrize(("scenario", "child"), CHILDREN, ids=lambda v: Path(v).name)
async def test_a_deleted_child_recording_is_unrecorded_naming_child_and_parent(
    scenario: Path, child: Path, tmp_path: Path
) -> None:
    fixture, spawn_index = _without_child(scenario, child, tmp_path)
    report = tmp_path / "report.json"
    # Drift off: the parent's request here is not the agent's; what is under test is whom
    # each live session is bound to. Content binding, as the proxy binds: without it, a
    # parent left with no indexed child (claude-code-101-async: one child and a title lane)
    # has its child bound by first-call order, to the title lane the proxy never serves it.
    provider = ReplayProvider(
        fixture, drift="off", report_path=report, scenario=scenario.name, content_binding=True
    )
    parent, live_child = "live-parent-session", "live-child-session"
    await collect(provider.stream(options_for(parent)))

    with pytest.raises(UnrecordedSessionError) as caught:
        provider.stream(options_for(live_child, parent=parent, spawn_index=spawn_index))
    provider.close()

    message = str(caught.value)
    first = message.splitlines()[0]
    assert first.startswith(
        f"live session {live_child} (parent session.jsonl ({{{{session:main}}}}) (live {parent}), "
        "spawn index "
    ), message
    assert f"spawn index {spawn_index})" in first
    assert len(message.splitlines()) <= 20, message
    assert rerecord_command(scenario.name) in message  # the command this run names (nox sets it)
    errors = read_report(report).errors
    assert errors, "the report names no error"
    assert errors[0].type == "UnrecordedSessionError"
    assert live_child in errors[0].message
