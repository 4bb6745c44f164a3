"""``agentreel record --drifted``: re-record only the sessions that drifted (SPEC 20).

The run replays the scenario's recording with the ``replay-drifted`` provider
(``agentreel.llm_replay.DriftedProvider``): a session whose request differs after masks,
or that the recording does not hold, goes to the record backend's upstream from that call
on; every other session is served as recorded. The run is then merged into the recording
(``merge_drifted``, the one rule, shared with the fixture and the proxy):

- a session bound to a recorded one that never went live and used all of its calls is
  **kept**: its recorded file, byte for byte;
- one that went live from call k is **re-recorded from call k**: its new log, the
  recorded session's id and lineage kept (every bound session's live id is written as its
  recorded id, so kept children still name their parent);
- a session the recording did not hold is **new**, recorded with its lineage;
- a recorded session no live caller was bound to is **dropped**, and said so.

Files are numbered by the one session order (``agentreel.session.order_sessions``), so a
kept file keeps its name unless lineage moves it; times of what was recorded now are put
on the recording's clock (``_ClockMap``), so the recorded schedule stays one timeline. The
secret scan runs over what is new, the trial replay on the merged whole, and the goldens
are written as pending (``agentreel review`` shows only what changed).
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentreel.llm_replay import ConsumptionReport, DriftedReport, read_drifted_report
from agentreel.session import (
    RECORDING_FILE_PATTERN,
    SessionHeader,
    load_session_log,
    order_sessions,
    session_file_name,
    tokenize_cwd,
)
from agentreel.snapshot_harness import _environment as envvars
from agentreel.snapshot_harness._backend import DRIFTED_REPORT_NAME
from agentreel.snapshot_harness._consumption import verify_consumption
from agentreel.snapshot_harness._diff import compare_goldens
from agentreel.snapshot_harness._layout import (
    GOLDEN_DIR,
    REPLAY_INPUTS,
    check_inventory,
    take_inventory,
)
from agentreel.snapshot_harness._pending import PendingGolden, review_hint, write_pending
from agentreel.snapshot_harness._prices import Prices, load_prices
from agentreel.snapshot_harness._render import render_goldens
from agentreel.snapshot_harness._result import RunResult
from agentreel.snapshot_harness._runner import run_scenario
from agentreel.snapshot_harness._scenario import WORKSPACE_DIR, RecordConfig, Scenario
from agentreel.snapshot_harness._secrets import scan_for_secrets
from agentreel.snapshot_harness.exceptions import HarnessError, RecordError

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


@dataclass(frozen=True, slots=True)
class DriftedSummary:
    """The report of one ``--drifted`` run: each session's fate and the totals."""

    scenario: str
    sessions: list[SessionFate]
    upstream_calls: int
    prices: Prices | None = None

    @property
    def saved_calls(self) -> int:
        return sum(fate.calls - fate.live_calls for fate in self.sessions if fate.file)

    @property
    def saved_tokens(self) -> tuple[int, int]:
        return _sum(fate.saved_tokens for fate in self.sessions if fate.file)

    @property
    def live_tokens(self) -> tuple[int, int]:
        return _sum(fate.live_tokens for fate in self.sessions if fate.file)

    def money_saved(self) -> float | None:
        """What the replayed calls would have cost at ``prices`` (``None`` without them,
        or when a model they name has no price)."""
        if self.prices is None:
            return None
        total = 0.0
        for fate in self.sessions:
            if not fate.file or fate.calls == fate.live_calls:
                continue
            cost = self.prices.cost(fate.model, *fate.saved_tokens)
            if cost is None:
                return None
            total += cost
        return total

    def text(self) -> str:
        counts = {s: sum(f.status == s for f in self.sessions) for s in _STATUSES}
        lines = [
            f"{self.scenario}: re-recorded only what drifted — "
            + ", ".join(f"{counts[s]} {s}" for s in _STATUSES)
        ]
        lines += [f"  {fate.line()}" for fate in self.sessions]
        saved_in, saved_out = self.saved_tokens
        live_in, live_out = self.live_tokens
        lines.append(
            f"  calls: {self.saved_calls} replayed, {self.upstream_calls} to the upstream; "
            f"tokens not spent again: {saved_in} prompt + {saved_out} completion "
            f"(spent: {live_in} + {live_out})"
        )
        money = self.money_saved()
        if money is not None and self.prices is not None:
            lines.append(f"  money not spent: {money:.4f} {self.prices.currency}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {
            "scenario": self.scenario,
            "sessions": [dataclasses.asdict(fate) for fate in self.sessions],
            "upstream_calls": self.upstream_calls,
            "saved_calls": self.saved_calls,
            "saved_tokens": list(self.saved_tokens),
            "live_tokens": list(self.live_tokens),
            "money_saved": self.money_saved(),
            "currency": self.prices.currency if self.prices is not None else None,
        }


_STATUSES: tuple[Status, ...] = ("kept", "re-recorded", "new", "dropped")


def _sum(pairs: object) -> tuple[int, int]:
    prompt = completion = 0
    for a, b in pairs:  # type: ignore[attr-defined]
        prompt += a
        completion += b
    return prompt, completion


