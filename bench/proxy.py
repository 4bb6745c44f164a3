"""7. The proxy (SPEC 11): replay per call, record time to first chunk, 64 HTTP sessions.

Every row is a ratio of two things measured side by side here, through the real
``openai`` adapter (the ``stub`` provider: the SDK's own HTTP stack, wire → chunk mapping):

- replay per call: the calls of SPEC 9's vcrpy comparison (1,000 recorded calls of 20
  chunks) streamed from the proxy in replay mode with a user's defaults (drift is an
  error), served as the upstream sent them (``wire.ndjson``) against the stub server
  streaming the same chunks to the same adapter (target ≤ 1.0×) and re-encoded from the
  chunks (the file removed: target ≤ 1.3×), and against vcrpy replaying the same calls
  from its cassette (target ≥ 10× faster). vcrpy matches the body too
  (``VCR_MATCH_ON_BODY``): with its default matchers every model call matches every
  recorded one and it answers in recorded order, the misrouting this package exists to
  prevent; that configuration is shown as a figure. On a shared, noisy machine the sides
  are measured in pairs: every round serves all the calls on each side (fresh replaying
  proxies, the cassette opened afresh) in ``BLOCKS_PER_ROUND`` blocks that take turns — a
  block of the stub, then the same questions from each other side, the order rotating
  per block — so load that comes and goes lands on neighbouring blocks alike. A side's
  cost per call is the median of its blocks; a ratio, the median over blocks of the
  side's block against the other side's block of the same questions. vcrpy's cost per
  call grows with its cassette (it compares a request with every recorded one) and the
  proxy's does not, so the ratio holds only at a stated size: a 100-call recording is
  measured beside it, and each side's growth shown. Both sides pay the client's own work
  per call, so the row also measures that floor — the same adapter reading the same SSE
  bytes from an in-memory transport — and each side's cost above it;
- record time to first chunk: the stub paces its frames 50 ms apart; the adapter reads
  through the proxy in record mode and directly (target ≤ live + 5 ms);
- concurrency: 64 sessions (identity headers) stream 50 chunks each through one replaying
  proxy at once; every session must get exactly its own answer (zero misroutes) and the
  per-chunk cost may be at most 2× that of one session alone;
- per scenario (issue 17, "the proxy started once per worker"): what a ``via = "proxy"``
  scenario pays for its proxy, wall and CPU, no agent: a proxy of its own started and
  stopped (thread, loop, server, the fixture loaded, logs and report flushed — the harness
  before the per-worker proxy), against the harness's backend today (a run opened and
  closed on the process's proxy, which is already running: the fixture loaded, logs and
  report flushed), and both against that scenario replayed end to end. Figures, not targets.

- HTTP server library: the proxy's aiohttp against starlette on uvicorn, each a minimal
  app serving the same replayed SSE stream (the frames the proxy encodes for the recorded
  call, one write per frame) to the same adapter — the measurement behind choosing
  aiohttp (target: starlette/uvicorn ≥ 0.9× aiohttp's time per call, i.e. the other
  library is not clearly faster).

The proxy runs on its own event loop in a thread, as it would in its own process, so the
client's loop does not pay for serving.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import logging
import shutil
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import uvicorn
import vcr
from aiohttp import web
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from agentreel.brand import SessionId
from agentreel.llm import Chunk, Finish, GenerateOptions, Message, TextDelta, load_provider
from agentreel.llm.stub import StubServer
from agentreel.llm.wire import (
    chat_chunk_frames,
    gemini_chunk_frames,
    messages_chunk_frames,
    responses_chunk_frames,
)
from agentreel.llm_proxy import Proxy, ProxySettings, start_proxy
from agentreel.llm_proxy._verbatim import VerbatimCall, read_verbatim
from agentreel.llm_replay import load_recording
from agentreel.session import VERBATIM_FILE
from agentreel.snapshot_harness import Scenario, check_scenario, load_scenario
from agentreel.snapshot_harness._proxied import proxy_backend
from bench._common import FIXTURES, BenchResult, Settings
from bench._openai_vcr import (
    CHUNKS_PER_CALL,
    VCR_COMPARISON_CALLS,
    VCR_MATCH_ON_BODY,
    InMemoryOpenAI,
    VcrVisibleOpenAI,
    drain,
    question,
    stub_rules,
)

PACING_MS = 50
# Blocks per round of the paired replay rounds (a block: at least ``MIN_BLOCK_CALLS``
# calls): short enough that load changes little between a block and its neighbours, long
# enough that a block's time is not timer noise.
BLOCKS_PER_ROUND = 20
MIN_BLOCK_CALLS = 5
# A small recording beside the SPEC 9 size, to show how each side's cost per call grows.
GROWTH_FROM_CALLS = 100
PROXIED_SCENARIO = FIXTURES / "example-openai-sdk"
SESSIONS = 64
SESSION_CHUNKS = 50


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

    thread = threading.Thread(target=serve, name="bench-proxy", daemon=True)
    thread.start()
    ready.wait(60)
    try:
        yield proxy
    finally:
        asyncio.run_coroutine_threadsafe(proxy.close(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
        loop.close()


async def _calls(base_url: str, calls: int, *, headers: bool = False) -> float:
    """Seconds to stream ``calls`` calls through the stub adapter at ``base_url``."""
    provider = load_provider("stub", base_url=base_url, send_identity=headers)
    await drain(provider.stream(question(0)))  # warm-up: connection, first request
    started = time.perf_counter()
    for number in range(calls):
        chunks = await drain(provider.stream(question(number)))
        assert len(chunks) == CHUNKS_PER_CALL, len(chunks)
    elapsed = time.perf_counter() - started
    await provider.aclose()  # type: ignore[attr-defined]
    return elapsed


async def _vcr_replay(
    base_url: str, cassette: Path, calls: int, match_on: tuple[str, ...] | None = None
) -> float:
    """vcrpy answering from its cassette (the server at ``base_url`` is stopped); its
    default matchers unless ``match_on`` is given."""
    provider = VcrVisibleOpenAI(base_url=base_url, api_key="bench-not-a-secret")
    matchers: dict[str, Any] = {} if match_on is None else {"match_on": match_on}
    with vcr.use_cassette(
        str(cassette), record_mode="none", allow_playback_repeats=False, **matchers
    ):
        started = time.perf_counter()
        for number in range(calls):
            await drain(provider.stream(question(number)))
        elapsed = time.perf_counter() - started
    await provider.aclose()
    return elapsed


async def _in_memory(frames: list[bytes], calls: int) -> float:
    """Seconds for ``calls`` calls of the adapter reading ``frames`` from memory (the floor)."""
    provider = InMemoryOpenAI(frames, base_url="http://in-memory.invalid/v1", api_key="bench")
    await drain(provider.stream(question(0)))  # warm-up, as the other sides
    started = time.perf_counter()
    for number in range(calls):
        chunks = await drain(provider.stream(question(number)))
        assert len(chunks) == CHUNKS_PER_CALL, len(chunks)
    elapsed = time.perf_counter() - started
    await provider.aclose()
    return elapsed


async def _vcr_record(base_url: str, cassette: Path, calls: int) -> None:
    provider = VcrVisibleOpenAI(base_url=base_url, api_key="bench-not-a-secret")
    with vcr.use_cassette(str(cassette), record_mode="all"):
        for number in range(calls):
            await drain(provider.stream(question(number)))
    await provider.aclose()


async def _first_chunk(base_url: str, number: int) -> float:
    provider = load_provider("stub", base_url=base_url)
    started = time.perf_counter()
    stream = provider.stream(question(number))
    try:
        async for _chunk in stream:
            return time.perf_counter() - started
        raise AssertionError("the stream ended without a chunk")
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await provider.aclose()  # type: ignore[attr-defined]


def _session_options(number: int) -> GenerateOptions:
    return GenerateOptions(
        model="stub-model",
        messages=(Message.user(f"session {number}"),),
        session_id=SessionId(f"bench-session-{number}"),
    )


SESSION_RULES = (
    "[[rule]]\n"
    'match.last_user_regex = "session (?P<n>[0-9]+)"\n'
    'text = "' + "answer {{n}} " * (SESSION_CHUNKS - 4) + '"\n'
    "chunk_size = 10\n"
)


async def _session(provider: Any, number: int) -> tuple[int, str]:
    chunks = await drain(provider.stream(_session_options(number)))
    return len(chunks), "".join(c.text for c in chunks if isinstance(c, TextDelta))


async def _sessions(base_url: str, numbers: list[int]) -> tuple[float, int, int]:
    """Seconds for these sessions at once, chunks streamed, sessions misrouted."""
    providers = [load_provider("stub", base_url=base_url, send_identity=True) for _ in numbers]
    started = time.perf_counter()
    results = await asyncio.gather(
        *(_session(p, n) for p, n in zip(providers, numbers, strict=True))
    )
    elapsed = time.perf_counter() - started
    for provider in providers:
        await provider.aclose()  # type: ignore[attr-defined]
    misrouted = sum(
        1 for n, (_, text) in zip(numbers, results, strict=True) if f"answer {n} " not in text
    )
    return elapsed, sum(count for count, _ in results), misrouted


# -- HTTP server library: aiohttp (the proxy's) vs starlette on uvicorn -----------------


def _replayed_frames(fixture: Path) -> list[bytes]:
    """The SSE frames the proxy sends for the fixture's first recorded call."""
    call = load_recording(fixture).scripts[0].calls[0]
    return chat_chunk_frames(
        call.chunks, model="stub-model", response_id="chatcmpl-bench", include_usage=True
    )


