"""Writing sessions: spawn and fork children, buckets, flushing, concurrent writers."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentreel.llm import TextDelta
from agentreel.session import (
    AssistantChunkData,
    EmptyData,
    EndSeed,
    Session,
    SessionClosedError,
    SessionStore,
    StepData,
    TurnEnd,
    TurnEndData,
    TurnStartData,
    UserMessageData,
    cwd_bucket,
    load_session_log,
)


def _counter() -> itertools.count[int]:
    return itertools.count(1_700_000_000_000)


def _store(root: Path) -> SessionStore:
    clock = _counter()
    return SessionStore(root, clock=lambda: next(clock))


def _turn(session: Session, turn: int, text: str = "hi") -> None:
    session.append(TurnStartData(turn=turn))
    session.append(UserMessageData(turn=turn, text=text))
    session.step_start(turn, 0)
    session.append(AssistantChunkData(turn=turn, step=0, chunk=TextDelta(index=0, text=text)))
    session.step_end(turn, 0)
    session.append(TurnEndData(turn=turn, reason="completed"))


def test_create_writes_a_main_header(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with store.create(tmp_path / "ws") as session:
        assert session.origin == "main"
        assert session.parent_session is None
        assert session.spawn_index is None
        assert session.seed_length == 0
        assert session.cwd == str(tmp_path / "ws")
        assert session.created_at == 1_700_000_000_000
    assert session.path == tmp_path / cwd_bucket(tmp_path / "ws") / f"{session.id}.jsonl"
    log = load_session_log(session.path)
    assert log.header == session.header
    assert log.events == []


def test_spawn_child_has_fresh_log_and_lineage(tmp_path: Path) -> None:
    store = _store(tmp_path)
    parent = store.create("/w")
    _turn(parent, 0)
    child = store.spawn(parent, 3)
    store.close_all()
    log = load_session_log(child.path)
    assert log.header.origin == "spawn"
    assert log.header.parent_session == parent.id
    assert log.header.spawn_index == 3
    assert log.header.seed_length == 0
    assert log.events == []
    assert child.path.parent == parent.path.parent  # one cwd, one bucket


def test_fork_copies_parent_prefix_up_to_last_turn_end(tmp_path: Path) -> None:
    store = _store(tmp_path)
    parent = store.create("/w")
    _turn(parent, 0, "first")
    _turn(parent, 1, "second")
    # An unfinished third turn must not be copied.
    parent.append(TurnStartData(turn=2))
    parent.append(UserMessageData(turn=2, text="in progress"))
    last_end = max(i for i, e in enumerate(parent.events) if isinstance(e, TurnEnd))

    child = store.fork(parent, 0)
    child.append(UserMessageData(turn=2, text="child's own"))
    store.close_all()

    parent_log = load_session_log(parent.path)
    child_log = load_session_log(child.path)
    assert child_log.header.origin == "fork"
    assert child_log.header.parent_session == parent.id
    assert child_log.header.seed_length == last_end + 1
    assert child_log.seed == parent_log.events[: last_end + 1]
    assert isinstance(child_log.events[last_end + 1], EndSeed)
    assert child_log.own_events[0] == child_log.events[last_end + 1]
    assert [e.seq for e in child_log.events] == list(range(len(child_log.events)))
    assert child_log.events[-1].data == UserMessageData(turn=2, text="child's own")


def test_fork_before_any_completed_turn_gives_an_explicit_empty_seed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    parent = store.create("/w")
    parent.append(TurnStartData(turn=0))
    parent.append(UserMessageData(turn=0, text="not done"))
    child = store.fork(parent, 0)
    store.close_all()
    log = load_session_log(child.path)
    assert log.header.origin == "fork"
    assert log.header.seed_length == 0
    assert log.seed == []
    assert len(log.events) == 1
    assert isinstance(log.events[0], EndSeed)


def test_fork_of_a_fork_carries_the_whole_chain(tmp_path: Path) -> None:
    store = _store(tmp_path)
    root = store.create("/w")
    _turn(root, 0)
    child = store.fork(root, 0)
    _turn(child, 1, "child turn")
    grandchild = store.fork(child, 0)
    store.close_all()
    child_log = load_session_log(child.path)
    grand_log = load_session_log(grandchild.path)
    assert grand_log.header.parent_session == child.id
    assert grand_log.seed == child_log.events
    assert grand_log.header.seed_length == len(child_log.events)
    assert isinstance(grand_log.events[grand_log.header.seed_length], EndSeed)


def test_turn_end_flushes_before_close(tmp_path: Path) -> None:
    session = _store(tmp_path).create("/w")
    session.append(TurnStartData(turn=0))
    _turn(session, 0)
    # Read through a separate handle while the writer is still open.
    lines = session.path.read_bytes().splitlines()
    assert len(lines) == 1 + len(session.events)
    session.close()


def test_close_flushes_and_closed_session_refuses_appends(tmp_path: Path) -> None:
    session = _store(tmp_path).create("/w")
    session.append(TurnStartData(turn=0))
    session.close()
    session.close()  # harmless
    assert session.closed
    assert len(load_session_log(session.path).events) == 1
    with pytest.raises(SessionClosedError, match=str(session.id)):
        session.append(TurnStartData(turn=1))


def test_append_rejects_ambiguous_and_reserved_payloads(tmp_path: Path) -> None:
    session = _store(tmp_path).create("/w")
    with pytest.raises(TypeError, match="step_start"):
        session.append(StepData(turn=0, step=0))
    with pytest.raises(TypeError, match="end-seed"):
        session.append(EmptyData())
    session.close()
    assert load_session_log(session.path).events == []


@pytest.mark.parametrize("spawn_index", [-1, True, 1.5, "0"])
def test_child_needs_a_valid_spawn_index(tmp_path: Path, spawn_index: object) -> None:
    store = _store(tmp_path)
    parent = store.create("/w")
    with pytest.raises(ValueError, match="spawn_index"):
        store.spawn(parent, spawn_index)  # type: ignore[arg-type]
    store.close_all()


def test_session_id_cannot_be_reused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    first = store.create("/w")
    with pytest.raises(FileExistsError, match=rf"session {first.id} already has a log at "):
        store.create("/w", session_id=first.id)
    store.close_all()


# -- cwd buckets ---------------------------------------------------------------------

AWKWARD_CWDS = [
    "/",
    "/home/user/my project",
    "/home/user/projet été/日本語",
    "/a/../b",
    "/a/b/..",
    "..",
    ".",
    "relative/dir",
    "/tmp/x" + "/very-long-component" * 60,
    "/tmp/quote\"and'apostrophe",
    "/tmp/back\\slash",
    "/tmp/new\nline\ttab",
    "/tmp/😀 emoji",
    "/tmp/COLON:STAR*Q?<>|",
    "/tmp/-leading-dash",
    "/tmp/.hidden",
    "/tmp/" + "\udcff" + "undecodable",
]


@pytest.mark.parametrize("cwd", AWKWARD_CWDS)
def test_bucket_is_a_safe_readable_name(cwd: str) -> None:
    bucket = cwd_bucket(cwd)
    assert 0 < len(bucket) <= 80
    assert bucket not in {".", ".."}
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in bucket)
    assert not bucket.startswith(("-", "."))
    assert cwd_bucket(cwd) == bucket  # deterministic


def test_bucket_keeps_the_readable_tail() -> None:
    assert cwd_bucket("/home/user/my project").startswith("home-user-my-project-")


def test_awkward_buckets_never_collide_and_are_creatable(tmp_path: Path) -> None:
    buckets = {cwd_bucket(cwd) for cwd in AWKWARD_CWDS}
    assert len(buckets) == len(AWKWARD_CWDS)
    for bucket in buckets:
        (tmp_path / bucket).mkdir()
    assert len(os.listdir(tmp_path)) == len(AWKWARD_CWDS)


def test_cwds_differing_only_in_unsafe_characters_get_different_buckets() -> None:
    cwds = ["/tmp/a b", "/tmp/a-b", "/tmp/a_b", "/tmp/a\tb", "/tmp/A B", "/tmp/a  b", "/tmp/a/b"]
    assert len({cwd_bucket(c) for c in cwds}) == len(cwds)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=40), min_size=2, max_size=8, unique=True))
def test_different_cwds_never_share_a_bucket(cwds: list[str]) -> None:
    buckets = [cwd_bucket(cwd) for cwd in cwds]
    assert len(set(buckets)) == len(cwds)
    for bucket in buckets:
        assert all(c.isascii() and (c.isalnum() or c in "._-") for c in bucket)


def test_awkward_cwd_end_to_end(tmp_path: Path) -> None:
    store = _store(tmp_path / "root")
    cwd = "/tmp/projet été/../with space/" + "deep/" * 80
    parent = store.create(cwd)
    _turn(parent, 0)
    child = store.fork(parent, 0)
    store.close_all()
    assert parent.path.parent == child.path.parent
    assert parent.path.parent.parent == tmp_path / "root"
    assert load_session_log(child.path).header.cwd == cwd


# -- concurrency ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_many_concurrent_writers_in_one_event_loop(tmp_path: Path) -> None:
    store = _store(tmp_path)
    parent = store.create("/w")
    parent.append(TurnStartData(turn=0))

    async def child_task(index: int) -> Session:
        child = store.spawn(parent, index) if index % 2 else store.fork(parent, index)
        child.append(TurnStartData(turn=0))
        for position in range(40):
            chunk = TextDelta(index=0, text=f"child {index} chunk {position} " + "x" * 200)
            child.append(AssistantChunkData(turn=0, step=0, chunk=chunk))
            parent.append(UserMessageData(turn=0, text=f"from {index}:{position}"))
            await asyncio.sleep(0)
        child.append(TurnEndData(turn=0, reason="completed"))
        child.close()
        return child

    children = await asyncio.gather(*(child_task(i) for i in range(32)))
    parent.append(TurnEndData(turn=0, reason="completed"))
    parent.close()

    parent_log = load_session_log(parent.path)
    assert parent_log.torn_tail is None
    assert len(parent_log.events) == 2 + 32 * 40
    for child in children:
        log = load_session_log(child.path)
        assert log.torn_tail is None
        own = log.own_events
        chunks = [e for e in own if isinstance(e.data, AssistantChunkData)]
        index = log.header.spawn_index
        assert [e.data.chunk for e in chunks] == [
            TextDelta(index=0, text=f"child {index} chunk {p} " + "x" * 200) for p in range(40)
        ]


def test_threads_appending_to_one_session_keep_seq_contiguous(tmp_path: Path) -> None:
    session = _store(tmp_path).create("/w")

    def writer(name: int) -> None:
        for position in range(300):
            session.append(UserMessageData(turn=0, text=f"{name}:{position}"))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    session.close()
    log = load_session_log(session.path)
    assert [e.seq for e in log.events] == list(range(6 * 300))
    texts = sorted(e.data.text for e in log.events if isinstance(e.data, UserMessageData))
    assert texts == sorted(f"{n}:{p}" for n in range(6) for p in range(300))
