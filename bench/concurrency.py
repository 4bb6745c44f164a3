"""4. Concurrency: 64 child sessions streaming at once through one ``ReplayProvider``.

A recording of a parent that spawned 64 children (each one call of 50 chunks, its text
naming its spawn index) is written through ``SessionStore``. Live, the parent binds first,
then 64 tasks — started in shuffled order, each a new session id with
``parent_session_id`` + ``spawn_index`` (lineage binding) — stream concurrently; every
consumer yields to the event loop after each chunk, so the streams really interleave.
The per-chunk cost is compared with one child streaming alone the same way, and every
child's output is checked against its own recording.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from pathlib import Path

from agentreel.brand import new_session_id
from agentreel.llm import BlockEnd, BlockStart, Chunk, Finish, TextDelta, TextPart, Usage
from agentreel.llm_replay import ReplayProvider
from agentreel.llm_replay.testing import FixtureRecorder, options_for, text_call
from bench._common import BenchResult, Settings, cpu_timed_async

CHILDREN = 64
CHUNKS = 50


def child_chunks(spawn_index: int) -> list[Chunk]:
    """50 chunks: block-start, 46 deltas naming the child, block-end, usage, finish."""
    deltas = [f"child {spawn_index} piece {n}; " for n in range(CHUNKS - 4)]
    return [
        BlockStart(index=0, block_type="text"),
        *(TextDelta(index=0, text=text) for text in deltas),
        BlockEnd(index=0, block=TextPart("".join(deltas))),
        Usage(input_tokens=10, output_tokens=CHUNKS - 4),
        Finish(reason="stop"),
    ]


def _write_fixture(root: Path, fixture_dir: Path) -> None:
    recorder = FixtureRecorder(root)
    parent = recorder.main()
    recorder.call(parent, text_call("delegating to 64 children"))
    for spawn_index in range(CHILDREN):
        child = recorder.spawn(parent, spawn_index)
        recorder.call(child, child_chunks(spawn_index))
    recorder.save(fixture_dir)


async def _child(provider: ReplayProvider, parent: str, spawn_index: int) -> list[Chunk]:
    seen: list[Chunk] = []
    options = options_for(new_session_id(), parent=parent, spawn_index=spawn_index)
    async for chunk in provider.stream(options):
        seen.append(chunk)
        await asyncio.sleep(0)  # let the other sessions run: real interleaving
    return seen


async def _bound_parent(provider: ReplayProvider) -> str:
    parent = new_session_id()
    async for _chunk in provider.stream(options_for(parent)):
        pass
    return parent


async def _measure(fixture_dir: Path, cwd: Path, spawn_indexes: list[int]) -> float:
    provider = ReplayProvider(fixture_dir, live_cwd=cwd)
    parent = await _bound_parent(provider)
    outputs: list[list[Chunk]] = []

    async def children() -> None:
        tasks = [asyncio.create_task(_child(provider, parent, i)) for i in spawn_indexes]
        outputs.extend(await asyncio.gather(*tasks))

    elapsed = await cpu_timed_async(children)
    for spawn_index, output in zip(spawn_indexes, outputs, strict=True):
        if output != child_chunks(spawn_index):
            raise AssertionError(
                f"child with spawn index {spawn_index} got another session's chunks "
                f"(first delta: {output[1] if len(output) > 1 else output!r})"
            )
    return elapsed


def run(settings: Settings) -> BenchResult:
    result = BenchResult("concurrency", "4. Concurrency: 64 children x 50 chunks, one provider")
    repeats = settings.scaled(15, 5)
    shuffled = list(range(CHILDREN))
    random.Random(9).shuffle(shuffled)
    alone_samples: list[float] = []
    together_samples: list[float] = []
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-concurrency-") as tmp_text:
        tmp = Path(tmp_text)
        fixture_dir = tmp / "fixture"
        _write_fixture(tmp / "sessions", fixture_dir)
        for _ in range(repeats):
            alone_samples.append(asyncio.run(_measure(fixture_dir, tmp, [shuffled[0]])))
            together_samples.append(asyncio.run(_measure(fixture_dir, tmp, shuffled)))
    alone = result.median("alone_s", alone_samples) / CHUNKS
    together = result.median("concurrent_s", together_samples) / (CHUNKS * CHILDREN)
    result.figure("per chunk, one child alone", alone, "s")
    result.figure(f"per chunk, {CHILDREN} children concurrently", together, "s")
    result.figure("children verified (own script, in full)", CHILDREN, "count")
    result.target(f"{CHILDREN} concurrent / alone, per chunk", together / alone, 2.0)
    result.notes.append(
        "children start in shuffled spawn order and bind by lineage "
        "(parent_session_id + spawn_index); each consumer awaits sleep(0) per chunk; "
        "times are CPU time of the process"
    )
    return result
