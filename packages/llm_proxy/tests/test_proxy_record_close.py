"""Closing a recording: deciding each caller's session among lanes that tie up to an absent
system prompt, and — when arranging or writing the fixture fails — keeping every recorded
log, saying first what failed and where the logs are, and exiting 1 (SPEC 11; nothing
recorded is ever lost)."""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.session import RequestHeader, load_session_log, recording_names

# conftest.py's proxy_cli fixture (test modules cannot import conftest under importlib mode).
ProxyCli = Callable[[list[str]], tuple["subprocess.Popen[bytes]", int]]

RULES = '[[rule]]\ntext = "ok"\n'
WITH_SYSTEM: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "one"},
]
WITHOUT_SYSTEM: list[ChatCompletionMessageParam] = [{"role": "user", "content": "two"}]


def _systems(fixture: Path) -> list[tuple[str | None, str]]:
    """Per log of the fixture in session order: its first request's system prompt and origin."""
    found: list[tuple[str | None, str]] = []
    for name in recording_names(fixture):
        log = load_session_log(fixture / name)
        request = next(e.data for e in log.events if isinstance(e, RequestHeader))
        found.append((request.system, log.header.origin))
    return found


@pytest.mark.asyncio
@pytest.mark.parametrize("system_first", [True, False])
async def test_lanes_tied_but_for_a_system_prompt_rank_in_either_order(
    system_first: bool, fixture_dir: Path
) -> None:
    """One caller, one call with a system prompt and one without (same model, no tools,
    one call each): closing ranked them by comparing ``None`` with a ``str`` and lost the
    recording. Now the lane without a prompt is the session, whichever came first."""
    order = [WITH_SYSTEM, WITHOUT_SYSTEM] if system_first else [WITHOUT_SYSTEM, WITH_SYSTEM]
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            client = openai.AsyncOpenAI(
                base_url=proxy.openai_base_url, api_key="sk-close-test-1", max_retries=0
            )
            for messages in order:
                reply = await client.chat.completions.create(model="m", messages=messages)
                assert reply.choices[0].message.content == "ok"
            await client.close()
        assert proxy.errors == []
    assert _systems(fixture_dir) == [(None, "main"), ("be brief", "spawn")]


def test_a_fixture_that_cannot_be_written_keeps_the_logs_and_exits_1(
    tmp_path: Path, proxy_cli: ProxyCli
) -> None:
    """The fixture's parent is a regular file, so writing the fixture fails at close: the
    CLI says so first (what failed, the fixture, where the logs are kept), exits 1, and the
    kept directory holds the recorded call."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    fixture = blocker / "fixture"
    with StubServer.from_toml(RULES) as stub:
        process, port = proxy_cli(
            ["record", "--upstream", stub.base_url, "--fixture", str(fixture)]
        )
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-close-test-2", max_retries=0
        )
        reply = client.chat.completions.create(model="m", messages=WITH_SYSTEM)
        assert reply.choices[0].message.content == "ok"
        client.close()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 1, err.decode()
    first = err.decode().splitlines()[0]
    expected = f"agentreel proxy: record: writing the fixture {fixture} failed ("
    assert first.startswith(expected), first
    assert "NotADirectoryError" in first
    kept = Path(first.split("every session log is kept in ")[1].split(". ")[0])
    (log,) = [load_session_log(path) for path in kept.rglob("*.jsonl")]
    (request,) = [e.data for e in log.events if isinstance(e, RequestHeader)]
    assert request.system == "be brief"
    assert "sk-close-test-2" not in err.decode()
    assert not fixture.exists()
    shutil.rmtree(kept)


KEY = "sk-recclose-live-key-0123456789"
LEAK_RULES = f"""
[[rule]]
match.last_user = "leak"
text = "Your key is {KEY} and that is all I will say about it."
chunk_size = 4

[[rule]]
text = "ok"
"""


def test_a_live_key_in_the_answer_is_refused_once_and_the_stream_still_reaches_the_client(
    tmp_path: Path, proxy_cli: ProxyCli
) -> None:
    """The upstream echoes the client's key, split over many chunks: the client still gets
    the whole stream (pass-through), the fixture is refused, the refusal is said exactly
    once — naming the fixture, the kept logs and what to do, never the key — and the CLI
    exits 1. The leaking lane's log is removed; the clean one is kept."""
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(LEAK_RULES) as stub:
        process, port = proxy_cli(
            ["record", "--upstream", stub.base_url, "--fixture", str(fixture)]
        )
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0)
        clean = client.chat.completions.create(model="m", messages=WITH_SYSTEM)
        assert clean.choices[0].message.content == "ok"
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "leak"}], stream=True
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        client.close()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert text == f"Your key is {KEY} and that is all I will say about it."
    stderr = err.decode()
    assert process.returncode == 1, stderr
    assert KEY not in stderr
    assert KEY not in out.decode()
    assert stderr.count("refused to record a live API key") == 1, stderr
    first = stderr.splitlines()[0]
    assert first.startswith("agentreel proxy: record: refused to record a live API key"), first
    assert f"the fixture {fixture} was not written" in first
    assert "record again" in first
    assert not fixture.exists()
    kept = Path(first.split("the other session logs are kept in ")[1].strip())
    logs = list(kept.rglob("*.jsonl"))
    assert all(KEY.encode() not in path.read_bytes() for path in kept.rglob("*") if path.is_file())
    (log,) = [load_session_log(path) for path in logs]
    (request,) = [e.data for e in log.events if isinstance(e, RequestHeader)]
    assert request.system == "be brief"
    shutil.rmtree(kept)
