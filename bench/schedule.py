"""The recorded schedule's cost (SPEC 13): replay with ``schedule = "recorded"`` vs free.

Two sides measured together, each a ratio recorded / free (target <= 1.1x where the live
order already matches the recorded one):

- **the committed suite**: every scenario of ``fixtures/`` that replays cleanly now,
  copied twice into a temporary fixtures directory — once as committed, once with
  ``[replay] schedule = "recorded"`` appended — and replayed one after another with
  ``check_scenario`` (agent processes, proxies and goldens as in ``nox -s replay``),
  alternating the two copies; wall time of the whole pass. Which scenarios replay with the
  schedule at all is listed (the default decision rests on it).
- **64 concurrent sessions**: a parent and 64 children of 50 chunks through one
  ``ReplayProvider`` (as ``concurrency``), recorded with the children started in the order
  the live tasks start and ended in the order they finish when each yields after every
  chunk — the live order matches — CPU time of the children's streams.
- **the proxy's 64 HTTP sessions**: the ``proxy`` bench's 64 concurrent sessions (identity
  headers, 50 chunks each, the stub upstream) recorded once through the recording proxy,
  then replayed over HTTP by the same 64 concurrent clients from a proxy with
  ``schedule = "recorded"`` and from one without, alternating; wall time per chunk, every
  session checked for its own answer, and the schedule divergences counted (a wait past
  the timeout: where the live order did not match the recorded one).
"""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
from functools import partial
from pathlib import Path

from agentreel.brand import new_session_id
from agentreel.llm import Chunk
from agentreel.llm_replay import ReplayProvider, ReplaySettings, ScheduleMode
from agentreel.llm_replay.testing import RECORD_CWD, options_for, text_call
from agentreel.session import (
    AssistantChunkData,
    SessionStore,
    SubagentStartData,
    build_request_header,
    harvest_session_logs,
    session_file_name,
)
from agentreel.snapshot_harness import HarnessError, check_scenario, discover_scenarios
from bench._common import FIXTURES, BenchResult, Settings, cpu_timed_async, timed
from bench.concurrency import CHILDREN, CHUNKS, child_chunks

SCHEDULED = '\n[replay]\nschedule = "recorded"\n'


def _suite_copies(tmp: Path) -> tuple[list[Path], list[Path], list[str]]:
    """Each committed scenario twice (free, scheduled) under ``tmp``, with the
    repository's ``examples/`` beside them so agent commands resolve as committed."""
    free_root, scheduled_root = tmp / "free" / "fixtures", tmp / "scheduled" / "fixtures"
    for root in (free_root, scheduled_root):
        root.mkdir(parents=True)
        (root.parent / "examples").symlink_to(FIXTURES.parent / "examples")
        if (FIXTURES / "agentreel.toml").is_file():
            shutil.copy(FIXTURES / "agentreel.toml", root / "agentreel.toml")
    free: list[Path] = []
    scheduled: list[Path] = []
    failing: list[str] = []
    for directory in discover_scenarios(FIXTURES):
        copy = shutil.copytree(directory, free_root / directory.name)
        other = shutil.copytree(directory, scheduled_root / directory.name)
        toml = other / "scenario.toml"
        toml.write_text(toml.read_text() + SCHEDULED)
        try:
            check_scenario(copy, "replay")
        except HarnessError as exc:
            failing.append(f"{directory.name} (free: {type(exc).__name__})")
            continue
        try:
            check_scenario(other, "replay")
        except HarnessError as exc:
            failing.append(f"{directory.name} (recorded: {type(exc).__name__}: {exc})"[:400])
            continue
        free.append(copy)
        scheduled.append(other)
    return free, scheduled, failing


def _replay_all(directories: list[Path]) -> None:
    for directory in directories:
        check_scenario(directory, "replay")


def _concurrent_fixture(tmp: Path, order: list[int]) -> Path:
    """A parent and 64 children recorded on a clock the benchmark sets: the parent's call,
    then every child's start in ``order``, then their ends in the same order."""
    now = [1_800_000_000_000.0]
    store = SessionStore(tmp / "sessions", clock=lambda: now[0])
    parent = store.create(RECORD_CWD)
    parent.append(build_request_header(options_for("p"), turn=1, step=1, cwd=RECORD_CWD))
    for chunk in text_call("delegating to 64 children"):
        parent.append(AssistantChunkData(turn=1, step=1, chunk=chunk))
    children = {}
    for spawn_index in range(CHILDREN):
        child = store.spawn(parent, spawn_index)
        parent.append(
            SubagentStartData(child_session=child.id, spawn_index=spawn_index, mode="spawn")
        )
        children[spawn_index] = child
    for spawn_index in order:
        now[0] += 0.01
        children[spawn_index].append(
            build_request_header(
                options_for("c", parent="p", spawn_index=spawn_index),
                turn=1,
                step=1,
                cwd=RECORD_CWD,
            )
        )
    for spawn_index in order:
        for chunk in child_chunks(spawn_index):
            now[0] += 0.001
            children[spawn_index].append(AssistantChunkData(turn=1, step=1, chunk=chunk))
    store.close_all()
    fixture = tmp / "fixture"
    fixture.mkdir()
    for number, log in enumerate(harvest_session_logs(tmp / "sessions")):
        shutil.copyfile(log.path, fixture / session_file_name(number))
    return fixture


