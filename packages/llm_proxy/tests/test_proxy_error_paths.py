"""The error paths between the recorded and the replayed call: an upstream error inside a
stream, a client leaving a replayed stream, bad requests arriving while a recording runs.

Each records through the stub server and replays with it stopped, through the official SDKs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import pytest

from agentreel.llm import Finish, TextDelta
from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import load_recording, read_report
from agentreel.session import AssistantChunk, harvest_session_logs

KEY = "sk-proxy-test-0123456789"

# -- an upstream error inside a stream ------------------------------------------------------

OVERLOADED = "the upstream is overloaded right now"
STREAM_ERROR_RULES = f"""
[[rule]]
name = "overloaded"
match.last_user = "busy"
text = "partial answer cut by an error event"
chunk_size = 4
error_after = 6
error_message = "{OVERLOADED}"
"""

Outcome = tuple[str, str, type[BaseException], str]
"""What a client saw: the text streamed before the error, the error's class and message."""


async def _chat_outcome(base_url: str) -> Outcome:
    client = openai.AsyncOpenAI(base_url=base_url + "/v1", api_key=KEY, max_retries=0)
    text: list[str] = []
    try:
        stream = await client.chat.completions.create(
            model="gpt-x", messages=[{"role": "user", "content": "busy?"}], stream=True
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                text.append(chunk.choices[0].delta.content)
    except openai.APIError as error:
        return "chat", "".join(text), type(error), error.message
    finally:
        await client.close()
    raise AssertionError(f"the chat stream ended without an error after {text!r}")


async def _responses_outcome(base_url: str) -> Outcome:
    client = openai.AsyncOpenAI(base_url=base_url + "/v1", api_key=KEY, max_retries=0)
    text: list[str] = []
    try:
        async with client.responses.stream(model="gpt-x", input="busy?") as stream:
            async for event in stream:
                if event.type == "response.output_text.delta":
                    text.append(event.delta)
    except openai.APIError as error:
        return "responses", "".join(text), type(error), error.message
    finally:
        await client.close()
    raise AssertionError(f"the responses stream ended without an error after {text!r}")


async def _messages_outcome(base_url: str) -> Outcome:
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=0)
    text: list[str] = []
    try:
        async with client.messages.stream(
            model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "busy?"}]
        ) as stream:
            async for piece in stream.text_stream:
                text.append(piece)
    except anthropic.APIError as error:
        return "messages", "".join(text), type(error), error.message
    finally:
        await client.close()
    raise AssertionError(f"the messages stream ended without an error after {text!r}")


