"""Replay at the recorded pace (issue 42): record mode keeps when each frame of an answer
arrived (``wire.ndjson``'s optional ``times``: milliseconds after the request reached the
proxy); ``pace="recorded"`` serves each frame no earlier than that, the default at once; a
recording without ``times`` (made before they were kept) replays under either pace.

Only lower bounds are asserted (a frame cannot arrive before its recorded time): how close
the pace comes is measured by ``nox -s bench`` (the ``pace`` row), never asserted here."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx2
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import VERBATIM_FILE

DELAY_MS = 10
RULES = f"""
[[rule]]
match = {{ last_user = "count" }}
text = "one two three four five six"
chunk_size = 4
delay_ms = {DELAY_MS}
"""
BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "count"}]}


async def _stream(base_url: str, body: dict[str, object]) -> tuple[bytes, list[float]]:
    """The answer's bytes and when each read of it arrived (seconds after sending)."""
    async with httpx2.AsyncClient() as http:
        sent = time.monotonic()
        reads: list[float] = []
        data = bytearray()
        async with http.stream("POST", f"{base_url}/v1/chat/completions", json=body) as answer:
            assert answer.status_code == 200
            async for piece in answer.aiter_raw():
                data += piece
                reads.append(time.monotonic() - sent)
    return bytes(data), reads


async def _calls(base_url: str) -> tuple[bytes, list[float], bytes]:
    """The streamed call (its bytes and reads' times), then the whole one (its body)."""
    streamed, reads = await _stream(base_url, BODY)
    async with httpx2.AsyncClient() as http:
        whole = {**BODY, "stream": False, "model": "whole"}
        answer = await http.post(f"{base_url}/v1/chat/completions", json=whole)
    assert answer.status_code == 200
    return streamed, reads, answer.content


def _kept(fixture: Path) -> list[dict[str, object]]:
    stamp, *lines = (fixture / VERBATIM_FILE).read_text().splitlines()
    assert json.loads(stamp)["format"] >= 2
    return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One streamed and one whole answer, recorded through the stub (frames ``DELAY_MS``
    apart)."""
    import asyncio

    fixture = tmp_path_factory.mktemp("pace") / "fixture"

    async def record() -> None:
        with StubServer.from_toml(RULES) as stub:
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                await _calls(proxy.base_url)

    asyncio.run(record())
    return fixture


def test_record_keeps_when_each_frame_arrived(recorded: Path) -> None:
    streamed, whole = _kept(recorded)
    times = streamed["times"]
    frames = streamed["frames"]
    assert isinstance(times, list)
    assert isinstance(frames, list)
    assert len(times) == len(frames) > 3
    assert times == sorted(times)
    # The stub pauses DELAY_MS before each frame: none can have come sooner (rounding aside).
    assert all(at >= DELAY_MS * (n + 1) - 1 for n, at in enumerate(times[:-1]))
    assert whole["body"] is not None
    assert isinstance(whole["times"], list)
    assert len(whole["times"]) == 1


def _with_times(recorded: Path, target: Path, times: list[int] | None) -> Path:
    """A copy of the recording with the stream's ``times`` replaced (None: removed, as in
    a recording made before they were kept)."""
    import shutil

    shutil.copytree(recorded, target)
    stamp, streamed, *rest = (target / VERBATIM_FILE).read_text().splitlines()
    call = json.loads(streamed)
    if times is None:
        del call["times"]
    else:
        call["times"] = [times[min(n, len(times) - 1)] for n in range(len(call["frames"]))]
    lines = [stamp, json.dumps(call, separators=(",", ":")), *rest]
    (target / VERBATIM_FILE).write_text("\n".join(lines) + "\n")
    return target


@pytest.mark.asyncio
async def test_recorded_pace_serves_no_frame_before_its_recorded_time(
    recorded: Path, tmp_path: Path
) -> None:
    frames = len(_kept(recorded)[0]["frames"])  # type: ignore[arg-type]
    gaps = [80 + 40 * n for n in range(frames)]  # the last frame at 80 + 40 (frames - 1) ms
    fixture = _with_times(recorded, tmp_path / "paced", gaps)
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report, pace="recorded") as proxy:
        paced, reads, paced_whole = await _calls(proxy.base_url)
    async with start_proxy("replay", fixture=fixture) as proxy:
        instant, _, whole = await _calls(proxy.base_url)
    assert paced == instant  # the same bytes, only later
    assert paced_whole == whole
    assert read_report(report).ok
    assert reads[0] >= gaps[0] / 1000
    assert reads[-1] >= gaps[frames - 1] / 1000
    assert len(reads) > 1  # sent frame by frame, not in one write


@pytest.mark.asyncio
async def test_a_recording_without_times_replays_under_the_recorded_pace(
    recorded: Path, tmp_path: Path
) -> None:
    fixture = _with_times(recorded, tmp_path / "old", None)
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report, pace="recorded") as proxy:
        served, _, _ = await _calls(proxy.base_url)
    async with start_proxy("replay", fixture=recorded) as proxy:
        assert (await _calls(proxy.base_url))[0] == served
    assert read_report(report).ok
