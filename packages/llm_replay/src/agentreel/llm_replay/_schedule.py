"""The recorded schedule (SPEC 13): replay keeps the recorded happens-before between calls.

A recording keeps, on one clock (``agentreel.session.now_ms``: every log's event ``time``,
whatever process wrote it), each call's start (its ``request/header``) and end (its
``finish``): ``RecordedCall.started`` / ``ended``. With ``schedule = "recorded"`` a
replayed call is held at two points:

- its **first frame** waits for every call that ended before it started;
- its **final frame** waits for every call that ended before it ended, for every call that
  *started* before it ended to have been requested (so an asynchronous child cannot end
  before the request its parent formed without its result), and for every call that ended
  before the next call of its own lane started (a child's completion, a title), as far as
  that hold moves its end only past other ends — never past a call's start.

That last limit is what keeps the holds free of cycles: a call that started after this one
ended may have started *because* it ended (a child spawned by this reply), so holding this
end past that start could wait forever. So the recorded timeline (ends before starts at
equal times, so a tie never orders a start before an end it may depend on) is cut at each
start into runs of ends, and within a run the calls whose lane goes on end last — the one
whose lane's next call is the start closing the run very last. Every wait then points
backwards in one total order that agrees with the recording: the agent, doing what it did,
can always make the call awaited.

A wait longer than ``timeout`` seconds proceeds; what it waited for is reported as a
schedule divergence naming both calls (``on_divergence``), and is given up on (no later
wait waits for it again). Partial lanes (side calls that may not run at all) are left out.
Calls are ``(script number, position)``; the provider tells the schedule when each is
requested (``requested``), and each served stream awaits ``first`` / ``final`` and says
``ended`` when its final frame goes out (or it stops early).
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from agentreel.llm_replay._fixture import Script


@dataclass(frozen=True, slots=True)
class ScheduleDivergence:
    """A wait that ran past the timeout: which call waited, at which frame, and for which."""

    waiting: str
    frame: Literal["first", "final"]
    awaited: str
    relation: str
    status: str
    others: int
    seconds: float

    def message(self, scenario: str) -> str:
        more = f" (and {self.others} more call(s) it waited for)" if self.others else ""
        return (
            f"schedule divergence in {scenario}: {self.waiting} waited {self.seconds:g} s "
            f"before its {self.frame} frame for {self.awaited}{more}, which {self.relation} "
            f"in the recording and has not {self.status} in this replay; it went on without "
            "it. The agent did not make or finish "
            "that call when the recording did: re-record if its behaviour changed, raise "
            "[replay] schedule_timeout if it is only slower, or set [replay] "
            'schedule_divergence = "allow" if this order does not matter'
        )


class _Waiter:
    __slots__ = ("before", "ends", "future", "starts")

    def __init__(self, before: int, ends: int, starts: int) -> None:
        self.before = before  # leading calls by recorded end that must have ended
        self.ends = ends  # leading calls of the end order that must have ended
        self.starts = starts  # leading calls by recorded start that must have been requested
        self.future: asyncio.Future[None] | None = None

    def met(self, schedule: Schedule) -> bool:
        return (
            self.before <= schedule._by_end_done
            and self.ends <= schedule._ends_done
            and self.starts <= schedule._starts_done
        )


class Schedule:
    """The recorded order of the calls of ``scripts`` and who has reached it in replay."""

    def __init__(
        self,
        scripts: Sequence[Script],
        *,
        timeout: float,
        on_divergence: Callable[[ScheduleDivergence], None],
        skip: Sequence[bool] = (),
    ) -> None:
        self.timeout = timeout
        self._on_divergence = on_divergence
        self._scripts = scripts
        # Flat call indexes; -1 for a call the schedule leaves out (a partial lane's).
        self._index: list[list[int]] = []
        calls: list[tuple[int, int]] = []
        started: list[float] = []
        ended: list[float] = []
        for script in scripts:
            left_out = script.number < len(skip) and skip[script.number]
            row: list[int] = []
            for position, call in enumerate(script.calls):
                if left_out:
                    row.append(-1)
                    continue
                row.append(len(calls))
                calls.append((script.number, position))
                started.append(call.started)
                ended.append(call.ended)
            self._index.append(row)
        self._calls = calls
        count = len(calls)
        # A lane's times never go back (a clock step, or one whole-millisecond tick
        # holding a call's start, its end and its lane's next start).
        ends: list[float] = []
        previous: dict[int, float] = {}
        for i, (number, _) in enumerate(calls):
            started[i] = max(started[i], previous.get(number, started[i]))
            ends.append(max(ended[i], started[i]))
            previous[number] = ends[i]
        timeline = _timeline(calls, started, ends)
        end_order: list[int] = []
        self._final_need = [0] * count
        run: list[int] = []

        def close_run(bound: int | None) -> None:
            # The calls whose lane goes on end last in their run, the one whose next call
            # opens the next start very last.
            def order(i: int) -> tuple[int, float]:
                number, position = calls[i]
                if position + 1 >= len(scripts[number].calls):
                    return (0, ends[i])
                if bound is not None and calls[bound] == (number, position + 1):
                    return (2, ends[i])
                return (1, ends[i])

            for i in sorted(run, key=order):
                self._final_need[i] = len(end_order)
                end_order.append(i)
            run.clear()

        for is_start, i in timeline:
            if is_start:
                close_run(i)
            else:
                run.append(i)
        close_run(None)
        # What each hold waits for, strictly earlier on the clock (ties order nothing): a
        # first frame for the calls that ended before it started; a final frame for those
        # ahead of it in ``end_order`` and for the starts before its end.
        by_end = sorted(range(count), key=lambda i: (ends[i], i))
        by_start = sorted(range(count), key=lambda i: (started[i], i))
        end_times = [ends[i] for i in by_end]
        start_times = [started[i] for i in by_start]
        self._first_need = [bisect_left(end_times, started[i]) for i in range(count)]
        self._arrival_need = [bisect_left(start_times, ends[i]) for i in range(count)]
        self._end_order = end_order
        self._by_end = by_end
        self._start_order = by_start
        self._ended = [False] * count
        self._requested = [False] * count
        self._ends_done = 0  # leading calls of end_order that have ended
        self._by_end_done = 0  # leading calls of by_end (by recorded end) that have ended
        self._starts_done = 0  # leading calls of start_order that were requested
        self._waiters: list[_Waiter] = []

    def gates(self, number: int, position: int) -> CallGates | None:
        """The gates of call ``position`` of script ``number`` (None: left out)."""
        index = self._index[number][position] if number < len(self._index) else -1
        return CallGates(self, index) if index >= 0 else None

    # -- progress ---------------------------------------------------------------------------

    def _request(self, index: int) -> None:
        if self._requested[index]:
            return
        self._requested[index] = True
        done = _leading(self._start_order, self._starts_done, self._requested)
        if done != self._starts_done:
            self._starts_done = done
            self._wake()

    def _end(self, index: int) -> None:
        if self._ended[index]:
            return
        self._ended[index] = True
        done = _leading(self._end_order, self._ends_done, self._ended)
        by_done = _leading(self._by_end, self._by_end_done, self._ended)
        if done != self._ends_done or by_done != self._by_end_done:
            self._ends_done = done
            self._by_end_done = by_done
            self._wake()

    def _wake(self) -> None:
        still: list[_Waiter] = []
        for waiter in self._waiters:
            future = waiter.future
            if future is None or future.done():
                continue
            if waiter.met(self):
                future.set_result(None)
            else:
                still.append(waiter)
        self._waiters = still

    async def _wait(self, index: int, frame: Literal["first", "final"]) -> None:
        if frame == "first":
            if self._first_need[index] <= self._by_end_done:
                return  # the common case, where the live order matches: nothing to build
            waiter = _Waiter(self._first_need[index], 0, 0)
        else:
            ends, starts = self._final_need[index], self._arrival_need[index]
            if ends <= self._ends_done and starts <= self._starts_done:
                return
            waiter = _Waiter(0, ends, starts)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter.future = future
        self._waiters.append(waiter)
        began = time.monotonic()
        try:
            await asyncio.wait_for(asyncio.shield(future), self.timeout)
        except TimeoutError:
            self._give_up(index, frame, waiter, time.monotonic() - began)
        finally:
            if not future.done():
                future.cancel()

    def _give_up(
        self, index: int, frame: Literal["first", "final"], waiter: _Waiter, waited: float
    ) -> None:
        """Report what ``index`` waited for and stop waiting for it, here and everywhere."""
        awaited_ends = self._by_end[self._by_end_done : waiter.before] + [
            i for i in self._end_order[self._ends_done : waiter.ends] if i != index
        ]
        missing_ends = list(dict.fromkeys(i for i in awaited_ends if not self._ended[i]))
        missing_starts = [
            i
            for i in self._start_order[self._starts_done : waiter.starts]
            if not self._requested[i]
        ]
        if missing_ends:
            awaited = missing_ends[0]
            if frame == "first":
                relation = "ended before it started"
            elif self._calls[awaited][0] != self._calls[index][0] and self._before_end(
                awaited, index
            ):
                relation = "ended before it ended"
            else:
                relation = "ended before the next call of its lane started"
            status = "ended"
        else:
            awaited = missing_starts[0]
            relation = "started before it ended"
            status = "been requested"
        self._on_divergence(
            ScheduleDivergence(
                waiting=self._label(index),
                frame=frame,
                awaited=self._label(awaited),
                relation=relation,
                status=status,
                others=len(missing_ends) + len(missing_starts) - 1,
                seconds=round(waited, 3),
            )
        )
        # A call given up on is given up whole: nothing waits for its request or end again.
        for i in missing_starts + missing_ends:
            self._request(i)
        for i in missing_ends:
            self._end(i)

    def _before_end(self, awaited: int, index: int) -> bool:
        a_number, a_position = self._calls[awaited]
        number, position = self._calls[index]
        a_call = self._scripts[a_number].calls[a_position]
        return a_call.ended < self._scripts[number].calls[position].ended

    def _label(self, index: int) -> str:
        number, position = self._calls[index]
        return f"call {position + 1} of {self._scripts[number].label}"


def _timeline(
    calls: Sequence[tuple[int, int]], started: Sequence[float], ends: Sequence[float]
) -> list[tuple[bool, int]]:
    """Every start and end, ``(is_start, call)``, in recorded order. At equal times each
    lane keeps its own order (a call's start, its end, its lane's next start) and, across
    lanes, ends come before starts: a tie never orders a start before an end it may
    depend on, nor an end before its own call's start."""
    events = sorted(
        [(ends[i], 0, i) for i in range(len(calls))]
        + [(started[i], 1, i) for i in range(len(calls))]
    )
    order: list[tuple[bool, int]] = []
    at = 0
    while at < len(events):
        tied = at
        while tied < len(events) and events[tied][0] == events[at][0]:
            tied += 1
        group = [(kind == 1, i) for _, kind, i in events[at:tied]]
        if len(group) > 1:
            group = _lane_ordered(calls, group)
        order.extend(group)
        at = tied
    return order