async def _concurrent(fixture: Path, order: list[int], schedule: ScheduleMode) -> float:
    provider = ReplayProvider(fixture, live_cwd=RECORD_CWD, drift="off", schedule=schedule)
    parent = new_session_id()
    async for _chunk in provider.stream(options_for(parent)):
        pass
    outputs: list[list[Chunk]] = []

    async def child(spawn_index: int) -> list[Chunk]:
        seen: list[Chunk] = []
        options = options_for(new_session_id(), parent=parent, spawn_index=spawn_index)
        async for chunk in provider.stream(options):
            seen.append(chunk)
            await asyncio.sleep(0)
        return seen

    async def children() -> None:
        outputs.extend(await asyncio.gather(*(child(i) for i in order)))

    elapsed = await cpu_timed_async(children)
    for spawn_index, output in zip(order, outputs, strict=True):
        if output != child_chunks(spawn_index):
            raise AssertionError(f"child {spawn_index} got another session's chunks")
    errors = provider.consumption_report().errors
    if errors:
        raise AssertionError(f"the recorded schedule diverged: {errors[0].message}")
    return elapsed


def _proxy_rows(result: BenchResult, tmp: Path, repeats: int) -> None:
    """The proxy's own 64 HTTP sessions, replayed with the recorded schedule and free."""
    from agentreel.llm.stub import StubServer
    from agentreel.llm_proxy import ProxySettings
    from bench.proxy import SESSION_RULES, SESSIONS, _proxy_thread, _run, _sessions

    tmp.mkdir()
    numbers = list(range(SESSIONS))
    fixture = tmp / "sessions"
    with StubServer.from_toml(SESSION_RULES, source="bench session rules") as stub:
        record = ProxySettings(mode="record", upstream=stub.base_url, fixture=fixture, cwd=str(tmp))
        with _proxy_thread(record) as proxy:
            _run(partial(_sessions, proxy.base_url, numbers))
    per_chunk: dict[ScheduleMode, list[float]] = {"free": [], "recorded": []}
    divergences = misrouted = 0
    for _ in range(repeats):
        for schedule in ("free", "recorded"):
            replay = ProxySettings(
                mode="replay",
                fixture=fixture,
                cwd=str(tmp),
                replay=ReplaySettings(schedule=schedule),
            )
            with _proxy_thread(replay) as proxy:
                elapsed, chunks, wrong = _run(partial(_sessions, proxy.base_url, numbers))
                assert proxy.provider is not None
                divergences += len(proxy.provider.consumption_report().errors)
            misrouted += wrong
            per_chunk[schedule].append(elapsed / chunks)
    free = result.median("proxy 64 sessions free_s per chunk", per_chunk["free"])
    recorded = result.median("proxy 64 sessions recorded_s per chunk", per_chunk["recorded"])
    result.figure(f"proxy, {SESSIONS} HTTP sessions, per chunk, free", free, "s")
    result.figure(f"proxy, {SESSIONS} HTTP sessions, per chunk, recorded", recorded, "s")
    result.target(
        f"proxy, {SESSIONS} HTTP sessions: recorded / free, per chunk", recorded / free, 1.1
    )
    result.target("proxy, 64 HTTP sessions: misrouted sessions", float(misrouted), 0.0, unit="")
    result.figure("proxy, 64 HTTP sessions: schedule divergences (all runs)", divergences, "count")


def run(settings: Settings) -> BenchResult:
    result = BenchResult("schedule", '13. The recorded schedule: schedule = "recorded" vs free')
    order = list(range(CHILDREN))
    random.Random(13).shuffle(order)
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-schedule-") as tmp_text:
        tmp = Path(tmp_text)
        fixture = _concurrent_fixture(tmp / "concurrent", order)
        repeats = settings.scaled(15, 5)
        free_cpu: list[float] = []
        recorded_cpu: list[float] = []
        for _ in range(repeats):
            free_cpu.append(asyncio.run(_concurrent(fixture, order, "free")))
            recorded_cpu.append(asyncio.run(_concurrent(fixture, order, "recorded")))
        free = result.median("concurrent free_s", free_cpu) / (CHUNKS * CHILDREN)
        recorded = result.median("concurrent recorded_s", recorded_cpu) / (CHUNKS * CHILDREN)
        result.figure(f"per chunk, {CHILDREN} sessions, free", free, "s")
        result.figure(f"per chunk, {CHILDREN} sessions, recorded", recorded, "s")
        result.target(f"{CHILDREN} sessions: recorded / free, per chunk", recorded / free, 1.1)

        _proxy_rows(result, tmp / "proxy", settings.scaled(5, 2))

        free_dirs, scheduled_dirs, failing = _suite_copies(tmp / "suite")
        suite_repeats = settings.scaled(3, 1)
        free_wall: list[float] = []
        recorded_wall: list[float] = []
        for _ in range(suite_repeats):
            free_wall.append(timed(partial(_replay_all, free_dirs)))
            recorded_wall.append(timed(partial(_replay_all, scheduled_dirs)))
        suite_free = result.median("suite free_s", free_wall)
        suite_recorded = result.median("suite recorded_s", recorded_wall)
        count = len(free_dirs)
        result.figure(f"suite replay, {count} scenarios, free", suite_free, "s")
        result.figure(f"suite replay, {count} scenarios, recorded", suite_recorded, "s")
        result.target(
            f"committed suite ({count} scenarios): recorded / free",
            suite_recorded / suite_free,
            1.1,
        )
        result.figure("committed scenarios that replay with the recorded schedule", count, "count")
        result.notes.append(f"timed: {', '.join(d.name for d in free_dirs)}")
        if failing:
            result.notes.append(f"not replaying: {'; '.join(failing)}")
    result.notes.append(
        "suite: wall time of check_scenario over every scenario, the two copies alternating; "
        "64 sessions: CPU time, every consumer awaiting sleep(0) per chunk, recorded in the "
        "order the live tasks start and end (the live order matches)"
    )
    return result
