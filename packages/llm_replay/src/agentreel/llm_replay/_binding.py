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
   parent's recorded children qualify (not, for a caller naming a spawn index, a proxied
   parent's side lanes: scripts under it without one) — each restriction only ever
   prevents misrouting.

``Binder.bind`` never awaits, so concurrent tasks bind in the order they call:
deterministic for a given interleaving of calls, whatever the interleaving of reads.

With ``content_binding`` (the proxy's setting, SPEC 11) a caller holds **lanes**: a title
call or classifier racing the main conversation under one identity gets its own script,
bound by what it is, never by when it arrived. A caller's request goes, in this order, to

1. the lane it **continues** (``_lanes.chain``): its messages are that lane's previous
   request's, then the lane's recorded reply (or, after a failed call, the same request
   again). Several lanes continued alike (conversations identical so far) are told apart by
   their next recorded request; still several with different futures: a loud error;
2. a new lane: the unclaimed script whose first recorded request is exactly this one;
3. the one lane it extends without the recorded reply (the drift check says what changed);
4. its lane of the same signature (model, system prompt, tools, first message), then a new
   lane by signature, then its conversation — each a drift or exhaustion error to come,
   never another conversation's answer.

A named caller's **conversation** is the script its first request bound — unless that is a
side lane the proxy recorded (a script under a conversation, without a spawn index): then
it is the conversation that lane hangs under. The recorder elects a caller's conversation
among its lanes and hangs its side calls under it whatever arrived first, so a title call
racing ahead of the conversation's first request in replay does not make the title lane the
caller's conversation — not the script a changed first request of the conversation falls
back to (a ScriptExhaustedError on the title lane instead of the conversation's drift), nor
the parent its children name.

A headerless new conversation is the child of the bound conversation that handed it on
(record time's rules, ``agentreel.llm_replay.lanes``: a delegation whose text is its first
message, else whose task that message wraps, else a handoff to it); when no unclaimed
recording starts exactly with it, it is bound to the recorded child of that same delegation
(a child whose own prompt changed: its drift names it) or, with none left, is an
``UnrecordedSessionError`` naming the parent's file, the child's recorded spawn index and
the delegating call. A request asked again with fewer or no tools (``narrows``) continues
its conversation.

A new caller is bound by content first — to the unclaimed script whose first recorded
request is this one (exactly, else by signature) — before rules 3 and 4. Several unclaimed
candidates bind in session order when they are interchangeable (same calls), or when their
first calls are (then chaining decides at the next request which conversation is which);
otherwise they fail loudly: the request cannot tell them apart, so any pick could be wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from agentreel.llm import Chunk, GenerateOptions
from agentreel.llm_replay._failures import ANONYMOUS, unrecorded_error
from agentreel.llm_replay._fixture import Recording, Script
from agentreel.llm_replay._lanes import (
    Chain,
    Delegation,
    LaneIndex,
    LaneSignature,
    Reply,
    chain,
    delegated_by,
    delegations,
    first_user_text,
    first_user_texts,
    handoff,
    lane_signature,
    message_digests,
    narrows,
    recorded_reply,
    restates,
    tool_digests,
    wrapped_delegation,
)
from agentreel.llm_replay.exceptions import UnrecordedSessionError
from agentreel.session import RequestHeaderData


@dataclass(slots=True)
class _Lane:
    """One conversation of a live caller: its script and its previous request's messages."""

    number: int
    signature: LaneSignature
    previous: tuple[str, ...]
    tools: frozenset[str] = frozenset()
    """The tool digests of its first request: fewer tools continue it (``narrows``)."""


@dataclass(slots=True)
class _CallerLanes:
    """A live caller's lanes in the order it opened them, and by signature (a headerless
    run's every conversation is a lane of one caller: looking a request's signature up
    keeps its cost per request from growing with the recording)."""

    lanes: list[_Lane] = field(default_factory=list)
    by_signature: dict[LaneSignature, list[_Lane]] = field(default_factory=dict)

    def add(self, lane: _Lane) -> _Lane:
        self.lanes.append(lane)
        self.by_signature.setdefault(lane.signature, []).append(lane)
        return lane

    def alike(self, signature: LaneSignature) -> list[_Lane]:
        """The lanes of ``signature``, in the order they were opened (do not modify)."""
        return self.by_signature.get(signature, [])


class Binder:
    """Which recorded script each live caller gets, and who holds each script.

    ``lineage_binding=False`` is a test hook: it disables rule 3 (and the reservation of
    lineage children for it), leaving first-call order alone. ``content_binding=True``
    adds lanes and binding by content (module docstring); chaining reads each script's
    ``cursors`` (calls served), its ``replies`` (the chunks served, per call) and sees
    replies through ``mask`` (the request masking of whoever built the requests).
    """

    def __init__(
        self,
        recording: Recording,
        scenario: str,
        *,
        lineage_binding: bool = True,
        content_binding: bool = False,
        cursors: Sequence[int] = (),
        replies: Sequence[Sequence[Sequence[Chunk]]] = (),
        mask: Callable[[str], str] | None = None,
        texts: Mapping[str, str] | None = None,
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
        self._numbers = {s.header.id: s.number for s in self._scripts}
        self._index = LaneIndex(self._scripts) if content_binding else None
        # Per live caller: its lanes (content binding only).
        self._lanes: dict[str, _CallerLanes] = {}
        self._cursors = cursors
        self._replies = replies
        self._mask = mask
        self._reply_cache: dict[tuple[int, int], Reply] = {}
        # Per script number: the delegations its served replies issued (and how many calls
        # they cover), the ones a headerless child has claimed, and the first user message
        # of the live request that bound it (content binding only).
        self._issued: dict[int, tuple[int, list[Delegation]]] = {}
        self._claimed: dict[int, set[int]] = {}
        # Per text a served delegation holds: the scripts that issued it. A headerless
        # request looks its first message up here instead of reading every bound script's
        # replies (a cost per request that grew with the recording). A script's replies are
        # served only after ``bind`` returns it, so the scripts bound since the index was
        # last brought up to date are the only ones that may have issued more.
        self._issuers: dict[str, set[int]] = {}
        self._since_indexed: set[int] = set()
        self._first_user: dict[int, str | None] = {}
        self._children_of: dict[int, dict[int, int]] = {}
        # The recorded messages' whole texts by digest (the loaded headers keep previews).
        self._texts: Mapping[str, str] = texts or {}

    def bind(self, options: GenerateOptions, live: RequestHeaderData | None = None) -> int:
        """The script number for the caller of ``options``, binding it on its first call.

        ``live`` is the request's normalized header; with content binding it picks the lane.
        Raises ``UnrecordedSessionError`` when no recorded script fits the caller.
        """
        key = options.session_id if options.session_id is not None else ANONYMOUS
        if self._index is not None and live is not None:
            number = self._bind_lane(options, key, live)
            self._since_indexed.add(number)
            return number
        bound = self._bound.get(key)
        if bound is not None:
            return bound
        parent_number = self._parent_number(options)
        lineage_parent = self._lineage_parent(options, parent_number)
        if lineage_parent is not None:
            number = self._by_lineage(options, lineage_parent)
        else:
            number = self._by_first_call(options, parent_number)
        self._bound[key] = number
        self.bound_to[number] = key
        return number

    def _bind_lane(self, options: GenerateOptions, key: str, live: RequestHeaderData) -> int:
        signature = lane_signature(live)
        digests = message_digests(live)
        caller = self._lanes.get(key)
        if caller is not None:
            lanes = caller.lanes
            lane = self._lane_for(options, key, caller, live, signature)
            if lane is None:
                owner = self._scripts[self._bound[key]]
                # A caller without identity is only what its requests are (SPEC 13): a
                # conversation no recording starts with is an unrecorded session, never a
                # drift of another lane's next call (a headerless worker whose recording is
                # gone, or whose task changed, is not the supervisor).
                anonymous = options.session_id is None
                number = self._by_content(options, live, owner.header.id, exact_only=anonymous)
                if number is None and anonymous:
                    raise self._unrecorded(
                        options,
                        "this request continues none of the recorded conversations with its "
                        "recorded reply, and no unclaimed recording starts with it",
                    )
                if number is None and live.tools:
                    number = self._shared_identity_child(options, lanes)
                if number is None and not anonymous:
                    number = self._changed_side_lane(owner, caller, signature)
                if number is None:
                    number = self._bound[key]
                    lane = next((held for held in lanes if held.number == number), None)
                    if lane is None and self.bound_to[number] is not None:
                        lane = lanes[0]
                if lane is None:
                    lane = caller.add(_Lane(number, signature, digests, tool_digests(live)))
                    self.bound_to[number] = key
                    self._first_user[number] = first_user_text(options.messages)
            lane.previous = digests
            return lane.number
        parent_number = self._parent_number(options)
        parent_id = self._scripts[parent_number].header.id if parent_number is not None else None
        number = None
        lineage_parent = self._lineage_parent(options, parent_number)
        if lineage_parent is not None:
            number = self._by_lineage(options, lineage_parent)
            assert self._index is not None
            if self._index.signature_of(number) not in (None, signature):
                # The recorded child's first call is another lane (its title call, say):
                # this request is one of the child's lanes, found by content.
                number = self._by_content(options, live, parent_id) or number
        else:
            number = self._by_content(options, live, parent_id)
            if number is None:
                number = self._by_first_call(options, parent_number, signature)
        self._bound[key] = (
            self._conversation_of(number) if options.session_id is not None else number
        )
        self._lanes[key] = _CallerLanes()
        self._lanes[key].add(_Lane(number, signature, digests, tool_digests(live)))
        self.bound_to[number] = key
        self._first_user[number] = first_user_text(options.messages)
        return number

    def _lane_for(
        self,
        options: GenerateOptions,
        key: str,
        caller: _CallerLanes,
        live: RequestHeaderData,
        signature: LaneSignature,
    ) -> _Lane | None:
        """The caller's lane this request goes to (steps 1-4 of the module docstring), or
        None for a new lane by signature (then the caller's conversation)."""
        continued: list[_Lane] = []
        extended: list[_Lane] = []
        # A lane's requests share its signature: a request with another model, system
        # prompt or tool set (a handoff to another agent) is a lane of its own.
        alike = caller.alike(signature)
        for lane in alike:
            strength = chain(lane.previous, self._last_reply(lane.number), live, options.messages)
            if strength is Chain.CONTINUES:
                continued.append(lane)
            elif strength is Chain.EXTENDS:
                extended.append(lane)
        if not continued:
            # Asked again with fewer or no tools (autogen's reflect_on_tool_use): the
            # conversation it continues, not a new one.
            for lane in caller.lanes:
                if (
                    narrows(lane.signature, lane.tools, live)
                    and chain(lane.previous, self._last_reply(lane.number), live, options.messages)
                    is Chain.CONTINUES
                ):
                    continued.append(lane)
        if continued:
            return self._one_continued(options, continued, live)
        owner = self._scripts[self._bound[key]].header.id
        delegator = self._delegator(options, live) if options.session_id is None else None
        if delegator is not None:
            # A headerless conversation whose first message a bound conversation handed
            # on (its tool call's prompt, its reply's payload), or that a conversation
            # handed itself over to: that conversation's child, as record time found it —
            # its recorded children first.
            owner = self._scripts[delegator[0]].header.id
        exact = self._by_content(options, live, owner, exact_only=True)
        if exact is None and delegator is not None:
            # The recorded child of that very delegation, changed (its own prompt or
            # tools): bound, so the drift check names that child, not its parent's call.
            exact = self._recorded_child(*delegator)
            if exact is None:
                raise self._unrecorded_child(options, *delegator)
        if exact is not None:
            lane = caller.add(_Lane(exact, signature, message_digests(live), tool_digests(live)))
            self.bound_to[exact] = self.bound_to[caller.lanes[0].number]
            self._first_user[exact] = first_user_text(options.messages)
            return lane
        if len(extended) == 1:
            return extended[0]
        if len(extended) > 1 or len(alike) > 1:
            several = extended or alike
            labels = ", ".join(self._scripts[lane.number].label for lane in several)
            raise self._unrecorded(
                options,
                f"this request continues none of this caller's {len(several)} conversations "
                f"that it could belong to ({labels}) with their recorded reply, and starts no "
                "unclaimed recorded one, so which one it is cannot be told; send identity "
                "headers (x-agentreel-session-id, -parent-session-id, -spawn-index)",
            )
        if options.session_id is None:
            # Without identity, a request that neither continues nor extends a lane of the
            # same signature is another conversation (a second worker), not that lane —
            # and when a bound conversation handed on its first message (a delegation a
            # side call of the child, such as its router call, claimed first), a child of
            # that conversation whose recording is missing.
            handed = self._delegator(options, live, claim=False)
            if handed is not None and not self._by_content(options, live, None, exact_only=True):
                raise self._unrecorded_child(options, *handed)
            return None
        return alike[0] if alike else None

    def _one_continued(
        self, options: GenerateOptions, continued: list[_Lane], live: RequestHeaderData
    ) -> _Lane:
        """Of several lanes this request continues alike, the one whose next recorded
        request it is; conversations identical so far and from here on are interchangeable."""
        if len(continued) == 1:
            return continued[0]
        digests = message_digests(live)
        exact = [lane for lane in continued if self._next_request(lane.number) == digests]
        candidates = exact or continued
        assert self._index is not None
        if len(candidates) == 1:
            return candidates[0]
        numbers = [lane.number for lane in candidates]
        start = {self._cursor(n) for n in numbers}
        if len(start) == 1 and self._index.interchangeable(numbers, start.pop()):
            return min(candidates, key=lambda lane: lane.number)
        labels = ", ".join(self._scripts[n].label for n in numbers)
        raise self._unrecorded(
            options,
            f"this request continues {len(numbers)} conversations alike ({labels}): the "
            "same messages and the same recorded replies so far, but their recorded futures "
            "differ, so which one it is cannot be told from the request; send identity "
            "headers (x-agentreel-session-id, -parent-session-id, -spawn-index) or make "
            "the conversations differ earlier",
        )

    def _delegator(
        self, options: GenerateOptions, live: RequestHeaderData, *, claim: bool = True
    ) -> tuple[int, Delegation] | None:
        """The bound script with a served, unclaimed delegation whose text is this
        request's first user message (``delegated_by``: record time's rule), else whose task
        the message wraps (``wrapped_delegation``), else that handed itself over to this
        request (``handoff``), with that delegation; claims it. With ``claim=False``
        (naming a missing child's parent) claimed ones count too."""
        said = first_user_texts(options.messages)
        if not said:
            return None
        self._index_delegations()
        issuers = set[int]().union(*(self._issuers.get(text, ()) for text in said))
        for number in sorted(issuers):
            if self.bound_to[number] is None or restates(
                options.messages, self._first_user.get(number)
            ):
                continue
            claimed = self._claimed.setdefault(number, set())
            found = delegated_by(
                said, self._delegations(number), claimed if claim else set(), anonymous=True
            )
            if found is not None:
                if claim:
                    claimed.add(found.ordinal)
                return number, found
        # Rarer shapes, looked for among the conversations this run holds (a new
        # conversation's first request only): a task inside a template, then a handoff.
        lanes = self._lanes.get(ANONYMOUS)
        held = lanes.lanes if lanes is not None else []
        for lane in held:
            number = lane.number
            if restates(options.messages, self._first_user.get(number)):
                continue
            claimed = self._claimed.setdefault(number, set())
            found = wrapped_delegation(
                said,
                self._delegations(number),
                claimed if claim else set(),
                offers_tools=bool(live.tools),
            )
            if found is not None:
                if claim:
                    claimed.add(found.ordinal)
                return number, found
        first = first_user_text(options.messages)
        position = next(
            (i for i, m in enumerate(options.messages) if m.role == "user"), len(options.messages)
        )
        later = [m.text for m in options.messages[position + 1 :]]
        signature = lane_signature(live)
        for lane in reversed(held):
            number = lane.number
            header = self._scripts[number].header
            if lane.signature == signature or self._cursor(number) == 0:
                continue
            if header.parent_session is not None and header.spawn_index is None:
                continue  # a side lane hands nothing over
            claimed = self._claimed.setdefault(number, set())
            found = handoff(
                self._delegations(number),
                claimed if claim else set(),
                self._cursor(number) - 1,
                continues=chain(lane.previous, self._last_reply(number), live, options.messages)
                is Chain.CONTINUES,
                carries_first=first is not None and first == self._first_user.get(number),
                offers_tools=bool(live.tools),
                later_texts=later,
            )
            if found is not None:
                if claim:
                    claimed.add(found.ordinal)
                return number, found
        return None

    def _recorded_children(self, parent_number: int) -> dict[int, int]:
        """Per delegation ordinal of script ``parent_number``'s recorded replies, the
        recorded child it was handed to (its script number), found by record time's rules
        over each child's first recorded request: the child a changed live child is, and
        the spawn index a missing one had."""
        found = self._children_of.get(parent_number)
        if found is not None:
            return found
        found = {}
        self._children_of[parent_number] = found
        parent = self._scripts[parent_number]
        replies = self._replies[parent_number] if parent_number < len(self._replies) else ()
        issued: list[Delegation] = []
        for position, chunks in enumerate(replies):
            issued += delegations(chunks, len(issued), self._mask, call=position)
        parent_first = (
            _header_first_user(parent.calls[0].request, self._texts)
            if parent.calls and parent.calls[0].request is not None
            else None
        )
        children = sorted(
            (
                s
                for s in self._scripts
                if s.header.parent_session == parent.header.id and s.header.spawn_index is not None
            ),
            key=lambda s: s.header.spawn_index or 0,
        )
        claimed: set[int] = set()
        for child in children:
            request = child.calls[0].request if child.calls else None
            if request is None:
                continue
            first = _header_first_user(request, self._texts)
            said = frozenset({first}) if first else frozenset()
            handed = delegated_by(said, issued, claimed, anonymous=True) or wrapped_delegation(
                said, issued, claimed, offers_tools=bool(request.tools)
            )
            if handed is None:
                handed = self._recorded_handoff(parent, issued, claimed, request, parent_first)
            if handed is None and first:
                # Known to be this parent's child: any delegation its first message holds
                # (a short prompt after a <system-reminder> part; a header keeps the parts
                # joined).
                handed = next(
                    (
                        d
                        for d in issued
                        if d.ordinal not in claimed and any(t in first for t in d.texts)
                    ),
                    None,
                )
            if handed is not None:
                claimed.add(handed.ordinal)
                found[handed.ordinal] = child.number
        return found

    def _recorded_handoff(
        self,
        parent: Script,
        issued: list[Delegation],
        claimed: set[int],
        request: RequestHeaderData,
        parent_first: str | None,
    ) -> Delegation | None:
        """The call of ``parent`` that handed itself over to the recorded ``request``."""
        digests = message_digests(request)
        first = _header_first_user(request, self._texts)
        position = next(
            (i for i, m in enumerate(request.messages) if m.role == "user"), len(request.messages)
        )
        later = [
            m.text or self._texts.get(m.digest, m.preview) for m in request.messages[position + 1 :]
        ]
        for index in range(len(parent.calls) - 1, -1, -1):
            asked = parent.calls[index].request
            if asked is None:
                continue
            previous = message_digests(asked)
            continues = (
                len(digests) > len(previous)
                and digests[: len(previous)] == previous
                and request.messages[len(previous)].role == "assistant"
            )
            found = handoff(
                issued,
                claimed,
                index,
                continues=continues,
                carries_first=first is not None and first == parent_first,
                offers_tools=bool(request.tools),
                later_texts=later,
            )
            if found is not None:
                return found
        return None

    def _recorded_child(self, parent_number: int, delegation: Delegation) -> int | None:
        """The recorded child ``delegation`` was handed to, while no one holds it."""
        number = self._recorded_children(parent_number).get(delegation.ordinal)
        return number if number is not None and self.bound_to[number] is None else None

    def _unrecorded_child(
        self, options: GenerateOptions, parent_number: int, handed: Delegation
    ) -> UnrecordedSessionError:
        parent = self._scripts[parent_number]
        # Named as the recording knows it: the parent's file, the spawn index the child had
        # (its delegation's place among the parent's recorded children) and the call.
        how = f" ({handed.said})" if handed.said else ""
        children = self._recorded_children(parent_number)
        spawn = sum(1 for ordinal in children if ordinal < handed.ordinal)
        error = self._error(
            options,
            f"its first request is what {parent.label} handed on{how}, so it is that "
            "session's child, but no unclaimed recording of a child starts with this request "
            "(a session.<n>.jsonl file is missing, or the child's first request changed)",
            parent_label=parent.label,
            recorded_spawn_index=spawn,
        )
        error.delegation = f"{parent.label}{how}"
        return error

    def _delegations(self, number: int) -> list[Delegation]:
        """What script ``number``'s replies served so far handed on, in the order issued."""
        replies = self._replies[number] if number < len(self._replies) else ()
        served = min(self._cursor(number), len(replies))
        done, issued = self._issued.get(number, (0, []))
        for position in range(done, served):
            issued = issued + delegations(replies[position], len(issued), self._mask, call=position)
        self._issued[number] = (served, issued)
        return issued

    def _index_delegations(self) -> None:
        """Bring ``_issuers`` up to date with the replies served since it last was."""
        for number in self._since_indexed:
            done = len(self._issued.get(number, (0, []))[1])
            for delegation in self._delegations(number)[done:]:
                for text in delegation.texts:
                    self._issuers.setdefault(text, set()).add(number)
        self._since_indexed.clear()

    def _shared_identity_child(self, options: GenerateOptions, lanes: list[_Lane]) -> int | None:
        """A named caller's new conversation that no recording starts with, whose first
        message is the prompt of a delegating tool call one of the caller's lanes was
        served, is that call's child sharing its parent's identity (Claude Code 0.23.1's
        Task subagent): the recorded child of that call, changed (bound, so the drift check
        names that child), else an unrecorded child named with its parent — never a drift
        of the parent's next call. None when no served call handed its message on."""
        said = first_user_texts(options.messages)
        for lane in lanes if said else ():
            found = delegated_by(said, self._delegations(lane.number), set(), anonymous=False)
            if found is None:
                continue
            recorded = self._recorded_child(lane.number, found)
            if recorded is not None:
                return recorded
            parent = self._scripts[lane.number]
            children = self._recorded_children(lane.number)
            error = self._error(
                options,
                f"its first message is the prompt of the {found.tool} call that "
                f"{parent.label} made ({found.said}), so it is that call's child sharing its "
                "parent's identity, and no unclaimed recording starts with it (the child's "
                "session.<n>.jsonl is missing or was recorded with another prompt)",
                parent_label=f"{parent.label} (live {options.session_id})",
                recorded_spawn_index=sum(1 for o in children if o < found.ordinal),
            )
            error.delegation = f"{parent.label} ({found.said})"
            raise error
        return None

    def _changed_side_lane(
        self, owner: Script, caller: _CallerLanes, signature: LaneSignature
    ) -> int | None:
        """A named caller's new request that starts no recorded lane, continues none of its
        lanes and whose signature is no recorded lane's: the unclaimed side lane recorded
        under its conversation that it is nearest to (most of model, system prompt, tools and
        first message the same), when that lane is nearer than the conversation itself and
        than every other side lane — a classifier call whose system prompt now names the user
        is that classifier's lane changed, and its drift says so, not a drift of the
        conversation's next call (claude-code-101-read's trial under another USER). None
        when no side lane is nearer: the conversation's drift, as before."""
        assert self._index is not None
        held = next((lane for lane in caller.lanes if lane.number == owner.number), None)
        # Nearer than the conversation, and half the signature at least.
        floor = max(2, _alike_fields(held.signature, signature) + 1 if held else 0)
        nearest: list[int] = []
        best = 0
        for script in self._scripts:
            header = script.header
            if (
                self.bound_to[script.number] is not None
                or header.parent_session != owner.header.id
                or header.spawn_index is not None
                or not self._proxied(script.number)
            ):
                continue
            recorded = self._index.signature_of(script.number)
            alike = _alike_fields(recorded, signature) if recorded is not None else 0
            if alike < floor:
                continue
            if alike > best:
                nearest, best = [script.number], alike
            elif alike == best:
                nearest.append(script.number)
        return nearest[0] if len(nearest) == 1 else None

    def _cursor(self, number: int) -> int:
        return self._cursors[number] if number < len(self._cursors) else 0

    def _last_reply(self, number: int) -> Reply | None:
        """The recorded reply last served from script ``number`` (None before its first)."""
        position = self._cursor(number)
        if position == 0 or number >= len(self._replies):
            return None
        key = (number, position - 1)
        reply = self._reply_cache.get(key)
        if reply is None:
            reply = recorded_reply(self._replies[number][position - 1], self._mask)
            self._reply_cache[key] = reply
        return reply

    def _next_request(self, number: int) -> tuple[str, ...] | None:
        calls = self._scripts[number].calls
        position = self._cursor(number)
        request = calls[position].request if position < len(calls) else None
        return message_digests(request) if request is not None else None

    def _by_content(
        self,
        options: GenerateOptions,
        live: RequestHeaderData,
        near: str | None,
        *,
        exact_only: bool = False,
    ) -> int | None:
        """The unclaimed script whose first request is this one; None when none is.

        Scripts whose first request is exactly this one come first, then those whose first
        request has its signature (unless ``exact_only``). ``near`` (a recorded session id:
        the caller's conversation, or its parent) narrows several candidates to those
        recorded under it.
        """
        assert self._index is not None
        signature = lane_signature(live)
        free = [n for n in self._index.candidates(signature) if self.bound_to[n] is None]
        digests = message_digests(live)
        exact = [n for n in free if self._index.first_request(n) == digests]
        if exact or exact_only:
            free = exact
        if len(free) > 1 and near is not None:
            close = [
                n
                for n in free
                if near in (self._scripts[n].header.parent_session, self._scripts[n].header.id)
            ]
            free = close or free
        if (
            len(free) > 1
            and not self._index.interchangeable(free)
            and not (exact and self._index.first_calls_alike(free))
        ):
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

    def _parent_number(self, options: GenerateOptions) -> int | None:
        """The script the caller's parent session is bound to, if it names a bound one."""
        if options.parent_session_id is None:
            return None
        return self._bound.get(options.parent_session_id)

    def _lineage_parent(self, options: GenerateOptions, parent_number: int | None) -> Script | None:
        """The parent's script when rule 3 binds the caller by lineage (a spawn index, under
        a bound parent whose children were recorded with theirs), else ``None``."""
        if (
            not self._lineage_binding
            or parent_number is None
            or options.spawn_index is None
            or self._scripts[parent_number].header.id not in self._lineage_parents
        ):
            return None
        return self._scripts[parent_number]

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
            # The proxy records every child with its spawn index: a script under a proxied
            # parent without one is a side lane of that parent (title, classifier), never
            # the child a caller naming its spawn index is.
            if (
                parent_number is not None
                and options.spawn_index is not None
                and self._scripts[number].header.spawn_index is None
                and self._proxied(parent_number)
            ):
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
            callless = [
                s.label for s in self._scripts if not s.calls and s.header.parent_session is None
            ]
            if callless and not any(holder is not None for holder in self.bound_to):
                # Nothing is bound yet, so this is the run's first caller: the top-level
                # recording it would be holds no call at all — cut short, not "all taken".
                reason = (
                    f"{', '.join(callless)} recorded no model call (the file was cut short, "
                    "or the recording run never called the model); restore it from version "
                    "control"
                )
        raise self._unrecorded(options, reason)

    def _conversation_of(self, number: int) -> int:
        """The script a named caller whose first request bound script ``number`` is (module
        docstring): for a side lane the proxy recorded, the conversation it hangs under, while
        no one holds that; otherwise ``number``."""
        header = self._scripts[number].header
        if header.spawn_index is not None or header.parent_session is None:
            return number
        conversation = self._numbers.get(header.parent_session)
        if conversation is None or self.bound_to[conversation] is not None:
            return number
        return conversation if self._proxied(number) else number

    def _proxied(self, number: int) -> bool:
        """The script was recorded by the proxy: its requests name their wire API."""
        return any(
            call.request is not None and call.request.api is not None
            for call in self._scripts[number].calls
        )

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
        parent = self._bound.get(options.parent_session_id) if options.parent_session_id else None
        parent_label: str | None = None
        spawn: int | None = None
        if parent is not None:
            # A child whose parent a header names: named as the recording knows them — the
            # parent's file, and (without a spawn index header) the spawn index record gave
            # it, the parent's delegation whose prompt is one of its user messages.
            handed = None
            for message in options.messages:
                if message.role == "user" and handed is None:
                    handed = delegated_by(
                        first_user_texts([message]),
                        self._delegations(parent),
                        set(),
                        anonymous=False,
                    )
            spawn = options.spawn_index
            if spawn is None and handed is not None:
                spawn = handed.ordinal
            label = self._scripts[parent].label
            if handed is not None and handed.said and handed.said not in reason:
                reason += f"; {label} handed it on with {handed.said}"
            parent_label = f"{label} (live {options.parent_session_id})"
        return self._error(options, reason, parent_label=parent_label, recorded_spawn_index=spawn)

    def _error(
        self,
        options: GenerateOptions,
        reason: str,
        *,
        parent_label: str | None = None,
        recorded_spawn_index: int | None = None,
    ) -> UnrecordedSessionError:
        """``unrecorded_error`` for this binder: its recording, the scripts bound so far,
        its scenario, whether it serves a proxy."""
        return unrecorded_error(
            options,
            reason,
            self._recording,
            sum(1 for holder in self.bound_to if holder is not None),
            self._scenario,
            proxied=self._index is not None,
            parent_label=parent_label,
            recorded_spawn_index=recorded_spawn_index,
        )


def _header_first_user(header: RequestHeaderData, texts: Mapping[str, str]) -> str | None:
    """The first user message of a recorded request header, whole (its text, kept in the
    header or in ``texts`` by digest, else its preview), stripped."""
    first = next((m for m in header.messages if m.role == "user"), None)
    if first is None:
        return None
    whole = first.text if first.text is not None else texts.get(first.digest, first.preview)
    text = whole.strip()
    return text or None


def _alike_fields(one: LaneSignature, other: LaneSignature) -> int:
    """How many of a lane signature's four fields two signatures share."""
    return sum(1 for mine, theirs in zip(one, other, strict=True) if mine == theirs)
