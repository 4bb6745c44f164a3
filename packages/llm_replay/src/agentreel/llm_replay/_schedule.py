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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from agentreel.llm_replay._fixture import Script

ScheduleMode = Literal["free", "recorded"]
SCHEDULE_MODES: tuple[ScheduleMode, ...] = ("free", "recorded")
DivergenceMode = Literal["error", "allow"]
DIVERGENCE_MODES: tuple[DivergenceMode, ...] = ("error", "allow")
DEFAULT_SCHEDULE_TIMEOUT = 10.0
"""Seconds a call waits for the calls the recording put before it (``schedule_timeout``)."""


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
    __slots__ = ("ends", "future", "starts")

    def __init__(self, ends: int, starts: int, future: asyncio.Future[None]) -> None:
        self.ends = ends
        self.starts = starts
        self.future = future


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
        # The recorded timeline: ends before starts at equal times.
        timeline = sorted(
            [(ended[i], 0, i) for i in range(count)] + [(started[i], 1, i) for i in range(count)]
        )
        end_order: list[int] = []
        start_order: list[int] = []
        self._first_need = [0] * count
        self._final_need = [0] * count
        self._arrival_need = [0] * count
        run: list[int] = []

        def close_run(bound: int | None) -> None:
            # The calls whose lane goes on end last in their run, the one whose next call
            # opens the next start very last.
            def order(i: int) -> tuple[int, float]:
                number, position = calls[i]
                if position + 1 >= len(scripts[number].calls):
                    return (0, ended[i])
                if bound is not None and calls[bound] == (number, position + 1):
                    return (2, ended[i])
                return (1, ended[i])

            for i in sorted(run, key=order):
                self._final_need[i] = len(end_order)
                end_order.append(i)
            run.clear()

        for _, kind, i in timeline:
            if kind == 0:
                self._arrival_need[i] = len(start_order)
                run.append(i)
            else:
                close_run(i)
                self._first_need[i] = len(end_order)
                start_order.append(i)
        close_run(None)
        self._end_order = end_order
        self._start_order = start_order
        self._ended = [False] * count
        self._requested = [False] * count
        self._ends_done = 0  # leading calls of end_order that have ended
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
        order, done = self._start_order, self._starts_done
        while done < len(order) and self._requested[order[done]]:
            done += 1
        if done != self._starts_done:
            self._starts_done = done
            self._wake()

    def _end(self, index: int) -> None:
        if self._ended[index]:
            return
        self._ended[index] = True
        order, done = self._end_order, self._ends_done
        while done < len(order) and self._ended[order[done]]:
            done += 1
        if done != self._ends_done:
            self._ends_done = done
            self._wake()

    def _wake(self) -> None:
        still: list[_Waiter] = []
        for waiter in self._waiters:
            if waiter.future.done():
                continue
            if waiter.ends <= self._ends_done and waiter.starts <= self._starts_done:
                waiter.future.set_result(None)
            else:
                still.append(waiter)
        self._waiters = still

    async def _wait(self, index: int, frame: Literal["first", "final"]) -> None:
        if frame == "first":
            ends, starts = self._first_need[index], 0
        else:
            ends, starts = self._final_need[index], self._arrival_need[index]
        if ends <= self._ends_done and starts <= self._starts_done:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(_Waiter(ends, starts, future))
        began = time.monotonic()
        try:
            await asyncio.wait_for(asyncio.shield(future), self.timeout)
        except TimeoutError:
            self._give_up(index, frame, ends, starts, time.monotonic() - began)
        finally:
            if not future.done():
                future.cancel()

    def _give_up(
        self, index: int, frame: Literal["first", "final"], ends: int, starts: int, waited: float
    ) -> None:
        """Report what ``index`` waited for and stop waiting for it, here and everywhere."""
        missing_ends = [i for i in self._end_order[self._ends_done : ends] if not self._ended[i]]
        missing_starts = [
            i for i in self._start_order[self._starts_done : starts] if not self._requested[i]
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
