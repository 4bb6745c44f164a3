"""The committed scenarios have the shapes SPEC section 8 names.

Read straight from the committed recordings (no agent run): a re-record that silently
changed a scenario's shape — a fork whose seed came out empty, parallel children that ran
one after the other, a lost child — fails here even though it would replay cleanly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentreel.llm import BlockEnd, Finish, TextDelta, ToolCallPart
from agentreel.session import (
    AssistantChunk,
    RequestHeader,
    SessionLog,
    SubagentEnd,
    SubagentStart,
    ToolCall,
    TurnEnd,
    UserMessage,
    load_session_log,
)
from agentreel.snapshot_harness import load_scenario

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"

SESSIONS = {
    "plain-turn": 1,
    "tool-call": 1,
    "multi-turn": 1,
    "cancel": 1,
    "error-finish": 1,
    "subagent-spawn": 2,
    "subagent-multi": 3,
    "subagent-fork": 2,
    "subagent-mixed": 3,
    "subagent-parallel": 3,
    "subagent-process": 3,
}


def recordings(name: str) -> list[SessionLog]:
    """The scenario's recordings in file order (session.jsonl, session.1.jsonl, ...)."""
    directory = FIXTURES / name
    logs = [load_session_log(directory / "session.jsonl")]
    n = 1
    while (directory / f"session.{n}.jsonl").is_file():
        logs.append(load_session_log(directory / f"session.{n}.jsonl"))
        n += 1
    return logs


def turn_ends(log: SessionLog) -> list[str]:
    return [e.data.reason for e in log.own_events if isinstance(e, TurnEnd)]


def subagent_events(log: SessionLog) -> list[str]:
    marks: list[str] = []
    for event in log.events:
        if isinstance(event, SubagentStart):
            marks.append(f"start {event.data.spawn_index} {event.data.mode}")
        elif isinstance(event, SubagentEnd):
            marks.append(f"end {event.data.outcome}")
    return marks


def override(name: str) -> dict[str, object]:
    data = json.loads((FIXTURES / name / "replay.override.json").read_text())
    (only,) = data["overrides"]
    assert isinstance(only, dict)
    return only


def calls(log: SessionLog) -> list[list[AssistantChunk]]:
    grouped: list[list[AssistantChunk]] = [[]]
    for event in log.own_events:
        if isinstance(event, AssistantChunk):
            grouped[-1].append(event)
            if isinstance(event.data.chunk, Finish):
                grouped.append([])
    return grouped[:-1]


@pytest.mark.parametrize(("name", "count"), sorted(SESSIONS.items()))
def test_session_count_and_lineage(name: str, count: int) -> None:
    logs = recordings(name)
    assert len(logs) == count
    main, children = logs[0], logs[1:]
    assert main.header.origin == "main"
    assert [c.header.spawn_index for c in children] == list(range(len(children)))
    assert all(c.header.parent_session == main.header.id for c in children)
    assert load_scenario(FIXTURES / name).record.provider == "stub"


def test_tool_call_reads_then_writes_behind_one_permission() -> None:
    (main,) = recordings("tool-call")
    assert [e.data.name for e in main.events if isinstance(e, ToolCall)] == [
        "read_file",
        "write_file",
    ]
    assert load_scenario(FIXTURES / "tool-call").permissions == ("allow_once",)


def test_multi_turn_has_two_completed_turns() -> None:
    (main,) = recordings("multi-turn")
    assert turn_ends(main) == ["completed", "completed"]


def test_cancel_hangs_inside_the_recorded_call_and_the_turn_is_aborted() -> None:
    (main,) = recordings("cancel")
    assert turn_ends(main) == ["aborted", "completed"]
    hang = override("cancel")
    first_call = calls(main)[0]
    assert hang["action"] == "hang"
    assert hang["call"] == 1
    chunks = hang["chunks"]
    assert isinstance(chunks, int)
    # The prefix must reach a text delta (the harness cancels at the first message chunk).
    assert any(isinstance(c.data.chunk, TextDelta) for c in first_call[:chunks])
    assert chunks < len(first_call)