@dataclass(frozen=True, slots=True)
class DriftedOutcome:
    """A ``--drifted`` record: the summary, the recording files written (changed ones
    only) and the pending goldens for review."""

    scenario: Scenario
    summary: DriftedSummary
    written: list[str]
    removed: list[str]
    pending: list[PendingGolden]
    duration: float
    result: RunResult | None = field(default=None, repr=False)

    def progress(self, width: int) -> str:
        """The CLI's lines for it: the progress line, what was written, the summary and
        where the pending goldens are reviewed."""
        kept = sum(fate.status != "dropped" for fate in self.summary.sessions)
        lines = [
            f"REC   {self.scenario.name:<{width}}  {f'{kept} sessions':>10}  "
            f"{self.duration:6.2f}s  (--drifted)"
        ]
        changed = [*self.written, *(f"removed {name}" for name in self.removed)]
        if changed:
            lines.append(f"      wrote {', '.join(changed)}")
        lines.append(self.summary.text())
        if self.pending:
            lines.append(
                f"      {len(self.pending)} golden(s) pending: "
                f"{review_hint(self.scenario.directory)}"
            )
        return "\n".join(lines)


# -- the merge: one rule for the scenario, the fixture and the proxy -----------------------


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
    """The merged recording (file name → bytes) and what happened to each session."""

    files: dict[str, bytes]
    fates: list[SessionFate]
    new_files: list[str]


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
        saved = _sum(usage[:live_from])
        spent = _sum(usage[live_from:])
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
    for log in recorded:
        if log.name not in used_files:
            calls, usage = _calls(log.data)
            fates.append(
                SessionFate(
                    "dropped",
                    None,
                    log.name,
                    calls=calls,
                    live_calls=calls,
                    live_tokens=_sum(usage),
                )
            )
    return Merged(files, fates, new_files)


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
    import msgspec

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


# -- the scenario command ------------------------------------------------------------------


def record_drifted(
    scenario: Scenario,
    *,
    record: RecordConfig | None = None,
    work_dir: Path | None = None,
) -> DriftedOutcome:
    """``agentreel record --drifted NAME``: replay, the drifted sessions live, merge, trial
    replay, write the changed recordings and the goldens as pending (module docstring).
    Raises a ``HarnessError`` naming what failed; nothing is written then."""
    started = time.monotonic()
    if scenario.model.proxied:
        raise RecordError(
            f"{scenario.name}: --drifted does not run scenarios through the proxy yet; "
            f"re-record it whole: agentreel record {scenario.name}"
        )
    check_inventory(scenario, "refresh")
    recorded = _recorded_logs(scenario)
    scratch = Path(tempfile.mkdtemp(prefix=f"agentreel-{scenario.name}-drifted-"))
    try:
        run_dir = (work_dir or scratch) / "run"
        result = run_scenario(scenario, "drifted", record=record, work_dir=run_dir)
        consumption = result.replay_report
        if consumption is None:
            raise RecordError(
                f"{scenario.name}: the agent never loaded the replay-drifted provider (it "
                "wrote no replay report); configure its provider from AGENTREEL_PROVIDER"
            )
        report_file = result.run_dir / DRIFTED_REPORT_NAME
        drifted = read_drifted_report(report_file) if report_file.is_file() else DriftedReport()
        live = [
            LiveLog(log.header, tokenize_cwd(raw, result.cwd))
            for log, raw in zip(result.session_logs, result.session_log_bytes, strict=True)
        ]
        merged = merge_drifted(recorded, live, consumption, drifted)
        secrets = envvars.secret_values(os.environ, scenario.env, keys=scenario.auth_env())
        allow = scenario.record.allow_secrets
        scan_for_secrets(
            {name: merged.files[name] for name in merged.new_files},
            secrets,
            scenario.name,
            allow=allow,
        )
        goldens = _trial_replay(scenario, merged.files, scratch / "trial")
        scan_for_secrets(
            {f"{GOLDEN_DIR}/{k}": v for k, v in goldens.items()},
            secrets,
            scenario.name,
            allow=allow,
            action="write the pending goldens",
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    written, removed = _write_changed(scenario.directory, merged.files)
    diffs = compare_goldens(scenario, goldens)
    pending = write_pending(scenario.directory, goldens, diffs) if diffs else []
    summary = DriftedSummary(
        scenario.name,
        merged.fates,
        drifted.upstream_calls,
        load_prices(scenario),
    )
    return DriftedOutcome(
        scenario, summary, written, removed, pending, time.monotonic() - started, result
    )


def _recorded_logs(scenario: Scenario) -> list[RecordedLog]:
    logs: list[RecordedLog] = []
    for name in take_inventory(scenario).recordings:
        path = scenario.directory / name
        logs.append(RecordedLog(name, load_session_log(path).header, path.read_bytes()))
    return logs


def _trial_replay(scenario: Scenario, files: dict[str, bytes], where: Path) -> dict[str, bytes]:
    """The merged recording replayed keylessly from a scratch copy; its goldens."""
    copy = where / scenario.name
    copy.mkdir(parents=True)
    for name in REPLAY_INPUTS:
        if (scenario.directory / name).is_file():
            shutil.copy2(scenario.directory / name, copy / name)
    if scenario.workspace is not None:
        shutil.copytree(scenario.workspace, copy / WORKSPACE_DIR, symlinks=True)
    for name, data in files.items():
        (copy / name).write_bytes(data)
    trial = dataclasses.replace(
        scenario, directory=copy, agent_root=scenario.agent_root or scenario.directory
    )
    try:
        replayed = run_scenario(trial, "replay")
        verify_consumption(trial, replayed)
    except HarnessError as exc:
        raise RecordError(
            f"{scenario.name}: re-recorded what drifted, but the merged recording does not "
            f"replay, so nothing was written:\n{exc}\nRe-record it whole: "
            f"agentreel record {scenario.name}"
        ) from exc
    return render_goldens(replayed)


def _write_changed(directory: Path, files: dict[str, bytes]) -> tuple[list[str], list[str]]:
    """Write the recording files whose bytes changed (a kept file is not touched) and
    remove the recording files the merged recording no longer has."""
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
