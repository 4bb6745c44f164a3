"""Session order (SPEC 4) and harvest: spawn_index first, then (created_at, id), depth first."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentreel.session import (
    DuplicateSessionError,
    SessionHeader,
    SessionStore,
    TurnEndData,
    TurnStartData,
    encode_record,
    harvest_session_logs,
    order_headers,
    order_sessions,
)


def _id(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def _h(
    n: int, created_at: int = 0, parent: int | None = None, spawn_index: int | None = None
) -> SessionHeader:
    return SessionHeader(
        id=_id(n),
        created_at=created_at,
        cwd="/w",
        parent_session=None if parent is None else _id(parent),
        spawn_index=spawn_index,
        origin="main" if parent is None else "spawn",
    )


def _names(headers: list[SessionHeader]) -> list[int]:
    return [int(h.id[-12:]) for h in headers]


def test_spawn_index_decides_even_when_created_at_ties() -> None:
    main = _h(0)
    a = _h(9, created_at=5, parent=0, spawn_index=1)
    b = _h(1, created_at=5, parent=0, spawn_index=0)
    assert _names(order_headers([a, main, b])) == [0, 1, 9]


def test_spawn_index_decides_even_when_created_at_runs_backwards() -> None:
    main = _h(0, created_at=100)
    first = _h(5, created_at=300, parent=0, spawn_index=0)
    second = _h(4, created_at=200, parent=0, spawn_index=1)
    third = _h(3, created_at=100, parent=0, spawn_index=2)
    assert _names(order_headers([third, second, first, main])) == [0, 5, 4, 3]


def test_without_spawn_index_created_at_then_id() -> None:
    main = _h(0)
    late = _h(1, created_at=20, parent=0)
    tie_b = _h(3, created_at=10, parent=0)
    tie_a = _h(2, created_at=10, parent=0)
    assert _names(order_headers([late, tie_b, main, tie_a])) == [0, 2, 3, 1]


def test_indexed_children_come_before_unindexed_ones() -> None:
    main = _h(0)
    unindexed = _h(1, created_at=0, parent=0)
    indexed = _h(2, created_at=99, parent=0, spawn_index=0)
    assert _names(order_headers([unindexed, indexed, main])) == [0, 2, 1]


def test_grandchildren_follow_their_parent_depth_first() -> None:
    headers = [
        _h(0),
        _h(1, parent=0, spawn_index=0),
        _h(2, parent=0, spawn_index=1),
        _h(11, parent=1, spawn_index=0),
        _h(12, parent=1, spawn_index=1),
        _h(21, parent=2, spawn_index=0),
        _h(111, parent=11, spawn_index=0),
    ]
    expected = [0, 1, 11, 111, 12, 2, 21]
    for permutation in itertools.islice(itertools.permutations(headers), 0, 5040, 97):
        assert _names(order_headers(list(permutation))) == expected


def test_several_top_level_sessions_by_created_at_then_id() -> None:
    headers = [_h(2, created_at=5), _h(1, created_at=5), _h(0, created_at=9), _h(3, parent=1)]
    assert _names(order_headers(headers)) == [1, 3, 2, 0]


def test_orphans_are_kept_as_top_level() -> None:
    orphan = _h(7, created_at=1, parent=99, spawn_index=0)
    main = _h(0, created_at=2)
    assert _names(order_headers([main, orphan])) == [7, 0]


def test_cycles_and_self_parents_are_kept() -> None:
    a = _h(1, created_at=1, parent=2)
    b = _h(2, created_at=2, parent=1)
    self_parent = _h(3, created_at=0, parent=3)
    result = order_headers([a, b, self_parent])
    assert _names(result) == [3, 1, 2]


def test_duplicate_ids_are_all_kept() -> None:
    main = _h(0)
    twin_a = _h(1, parent=0, spawn_index=0)
    twin_b = _h(1, parent=0, spawn_index=0)
    assert len(order_headers([main, twin_a, twin_b])) == 3


def test_order_sessions_works_on_any_item_type() -> None:
    items = {"child": _h(1, parent=0, spawn_index=0), "main": _h(0)}
    assert order_sessions(items, lambda key: items[key]) == ["main", "child"]


@st.composite
def _forests(draw: st.DrawFn) -> list[SessionHeader]:
    count = draw(st.integers(min_value=1, max_value=25))
    headers: list[SessionHeader] = []
    for n in range(count):
        parent = draw(st.none() | st.integers(min_value=0, max_value=max(n - 1, 0)))
        if n == 0:
            parent = None
        spawn_index = draw(st.none() | st.integers(min_value=0, max_value=4))
        created_at = draw(st.integers(min_value=0, max_value=3))  # many ties
        headers.append(_h(n, created_at=created_at, parent=parent, spawn_index=spawn_index))
    return headers


@settings(max_examples=300, deadline=None)
@given(_forests(), st.randoms(use_true_random=False))
def test_order_is_a_deterministic_permutation(
    headers: list[SessionHeader], shuffler: random.Random
) -> None:
    ordered = order_headers(headers)
    assert sorted(_names(ordered)) == sorted(_names(headers))
    shuffled = list(headers)
    shuffler.shuffle(shuffled)
    assert order_headers(shuffled) == ordered
    # Every session comes after its parent, and a subtree is contiguous.
    position = {h.id: i for i, h in enumerate(ordered)}
    for header in ordered:
        if header.parent_session is not None:
            assert position[header.parent_session] < position[header.id]
    for header in ordered:
        subtree = _subtree(header.id, headers)
        spots = sorted(position[s] for s in subtree)
        assert spots == list(range(spots[0], spots[0] + len(spots)))


def _subtree(root: str, headers: list[SessionHeader]) -> set[str]:
    found = {root}
    changed = True
    while changed:
        changed = False
        for header in headers:
            if header.parent_session in found and header.id not in found:
                found.add(header.id)
                changed = True
    return found


# -- harvest --------------------------------------------------------------------------


def test_harvest_walks_every_bucket_in_session_order(tmp_path: Path) -> None:
    now = [500]
    store = SessionStore(tmp_path / "sessions", clock=lambda: now[0])
    main = store.create("/w/one")
    main.append(TurnStartData(turn=0))
    main.append(TurnEndData(turn=0, reason="completed"))
    now[0] = 300
    second = store.spawn(main, 1)  # created before its elder sibling: the index decides
    now[0] = 400
    first = store.fork(main, 0)
    now[0] = 300
    grandchild = store.spawn(second, 0)
    unindexed_sibling = store.spawn(main, 5)  # its spawn_index is stripped below
    now[0] = 100
    other = store.create("/w/two")  # another cwd, another bucket, the earliest top level
    store.close_all()
    # A child without spawn_index (older recordings) sorts after the indexed ones.
    _strip_spawn_index(unindexed_sibling.path)
    logs = harvest_session_logs(tmp_path / "sessions")
    assert [log.header.id for log in logs] == [
        other.id,
        main.id,
        first.id,
        second.id,
        grandchild.id,
        unindexed_sibling.id,
    ]
    assert len({log.path.parent for log in logs}) == 2


def _strip_spawn_index(path: Path) -> None:
    header, _, rest = path.read_bytes().partition(b"\n")
    decoded = msgspec.json.decode(header, type=SessionHeader)
    stripped = msgspec.structs.replace(decoded, spawn_index=None)
    path.write_bytes(encode_record(stripped) + rest)


def test_harvest_of_missing_root_is_empty(tmp_path: Path) -> None:
    assert harvest_session_logs(tmp_path / "nothing") == []


def test_harvest_refuses_two_logs_with_one_id(tmp_path: Path) -> None:
    header = _h(0)
    for bucket in ("a", "b"):
        (tmp_path / bucket).mkdir()
        (tmp_path / bucket / f"{header.id}.jsonl").write_bytes(encode_record(header))
    with pytest.raises(DuplicateSessionError) as caught:
        harvest_session_logs(tmp_path)
    assert header.id in str(caught.value)
    assert str(tmp_path / "a") in str(caught.value)
    assert str(tmp_path / "b") in str(caught.value)
