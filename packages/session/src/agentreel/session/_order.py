"""Session order: the one ordering function behind harvest, fixture numbering,
normalizer tokens and replay's first-call fallback (SPEC section 4)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from agentreel.session._events import SessionHeader

T = TypeVar("T")


def _sibling_key(header: SessionHeader) -> tuple[int, int, int, str]:
    # Children with a spawn_index come first, by it; the rest by (created_at, id).
    if header.spawn_index is not None:
        return (0, header.spawn_index, header.created_at, header.id)
    return (1, 0, header.created_at, header.id)


def _top_key(header: SessionHeader) -> tuple[int, str]:
    return (header.created_at, header.id)


def order_sessions(items: Iterable[T], header_of: Callable[[T], SessionHeader]) -> list[T]:
    """Return ``items`` in session order (a permutation of them: nothing dropped or added).

    The session tree is walked depth-first from the top-level sessions (no
    ``parent_session``, ordered by ``(created_at, id)``); each session's children come
    right after it (and their own children before the next sibling), ordered by
    ``spawn_index``, then — for children without one — by ``(created_at, id)``. Neither
    the input order nor clock ties change the result. A session whose parent is not among
    ``items`` is ordered as a top-level session; sessions caught in a parent cycle (a
    corrupt tree) come last by ``(created_at, id)``. Items sharing an id are all kept.
    """
    listed = list(items)
    headers = [header_of(item) for item in listed]
    ids = {header.id for header in headers}
    children: defaultdict[str, list[int]] = defaultdict(list)
    roots: list[int] = []
    for position, header in enumerate(headers):
        parent = header.parent_session
        if parent is not None and parent in ids and parent != header.id:
            children[parent].append(position)
        else:
            roots.append(position)

    ordered: list[int] = []
    expanded: set[str] = set()
    stack = sorted(roots, key=lambda p: (_top_key(headers[p]), p), reverse=True)
    while stack:
        position = stack.pop()
        ordered.append(position)
        session_id = headers[position].id
        if session_id in expanded:
            continue  # a duplicate id: its children were placed after the first one
        expanded.add(session_id)
        kids = sorted(children.get(session_id, ()), key=lambda p: (_sibling_key(headers[p]), p))
        stack.extend(reversed(kids))
    placed = set(ordered)
    leftovers = [p for p in range(len(listed)) if p not in placed]
    ordered.extend(sorted(leftovers, key=lambda p: (_top_key(headers[p]), p)))
    return [listed[position] for position in ordered]


def order_headers(headers: Sequence[SessionHeader]) -> list[SessionHeader]:
    """``order_sessions`` for bare headers."""
    return order_sessions(headers, lambda h: h)