def test_error_finish_throws_and_the_session_recovers() -> None:
    (main,) = recordings("error-finish")
    assert turn_ends(main) == ["error", "completed"]
    assert override("error-finish")["action"] == "throw"


def test_subagent_multi_runs_its_children_one_after_the_other() -> None:
    main = recordings("subagent-multi")[0]
    assert subagent_events(main) == [
        "start 0 spawn",
        "end completed",
        "start 1 spawn",
        "end completed",
    ]


@pytest.mark.parametrize("name", ["subagent-fork", "subagent-mixed"])
def test_fork_child_has_a_seed_holding_a_completed_model_turn(name: str) -> None:
    fork = recordings(name)[-1]
    assert fork.header.origin == "fork"
    assert fork.header.seed_length > 0
    seed = fork.seed
    assert any(isinstance(e, TurnEnd) and e.data.reason == "completed" for e in seed)
    assert any(isinstance(e, AssistantChunk) for e in seed)  # what the seed slice skips
    assert calls(fork), "the fork child made its own model call after the seed"


def test_subagent_mixed_spawns_then_forks() -> None:
    main, spawned, forked = recordings("subagent-mixed")
    assert subagent_events(main) == [
        "start 0 spawn",
        "end completed",
        "start 1 fork",
        "end completed",
    ]
    assert (spawned.header.origin, forked.header.origin) == ("spawn", "fork")


def test_subagent_parallel_children_have_different_tasks_and_overlap() -> None:
    main, first, second = recordings("subagent-parallel")
    # One step issued both subagent calls: both children started before either ended.
    assert subagent_events(main) == [
        "start 0 spawn",
        "start 1 spawn",
        "end completed",
        "end completed",
    ]
    tasks = [
        next(e.data.text for e in child.events if isinstance(e, UserMessage))
        for child in (first, second)
    ]
    assert tasks[0] != tasks[1]
    # Each child made its first model call before the other one finished.
    first_request = [
        next(e.time for e in child.events if isinstance(e, RequestHeader))
        for child in (first, second)
    ]
    finished = [
        next(e.time for e in child.events if isinstance(e, TurnEnd)) for child in (first, second)
    ]
    assert first_request[0] <= finished[1]
    assert first_request[1] <= finished[0]
    assert all(len(calls(child)) == 2 for child in (first, second))


def test_subagent_process_children_are_agent_processes_whose_calls_overlap() -> None:
    # Recorded through the proxy: each log is what one caller identity (x-agentreel-*
    # headers) sent, so lineage and spawn indexes came over HTTP from separate processes.
    main, first, second = recordings("subagent-process")
    toml = load_scenario(FIXTURES / "subagent-process")
    assert toml.model.proxied
    assert toml.agent is not None
    assert "process" in toml.agent
    delegated = [
        json.loads(e.data.chunk.block.arguments)
        for e in main.events
        if isinstance(e, AssistantChunk)
        and isinstance(e.data.chunk, BlockEnd)
        and isinstance(e.data.chunk.block, ToolCallPart)
    ]
    assert [call["mode"] for call in delegated] == ["process", "process"]
    tasks = [
        next(e.data.messages[-1].preview for e in child.events if isinstance(e, RequestHeader))
        for child in (first, second)
    ]
    assert tasks[0] != tasks[1]
    # The two processes' model calls overlap: each child's first request came before the
    # other child's last call ended.
    spans = [
        [e.time for e in child.events if isinstance(e, RequestHeader | TurnEnd)]
        for child in (first, second)
    ]
    assert spans[0][0] <= spans[1][-1]
    assert spans[1][0] <= spans[0][-1]
    assert all(len(calls(child)) == 2 for child in (first, second))