def _lane_ordered(
    calls: Sequence[tuple[int, int]], group: list[tuple[bool, int]]
) -> list[tuple[bool, int]]:
    """Events of one time: each lane's in its own order, ends first where free."""

    def lane_key(event: tuple[bool, int]) -> tuple[int, int, int]:
        number, position = calls[event[1]]
        return (number, position, 0 if event[0] else 1)

    lanes: dict[int, list[tuple[bool, int]]] = {}
    for event in sorted(group, key=lane_key):
        lanes.setdefault(calls[event[1]][0], []).append(event)
    heads = {number: 0 for number in lanes}
    placed: list[tuple[bool, int]] = []
    while len(placed) < len(group):
        ready = [lanes[n][heads[n]] for n in sorted(lanes) if heads[n] < len(lanes[n])]
        pick = next((event for event in ready if not event[0]), ready[0])
        placed.append(pick)
        heads[calls[pick[1]][0]] += 1
    return placed


class CallGates:
    """One replayed call's holds: ``requested`` when bound, ``first`` before its first
    frame, ``final`` before its final frame, ``ended`` once that frame is out (or the
    stream stopped early: a cancel, an override's error)."""

    __slots__ = ("_index", "_schedule")

    def __init__(self, schedule: Schedule, index: int) -> None:
        self._schedule = schedule
        self._index = index

    def requested(self) -> None:
        self._schedule._request(self._index)

    async def first(self) -> None:
        await self._schedule._wait(self._index, "first")

    async def final(self) -> None:
        await self._schedule._wait(self._index, "final")

    def ended(self) -> None:
        self._schedule._end(self._index)


