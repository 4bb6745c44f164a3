"""Binding a live caller to a recorded script (SPEC section 5): the four rules, in order.

1. no ``session_id``: the anonymous caller, bound like any new caller;
2. already bound: its own script;
3. new, with ``parent_session_id`` and ``spawn_index``, parent bound: the child recorded
   under that recorded parent with that spawn index (nothing else: no such child is an
   ``UnrecordedSessionError``, never a fallback). Lineage comes from the children's headers
   and the parent's ``subagent/start`` events; a recorded parent with neither (a recording
   made without spawn indexes) falls through to rule 4;
4. otherwise first-call order: the next unclaimed script in session order. Scripts that
   rule 3 can reach (children recorded with a spawn index) are left to rule 3, scripts
   without a model call are skipped, and when the caller names a bound parent only that
   parent's recorded children qualify — each restriction only ever prevents misrouting.

``Binder.bind`` never awaits, so concurrent tasks bind in the order they call:
deterministic for a given interleaving of calls, whatever the interleaving of reads.
"""

from __future__ import annotations

from agentreel.llm import GenerateOptions
from agentreel.llm_replay._failures import ANONYMOUS, unrecorded_error
from agentreel.llm_replay._fixture import Recording, Script
from agentreel.llm_replay.exceptions import UnrecordedSessionError


class Binder:
    """Which recorded script each live caller gets, and who holds each script.

    ``lineage_binding=False`` is a test hook: it disables rule 3 (and the reservation of
    lineage children for it), leaving first-call order alone.
    """

    def __init__(self, recording: Recording, scenario: str, *, lineage_binding: bool = True):
        self._recording = recording
        self._scripts = recording.scripts
        self._scenario = scenario
        self._lineage_binding = lineage_binding
        self._bound: dict[str, int] = {}
        self.bound_to: list[str | None] = [None] * len(self._scripts)
        """Per script number: the live caller bound to it (``ANONYMOUS`` for none), or
        ``None`` while unbound."""
        reserved = set(recording.lineage.values()) if lineage_binding else set()
        # Recorded parents whose children's spawn indexes are known (rule 3 applies).
        self._lineage_parents = {parent for parent, _ in recording.spawned}
        self._first_call_candidates = [
            s.number for s in self._scripts if s.calls and s.number not in reserved
        ]

    def bind(self, options: GenerateOptions) -> int:
        """The script number for the caller of ``options``, binding it on its first call.

        Raises ``UnrecordedSessionError`` when no recorded script fits the caller.
        """
        key = options.session_id if options.session_id is not None else ANONYMOUS
        bound = self._bound.get(key)
        if bound is not None:
            return bound
        parent_number = (
            self._bound.get(options.parent_session_id)
            if options.parent_session_id is not None
            else None
        )
        if (
            self._lineage_binding
            and parent_number is not None
            and options.spawn_index is not None
            and self._scripts[parent_number].header.id in self._lineage_parents
        ):
            number = self._by_lineage(options, self._scripts[parent_number])
        else:
            number = self._by_first_call(options, parent_number)
        self._bound[key] = number
        self.bound_to[number] = key
        return number

    def _by_lineage(self, options: GenerateOptions, parent: Script) -> int:
        assert options.spawn_index is not None
        key = (parent.header.id, options.spawn_index)
        number = self._recording.lineage.get(key)
        if number is None and key in self._recording.spawned:
            raise self._unrecorded(
                options,
                f"its parent is bound to {parent.label}, which spawned child "
                f"{self._recording.spawned[key]} with spawn index {options.spawn_index}, but "
                "the fixture holds no log for that child (a session.<n>.jsonl file is "
                "missing or was never recorded)",
            )
        if number is None:
            recorded = sorted(i for (p, i) in self._recording.spawned if p == parent.header.id)
            raise self._unrecorded(
                options,
                f"its parent is bound to {parent.label}, which recorded no child with spawn "
                f"index {options.spawn_index} (recorded spawn indexes: "
                f"{recorded or 'none'})",
            )
        holder = self.bound_to[number]
        if holder is not None:
            raise self._unrecorded(
                options,
                f"the recorded child {self._scripts[number].label} for that parent and spawn "
                f"index is already bound to live session {holder}",
            )
        return number

    def _by_first_call(self, options: GenerateOptions, parent_number: int | None) -> int:
        parent_id = self._scripts[parent_number].header.id if parent_number is not None else None
        for number in self._first_call_candidates:
            if self.bound_to[number] is not None:
                continue
            if parent_id is not None and self._scripts[number].header.parent_session != parent_id:
                continue
            return number
        if parent_number is not None:
            reason = (
                f"no unclaimed script recorded as a child of {self._scripts[parent_number].label}"
            )
            if self._lineage_binding and options.spawn_index is None:
                reason += (
                    " without a spawn index (children recorded with one are bound only by "
                    "parent_session_id + spawn_index)"
                )
        else:
            reason = "every recorded script with model calls is already bound"
        raise self._unrecorded(options, reason)

    def _unrecorded(self, options: GenerateOptions, reason: str) -> UnrecordedSessionError:
        bound = sum(1 for holder in self.bound_to if holder is not None)
        return unrecorded_error(options, reason, self._recording, bound, self._scenario)
