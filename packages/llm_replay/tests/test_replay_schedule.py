"""The recorded schedule in the in-process provider (SPEC 13).

The recordings are written through ``SessionStore`` with a clock the test sets, so each
call's start (``request/header``) and end (``finish``) sit where the test says on the one
clock. The live "agent" is a small asyncio program: a parent that starts a child task and
keeps calling the model, putting the child's answer into whichever request comes next —
what an agent with asynchronous subagents does.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentreel.brand import SessionId
from agentreel.llm import GenerateOptions, Message, TextDelta
from agentreel.llm_replay import (
    ReplayProvider,
    RequestDriftError,
    ScheduleDivergenceError,
    create_replay_provider,
    read_report,
)
from agentreel.llm_replay.testing import RECORD_CWD, collect, text_call
from agentreel.session import (
    AssistantChunkData,
    Session,
    SessionStore,
    SubagentStartData,
    build_request_header,
    harvest_session_logs,
    session_file_name,
)

PARENT = "You are the parent."
CHILD = "You are the child."


def parent_options(step: int, child_said: str | None) -> GenerateOptions:
    messages = [Message.user(f"parent step {step}")]
    if child_said is not None:
        messages.append(Message.user(f"the child said: {child_said}"))
    return GenerateOptions(
        model="m", system=PARENT, messages=tuple(messages), session_id=SessionId("live-parent")
    )


def child_options() -> GenerateOptions:
    return GenerateOptions(
        model="m",
        system=CHILD,
        messages=(Message.user("child task"),),
        session_id=SessionId("live-child"),
        parent_session_id=SessionId("live-parent"),
        spawn_index=0,
    )


class _Timeline:
    """Writes calls whose starts and ends the test places on the recording's clock."""

    def __init__(self, root: Path) -> None:
        self.now = 1_800_000_000_000.0
        self.store = SessionStore(root, clock=lambda: self.now)
        self._steps: dict[str, int] = {}

    def start(self, session: Session, at: float, options: GenerateOptions) -> int:
        self.now += at
        step = self._steps.get(session.id, 0) + 1
        self._steps[session.id] = step
        session.append(build_request_header(options, turn=1, step=step, cwd=RECORD_CWD))
        self.now -= at
        return step

    def end(self, session: Session, at: float, step: int, text: str) -> None:
        self.now += at
        for chunk in text_call(text):
            session.append(AssistantChunkData(turn=1, step=step, chunk=chunk))
        self.now -= at


def record(
    root: Path, fixture: Path, *, child_ends: float, result_at: int, child_starts: float = 2.5
) -> None:
    """Parent: 4 calls at [0,1], [2,3], [4,5], [7,8] (ms); its child's one call starts at
    ``child_starts`` and ends at ``child_ends``; the parent's call ``result_at`` holds the child's
    answer (the first to start after the child ended)."""
    line = _Timeline(root / "logs")
    parent = line.store.create(RECORD_CWD)
    calls = [(0.0, 1.0), (2.0, 3.0), (4.0, 5.0), (7.0, 8.0)]
    steps = []
    child = line.store.spawn(parent, 0)
    parent.append(SubagentStartData(child_session=child.id, spawn_index=0, mode="spawn"))
    events: list[tuple[float, int, str, int]] = []
    for number, (start, end) in enumerate(calls, start=1):
        events.append((start, 1, "p-start", number))
        events.append((end, 0, "p-end", number))
    events.append((child_starts, 1, "c-start", 1))
    events.append((child_ends, 0, "c-end", 1))
    for at, _, kind, number in sorted(events):
        if kind == "p-start":
            said = "done" if number >= result_at else None
            steps.append(line.start(parent, at, parent_options(number, said)))
        elif kind == "p-end":
            line.end(parent, at, steps[number - 1], f"parent reply {number}")
        elif kind == "c-start":
            child_step = line.start(child, at, child_options())
        else:
            line.end(child, at, child_step, "done")
    line.store.close_all()
    fixture.mkdir()
    for number, log in enumerate(harvest_session_logs(root / "logs")):
        (fixture / session_file_name(number)).write_bytes(log.path.read_bytes())


async def async_agent(provider: ReplayProvider) -> list[str]:
    """The parent's four calls; the child's answer goes into whichever comes next."""
    said: list[str] = []
    replies: list[str] = []

    async def child() -> None:
        chunks = await collect(provider.stream(child_options()))
        said.append("".join(c.text for c in chunks if isinstance(c, TextDelta)))

    task: asyncio.Task[None] | None = None
    for step in range(1, 5):
        options = parent_options(step, said[0] if said else None)
        chunks = await collect(provider.stream(options))
        replies.append(str(len(chunks)))
        if step == 1:
            task = asyncio.create_task(child())
        await asyncio.sleep(0)
    assert task is not None
    await task
    return replies


def test_async_child_replays_in_recorded_order(tmp_path: Path) -> None:
    record(tmp_path, tmp_path / "fx", child_ends=6.0, result_at=4)
    for _ in range(20):
        provider = ReplayProvider(tmp_path / "fx", live_cwd=RECORD_CWD, schedule="recorded")
        asyncio.run(async_agent(provider))
        report = provider.consumption_report()
        assert report.errors == []
        assert report.ok


