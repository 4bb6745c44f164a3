"""Property: under any interleaving of concurrent sessions, each live session gets exactly
its own recorded script; a recording missing a session fails loudly, never misroutes."""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentreel.brand import new_session_id
from agentreel.llm import Chunk
from agentreel.llm_replay import ReplayProvider, UnrecordedSessionError
from agentreel.llm_replay.testing import FixtureRecorder, options_for, text_call
from agentreel.session import Session, harvest_session_logs


@dataclass(frozen=True)
class Node:
    """One recorded session of the generated tree (index 0 is the main session)."""

    parent: int | None
    lineage: bool  # recorded (and called) with parent_session_id + spawn_index
    fork: bool
    calls: int
    spawn_after: int  # the parent's call after which it starts this child


@st.composite
def session_trees(draw: st.DrawFn, *, extra_lineage_leaf: bool = False) -> list[Node]:
    nodes = [Node(None, False, False, draw(st.integers(1, 3)), 0)]
    for index in range(1, draw(st.integers(1, 6)) + 1):
        parent = draw(st.integers(0, index - 1))
        lineage = draw(st.booleans())
        nodes.append(
            Node(
                parent=parent,
                lineage=lineage,
                fork=lineage and draw(st.booleans()),
                calls=draw(st.integers(1, 3)),
                spawn_after=draw(st.integers(1, nodes[parent].calls)),
            )
        )
    if extra_lineage_leaf:
        nodes.append(Node(0, True, False, 2, draw(st.integers(1, nodes[0].calls))))
    return nodes


def _expected(index: int, call: int) -> list[Chunk]:
    return text_call(f"session {index} call {call} says hello")


def _spawn_indexes(nodes: list[Node]) -> dict[int, int]:
    counters: dict[int, int] = {}
    result: dict[int, int] = {}
    for index, node in enumerate(nodes):
        if node.parent is not None and node.lineage:
            result[index] = counters.get(node.parent, 0)
            counters[node.parent] = result[index] + 1
    return result


def _record(nodes: list[Node], root: Path, fixture_dir: Path, remove: int | None) -> None:
    recorder = FixtureRecorder(root / "sessions")
    spawn_indexes = _spawn_indexes(nodes)
    sessions: list[Session] = []
    for index, node in enumerate(nodes):
        if node.parent is None:
            session = recorder.main()
        elif not node.lineage:
            session = recorder.child_without_index(sessions[node.parent])
        elif node.fork:
            session = recorder.fork(sessions[node.parent], spawn_indexes[index])
        else:
            session = recorder.spawn(sessions[node.parent], spawn_indexes[index])
        sessions.append(session)
        for call in range(1, node.calls + 1):
            recorder.call(session, _expected(index, call))
        recorder.end_turn(session)  # so a later fork child gets a non-empty seed
    recorder.store.close_all()
    for session in sessions:
        session.close()
    removed_id = sessions[remove].header.id if remove is not None else None
    logs = [log for log in harvest_session_logs(root / "sessions") if log.header.id != removed_id]
    fixture_dir.mkdir()
    for number, log in enumerate(logs):
        name = "session.jsonl" if number == 0 else f"session.{number}.jsonl"
        shutil.copyfile(log.path, fixture_dir / name)


async def _run_live(
    nodes: list[Node], provider: ReplayProvider, rng: random.Random
) -> tuple[dict[int, list[Chunk]], dict[int, BaseException]]:
    """Run every session as its own task, in a random interleaving; children start after
    their parent's ``spawn_after``-th call. Children without lineage start their first call
    in recorded order (first-call order cannot tell such siblings apart otherwise)."""
    live_ids = [new_session_id() for _ in nodes]
    spawn_indexes = _spawn_indexes(nodes)
    first_call_made = [asyncio.Event() for _ in nodes]
    received: dict[int, list[Chunk]] = {index: [] for index in range(len(nodes))}
    failures: dict[int, BaseException] = {}
    tasks: list[asyncio.Task[None]] = []

    def previous_unindexed_sibling(index: int) -> int | None:
        node = nodes[index]
        earlier = [
            i
            for i in range(index)
            if nodes[i].parent == node.parent
            and nodes[i].parent is not None
            and not nodes[i].lineage
        ]
        return earlier[-1] if earlier else None

    async def jitter() -> None:
        for _ in range(rng.randint(0, 3)):
            await asyncio.sleep(0)

    async def run(index: int) -> None:
        node = nodes[index]
        if node.parent is not None and not node.lineage:
            previous = previous_unindexed_sibling(index)
            if previous is not None:
                await first_call_made[previous].wait()
        try:
            for call in range(1, node.calls + 1):
                await jitter()
                parent = live_ids[node.parent] if node.parent is not None else None
                stream = provider.stream(
                    options_for(
                        live_ids[index], parent=parent, spawn_index=spawn_indexes.get(index)
                    )
                )
                first_call_made[index].set()
                async for chunk in stream:
                    received[index].append(chunk)
                    await jitter()
                for child, child_node in enumerate(nodes):
                    if child_node.parent == index and child_node.spawn_after == call:
                        tasks.append(asyncio.create_task(run(child)))
        except UnrecordedSessionError as error:
            failures[index] = error
            first_call_made[index].set()

    tasks.append(asyncio.create_task(run(0)))
    try:
        position = 0
        while position < len(tasks):
            await tasks[position]
            position += 1
    finally:  # on an unexpected failure, retrieve every other task's outcome too
        await asyncio.gather(*tasks, return_exceptions=True)
    return received, failures


_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(nodes=session_trees(), seed=st.integers(0, 2**32 - 1))
def test_every_session_gets_exactly_its_script(nodes: list[Node], seed: int) -> None:
    rng = random.Random(seed)  # drives the interleaving; drawn up front, not inside tasks
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        _record(nodes, root, root / "fixture", remove=None)
        provider = ReplayProvider(root / "fixture")

        received, failures = asyncio.run(_run_live(nodes, provider, rng))

        assert failures == {}
        for index, node in enumerate(nodes):
            expected = [c for call in range(1, node.calls + 1) for c in _expected(index, call)]
            assert received[index] == expected, f"session {index} got another script"
        provider.assert_consumed()


@_SETTINGS
@given(nodes=session_trees(extra_lineage_leaf=True), seed=st.integers(0, 2**32 - 1))
def test_a_missing_recorded_child_fails_loudly_and_misroutes_nothing(
    nodes: list[Node], seed: int
) -> None:
    rng = random.Random(seed)
    removed = len(nodes) - 1  # the extra lineage leaf
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        _record(nodes, root, root / "fixture", remove=removed)
        provider = ReplayProvider(root / "fixture")

        received, failures = asyncio.run(_run_live(nodes, provider, rng))

        assert list(failures) == [removed]
        assert "the fixture holds no log for that child" in str(failures[removed])
        assert received[removed] == []
        for index, node in enumerate(nodes[:removed]):
            expected = [c for call in range(1, node.calls + 1) for c in _expected(index, call)]
            assert received[index] == expected, f"session {index} got another script"
        provider.assert_consumed()