@pytest.mark.asyncio
@pytest.mark.parametrize("ask", [_chat_outcome, _messages_outcome, _responses_outcome])
async def test_an_error_event_inside_a_stream_is_passed_through_recorded_and_replayed(
    ask: Any, tmp_path: Path
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(STREAM_ERROR_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            recorded = await ask(proxy.base_url)
        assert len(stub.requests) == 1
    api, text, error_class, message = recorded
    # Passed through as the upstream sent it: the text before the error, then the error.
    assert text, recorded
    assert "partial answer cut by an error event".startswith(text), recorded
    assert issubclass(error_class, openai.APIError | anthropic.APIError), recorded
    assert OVERLOADED in message, recorded
    # Recorded: the call ends with the raw error event, not as a cut or a clean finish.
    (script,) = load_recording(fixture).scripts
    (call,) = script.calls
    finish = call.chunks[-1]
    assert isinstance(finish, Finish)
    assert (finish.reason, finish.code) == ("error", "stream-error"), finish
    assert OVERLOADED in json.loads(finish.message or "{}")["error"]["message"]
    # Replayed: the official SDK raises the same error class with the same message, after
    # the same text.
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        replayed = await ask(proxy.base_url)
    assert replayed == recorded, api
    (consumed,) = read_report(report).scripts
    assert (consumed.calls, consumed.consumed) == (1, 1)


# -- a client leaving a replayed stream -----------------------------------------------------

# Many frames, so the client hangs up with most of the stream unread.
BIG_TEXT = "".join(f"word{i:06d} " for i in range(20_000))
LEAVE_RULES = f"""
[[rule]]
name = "long"
match.last_user = "long"
text = "{BIG_TEXT}"
chunk_size = 500

[[rule]]
name = "short"
match.last_user = "short"
text = "a short answer"
"""


async def _chat_text(base_url: str, prompt: str) -> str:
    client = openai.AsyncOpenAI(base_url=base_url + "/v1", api_key=KEY, max_retries=0)
    try:
        stream = await client.chat.completions.create(
            model="gpt-x", messages=[{"role": "user", "content": prompt}], stream=True
        )
        return "".join(
            [c.choices[0].delta.content or "" async for c in stream if c.choices],
        )
    finally:
        await client.close()


def _texts(chunk_lists: list[list[Any]]) -> dict[str, str]:
    """Each call's text, by which prompt it answered; every call finished cleanly."""
    texts: dict[str, str] = {}
    for chunks in chunk_lists:
        finish = chunks[-1]
        assert isinstance(finish, Finish), finish
        assert finish.reason == "stop", finish
        text = "".join(c.text for c in chunks if isinstance(c, TextDelta))
        texts["long" if len(text) > 100 else "short"] = text
    return texts


@pytest.mark.asyncio
async def test_a_client_leaving_a_replayed_stream_is_a_clean_end(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(LEAVE_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert await _chat_text(proxy.base_url, "long") == BIG_TEXT
            assert await _chat_text(proxy.base_url, "short") == "a short answer"
    report = tmp_path / "report.json"
    served = tmp_path / "served"
    caplog.set_level(logging.INFO, logger="agentreel.llm_proxy")
    async with start_proxy("replay", fixture=fixture, report=report, sessions_root=served) as proxy:
        body = {"model": "gpt-x", "stream": True, "messages": [{"role": "user", "content": "long"}]}
        url = proxy.openai_base_url + "/chat/completions"
        async with aiohttp.ClientSession() as http, http.post(url, json=body) as response:
            assert response.status == 200
            first = await response.content.readany()
            assert first.startswith(b"data: ")
            response.close()  # hang up with the rest unread
        # ...and the proxy goes on serving.
        assert await _chat_text(proxy.base_url, "short") == "a short answer"
    # A clean end: nothing logged as an error or a warning (all was consumed).
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    consumed = read_report(report)
    assert consumed.errors == []
    assert sorted((s.calls, s.consumed) for s in consumed.scripts) == [(1, 1), (1, 1)]
    # The served logs hold what was served, as record mode holds a call its client left.
    logs = harvest_session_logs(served)
    assert _texts(
        [[e.data.chunk for e in log.events if isinstance(e, AssistantChunk)] for log in logs]
    ) == {
        "long": BIG_TEXT,
        "short": "a short answer",
    }


# -- bad requests in the middle of a recording ----------------------------------------------

MIDDLE_RULES = """
[[rule]]
name = "first"
match.last_user = "first"
text = "the first answer, recorded before anything went wrong"
chunk_size = 8

[[rule]]
name = "slow"
match.last_user = "slow"
text = "the second answer streams while bad requests arrive"
chunk_size = 3
delay_ms = 150
"""


async def _streaming(stub: StubServer, index: int) -> None:
    """Wait until the stub has started streaming its request ``index`` (a state, polled)."""
    for _ in range(2400):
        requests = stub.requests
        if len(requests) > index and requests[index].frames_sent > 0:
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"the stub never started streaming request {index}")


@pytest.mark.asyncio
async def test_bad_requests_in_the_middle_of_a_recording_lose_nothing_recorded(
    tmp_path: Path,
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(MIDDLE_RULES) as stub:
        async with start_proxy(
            "record", upstream=stub.base_url, fixture=fixture, max_body_bytes=20_000
        ) as proxy:
            first = await _chat_text(proxy.base_url, "first")
            slow = asyncio.create_task(_chat_text(proxy.base_url, "slow"))
            # While the second call streams: malformed JSON, a non-object body, an oversize
            # body — each on both APIs.
            await _streaming(stub, 1)
            statuses = []
            async with aiohttp.ClientSession() as http:
                big = json.dumps(
                    {"model": "m", "messages": [{"role": "user", "content": "x" * 30_000}]}
                )
                for path in ("/v1/chat/completions", "/v1/messages"):
                    for data in (b"{not json", b"[1, 2]", big.encode()):
                        async with http.post(proxy.base_url + path, data=data) as response:
                            statuses.append(response.status)
            # They arrived in the middle of the recording: the upstream was still streaming.
            assert stub.requests[1].outcome == "pending", "the second call ended too soon"
            second = await slow
    assert statuses == [400, 400, 413, 400, 400, 413]
    assert len(stub.requests) == 2  # no bad request was forwarded
    assert first == "the first answer, recorded before anything went wrong"
    assert second == "the second answer streams while bad requests arrive"
    texts = {}
    for script in load_recording(fixture).scripts:
        (call,) = script.calls
        finish = call.chunks[-1]
        assert isinstance(finish, Finish), finish
        assert finish.reason == "stop", finish
        texts[script.number] = "".join(c.text for c in call.chunks if isinstance(c, TextDelta))
    assert sorted(texts.values()) == sorted([first, second])