def test_async_child_drifts_when_free(tmp_path: Path) -> None:
    record(tmp_path, tmp_path / "fx", child_ends=6.0, result_at=4)
    provider = ReplayProvider(tmp_path / "fx", live_cwd=RECORD_CWD)
    with pytest.raises(RequestDriftError, match="the child said"):
        asyncio.run(async_agent(provider))


def test_child_ending_early_is_kept_early(tmp_path: Path) -> None:
    """The child's end recorded between the parent's calls 2 and 3: the parent's second
    final frame waits for it (the next call of its lane held what it held)."""
    record(tmp_path, tmp_path / "fx", child_ends=3.5, result_at=3)
    for _ in range(5):
        provider = ReplayProvider(tmp_path / "fx", live_cwd=RECORD_CWD, schedule="recorded")
        asyncio.run(async_agent(provider))
        assert provider.consumption_report().ok


def test_timeout_is_a_divergence_naming_both_calls(tmp_path: Path) -> None:
    """The child ended before the parent's second call started; a live agent that never
    starts the child makes that call wait, then go on, reported with both calls named."""
    record(tmp_path, tmp_path / "fx", child_starts=1.2, child_ends=1.5, result_at=5)

    async def parent_alone(provider: ReplayProvider) -> int:
        served = 0
        for step in range(1, 5):
            served += len(await collect(provider.stream(parent_options(step, None))))
        return served

    provider = ReplayProvider(
        tmp_path / "fx",
        live_cwd=RECORD_CWD,
        schedule="recorded",
        schedule_timeout=0.2,
        report_path=tmp_path / "report.json",
    )
    assert asyncio.run(parent_alone(provider)) == 4 * len(text_call("parent reply 1"))
    provider.close()
    errors = read_report(tmp_path / "report.json").errors
    assert [error.type for error in errors] == [ScheduleDivergenceError.__name__]
    message = errors[0].message
    assert "call 2 of session.jsonl ({{session:main}})" in message
    assert "before its first frame for call 1 of session.1.jsonl ({{session:1}})" in message
    assert "ended before it started" in message
    # Given up on once: the later calls did not wait again.
    assert len(errors) == 1

    allowed = ReplayProvider(
        tmp_path / "fx",
        live_cwd=RECORD_CWD,
        schedule="recorded",
        schedule_timeout=0.2,
        schedule_divergence="allow",
    )
    asyncio.run(parent_alone(allowed))
    report = allowed.consumption_report()
    assert report.errors == []
    assert len(report.schedule_warnings) == 1
    assert "call 1 of session.1.jsonl" in report.schedule_warnings[0]


def test_schedule_settings_are_checked(tmp_path: Path) -> None:
    record(tmp_path, tmp_path / "fx", child_ends=6.0, result_at=4)
    with pytest.raises(ValueError, match="schedule must be one of free, recorded; got 'record'"):
        ReplayProvider(tmp_path / "fx", schedule="record")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="schedule_timeout must be a positive number"):
        ReplayProvider(tmp_path / "fx", schedule="recorded", schedule_timeout=0)
    with pytest.raises(ValueError, match="schedule_divergence must be one of error, allow"):
        ReplayProvider(tmp_path / "fx", schedule_divergence="warn")  # type: ignore[arg-type]
    # From the environment, as the harness passes them: text.
    provider = create_replay_provider(
        fixture_dir=str(tmp_path / "fx"),
        live_cwd=RECORD_CWD,
        schedule="recorded",
        schedule_timeout="2.5",
        schedule_divergence="allow",
    )
    asyncio.run(async_agent(provider))
    assert provider.consumption_report().ok


def test_whole_millisecond_ties_order_nothing(tmp_path: Path) -> None:
    """An older recording's whole-millisecond times: every call started and ended within
    one millisecond. Nothing is ordered by a tie — least of all a call before itself."""
    store = SessionStore(tmp_path / "logs", clock=lambda: 1_700_000_000_000)
    parent = store.create(RECORD_CWD)
    child = store.spawn(parent, 0)
    parent.append(SubagentStartData(child_session=child.id, spawn_index=0, mode="spawn"))
    for session, options in [
        (parent, parent_options(1, None)),
        (child, child_options()),
        (parent, parent_options(2, None)),
    ]:
        step = sum(1 for e in session.events if type(e).__name__ == "RequestHeader") + 1
        session.append(build_request_header(options, turn=1, step=step, cwd=RECORD_CWD))
        for chunk in text_call("same millisecond"):
            session.append(AssistantChunkData(turn=1, step=step, chunk=chunk))
    store.close_all()
    fixture = tmp_path / "fx"
    fixture.mkdir()
    for number, log in enumerate(harvest_session_logs(tmp_path / "logs")):
        (fixture / session_file_name(number)).write_bytes(log.path.read_bytes())

    async def run(provider: ReplayProvider) -> None:
        await collect(provider.stream(parent_options(1, None)))
        await asyncio.gather(
            collect(provider.stream(child_options())),
            collect(provider.stream(parent_options(2, None))),
        )

    provider = ReplayProvider(
        fixture, live_cwd=RECORD_CWD, schedule="recorded", schedule_timeout=0.2
    )
    asyncio.run(run(provider))
    report = provider.consumption_report()
    assert report.errors == []
    assert report.ok
