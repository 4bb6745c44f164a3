"""SIGTERM / SIGINT / end of stdin while a stream is in flight (SPEC 11, issue 18).

``python -m agentreel.llm_proxy record|replay`` runs as a subprocess; a real ``openai``
client streams through it; the signal is sent once the client has parsed some deltas. The
proxy exits 0 promptly, every chunk the client got before the signal is in what it wrote
(record: the fixture; replay: the served session logs), the interrupted call is sealed and
named, and replay's report is written.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import openai
import pytest

from agentreel.llm import Finish, TextDelta
from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import SESSION_HEADER, start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import (
    AssistantChunk,
    SessionLog,
    TurnEnd,
    harvest_session_logs,
    load_session_log,
)

TEXT = "one two three four five six seven eight nine ten eleven twelve"
RULES = f"""
[[rule]]
match.last_user = "count"
text = "{TEXT}"
chunk_size = 4
usage = {{ input_tokens = 9, output_tokens = 12 }}
"""
# Record: each frame 250 ms apart, so the stream is in flight for seconds after the signal.
SLOW_RULES = RULES.replace("chunk_size = 4", "chunk_size = 4\ndelay_ms = 250")
DELTAS = -(-len(TEXT) // 4)
# Deltas the client parses before the signal.
BEFORE_SIGNAL = 3
# Replay: the recorded call streams its block start and this many deltas, then hangs.
HUNG_AFTER = 4
STOPS = ["SIGTERM", "SIGINT", "stdin EOF"]
# conftest.py's proxy_cli fixture (test modules cannot import conftest under importlib mode).
ProxyCli = Callable[[list[str]], tuple["subprocess.Popen[bytes]", int]]


def _stop(process: subprocess.Popen[bytes], how: str) -> None:
    if how == "stdin EOF":
        assert process.stdin is not None
        process.stdin.close()
    else:
        process.send_signal(getattr(signal, how))


def _stopped_mid_stream(proxy_cli: ProxyCli, args: list[str], how: str) -> tuple[list[str], str]:
    """Start the proxy, stream through it and stop it ``how`` after ``BEFORE_SIGNAL``
    deltas: (every delta the client got, the proxy's stderr); it must have exited 0."""
    process, port = proxy_cli(args)
    received = _stream_and_stop(port, process, how)
    process.wait(timeout=60)
    assert process.stderr is not None
    stderr = process.stderr.read().decode()
    assert process.returncode == 0, stderr
    assert len(received) >= BEFORE_SIGNAL
    return received, stderr


def _deltas(port: int) -> Iterator[str]:
    """Text deltas of one streamed chat completion through the proxy, as they are parsed."""
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key="sk-signal-test-key-1",
        max_retries=0,
        timeout=60,
        default_headers={SESSION_HEADER: "main-1"},
    )
    try:
        stream = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "count to twelve"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        for chunk in stream:
            for choice in chunk.choices:
                if choice.delta.content:
                    yield choice.delta.content
    finally:
        client.close()


def _stream_and_stop(port: int, process: subprocess.Popen[bytes], how: str) -> list[str]:
    """Deltas the client parsed before ``how`` stopped the proxy (the rest is cut off)."""
    received: list[str] = []
    deltas = _deltas(port)
    for delta in deltas:
        received.append(delta)
        if len(received) == BEFORE_SIGNAL:
            break
    _stop(process, how)
    try:
        for delta in deltas:  # what still arrives until the proxy cuts the stream
            received.append(delta)
    except openai.APIConnectionError:
        pass  # the proxy cut the stream when it stopped
    return received


def _chunks(log: SessionLog) -> list[object]:
    return [e.data.chunk for e in log.events if isinstance(e, AssistantChunk)]


def _assert_sealed_interrupted(log: SessionLog, received: list[str], stderr: str) -> None:
    """Every delta the client got is in ``log``, the call is sealed as interrupted and the
    proxy named it, once."""
    assert stderr.count("session 'main-1' (from x-agentreel-session-id): call 1 was still") == 1
    chunks = _chunks(log)
    logged = [c.text for c in chunks if isinstance(c, TextDelta)]
    assert logged[: len(received)] == received, (logged, received)
    assert len(logged) < DELTAS, "the call streamed to its end: nothing was interrupted"
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason == "error"
    assert "stopped" in (finish.message or "")
    last = log.events[-1]
    assert isinstance(last, TurnEnd)
    assert last.data.reason == "interrupted"


@pytest.mark.slow
@pytest.mark.parametrize("how", STOPS)
def test_stop_mid_stream_while_recording_keeps_every_forwarded_chunk(
    how: str, tmp_path: Path, proxy_cli: ProxyCli
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(SLOW_RULES) as stub:
        args = ["record", "--upstream", stub.base_url, "--fixture", str(fixture)]
        received, stderr = _stopped_mid_stream(proxy_cli, args, how)
    _assert_sealed_interrupted(load_session_log(fixture / "session.jsonl"), received, stderr)


def _record_fixture(fixture: Path) -> None:
    async def record() -> None:
        with StubServer.from_toml(RULES) as stub:
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                client = openai.AsyncOpenAI(
                    base_url=proxy.openai_base_url, api_key="not-a-key", max_retries=0
                )
                stream = await client.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": "count to twelve"}],
                    stream=True,
                    stream_options={"include_usage": True},
                )
                async for _ in stream:
                    pass
                await client.close()

    asyncio.run(record())
    hang = {"action": "hang", "session": 0, "call": 1, "chunks": 1 + HUNG_AFTER}
    (fixture / "replay.override.json").write_text(json.dumps({"overrides": [hang]}))


@pytest.mark.slow
@pytest.mark.parametrize("how", STOPS)
def test_stop_mid_stream_while_replaying_keeps_the_served_log_and_the_report(
    how: str, tmp_path: Path, proxy_cli: ProxyCli
) -> None:
    fixture = tmp_path / "fixture"
    _record_fixture(fixture)
    recorded = [
        c.text for c in _chunks(load_session_log(fixture / "session.jsonl"))
        if isinstance(c, TextDelta)
    ]  # fmt: skip
    assert len(recorded) == DELTAS
    served_root = tmp_path / "served"
    report = tmp_path / "report.json"
    args = ["--fixture", str(fixture), "--report", str(report), "--sessions-root", str(served_root)]
    received, stderr = _stopped_mid_stream(proxy_cli, ["replay", *args], how)
    # Everything before the hang reached the client as it was streamed, and nothing after.
    assert received == recorded[:HUNG_AFTER]
    (served,) = harvest_session_logs(served_root)
    _assert_sealed_interrupted(served, received, stderr)
    consumption = read_report(report)
    assert [(s.file, s.calls, s.consumed) for s in consumption.scripts] == [("session.jsonl", 1, 1)]
    assert consumption.scripts[0].interrupted == [1]  # consumed, but cut by the stop
    assert consumption.errors == []
