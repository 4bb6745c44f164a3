"""Writing sessions: the JSONL backend ``<root>/<cwd bucket>/<session id>.jsonl``."""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from agentreel.brand import SessionId, new_session_id
from agentreel.session._codec import encode_record
from agentreel.session._events import (
    EVENT_FOR_DATA,
    EmptyData,
    EndSeed,
    Event,
    EventData,
    Origin,
    SessionHeader,
    StepData,
    StepEnd,
    StepStart,
    TurnEnd,
)
from agentreel.session.exceptions import SessionClosedError

Clock = Callable[[], float]
"""Where a log's times come from: epoch milliseconds. A header's ``created_at`` takes the
whole milliseconds; an event's ``time`` keeps the fraction."""


def epoch_ms() -> int:
    """Wall-clock time in whole epoch milliseconds."""
    return time.time_ns() // 1_000_000


def now_ms() -> float:
    """Wall-clock time in epoch milliseconds to the microsecond: every event's ``time``.

    One clock for every log of a recording, whatever process writes it (the system's
    real-time clock is shared by a parent agent and its process children, and by the
    proxy): so a ``request/header`` and a ``finish`` in two logs tell which call ended
    before which started (SPEC 13, the recorded schedule). Whole milliseconds could not:
    a stub or replay answers within one."""
    return round(time.time_ns() / 1_000_000, 3)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def cwd_bucket(cwd: str | Path) -> str:
    """A readable, filesystem-safe, collision-free directory name for ``cwd``.

    The readable part is a slug of the path's last components (bounded length); a digest
    of the full path makes different cwds that slug alike land in different buckets.
    """
    text = str(cwd)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    slug = _UNSAFE.sub("-", text).strip("-.")[-48:].lstrip("-.") or "root"
    return f"{slug}-{digest}"


class Session:
    """One live session writing its log. Create through ``SessionStore``.

    Appends write whole lines; the file is flushed at every ``turn/end`` and on close (a
    process killed in between loses at most the unflushed tail, and the loader reports a
    torn last line). Appends never await and take a lock, so any number of asyncio tasks
    (or threads) may append to their sessions concurrently: lines never interleave and
    ``seq`` stays contiguous. Usable as a context manager (closes on exit).
    """

    def __init__(self, path: Path, header: SessionHeader, seed: list[Event], clock: Clock) -> None:
        self.path = path
        self.header = header
        self._clock = clock
        self._events: list[Event] = []
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._file: BinaryIO | None = path.open("xb")
        except FileExistsError:
            raise FileExistsError(
                f"session {header.id} already has a log at {path}; a session id is written "
                "once: start a new session (let the store pick the id) or use a fresh "
                "sessions root"
            ) from None
        self._file.write(encode_record(header))
        for event in seed:
            self._write(event)
        if header.origin == "fork":
            self._write(EndSeed(seq=len(self._events), time=clock(), data=EmptyData()))
        self._file.flush()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def id(self) -> SessionId:
        return SessionId(self.header.id)

    @property
    def created_at(self) -> int:
        return self.header.created_at

    @property
    def cwd(self) -> str:
        return self.header.cwd

    @property
    def parent_session(self) -> SessionId | None:
        parent = self.header.parent_session
        return None if parent is None else SessionId(parent)

    @property
    def spawn_index(self) -> int | None:
        return self.header.spawn_index

    @property
    def origin(self) -> Origin:
        return self.header.origin

    @property
    def seed_length(self) -> int:
        return self.header.seed_length

    @property
    def events(self) -> list[Event]:
        """Every event written so far (a fork child's seed included)."""
        return list(self._events)

    @property
    def closed(self) -> bool:
        return self._file is None

    def append(self, data: EventData) -> Event:
        """Append one event built from its payload; returns the written event."""
        if isinstance(data, StepData):
            raise TypeError("StepData is ambiguous: use step_start() or step_end()")
        if isinstance(data, EmptyData):
            raise TypeError(
                "session/end-seed is written by SessionStore.fork() right after the seed; "
                "it cannot be appended"
            )
        event_type = EVENT_FOR_DATA.get(type(data))
        if event_type is None:
            raise TypeError(f"{type(data).__name__} is not an event payload of the session log")
        return self._append(event_type, data, flush=event_type is TurnEnd)

    def step_start(self, turn: int, step: int) -> Event:
        return self._append(StepStart, StepData(turn=turn, step=step))

    def step_end(self, turn: int, step: int) -> Event:
        return self._append(StepEnd, StepData(turn=turn, step=step))

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def close(self) -> None:
        """Flush and close the log; closing twice is harmless."""
        with self._lock:
            if self._file is not None:
                self._file.flush()
                self._file.close()
                self._file = None

    def _append(self, event_type: type[Event], data: EventData, *, flush: bool = False) -> Event:
        with self._lock:
            event = event_type(seq=len(self._events), time=self._clock(), data=data)  # type: ignore[arg-type]
            self._write(event)
            if flush and self._file is not None:
                self._file.flush()
        return event

    def _write(self, event: Event) -> None:
        if self._file is None:
            raise SessionClosedError(
                f"session {self.header.id} ({self.path}) is closed; cannot append "
                f"{type(event).__name__}. Append before close(), or start a new session"
            )
        self._file.write(encode_record(event))
        self._events.append(event)


