"""3. Scale: load + derive + normalize + diff of 1k, 10k and 100k-event session logs.

Each log is written through ``SessionStore`` like an agent's: turns of steps, each step a
``request/header``, 17 streamed chunks (some naming the cwd or a UUID, so the normalizer
has work), the assistant message, a tool call and its result. The pipeline is what one
session log costs in a replay run:

- replay side (the agent process): ``load_recording`` (load the log, derive the scripts);
- harness side (the harness process): ``load_session_log``,
  ``Normalizer.for_logs(...).session_log_bytes`` (what ``render_goldens`` makes a golden
  with), and the comparison with a golden file that differs in one line, as
  ``compare_goldens`` makes it (``file_equals``, ``unified_diff_file``: a real diff).
  That is all a replay run holds per log: ``run_scenario`` keeps the raw log bytes only
  in record mode (for recordings), and the golden file is read a block at a time.

Time is a median over repeats of both sides back to back. Peak memory is
``tracemalloc``'s peak (every Python and msgspec allocation) of each side run on its own,
against the file size.
"""

from __future__ import annotations

import gc
import itertools
import tempfile
import tracemalloc
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from agentreel.llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    GenerateOptions,
    Message,
    TextDelta,
    TextPart,
    ToolCallPart,
    Usage,
)
from agentreel.llm_replay import load_recording
from agentreel.session import (
    AssistantChunkData,
    AssistantMessageData,
    Normalizer,
    SessionStore,
    ToolCallData,
    ToolResultData,
    TurnEndData,
    TurnStartData,
    UserMessageData,
    build_request_header,
    load_session_log,
    tokenize_cwd,
)
from agentreel.snapshot_harness import file_equals, unified_diff_file
from bench._common import BenchResult, Settings, cpu_timed

STEPS_PER_TURN = 4


@dataclass(frozen=True, slots=True)
class _Log:
    fixture_dir: Path
    path: Path
    cwd: Path
    golden_path: Path
    events: int
    size: int


def _step_chunks(cwd: Path, turn: int, step: int) -> list[Chunk]:
    marker = uuid.UUID(int=turn * 1000 + step, version=4)
    texts = [f"step {step} of turn {turn}: token {n} " for n in range(13)]
    texts[3] = f"reading {cwd}/src/module_{step}.py "
    texts[7] = f"request {marker} "
    return [
        BlockStart(index=0, block_type="text"),
        *(TextDelta(index=0, text=text) for text in texts),
        BlockEnd(index=0, block=TextPart("".join(texts))),
        Usage(input_tokens=100 + step, output_tokens=13),
        Finish(reason="stop"),
    ]


