"""6. Recording is pass-through: time to first chunk while recording vs live.

The stub server paces its SSE frames 50 ms apart (20 frames: role, 16 deltas, finish,
usage, done). Three consumers read the same call through the real ``stub`` provider (the
``openai`` adapter):

- live: the adapter's stream as is;
- recording: the way the agent records — ``step/start`` and ``request/header`` appended to
  a ``SessionStore`` session, then every chunk appended as ``assistant/chunk`` before the
  consumer sees it;
- vcrpy: the same adapter under a recording cassette (vcrpy reads the whole response
  before handing anything on).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import vcr

from agentreel.llm import Chunk, GenerateOptions, Provider, load_provider
from agentreel.llm.stub import StubServer
from agentreel.session import AssistantChunkData, Session, SessionStore, build_request_header
from bench._common import BenchResult, Settings
from bench._openai_vcr import VcrVisibleOpenAI, question, stub_rules

PACING_MS = 50


async def _recorded(
    provider: Provider, session: Session, options: GenerateOptions, step: int
) -> AsyncIterator[Chunk]:
    session.step_start(1, step)
    session.append(build_request_header(options, turn=1, step=step, cwd=session.header.cwd))
    async for chunk in provider.stream(options):
        session.append(AssistantChunkData(turn=1, step=step, chunk=chunk))
        yield chunk


async def _first_chunk(stream: AsyncIterator[Chunk], started: float) -> float:
    try:
        async for _chunk in stream:
            return time.perf_counter() - started
        raise AssertionError("the stream ended without a chunk")
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def _live(provider: Provider, number: int) -> float:
    started = time.perf_counter()
    return await _first_chunk(provider.stream(question(number)), started)


async def _recording(provider: Provider, session: Session, number: int) -> float:
    started = time.perf_counter()
    return await _first_chunk(_recorded(provider, session, question(number), number), started)


async def _vcrpy(base_url: str, cassette: Path) -> float:
    provider = VcrVisibleOpenAI(base_url=base_url, api_key="bench-not-a-secret")
    with vcr.use_cassette(str(cassette), record_mode="all"):
        started = time.perf_counter()
        elapsed = await _first_chunk(provider.stream(question(0)), started)
    await provider.aclose()
    return elapsed


async def _measure(
    server: StubServer, tmp: Path, repeats: int, vcr_repeats: int
) -> tuple[list[float], list[float], list[float]]:
    provider = load_provider("stub", base_url=server.base_url)
    store = SessionStore(tmp / "sessions")
    session = store.create(tmp / "cwd")
    await _live(provider, 0)  # warm-up: imports, first connection
    live: list[float] = []
    recording: list[float] = []
    for number in range(1, repeats + 1):
        live.append(await _live(provider, number))
        recording.append(await _recording(provider, session, number))
    store.close_all()
    vcrpy = [await _vcrpy(server.openai_base_url, tmp / f"c{n}.yaml") for n in range(vcr_repeats)]
    return live, recording, vcrpy


def run(settings: Settings) -> BenchResult:
    result = BenchResult("passthrough", "6. Recording pass-through (50 ms between frames)")
    repeats = settings.scaled(9, 4)
    vcr_repeats = settings.scaled(3, 2)
    with (
        tempfile.TemporaryDirectory(prefix="agentreel-bench-ttfc-") as tmp_text,
        StubServer.from_toml(stub_rules(PACING_MS), source="bench paced rules") as server,
    ):
        tmp = Path(tmp_text)
        (tmp / "cwd").mkdir()
        live, recording, vcrpy = asyncio.run(_measure(server, tmp, repeats, vcr_repeats))
    live_ttfc = result.median("live_s", live)
    recording_ttfc = result.median("recording_s", recording)
    vcr_ttfc = result.median("vcrpy_s", vcrpy)
    result.figure("time to first chunk, live", live_ttfc, "s")
    result.figure("time to first chunk, recording", recording_ttfc, "s")
    result.figure("time to first chunk, vcrpy recording", vcr_ttfc, "s")
    result.target(
        "recording - live, time to first chunk",
        (recording_ttfc - live_ttfc) * 1000,
        5.0,
        unit="ms",
    )
    result.notes.append(
        "the first text chunk is the stub's second frame (role frame first), so live is "
        f"about 2 x {PACING_MS} ms; vcrpy hands out nothing before the whole stream is read"
    )
    return result