class SessionStore:
    """Creates sessions under ``root``; parent and children of one cwd share a bucket."""

    def __init__(self, root: Path | str, *, clock: Clock = now_ms) -> None:
        self.root = Path(root)
        self._clock = clock
        self._open: dict[str, Session] = {}

    def path_for(self, header: SessionHeader) -> Path:
        return self.root / cwd_bucket(header.cwd) / f"{header.id}.jsonl"

    def create(self, cwd: str | Path, *, session_id: SessionId | None = None) -> Session:
        """Start a top-level (``main``) session."""
        header = SessionHeader(
            id=session_id or new_session_id(), created_at=int(self._clock()), cwd=str(cwd)
        )
        return self._open_session(header, [])

    def spawn(self, parent: Session, spawn_index: int) -> Session:
        """Start a child with a fresh log."""
        return self._child(parent, spawn_index, "spawn", [])

    def adopt(
        self, cwd: str | Path, *, session_id: SessionId, parent_session: SessionId, spawn_index: int
    ) -> Session:
        """Start a spawned child whose parent lives in another process (a process subagent).

        The parent chose ``session_id`` and ``spawn_index`` and logged ``subagent/start``
        for them; this process only writes the child's own log, so harvesting the shared
        sessions root still finds one tree.
        """
        if isinstance(spawn_index, bool) or not isinstance(spawn_index, int) or spawn_index < 0:
            raise ValueError(
                f"spawn_index must be an int >= 0 (the child's ordinal among the children "
                f"of {parent_session}), got {spawn_index!r}"
            )
        header = SessionHeader(
            id=session_id,
            created_at=int(self._clock()),
            cwd=str(cwd),
            parent_session=parent_session,
            spawn_index=spawn_index,
            origin="spawn",
        )
        return self._open_session(header, [])

    def fork(self, parent: Session, spawn_index: int) -> Session:
        """Start a child seeded with the parent's events up to its last ``turn/end``.

        A parent with no completed turn yields an explicit empty seed (``seed_length`` 0,
        ``session/end-seed`` still written): the child starts with a fresh context.
        """
        events = parent.events
        cut = 0
        for position in range(len(events) - 1, -1, -1):
            if isinstance(events[position], TurnEnd):
                cut = position + 1
                break
        return self._child(parent, spawn_index, "fork", events[:cut])

    def close_all(self) -> None:
        """Flush and close every session this store opened."""
        for session in list(self._open.values()):
            session.close()
        self._open.clear()

    def _child(
        self, parent: Session, spawn_index: int, origin: Origin, seed: list[Event]
    ) -> Session:
        if isinstance(spawn_index, bool) or not isinstance(spawn_index, int) or spawn_index < 0:
            raise ValueError(
                f"spawn_index must be an int >= 0 (the child's ordinal among the children "
                f"of {parent.id}), got {spawn_index!r}"
            )
        header = SessionHeader(
            id=new_session_id(),
            created_at=int(self._clock()),
            cwd=parent.header.cwd,
            parent_session=parent.header.id,
            spawn_index=spawn_index,
            origin=origin,
            seed_length=len(seed),
        )
        return self._open_session(header, seed)

    def _open_session(self, header: SessionHeader, seed: list[Event]) -> Session:
        session = Session(self.path_for(header), header, seed, self._clock)
        self._open[header.id] = session
        return session
