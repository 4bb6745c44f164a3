"""13. The wires beyond SSE (issue 42): replay per call on AWS event-stream and NDJSON, and
replay at the recorded pace.

- replay per call: ``CALLS`` calls (each its own question, ``CHUNKS`` text deltas) streamed
  with the official client — boto3 ``bedrock-runtime`` ``converse_stream`` (binary AWS
  event-stream messages with both CRCs) and the ``ollama`` client's ``chat`` (NDJSON) —
  from the proxy replaying them as sent (``wire.ndjson``) against the stub server streaming
  the same answers to the same client (target ≤ 1.0×, as for SSE in ``proxy``). Measured
  in pairs: blocks of the stub and of the proxy take turns, the order rotating per block,
  so load that comes and goes lands on neighbouring blocks alike; a ratio is the median
  over blocks of the proxy's block against the stub's block of the same questions.
- recorded pace: one call of ``PACE_FRAMES`` frames, recorded from the stub pacing them
  ``PACE_GAP_MS`` apart, replayed with ``pace = "recorded"``: the client's wall time of the
  call (request sent → stream ended) against the recorded one (the request's arrival →
  its last frame, ``wire.ndjson``'s ``times``; target within 5 %), and the same call
  replayed instantly as a figure.

The proxy runs on its own event loop in a thread, as it would in its own process.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import httpx
import ollama
from botocore.config import Config

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import Proxy, ProxySettings
from agentreel.llm_replay import ReplaySettings
from agentreel.session import VERBATIM_FILE
from bench._common import BenchResult, Settings

CHUNKS = 20
CALLS = 200
BLOCKS = 10
PACE_FRAMES = 50
PACE_GAP_MS = 20
KEY_ID = "AKIABENCHWIRES012345"
SECRET = "benchWiresSecret0123456789abcdefghijklmn"


def _rules(chunks: int, delay_ms: int = 0) -> str:
    """One rule answering every request with ``chunks`` deltas of four characters."""
    return (
        "[[rule]]\n"
        'name = "bench answer"\n'
        f'text = "{"abcd" * chunks}"\n'
        "chunk_size = 4\n"
        f"delay_ms = {delay_ms}\n"
    )


@contextmanager
def _proxy_thread(settings: ProxySettings) -> Iterator[Proxy]:
    """A proxy serving from its own event loop in a daemon thread."""
    loop = asyncio.new_event_loop()
    proxy = Proxy(settings)
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(proxy.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, name="bench-wires-proxy", daemon=True)
    thread.start()
    ready.wait(60)
    try:
        yield proxy
    finally:
        asyncio.run_coroutine_threadsafe(proxy.close(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
        loop.close()


Caller = Callable[[int], None]
"""Makes call ``number`` (its own question) and reads its whole stream."""


def _bedrock(base_url: str) -> Caller:
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=base_url,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        config=Config(retries={"max_attempts": 1}),
    )

    def call(number: int) -> None:
        answer = client.converse_stream(
            modelId="stub-model",
            messages=[{"role": "user", "content": [{"text": f"question {number}"}]}],
        )
        deltas = sum("contentBlockDelta" in event for event in answer["stream"])
        assert deltas == CHUNKS, deltas

    return call


def _ollama(base_url: str) -> Caller:
    client = ollama.Client(host=base_url)

    def call(number: int) -> None:
        stream = client.chat(
            model="stub-model",
            messages=[{"role": "user", "content": f"question {number}"}],
            stream=True,
        )
        text = "".join(part.message.content or "" for part in stream)
        assert len(text) == 4 * CHUNKS, text

    return call


def _block(call: Caller, numbers: range) -> float:
    start = time.perf_counter()
    for number in numbers:
        call(number)
    return time.perf_counter() - start


def _paired(
    make: Callable[[str], Caller], stub_url: str, proxy_url: str, calls: int, blocks: int
) -> tuple[list[float], list[float]]:
    """Per-call seconds of each block on the stub and on the proxy, blocks taking turns."""
    sides = {"stub": make(stub_url), "proxy": make(proxy_url)}
    size = max(1, calls // blocks)
    per_call: dict[str, list[float]] = {"stub": [], "proxy": []}
    for index in range(blocks):
        numbers = range(index * size, (index + 1) * size)
        order = ["stub", "proxy"] if index % 2 == 0 else ["proxy", "stub"]
        for side in order:
            per_call[side].append(_block(sides[side], numbers) / size)
    return per_call["stub"], per_call["proxy"]


def _replay_row(
    result: BenchResult,
    name: str,
    make: Callable[[str], Caller],
    tmp: Path,
    calls: int,
    blocks: int,
) -> None:
    fixture = tmp / f"fixture-{name}"
    with StubServer.from_toml(_rules(CHUNKS), source="bench rules") as stub:
        record = ProxySettings(mode="record", upstream=stub.base_url, fixture=fixture, cwd=str(tmp))
        with _proxy_thread(record) as proxy:
            recorder = make(proxy.base_url)
            for number in range(calls):
                recorder(number)
        # Replayed twice over: the first round warms both sides (imports, connections).
        replay = ProxySettings(mode="replay", fixture=fixture, cwd=str(tmp))
        stub_times: list[float] = []
        proxy_times: list[float] = []
        for _ in range(2):
            with _proxy_thread(replay) as proxy:
                stub_times, proxy_times = _paired(
                    make, stub.base_url, proxy.base_url, calls, blocks
                )
    ratios = [p / s for p, s in zip(proxy_times, stub_times, strict=True)]
    stub_call = result.median(f"{name}_stub_per_call_s", stub_times)
    proxy_call = result.median(f"{name}_proxy_replay_per_call_s", proxy_times)
    result.figure(f"{name}: stub server, per call ({calls} calls)", stub_call, "s")
    result.figure(f"{name}: proxy replay (as sent), per call", proxy_call, "s")
    result.target(f"{name}: proxy replay vs stub server, per call", statistics.median(ratios), 1.0)


async def _timed_stream(url: str, body: dict[str, Any]) -> float:
    async with httpx.AsyncClient(timeout=60) as client:
        start = time.perf_counter()
        async with client.stream("POST", url, json=body) as answer:
            async for _ in answer.aiter_raw():
                pass
        return time.perf_counter() - start


def _pace_row(result: BenchResult, tmp: Path, repeats: int) -> None:
    fixture = tmp / "fixture-pace"
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "paced"}]}
    # The stub pauses before each frame: PACE_FRAMES frames in all (the deltas, the
    # finish and [DONE]).
    deltas = PACE_FRAMES - 3
    with StubServer.from_toml(_rules(deltas, PACE_GAP_MS), source="bench rules") as stub:
        record = ProxySettings(mode="record", upstream=stub.base_url, fixture=fixture, cwd=str(tmp))
        with _proxy_thread(record) as proxy:
            url = f"{proxy.base_url}/v1/chat/completions"
            recorded_wall = asyncio.run(_timed_stream(url, body))
    _, line = (fixture / VERBATIM_FILE).read_text().splitlines()
    kept = json.loads(line)
    frames, times = len(kept["frames"]), kept["times"]
    recorded = times[-1] / 1000
    paced: list[float] = []
    instant: list[float] = []
    for _ in range(repeats):
        for pace, samples in (("recorded", paced), ("instant", instant)):
            replay = ProxySettings(
                mode="replay",
                fixture=fixture,
                cwd=str(tmp),
                replay=ReplaySettings(pace=pace),  # type: ignore[arg-type]
            )
            with _proxy_thread(replay) as proxy:
                url = f"{proxy.base_url}/v1/chat/completions"
                samples.append(asyncio.run(_timed_stream(url, body)))
    paced_wall = result.median("pace_recorded_wall_s", paced)
    result.figure(f"recorded call: {frames} frames, last at (request → last frame)", recorded, "s")
    result.figure("recorded call: client's wall time while recording", recorded_wall, "s")
    result.figure("replay pace=recorded: client's wall time", paced_wall, "s")
    result.figure(
        "replay pace=instant: client's wall time",
        result.median("pace_instant_wall_s", instant),
        "s",
    )
    result.target(
        "pace=recorded wall vs recorded, off by",
        abs(paced_wall - recorded) / recorded * 100,
        5.0,
        unit="%",
    )


def run(settings: Settings) -> BenchResult:
    result = BenchResult("wires", "13. Wires: event-stream and NDJSON replay, recorded pace")
    calls = 40 if settings.quick else CALLS
    blocks = 4 if settings.quick else BLOCKS
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-wires-") as tmp_text:
        tmp = Path(tmp_text)
        _replay_row(result, "bedrock event-stream", _bedrock, tmp, calls, blocks)
        _replay_row(result, "ollama ndjson", _ollama, tmp, calls, blocks)
        _pace_row(result, tmp, settings.scaled(5, 2))
    return result
