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
        return (0, header.spawn_index, 0, header.id)
    return (1, 0, header.created_at, header.id)


def _top_key(header: SessionHeader) -> tuple[int, str]:
    return (header.created_at, header.id)


def order_sessions(items: Iterable[T], header_of: Callable[[T], SessionHeader]) -> list[T]:
    """Return ``items`` in session order.

    The session tree is walked depth-first from the top-level sessions (no
    ``parent_session``, ordered by ``(created_at, id)``); each session's children come
    right after it, ordered by ``spawn_index``, then — for children without one — by
    ``(created_at, id)``. A session whose parent is not among ``items`` is treated as a
    top-level session so nothing is ever dropped.
    """
    items = list(items)
    by_id = {header_of(item).id: item for item in items}
    children: defaultdict[str, list[T]] = defaultdict(list)
    roots: list[T] = []
    for item in items:
        parent = header_of(item).parent_session
        if parent is not None and parent in by_id and parent != header_of(item).id:
            children[parent].append(item)
        else:
            roots.append(item)

    ordered: list[T] = []
    seen: set[str] = set()
    stack: list[T] = sorted(roots, key=lambda i: _top_key(header_of(i)), reverse=True)
    while stack:
        item = stack.pop()
        sid = header_of(item).id
        if sid in seen:
            continue
        seen.add(sid)
        ordered.append(item)
        kids = sorted(children.get(sid, ()), key=lambda i: _sibling_key(header_of(i)))
        stack.extend(reversed(kids))
    # Cycles (a corrupt tree) would leave sessions unreached: keep them, in a stable order.
    leftovers = [i for i in items if header_of(i).id not in seen]
    ordered.extend(sorted(leftovers, key=lambda i: _top_key(header_of(i))))
    return ordered


def order_headers(headers: Sequence[SessionHeader]) -> list[SessionHeader]:
    """``order_sessions`` for bare headers."""
    return order_sessions(headers, lambda h: h)