def _loopback_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@contextmanager
def _aiohttp_server(frames: list[bytes]) -> Iterator[str]:
    """A minimal aiohttp app streaming ``frames`` as the proxy does; yields its base URL."""

    async def chat(request: web.Request) -> web.StreamResponse:
        json.loads(await request.read())
        response = web.StreamResponse(headers={"content-type": "text/event-stream; charset=utf-8"})
        await response.prepare(request)
        for frame in frames:
            await response.write(frame)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    sock = _loopback_socket()
    loop = asyncio.new_event_loop()

    async def start() -> None:
        await runner.setup()
        await web.SockSite(runner, sock).start()

    loop.run_until_complete(start())
    thread = threading.Thread(target=loop.run_forever, name="bench-aiohttp", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
        loop.close()
        sock.close()


@contextmanager
def _uvicorn_server(frames: list[bytes]) -> Iterator[str]:
    """The same app in starlette, served by uvicorn (asyncio loop, httptools parser when
    installed — its fastest pure-asyncio setup); yields its base URL."""

    async def chat(request: Request) -> StreamingResponse:
        json.loads(await request.body())

        async def body() -> Any:
            for frame in frames:
                yield frame

        return StreamingResponse(body(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    config = uvicorn.Config(
        app, loop="asyncio", http="auto", lifespan="off", log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    sock = _loopback_socket()
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve(sockets=[sock])), name="bench-uvicorn", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()


def _median(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2]


def _run(work: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(work())  # type: ignore[arg-type]


def _record_calls(upstream: StubServer, tmp: Path, calls: int) -> tuple[Path, Path]:
    """``calls`` calls recorded once through the recording proxy (a fixture) and once under
    vcrpy (a cassette), both against ``upstream``; each replay side makes the same calls."""
    fixture, cassette = tmp / f"fixture-{calls}", tmp / f"cassette-{calls}.yaml"
    record = ProxySettings(mode="record", upstream=upstream.base_url, fixture=fixture, cwd=str(tmp))
    with _proxy_thread(record) as proxy:
        _run(lambda: _calls(proxy.base_url, calls))  # the warm-up call and ``calls`` more
    _run(lambda: _vcr_record(upstream.openai_base_url, cassette, calls))
    return fixture, cassette


async def _timed_block(provider: Any, numbers: range, cassette: Path | None = None) -> float:
    """Seconds for ``provider`` to stream the questions ``numbers``, one after the other;
    with a ``cassette``, vcrpy answers them from it (opened before the clock starts: while
    it is open vcrpy answers every side's requests, so it is open for its own block only)."""
    with ExitStack() as stack:
        if cassette is not None:
            stack.enter_context(
                vcr.use_cassette(
                    str(cassette),
                    record_mode="none",
                    allow_playback_repeats=False,
                    match_on=VCR_MATCH_ON_BODY,
                )
            )
        started = time.perf_counter()
        for number in numbers:
            chunks = await drain(provider.stream(question(number)))
            assert len(chunks) == CHUNKS_PER_CALL, len(chunks)
        return time.perf_counter() - started


async def _paired_round(
    stub: StubServer, replays: dict[str, str], cassette: Path | None, calls: int
) -> dict[str, list[float]]:
    """One round: all ``calls`` questions on every side, in blocks that take turns (the
    order rotating per block). Sides: ``stub`` (the live server), each of ``replays`` (a
    replaying proxy's base URL by name), and ``vcrpy`` when a ``cassette`` is given
    (matching the body). Returns each side's seconds per call, per block."""
    providers: dict[str, Any] = {"stub": load_provider("stub", base_url=stub.base_url)}
    for name, url in replays.items():
        providers[name] = load_provider("stub", base_url=url)
    cassettes: dict[str, Path | None] = dict.fromkeys(providers)
    if cassette is not None:
        providers["vcrpy"] = VcrVisibleOpenAI(
            base_url=stub.openai_base_url, api_key="bench-not-a-secret"
        )
        cassettes["vcrpy"] = cassette
    names = list(providers)
    for name in names:  # warm-up: connection, first request
        await _timed_block(providers[name], range(1), cassettes[name])
    per_call: dict[str, list[float]] = {name: [] for name in names}
    size = max(MIN_BLOCK_CALLS, calls // BLOCKS_PER_ROUND)
    for block, start in enumerate(range(0, calls, size)):
        numbers = range(start, min(calls, start + size))
        turn = block % len(names)
        for name in names[turn:] + names[:turn]:
            seconds = await _timed_block(providers[name], numbers, cassettes[name])
            per_call[name].append(seconds / len(numbers))
    for provider in providers.values():
        await provider.aclose()
    return per_call


def _paired_replays(
    stub: StubServer,
    fixtures: dict[str, Path],
    cassette: Path | None,
    tmp: Path,
    calls: int,
    rounds: int,
) -> dict[str, list[float]]:
    """``rounds`` paired rounds (``_paired_round``), each on fresh proxies replaying
    ``fixtures`` (by side name) with the defaults a user gets (drift is an error); each
    side's seconds per call, per block, over all rounds. vcrpy (the ``cassette``) takes
    part in the first round only: at 1,000 calls it takes longer than all other sides
    together, and a ratio of 10× needs no second round to tell."""
    samples: dict[str, list[float]] = {}
    for number in range(rounds):
        with ExitStack() as stack:
            urls = {
                name: stack.enter_context(
                    _proxy_thread(ProxySettings(mode="replay", fixture=fixture, cwd=str(tmp)))
                ).base_url
                for name, fixture in fixtures.items()
            }
            in_round = cassette if number == 0 else None
            got = _run(lambda: _paired_round(stub, urls, in_round, calls))  # noqa: B023
        for name, values in got.items():
            samples.setdefault(name, []).extend(values)
    return samples


def _paired_ratio(samples: dict[str, list[float]], side: str, floor: str = "stub") -> float:
    """The median over blocks of ``side``'s time per call over ``floor``'s in that block
    (blocks in the order measured: a side of the first round only, vcrpy, pairs with the
    first round's blocks)."""
    pairs = zip(samples[side], samples[floor], strict=False)
    return statistics.median(a / b for a, b in pairs)


def run(settings: Settings) -> BenchResult:
    result = BenchResult("proxy", "7. Proxy: replay per call, record TTFC, 64 HTTP sessions")
    calls = 40 if settings.quick else VCR_COMPARISON_CALLS
    small = 10 if settings.quick else GROWTH_FROM_CALLS
    library_calls = settings.scaled(300, 40)
    call_repeats = settings.scaled(3, 2)
    vcr_repeats = max(1, call_repeats - 1)
    repeats = settings.scaled(5, 2)
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-proxy-") as tmp_text:
        tmp = Path(tmp_text)
        with StubServer.from_toml(stub_rules(), source="bench rules") as stub:
            fixture, cassette = _record_calls(stub, tmp, calls)
            small_fixture, small_cassette = _record_calls(stub, tmp, small)
            recorded_url = stub.openai_base_url
            # Every call of ``fixture`` is served from its kept answer (wire.ndjson):
            # verbatim. Without the file the same calls are re-encoded from their chunks.
            assert read_verbatim(fixture), "the recording kept no answers as sent"
            reencoded_fixture = tmp / "fixture-reencoded"
            shutil.copytree(fixture, reencoded_fixture)
            (reencoded_fixture / VERBATIM_FILE).unlink()
            # The replaying proxies have no upstream: the stub serves only its own blocks.
            paired = _paired_replays(
                stub,
                {"verbatim": fixture, "reencoded": reencoded_fixture},
                cassette,
                tmp,
                calls,
                call_repeats,
            )
            paired_small = _paired_replays(
                stub, {"verbatim": small_fixture}, small_cassette, tmp, small, call_repeats
            )
        # The stub server is stopped from here on.
        vcrpy_in_order = [
            _run(lambda: _vcr_replay(recorded_url, cassette, calls)) for _ in range(vcr_repeats)
        ]

        frames = _replayed_frames(fixture)
        in_memory = [_run(lambda: _in_memory(frames, calls)) for _ in range(call_repeats)]
        on_aiohttp: list[float] = []
        on_uvicorn: list[float] = []
        for _ in range(repeats):  # alternated, so load drifts hit both alike
            with _aiohttp_server(frames) as url:
                on_aiohttp.append(_run(lambda: _calls(url, library_calls)))
            with _uvicorn_server(frames) as url:
                on_uvicorn.append(_run(lambda: _calls(url, library_calls)))

        stub_call = result.median("stub_per_call_s", paired["stub"])
        proxy_call = result.median("proxy_replay_per_call_s", paired["verbatim"])
        reencoded_call = result.median("proxy_reencoded_per_call_s", paired["reencoded"])
        vcr_call = result.median("vcrpy_per_call_s", paired["vcrpy"])
        vcr_in_order_call = result.median(
            "vcrpy_in_order_per_call_s", [t / calls for t in vcrpy_in_order]
        )
        floor_call = result.median("client_floor_per_call_s", [t / calls for t in in_memory])
        stub_small_call = result.median(f"stub_{small}_per_call_s", paired_small["stub"])
        proxy_small_call = result.median(
            f"proxy_replay_{small}_per_call_s", paired_small["verbatim"]
        )
        vcr_small_call = result.median(f"vcrpy_{small}_per_call_s", paired_small["vcrpy"])
        blocks = len(paired["stub"])
        result.figure(
            f"stub server, per call ({calls} calls)",
            stub_call,
            "s",
            note=f"median of {blocks} blocks, each beside the other sides' blocks",
        )
        result.figure("proxy replay (verbatim, wire.ndjson), per call", proxy_call, "s")
        result.figure("proxy replay re-encoded from chunks, per call", reencoded_call, "s")
        result.figure("vcrpy replay (matching the body), per call", vcr_call, "s")
        result.figure(
            "vcrpy replay (default matchers: recorded order), per call", vcr_in_order_call, "s"
        )
        result.figure(
            "client floor: the adapter reading the SSE from memory, per call", floor_call, "s"
        )
        result.figure("proxy replay above the client floor, per call", proxy_call - floor_call, "s")
        result.figure("vcrpy (body) above the client floor, per call", vcr_call - floor_call, "s")
        result.figure("client floor's share of a proxied call", floor_call / proxy_call, "x")
        result.figure(f"stub server, per call ({small} calls)", stub_small_call, "s")
        result.figure(f"proxy replay, per call ({small} calls)", proxy_small_call, "s")
        result.figure(f"vcrpy replay (body), per call ({small} calls)", vcr_small_call, "s")
        result.figure(
            f"proxy replay per call, {calls} / {small} calls", proxy_call / proxy_small_call, "x"
        )
        result.figure(
            f"vcrpy (body) per call, {calls} / {small} calls", vcr_call / vcr_small_call, "x"
        )
        result.figure(
            f"proxy replay / stub server, per call ({small} calls)",
            _paired_ratio(paired_small, "verbatim"),
            "x",
        )
        result.figure(
            f"vcrpy (body) / proxy replay, per call ({small} calls)",
            _paired_ratio(paired_small, "vcrpy", "verbatim"),
            "x",
        )
        result.target(
            "proxy replay re-encoded from chunks / stub server, per call",
            _paired_ratio(paired, "reencoded"),
            1.3,
        )
        result.target(
            "proxy verbatim replay / stub server, per call", _paired_ratio(paired, "verbatim"), 1.0
        )
        _corpus_rows(result, tmp, settings.scaled(20, 3))
        result.target(
            f"vcrpy / proxy replay, per call ({calls} calls)",
            _paired_ratio(paired, "vcrpy", "verbatim"),
            10.0,
            op=">=",
        )
        aiohttp_call = result.median("aiohttp_per_call_s", [t / library_calls for t in on_aiohttp])
        uvicorn_call = result.median("uvicorn_per_call_s", [t / library_calls for t in on_uvicorn])
        result.figure(
            f"same SSE stream from a minimal aiohttp app, per call ({library_calls} calls)",
            aiohttp_call,
            "s",
        )
        result.figure("same SSE stream from starlette on uvicorn, per call", uvicorn_call, "s")
        result.target(
            "starlette+uvicorn / aiohttp, per call (aiohttp kept unless < 0.9)",
            uvicorn_call / aiohttp_call,
            0.9,
            op=">=",
        )

        with StubServer.from_toml(stub_rules(PACING_MS), source="bench paced rules") as paced:
            record = ProxySettings(
                mode="record", upstream=paced.base_url, sessions_root=tmp / "ttfc", cwd=str(tmp)
            )
            with _proxy_thread(record) as proxy:
                _run(lambda: _first_chunk(paced.base_url, 0))
                direct: list[float] = []
                through: list[float] = []
                for number in range(1, settings.scaled(9, 3) + 1):
                    direct.append(_run(lambda n=number: _first_chunk(paced.base_url, n)))  # type: ignore[misc]
                    through.append(_run(lambda n=number: _first_chunk(proxy.base_url, n)))  # type: ignore[misc]
        live_ttfc = result.median("live_ttfc_s", direct)
        record_ttfc = result.median("record_ttfc_s", through)
        result.figure("time to first chunk, live", live_ttfc, "s")
        result.figure("time to first chunk, through the recording proxy", record_ttfc, "s")
        result.target(
            "recording proxy - live, time to first chunk",
            (record_ttfc - live_ttfc) * 1000,
            5.0,
            unit="ms",
        )

        # One recording of the 64 sessions and one of session 0 alone, so that each replay
        # makes every call its recording holds (nothing reported as never requested).
        recordings = {"one": [0], "many": list(range(SESSIONS))}
        with StubServer.from_toml(SESSION_RULES, source="bench session rules") as stub:
            for name, numbers in recordings.items():
                record = ProxySettings(
                    mode="record",
                    upstream=stub.base_url,
                    fixture=tmp / f"sessions-{name}",
                    cwd=str(tmp),
                )
                with _proxy_thread(record) as proxy:
                    _run(partial(_sessions, proxy.base_url, numbers))
        replay_one = ProxySettings(mode="replay", fixture=tmp / "sessions-one", cwd=str(tmp))
        replay_many = ProxySettings(mode="replay", fixture=tmp / "sessions-many", cwd=str(tmp))
        one: list[float] = []
        many: list[float] = []
        misrouted = 0
        for _ in range(repeats):
            with _proxy_thread(replay_one) as proxy:
                alone, chunks_one, wrong_one = _run(lambda: _sessions(proxy.base_url, [0]))
            with _proxy_thread(replay_many) as proxy:
                together, chunks_many, wrong_many = _run(
                    lambda: _sessions(proxy.base_url, list(range(SESSIONS)))
                )
            misrouted += wrong_one + wrong_many
            one.append(alone / chunks_one)
            many.append(together / chunks_many)
        per_chunk_one = result.median("one_session_per_chunk_s", one)
        per_chunk_many = result.median("64_sessions_per_chunk_s", many)
        result.figure("1 session, per chunk", per_chunk_one, "s")
        result.figure(f"{SESSIONS} concurrent sessions, per chunk", per_chunk_many, "s")
        result.target("misrouted sessions", float(misrouted), 0.0, unit="")
        result.target(
            f"{SESSIONS} sessions / 1 session, per chunk", per_chunk_many / per_chunk_one, 2.0
        )
    own, worker, scenario_wall = _per_scenario(settings.scaled(10, 3))
    result.figure("a proxy of its own per scenario, started + stopped (wall)", own[0], "s")
    result.figure("a proxy of its own per scenario, started + stopped (CPU)", own[1], "s")
    result.figure(
        "the per-worker proxy: a run opened + closed, per scenario (wall)", worker[0], "s"
    )
    result.figure("the per-worker proxy: a run opened + closed, per scenario (CPU)", worker[1], "s")
    result.figure("per-worker / own proxy, per scenario (wall)", worker[0] / own[0], "x")
    result.figure("per-worker / own proxy, per scenario (CPU)", worker[1] / own[1], "x")
    result.figure(
        f"{PROXIED_SCENARIO.name} replayed end to end (wall, proxy included)", scenario_wall, "s"
    )
    result.figure(
        "share of that scenario the per-worker proxy saves",
        (own[0] - worker[0]) / scenario_wall,
        "x",
    )
    result.notes.append(
        "replay answers from memory; the stub server writes its frames from a thread; vcrpy "
        "replays through the legacy httpx transport it patches"
    )
    return result


def _per_scenario(
    repeats: int,
) -> tuple[tuple[float, float], tuple[float, float], float]:
    """Median (wall, CPU) seconds per scenario of a proxy of its own and of a run on the
    per-worker proxy, for a replay of ``PROXIED_SCENARIO`` (no agent), alternated; and the
    scenario's whole replay (wall)."""
    scenario = load_scenario(PROXIED_SCENARIO)
    own: list[tuple[float, float]] = []
    worker: list[tuple[float, float]] = []
    # No agent makes the recorded calls here: the proxy's "never requested" warnings are
    # expected, not news.
    proxy_log = logging.getLogger("agentreel.llm_proxy")
    level = proxy_log.level
    proxy_log.setLevel(logging.ERROR)
    try:
        for _ in range(repeats + 1):  # the first pays one-time imports and the start: dropped
            own.append(_own_proxy_once(scenario))
            worker.append(_backend_once(scenario))
    finally:
        proxy_log.setLevel(level)
    whole: list[float] = []
    for _ in range(max(2, repeats // 3)):
        started = time.perf_counter()
        check_scenario(scenario, "replay")  # raises unless it replays cleanly
        whole.append(time.perf_counter() - started)

    def medians(samples: list[tuple[float, float]]) -> tuple[float, float]:
        return _median([s[0] for s in samples[1:]]), _median([s[1] for s in samples[1:]])

    return medians(own), medians(worker), _median(whole)


def _own_proxy_once(scenario: Scenario) -> tuple[float, float]:
    """A proxy of its own for one replay, as the harness had one per scenario."""
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-own-") as tmp_text:
        run_dir = Path(tmp_text)
        (run_dir / "sessions").mkdir()
        settings = ProxySettings(
            mode="replay",
            fixture=scenario.directory.resolve(),
            report=run_dir / "report.json",
            sessions_root=run_dir / "sessions",
            replay=scenario.replay,
            cwd=str(run_dir),
            scenario=scenario.name,
        )
        wall, cpu = time.perf_counter(), time.process_time()
        with _proxy_thread(settings):
            pass
        return time.perf_counter() - wall, time.process_time() - cpu


def _backend_once(scenario: Scenario) -> tuple[float, float]:
    """The harness's proxy backend for one replay: a run on the per-worker proxy."""
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-backend-") as tmp_text:
        run_dir = Path(tmp_text)
        (run_dir / "cwd").mkdir()
        (run_dir / "home").mkdir()
        wall, cpu = time.perf_counter(), time.process_time()
        with proxy_backend(
            scenario,
            "replay",
            record=scenario.record,
            run_dir=run_dir,
            cwd=run_dir / "cwd",
            home=run_dir / "home",
            report=run_dir / "report.json",
        ):
            pass
        return time.perf_counter() - wall, time.process_time() - cpu


CORPUS = Path(__file__).resolve().parents[1] / "packages" / "llm_proxy" / "tests" / "corpus"
_CORPUS_REQUESTS: dict[str, dict[str, Any]] = {
    "chat": {"messages": [{"role": "user", "content": "Hello there"}]},
    "messages": {"max_tokens": 64, "messages": [{"role": "user", "content": "Hello there"}]},
    "responses": {"input": "Hello there"},
}
_CORPUS_PATHS = {
    "chat": "/v1/chat/completions",
    "messages": "/v1/messages",
    "responses": "/v1/responses",
}
_GEMINI_REQUEST = {"contents": [{"role": "user", "parts": [{"text": "Hello there"}]}]}


def _corpus_request(case: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The path and body a client sends for ``case``'s API (Gemini: model and streaming in
    the path)."""
    if case["api"] == "gemini":
        method = "streamGenerateContent?alt=sse" if case["stream"] else "generateContent"
        return f"/v1beta/models/{case['model']}:{method}", dict(_GEMINI_REQUEST)
    body = {"model": case["model"], "stream": case["stream"], **_CORPUS_REQUESTS[case["api"]]}
    return _CORPUS_PATHS[case["api"]], body


async def _record_corpus(fixture: Path) -> int:
    """Every corpus case recorded through the proxy into ``fixture`` (one session each),
    from a loopback upstream answering each with the case's bytes; returns the count."""
    import httpx2

    cases = {path.stem: json.loads(path.read_text()) for path in sorted(CORPUS.glob("*.json"))}

    async def answer(request: web.Request) -> web.StreamResponse:
        await request.read()
        case = cases[request.headers["x-corpus-case"]]
        response = case["response"]
        headers = {"content-type": response["content_type"]}
        body = response["body"].encode()
        if not case["stream"]:
            return web.Response(status=response["status"], body=body, headers=headers)
        out = web.StreamResponse(status=response["status"], headers=headers)
        await out.prepare(request)
        await out.write(body)
        await out.write_eof()
        return out

    app = web.Application()
    app.router.add_post("/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    upstream = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with (
            start_proxy("record", upstream=upstream, fixture=fixture) as proxy,
            httpx2.AsyncClient(timeout=60) as http,
        ):
            for number, (name, case) in enumerate(cases.items()):
                path, body = _corpus_request(case)
                headers = {"x-corpus-case": name, "x-agentreel-session-id": f"corpus-{number}"}
                await http.post(proxy.base_url + path, json=body, headers=headers)
    finally:
        await runner.cleanup()
    return len(cases)


def _reencoded(answer: VerbatimCall, chunks: tuple[Chunk, ...]) -> list[str]:
    """What replay without the kept answer sends for a streamed call: its re-encoding."""
    finish = chunks[-1] if chunks and isinstance(chunks[-1], Finish) else None
    meta = finish.response if finish is not None else None
    model = (meta.model if meta is not None else None) or "model"
    if answer.api == "chat":
        frames = chat_chunk_frames(chunks, model=model, response_id="r", include_usage=True)
    elif answer.api == "messages":
        frames = messages_chunk_frames(chunks, model=model, message_id="r")
    elif answer.api == "gemini":
        frames = gemini_chunk_frames(chunks, model=model, response_id="r")
    else:
        frames = responses_chunk_frames(chunks, model=model, response_id="r")
    return [frame.decode() for frame in frames]


def _differences(fixture: Path) -> tuple[bytes, int, int]:
    """The alternative to keeping whole answers: per call, only the frames that differ from
    the re-encoding (difflib opcodes with the upstream's frames). Returns that file's bytes,
    and how many of the upstream's frames the re-encoding reproduced, of how many."""
    recording = load_recording(fixture)
    calls = {
        (script.header.id, call.turn): call.chunks
        for script in recording.scripts
        for call in script.calls
    }
    lines: list[bytes] = []
    same = total = 0
    for answer in read_verbatim(fixture).values():
        if answer.frames is None:  # a body: nothing frame-wise to share
            lines.append(json.dumps({"key": answer.key, "body": answer.body}).encode() + b"\n")
            continue
        encoded = _reencoded(answer, calls[answer.key])
        ops = difflib.SequenceMatcher(None, encoded, answer.frames, autojunk=False).get_opcodes()
        kept = [
            (tag, i1, i2, answer.frames[j1:j2]) for tag, i1, i2, j1, j2 in ops if tag != "equal"
        ]
        same += sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag == "equal")
        total += len(answer.frames)
        lines.append(json.dumps({"key": answer.key, "ops": kept}).encode() + b"\n")
    return b"".join(lines), same, total


def _load_seconds(work: Callable[[], Any], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        samples.append(time.perf_counter() - start)
    return _median(samples)


def _corpus_rows(result: BenchResult, tmp: Path, repeats: int) -> None:
    """The corpus's recordings: chunk-only logs vs the kept answers (wire.ndjson) vs only
    their difference from the re-encoding — size on disk and load time."""
    fixture = tmp / "corpus-fixture"
    cases = _run(lambda: _record_corpus(fixture))
    logs = sum(path.stat().st_size for path in fixture.glob("session*.jsonl"))
    verbatim = (fixture / VERBATIM_FILE).stat().st_size
    difference, same, total = _differences(fixture)
    chunk_only = _load_seconds(lambda: load_recording(fixture), repeats)
    with_answers = _load_seconds(lambda: (load_recording(fixture), read_verbatim(fixture)), repeats)

    def load_differences() -> None:
        recording = load_recording(fixture)
        answers = read_verbatim(fixture)  # stands in for decoding the difference file
        for script in recording.scripts:
            for call in script.calls:
                answer = answers.get((script.header.id, call.turn))
                if answer is not None and answer.frames is not None:
                    _reencoded(answer, call.chunks)  # rebuilding needs the re-encoding

    with_differences = _load_seconds(load_differences, repeats)
    result.figure(f"corpus ({cases} real answers): session logs, chunks only", logs, "B")
    result.figure("corpus: answers as sent (wire.ndjson)", verbatim, "B")
    result.figure("corpus: only the difference from the re-encoding", len(difference), "B")
    result.figure("corpus: fixture with answers / chunk-only", (logs + verbatim) / logs, "x")
    result.figure(
        "corpus: upstream frames the re-encoding reproduces",
        same / total if total else 0,
        "x",
        note=f"{same} of {total}",
    )
    result.figure("corpus: load, chunks only", chunk_only, "s")
    result.figure("corpus: load, chunks + answers as sent", with_answers, "s")
    result.figure(
        "corpus: load, chunks + differences (re-encode to rebuild)", with_differences, "s"
    )