def unheld_orders(scripts: Sequence[Script]) -> list[str]:
    """Orders in a recording the recorded schedule cannot be trusted to hold (issue 39):
    a spawned child's call after its first that started while its parent's call was
    still open. The schedule would hold the parent's end until that child call is
    requested, but the child reaches it only through its own progress, which raced the
    parent's stream when it was recorded: a replay keeps the order by luck. (A child's
    first call follows the spawn that started it, so a parent's open call may overlap
    it: an asynchronous child.) Side lanes are left out, as the schedule leaves them."""
    by_id = {script.header.id: script for script in scripts}
    found: list[str] = []
    for script in scripts:
        parent = by_id.get(script.header.parent_session or "")
        if parent is None or script.header.spawn_index is None:
            continue
        for call in script.calls[1:]:
            for open_call in parent.calls:
                if open_call.started < call.started < open_call.ended:
                    found.append(
                        f"{script.label} call {call.number} started "
                        f"{call.started - open_call.started:.0f} ms into {parent.label} call "
                        f"{open_call.number}, which ended "
                        f"{open_call.ended - call.started:.0f} ms later"
                    )
    return found


def _leading(order: Sequence[int], done: int, reached: Sequence[bool]) -> int:
    """How many leading calls of ``order`` have ``reached``, counting on from ``done``."""
    while done < len(order) and reached[order[done]]:
        done += 1
    return done