def _write_log(root: Path, events: int) -> _Log:
    cwd = root / "work"
    cwd.mkdir(parents=True)
    ticks = itertools.count(1_700_000_000_000)
    store = SessionStore(root / "sessions", clock=lambda: next(ticks))
    session = store.create(cwd)
    written = 0
    turn = 0
    while written < events:
        turn += 1
        session.append(TurnStartData(turn=turn))
        session.append(UserMessageData(turn=turn, text=f"please do task {turn} in {cwd}"))
        written += 2
        for step in range(1, STEPS_PER_TURN + 1):
            options = GenerateOptions(
                model="bench-model",
                system="You are a benchmark agent.",
                messages=(Message.user(f"task {turn}"),),
            )
            session.step_start(turn, step)
            session.append(build_request_header(options, turn=turn, step=step, cwd=str(cwd)))
            chunks = _step_chunks(cwd, turn, step)
            for chunk in chunks:
                session.append(AssistantChunkData(turn=turn, step=step, chunk=chunk))
            block = chunks[-3]
            assert isinstance(block, BlockEnd)
            call_id = f"call_{turn}_{step}"
            session.append(
                AssistantMessageData(
                    turn=turn,
                    step=step,
                    message=Message(
                        role="assistant",
                        content=(block.block, ToolCallPart(call_id, "read_file", "{}")),
                    ),
                )
            )
            session.append(
                ToolCallData(
                    turn=turn,
                    step=step,
                    call_id=call_id,
                    name="read_file",
                    arguments=f'{{"path": "{cwd}/src/module_{step}.py"}}',
                )
            )
            session.append(
                ToolResultData(
                    turn=turn, step=step, call_id=call_id, content="x = 1\n", is_error=False
                )
            )
            session.step_end(turn, step)
            written += 6 + len(chunks)
        session.append(TurnEndData(turn=turn, reason="completed"))
        written += 1
    store.close_all()
    fixture_dir = root / "fixture"
    fixture_dir.mkdir()
    path = fixture_dir / "session.jsonl"
    # As the harness writes a recording: the run's cwd as {{cwd}} (replay refuses it raw).
    path.write_bytes(tokenize_cwd(session.path.read_bytes(), cwd))
    log = load_session_log(path)
    normalized = Normalizer.for_logs(cwd, [log]).session_log_bytes(log)
    lines = normalized.splitlines(keepends=True)
    middle = next(n for n in range(len(lines) // 2, len(lines)) if b"token" in lines[n])
    lines[middle] = lines[middle].replace(b"token", b"TOKEN", 1)  # the one golden change
    golden_path = root / "golden.jsonl"
    golden_path.write_bytes(b"".join(lines))
    return _Log(fixture_dir, path, cwd, golden_path, len(log.events), path.stat().st_size)


def _replay_side(log: _Log) -> int:
    """What the agent process does with the log: load it and derive the scripts."""
    return len(load_recording(log.fixture_dir).scripts[0].calls)


def _harness_side(log: _Log) -> int:
    """What the harness process does: load (harvest), normalize, compare with the golden
    file and diff them (as ``compare_goldens``: from the file, a block at a time)."""
    loaded = load_session_log(log.path)
    live = Normalizer.for_logs(log.cwd, [loaded]).session_log_bytes(loaded)
    if file_equals(log.golden_path, live):
        raise AssertionError("the golden was meant to differ in one line")
    return len(unified_diff_file("session.jsonl", log.golden_path, live))


def _pipeline(log: _Log) -> int:
    return _replay_side(log) + _harness_side(log)


def _peak_bytes(work: Callable[[_Log], int], log: _Log) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        work(log)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _harness_phases(log: _Log) -> dict[str, int]:
    """Where the harness side's memory goes: tracemalloc (current, peak) per phase."""
    phases: dict[str, int] = {}
    tracemalloc.start()
    try:
        loaded = load_session_log(log.path)
        phases["load: peak"], phases["load: typed log kept"] = reversed(
            tracemalloc.get_traced_memory()
        )
        tracemalloc.reset_peak()
        live = Normalizer.for_logs(log.cwd, [loaded]).session_log_bytes(loaded)
        phases["normalize to bytes: peak, log alive"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        file_equals(log.golden_path, live)
        unified_diff_file("session.jsonl", log.golden_path, live)
        phases["compare + diff with the golden file: peak, log and text alive"] = (
            tracemalloc.get_traced_memory()[1]
        )
    finally:
        tracemalloc.stop()
    return phases


def _timed_without_gc(work: Callable[[], object]) -> float:
    """``cpu_timed`` with the collector paused: the diagnostic twin of the real figure."""
    gc.disable()
    try:
        return cpu_timed(work)
    finally:
        gc.enable()


def run(settings: Settings) -> BenchResult:
    result = BenchResult("scale", "3. Scale: load + derive + normalize + diff")
    sizes = [1_000, 10_000] if settings.quick else [1_000, 10_000, 100_000]
    times: dict[int, float] = {}
    times_without_gc: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-scale-") as tmp_text:
        tmp = Path(tmp_text)
        for size in sizes:
            log = _write_log(tmp / f"log-{size}", size)
            repeats = settings.scaled({1_000: 21, 10_000: 9}.get(size, 7), 3)
            samples: list[float] = []
            samples_without_gc: list[float] = []
            for _ in range(repeats):
                samples.append(cpu_timed(partial(_pipeline, log)))
                samples_without_gc.append(_timed_without_gc(partial(_pipeline, log)))
            times[size] = result.median(f"pipeline_{size}_s", samples)
            times_without_gc[size] = result.median(
                f"pipeline_{size}_without_gc_s", samples_without_gc
            )
            replay_peak = _peak_bytes(_replay_side, log)
            harness_peak = _peak_bytes(_harness_side, log)
            label = f"{size // 1000}k"
            result.figure(
                f"{label} events: file size", log.size / 1e6, "MB", f"{log.events} events"
            )
            result.figure(f"{label} events: time", times[size], "s")
            result.figure(f"{label} events: time, collector paused", times_without_gc[size], "s")
            for side, peak in (("replay side", replay_peak), ("harness side", harness_peak)):
                result.figure(
                    f"{label} events: peak memory, {side}",
                    peak / 1e6,
                    "MB",
                    f"{peak / log.size:.2f}x the file",
                )
            if size == sizes[-1]:
                for phase, used in _harness_phases(log).items():
                    result.figure(
                        f"{label} harness side, {phase}",
                        used / 1e6,
                        "MB",
                        f"{used / log.size:.2f}x the file",
                    )
                for side, peak in (("replay side", replay_peak), ("harness side", harness_peak)):
                    result.target(f"{label}: peak memory / file, {side}", peak / log.size, 3)
    for small, large in itertools.pairwise(sizes):
        result.figure(
            f"time {large // 1000}k / {small // 1000}k events, collector paused",
            times_without_gc[large] / times_without_gc[small],
            "x",
        )
        result.target(
            f"time {large // 1000}k / {small // 1000}k events", times[large] / times[small], 12.0
        )
    result.notes.append(
        "time = CPU time of both sides back to back, collector on (a real run pays for "
        "it); memory = tracemalloc peak of each side on its own: they run in different "
        "processes (the agent derives, the harness loads, normalizes and diffs)"
    )
    return result
