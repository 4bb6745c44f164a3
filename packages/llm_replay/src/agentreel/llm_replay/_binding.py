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

With ``content_binding`` (the proxy's setting, SPEC 11) a caller holds **lanes**: each
request is keyed by its caller and its lane signature (model, system prompt, tools, first
message — ``_lanes``), so a title call or classifier racing the main conversation under
one identity gets its own script, bound by what it is, never by when it arrived; and a
new caller is bound by content first — to the unclaimed script whose first recorded
request has the same signature — before rules 3 and 4. A caller's request that matches
no recorded lane continues its first lane (the drift check then says what changed).
Several unclaimed scripts starting with the same request bind in session order when they
are interchangeable (same calls), and fail loudly when they are not: the request cannot
tell them apart, so any pick could be the wrong one.
"""

from __future__ import annotations

from agentreel.llm import GenerateOptions
from agentreel.llm_replay._failures import ANONYMOUS, unrecorded_error
from agentreel.llm_replay._fixture import Recording, Script
from agentreel.llm_replay._lanes import LaneIndex, LaneSignature, lane_signature
from agentreel.llm_replay.exceptions import UnrecordedSessionError
from agentreel.session import RequestHeaderData


class Binder:
    """Which recorded script each live caller gets, and who holds each script.

    ``lineage_binding=False`` is a test hook: it disables rule 3 (and the reservation of
    lineage children for it), leaving first-call order alone. ``content_binding=True``
    adds lanes and binding by content (module docstring).
    """

    def __init__(
        self,
        recording: Recording,
        scenario: str,
        *,
        lineage_binding: bool = True,
        content_binding: bool = False,
    ):
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
        self._index = LaneIndex(self._scripts) if content_binding else None
        # Per live caller: its lanes, by signature (content binding only).
        self._lanes: dict[str, dict[LaneSignature, int]] = {}

    def bind(self, options: GenerateOptions, live: RequestHeaderData | None = None) -> int:
        """The script number for the caller of ``options``, binding it on its first call.

        ``live`` is the request's normalized header; with content binding it picks the lane.
        Raises ``UnrecordedSessionError`` when no recorded script fits the caller.
        """
        key = options.session_id if options.session_id is not None else ANONYMOUS
        if self._index is not None and live is not None:
            return self._bind_lane(options, key, lane_signature(live))
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

    def _bind_lane(self, options: GenerateOptions, key: str, signature: LaneSignature) -> int:
        lanes = self._lanes.get(key)
        if lanes is not None:
            number = lanes.get(signature)
            if number is None:
                owner = self._scripts[next(iter(lanes.values()))]
                number = self._by_content(options, signature, owner.header.id)
                if number is None:
                    return next(iter(lanes.values()))
                lanes[signature] = number
                self.bound_to[number] = key
            return number
        parent_number = (
            self._bound.get(options.parent_session_id)
            if options.parent_session_id is not None
            else None
        )
        parent_id = self._scripts[parent_number].header.id if parent_number is not None else None
        number = None
        if (
            self._lineage_binding
            and parent_number is not None
            and options.spawn_index is not None
            and self._scripts[parent_number].header.id in self._lineage_parents
        ):
            number = self._by_lineage(options, self._scripts[parent_number])
            assert self._index is not None
            if self._index.signature_of(number) not in (None, signature):
                # The recorded child's first call is another lane (its title call, say):
                # this request is one of the child's lanes, found by content.
                number = self._by_content(options, signature, parent_id) or number
        else:
            number = self._by_content(options, signature, parent_id)
            if number is None:
                number = self._by_first_call(options, parent_number, signature)
        self._bound[key] = number
        self._lanes[key] = {signature: number}
        self.bound_to[number] = key
        return number

    def _by_content(
        self, options: GenerateOptions, signature: LaneSignature, near: str | None
    ) -> int | None:
        """The unclaimed script whose first request is this one; None when none is.

        ``near`` (a recorded session id: the caller's own first lane, or its parent)
        narrows several candidates to those recorded under it.
        """
        assert self._index is not None
        free = [n for n in self._index.candidates(signature) if self.bound_to[n] is None]
        if len(free) > 1 and near is not None:
            close = [
                n
                for n in free
                if near in (self._scripts[n].header.parent_session, self._scripts[n].header.id)
            ]
            free = close or free
        if len(free) > 1 and not self._index.interchangeable(free):
            labels = ", ".join(self._scripts[n].label for n in free)
            raise self._unrecorded(
                options,
                f"{len(free)} unclaimed recorded sessions start with this same request "
                f"({signature.describe()}: {labels}) and their scripts differ, so which one "
                "this caller is cannot be told from the request; send identity headers "
                "(x-agentreel-session-id, -parent-session-id, -spawn-index) or make the "
                "sessions' first requests differ",
            )
        return free[0] if free else None

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

    def _by_first_call(
        self,
        options: GenerateOptions,
        parent_number: int | None,
        signature: LaneSignature | None = None,
    ) -> int:
        parent_id = self._scripts[parent_number].header.id if parent_number is not None else None
        for number in self._first_call_candidates:
            if self.bound_to[number] is not None:
                continue
            if parent_id is not None and self._scripts[number].header.parent_session != parent_id:
                continue
            # Content binding found no script starting with this request; one that starts
            # with another recorded request is someone else's, never this one's.
            if (
                signature is not None
                and self._index is not None
                and self._index.signature_of(number) is not None
            ):
                continue
            return number
        if signature is not None:
            drifted_main = self._drifted_main(parent_number)
            if drifted_main is not None:
                return drifted_main
            raise self._unrecorded(
                options,
                f"no unclaimed recorded session starts with this request ({signature.describe()})",
            )
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

    def _drifted_main(self, parent_number: int | None) -> int | None:
        """The main script, for the run's first caller when it is the only top-level one.

        A request that starts no recorded lane is someone else's script — except for the
        first caller of a run that recorded one top-level session: that caller can only be
        the main session, changed. Binding it lets the drift check say what changed (the
        readable diff) instead of "unrecorded"; once anything is bound, nothing is guessed.
        """
        if parent_number is not None or any(holder is not None for holder in self.bound_to):
            return None
        top_level = [
            n for n in self._first_call_candidates if self._scripts[n].header.parent_session is None
        ]
        return top_level[0] if len(top_level) == 1 else None

    def _unrecorded(self, options: GenerateOptions, reason: str) -> UnrecordedSessionError:
        bound = sum(1 for holder in self.bound_to if holder is not None)
        return unrecorded_error(options, reason, self._recording, bound, self._scenario)
