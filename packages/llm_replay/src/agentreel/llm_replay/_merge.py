"""Merging a drifted run into the recording it replayed (SPEC 20): one rule for
``agentreel record --drifted``, the pytest fixture and ``agentreel proxy replay
--record-drifted``.

- a session bound to a recorded one that never went live and used all of its calls is
  **kept**: its recorded file, byte for byte;
- one that went live from call k is **re-recorded from call k**: its new log, the
  recorded session's id and lineage kept (every bound session's live id is written as its
  recorded id, so kept children still name their parent);
- a session the recording did not hold is **new**, recorded with its lineage (a new child
  of a kept parent takes the id that parent's recording started it under);
- a recorded session no live caller was bound to is **dropped**.

Files are numbered by the one session order (``agentreel.session.order_sessions``), so a
kept file keeps its name unless lineage moves it; the new logs' times are put on the
recording's clock (``_ClockMap``), so the recorded schedule stays one timeline.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import re
import shutil
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec

from agentreel.llm_replay._drifted import DriftedReport
from agentreel.llm_replay._report import ConsumptionReport
from agentreel.session import (
    RECORDING_FILE_PATTERN,
    SessionHeader,
    order_sessions,
    recording_names,
    session_file_name,
)

Status = Literal["kept", "re-recorded", "new", "dropped"]


@dataclass(frozen=True, slots=True)
class SessionFate:
    """What ``--drifted`` did with one session: ``file`` is its name in the merged
    recording (``recorded_file`` in the old one; a dropped session has only that),
    ``from_call`` the first re-recorded call, ``calls`` its calls, split into those
    replayed (not paid for again) and those made live, with their recorded usage."""

    status: Status
    file: str | None
    recorded_file: str | None
    from_call: int | None = None
    calls: int = 0
    live_calls: int = 0
    saved_tokens: tuple[int, int] = (0, 0)
    live_tokens: tuple[int, int] = (0, 0)
    model: str | None = None

    def line(self) -> str:
        name = self.file or self.recorded_file or "?"
        if self.status == "kept":
            what = f"kept ({self.calls} call(s) replayed)"
        elif self.status == "re-recorded":
            what = (
                f"re-recorded from call {self.from_call} ({self.live_calls} of {self.calls} live)"
            )
        elif self.status == "new":
            what = f"new ({self.live_calls} call(s) recorded)"
        else:
            what = "dropped: no live session made its calls any more"
        moved = (
            f" (was {self.recorded_file})"
            if self.file and self.recorded_file and self.file != self.recorded_file
            else ""
        )
        return f"{name}{moved}: {what}"


def usage_sum(pairs: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """Prompt and completion tokens summed."""
    prompt = completion = 0
    for a, b in pairs:
        prompt += a
        completion += b
    return prompt, completion


@dataclass(frozen=True, slots=True)
class LiveLog:
    """One session log the drifted run wrote: its raw bytes (cwd already ``{{cwd}}``)."""

    header: SessionHeader
    data: bytes


@dataclass(frozen=True, slots=True)
class RecordedLog:
    """One file of the recording the run replayed."""

    name: str
    header: SessionHeader
    data: bytes


@dataclass(frozen=True, slots=True)
class Merged:
    """The merged recording (file name → bytes), what happened to each session, and the
    live session ids written as another (a bound session's recorded id, a new child's
    id from its kept parent's recording): what else names them (``wire.ndjson``) follows."""

    files: dict[str, bytes]
    fates: list[SessionFate]
    new_files: list[str]
    ids: dict[str, str]


def merge_drifted(
    recorded: Sequence[RecordedLog],
    live: Sequence[LiveLog],
    consumption: ConsumptionReport,
    drifted: DriftedReport,
) -> Merged:
    """Merge a drifted run into the recording it replayed (module docstring)."""
    by_file = {log.name: log for log in recorded}
    bound: dict[str, RecordedLog] = {}  # live session id → the recorded log it replayed
    consumed: dict[str, tuple[int, int]] = {}
    for script in consumption.scripts:
        if script.bound_to is not None and script.file in by_file:
            bound[script.bound_to] = by_file[script.file]
            consumed[script.bound_to] = (script.consumed, script.calls)
    went_live = {entry.caller: entry.from_call for entry in drifted.live}
    ids = {caller: log.header.id for caller, log in bound.items() if caller != log.header.id}
    clock = _ClockMap.between(bound, live, went_live)

    def is_kept(own: str) -> bool:
        if own not in bound or own in went_live:
            return False
        used, calls = consumed[own]
        return used >= calls

    kept = {
        bound[own].header.id: bound[own] for own in (log.header.id for log in live) if is_kept(own)
    }
    taken = {log.header.id for log in bound.values()}
    for log in live:
        header = log.header
        if header.id in bound or header.spawn_index is None or header.parent_session is None:
            continue
        # A new child of a kept parent takes the id the parent's recording started it
        # under (its recording deleted, or dropped and made again), so the kept log
        # and the new one agree on who the child is.
        parent = kept.get(ids.get(header.parent_session, header.parent_session))
        started = _started_children(parent.data) if parent is not None else {}
        child = started.get(header.spawn_index)
        if child is not None and child not in taken:
            ids[header.id] = child
            taken.add(child)

    items: list[tuple[SessionHeader, bytes, SessionFate]] = []
    for log in live:
        own = log.header.id
        target = bound.get(own)
        if target is not None and is_kept(own):
            fate = SessionFate("kept", None, target.name, calls=consumed[own][1])
            items.append((target.header, target.data, fate))
            continue
        data = clock.shift(_rename_ids(log.data, ids))
        header = _header(data)
        if target is not None:
            used, _ = consumed[own]
            # A bound session that never drifted but stopped short is re-recorded after
            # its last replayed call: what it did from then on is what the agent does now.
            start = went_live.get(own, used + 1)
            fate = SessionFate("re-recorded", None, target.name, from_call=start)
        else:
            fate = SessionFate("new", None, None, from_call=1)
        items.append((header, data, fate))
    ordered = order_sessions(items, lambda item: item[0])
    files: dict[str, bytes] = {}
    fates: list[SessionFate] = []
    new_files: list[str] = []
    for number, (_, data, fate) in enumerate(ordered):
        name = session_file_name(number)
        files[name] = data
        calls, usage = _calls(data)
        live_from = (fate.from_call or 1) - 1 if fate.status != "kept" else len(usage)
        live_from = min(live_from, len(usage))
        saved = usage_sum(usage[:live_from])
        spent = usage_sum(usage[live_from:])
        model = _model(data)
        fates.append(
            dataclasses.replace(
                fate,
                file=name,
                calls=calls,
                live_calls=calls - live_from,
                saved_tokens=saved,
                live_tokens=spent,
                model=model,
            )
        )
        if fate.status != "kept":
            new_files.append(name)
    used_files = {fate.recorded_file for fate in fates}
    for old in recorded:
        if old.name not in used_files:
            calls, usage = _calls(old.data)
            fates.append(
                SessionFate(
                    "dropped",
                    None,
                    old.name,
                    calls=calls,
                    live_calls=calls,
                    live_tokens=usage_sum(usage),
                )
            )
    return Merged(files, fates, new_files, ids)


def write_merged(directory: Path, files: Mapping[str, bytes]) -> tuple[list[str], list[str]]:
    """Write a merged recording's ``files`` into ``directory``: each changed file replaced
    whole (a temporary file renamed over it, so a crash leaves the old one), every session
    log the merge no longer holds removed. Returns ``(written, removed)`` file names."""
    written: list[str] = []
    removed: list[str] = []
    for path in sorted(directory.iterdir()):
        name = path.name
        stale = name not in files and name.startswith("session.")
        if stale and path.is_file() and RECORDING_FILE_PATTERN.fullmatch(name):
            path.unlink()
            removed.append(name)
    for name, data in files.items():
        target = directory / name
        if target.is_file() and target.read_bytes() == data:
            continue
        temporary = target.with_name(f".{name}.tmp")
        temporary.write_bytes(data)
        temporary.replace(target)
        written.append(name)
    return written, removed


def gap_names(directory: Path) -> dict[str, str]:
    """When a deleted session's file left a gap in ``directory``'s numbering: each name its
    recordings take numbered in order (what replay reads) → its name in ``directory``;
    ``{}`` when there is no gap."""
    names = recording_names(directory)
    if names == [session_file_name(number) for number in range(len(names))]:
        return {}
    return {session_file_name(number): name for number, name in enumerate(names)}


def gapless_copy(directory: Path, where: Path, *, leave_out: Collection[str] = ()) -> Path:
    """The recording a drifted run replays (SPEC 20): ``directory`` itself, or — when its
    numbering has a gap (``gap_names``) — a copy at ``where``, its recordings renumbered
    in order and every other entry but ``leave_out`` linked. The merge numbers its result
    by session order anyway; ``with_recorded_names`` says the fates in ``directory``'s
    names."""
    renamed = gap_names(directory)
    if not renamed:
        return directory
    where.mkdir(parents=True)
    for entry in directory.iterdir():
        if entry.name not in renamed.values() and entry.name not in leave_out:
            (where / entry.name).symlink_to(entry.resolve())
    for name, original in renamed.items():
        shutil.copy2(directory / original, where / name)
    return where


def with_recorded_names(merged: Merged, renamed: Mapping[str, str]) -> Merged:
    """``merged`` of a gapless copy (``gapless_copy``), its fates naming each recorded
    file as the recording has it (``renamed``: the copy's name → that name)."""
    if not renamed:
        return merged
    fates = [
        dataclasses.replace(fate, recorded_file=renamed.get(fate.recorded_file))
        if fate.recorded_file
        else fate
        for fate in merged.fates
    ]
    return dataclasses.replace(merged, fates=fates)


def _rename_ids(data: bytes, ids: Mapping[str, str]) -> bytes:
    """Every bound session's live id written as its recorded id (headers, lineage and
    the ``subagent/start`` events naming children)."""
    for live, recorded in ids.items():
        data = data.replace(live.encode(), recorded.encode())
    return data


_STARTED = re.compile(
    rb'"type":"subagent/start".*?"child_session":"([^"]+)","spawn_index":(\d+)', re.MULTILINE
)


def _started_children(data: bytes) -> dict[int, str]:
    """The children a log started: spawn index → child session id."""
    return {int(m.group(2)): m.group(1).decode() for m in _STARTED.finditer(data)}


def _header(data: bytes) -> SessionHeader:
    first = data.split(b"\n", 1)[0]
    return msgspec.json.decode(first, type=SessionHeader)


_EVENT = re.compile(rb'^\{"type":"([^"]+)","seq":\d+,"time":(\d+)', re.MULTILINE)
_CREATED = re.compile(rb'"created_at":(\d+)')


def _calls(data: bytes) -> tuple[int, list[tuple[int, int]]]:
    """A log's own calls (after a fork seed) and each call's recorded usage."""
    header = _header(data)
    usage: list[tuple[int, int]] = []
    lines = data.splitlines()[1 + header.seed_length :]
    for line in lines:
        if line.startswith(b'{"type":"request/header"'):
            usage.append((0, 0))
        elif b'"type":"usage"' in line and usage:
            chunk = json.loads(line)["data"]["chunk"]
            prompt, completion = usage[-1]
            usage[-1] = (
                prompt + int(chunk.get("input_tokens", 0)),
                completion + int(chunk.get("output_tokens", 0)),
            )
    return len(usage), usage


def _model(data: bytes) -> str | None:
    match = re.search(rb'"type":"request/header".*?"model":"([^"]*)"', data)
    return match.group(1).decode() if match else None


def _times(data: bytes, kinds: tuple[bytes, ...] = (b"request/header",)) -> list[int]:
    return [int(m.group(2)) for m in _EVENT.finditer(data) if m.group(1) in kinds]


class _ClockMap:
    """Live times onto the recording's clock, anchored at every replayed call.

    Each call a bound session replayed happened twice: when it was recorded and in the
    drifted run; those pairs are the anchors. A live time maps to the recorded time of
    the latest anchor at or before it plus the time since (never earlier than any anchor
    before it), so whatever the run did after a replayed call stays after it on the
    recorded clock, and the merged schedule is one timeline.
    """

    def __init__(self, anchors: list[tuple[int, int]]) -> None:
        anchors.sort()
        self._live = [a for a, _ in anchors]
        floor: list[int] = []
        best = None
        for live_time, recorded_time in anchors:
            value = recorded_time - live_time
            best = value if best is None else max(best, value)
            floor.append(best)
        self._offset = floor

    @classmethod
    def between(
        cls,
        bound: Mapping[str, RecordedLog],
        live: Sequence[LiveLog],
        went_live: Mapping[str, int],
    ) -> _ClockMap:
        """Anchors: each bound session's start and the request of each call it
        replayed, live and recorded."""
        anchors: list[tuple[int, int]] = []
        for log in live:
            target = bound.get(log.header.id)
            if target is None:
                continue
            anchors.append((log.header.created_at, target.header.created_at))
            replayed = went_live.get(log.header.id, 1 << 30) - 1
            ours = _times(log.data)[:replayed]
            theirs = _times(target.data)[:replayed]
            anchors += list(zip(ours, theirs, strict=False))
        return cls(anchors)

    def __call__(self, time_ms: int) -> int:
        if not self._live:
            return time_ms
        at = bisect.bisect_right(self._live, time_ms) - 1
        return time_ms + self._offset[max(at, 0)]

    def shift(self, data: bytes) -> bytes:
        if not self._live:
            return data

        def event(match: re.Match[bytes]) -> bytes:
            start = match.start(2) - match.start(0)
            return match.group(0)[:start] + str(self(int(match.group(2)))).encode()

        def created(match: re.Match[bytes]) -> bytes:
            return b'"created_at":' + str(self(int(match.group(1)))).encode()

        first, _, rest = data.partition(b"\n")
        return _CREATED.sub(created, first, count=1) + b"\n" + _EVENT.sub(event, rest)
