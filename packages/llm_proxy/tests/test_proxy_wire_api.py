"""The wire API of every call and the raw status of upstream errors are in the session log
(SPEC 11), and replay uses them: an error comes back with its recorded status and body, and
a request on another wire API than recorded is named drift, never a silent re-encode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from agentreel.llm import Finish
from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import (
    AssistantChunk,
    RequestHeader,
    harvest_session_logs,
    load_session_log,
    recording_names,
    rerecord_command,
)

KEY = "sk-proxy-wire-api-0123456789"


def recording_paths(fixture: Path) -> list[Path]:
    return [fixture / name for name in recording_names(fixture)]


async def _one_call_per_api(proxy_base: str) -> None:
    """One streamed "hello" in each wire API, each under its own session id."""
    chat = openai.AsyncOpenAI(
        base_url=f"{proxy_base}/v1",
        api_key=KEY,
        max_retries=0,
        default_headers={"x-agentreel-session-id": "chat-caller"},
    )
    stream = await chat.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}], stream=True
    )
    async for _ in stream:
        pass
    responses = openai.AsyncOpenAI(
        base_url=f"{proxy_base}/v1",
        api_key=KEY,
        max_retries=0,
        default_headers={"x-agentreel-session-id": "responses-caller"},
    )
    async with responses.responses.stream(model="m", input="hello") as events:
        async for _ in events:
            pass
    messages = anthropic.AsyncAnthropic(
        base_url=proxy_base,
        api_key=KEY,
        max_retries=0,
        default_headers={"x-agentreel-session-id": "messages-caller"},
    )
    async with messages.messages.stream(
        model="m", max_tokens=32, messages=[{"role": "user", "content": "hello"}]
    ) as events:
        async for _ in events:
            pass
    for client in (chat, responses, messages):
        await client.close()


@pytest.mark.asyncio
async def test_record_writes_the_wire_api_of_each_call_into_its_request_header(
    weather_stub: StubServer, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    async with start_proxy("record", upstream=weather_stub.base_url, sessions_root=root) as proxy:
        await _one_call_per_api(proxy.base_url)
    apis = set()
    for log in harvest_session_logs(root):
        (header,) = [e.data for e in log.events if isinstance(e, RequestHeader)]
        apis.add(header.api)
        assert f'"api":"{header.api}"' in log.path.read_text()
    assert apis == {"chat", "messages", "responses"}


@pytest.mark.asyncio
async def test_replay_on_another_wire_api_than_recorded_is_named_drift(
    weather_stub: StubServer, fixture_dir: Path, tmp_path: Path
) -> None:
    async with start_proxy("record", upstream=weather_stub.base_url, fixture=fixture_dir) as proxy:
        client = openai.AsyncOpenAI(base_url=proxy.openai_base_url, api_key=KEY, max_retries=0)
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}]
        )
        await client.close()
    weather_stub.stop()
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        # The same conversation, now sent as Anthropic Messages.
        other = anthropic.AsyncAnthropic(base_url=proxy.base_url, api_key="unused", max_retries=0)
        with pytest.raises(anthropic.BadRequestError) as refused:
            await other.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "hello"}]
            )
        await other.close()
    message = str(refused.value)
    assert "differs from the recorded request/header" in message
    assert "wire API: recorded POST /v1/chat/completions" in message
    assert "live POST /v1/messages" in message
    assert rerecord_command("fixture") in message
    (error,) = read_report(report).errors
    assert error.type == "RequestDriftError"
    assert "wire API" in error.message


ERROR_RULES = """
[[rule]]
match.last_user = "overloaded"
times = 1
status = 500
error_message = "the upstream is overloaded"
[[rule]]
match.last_user = "limited"
times = 1
status = 429
retry_after = 7
[[rule]]
text = "fine now"
"""


async def _anthropic_outcomes(base_url: str) -> list[Any]:
    """A 500 on Anthropic Messages (streaming), then the retry that succeeds."""
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=0)
    outcomes: list[Any] = []
    for _ in range(2):
        try:
            async with client.messages.stream(
                model="m", max_tokens=32, messages=[{"role": "user", "content": "overloaded"}]
            ) as events:
                outcomes.append(await events.get_final_text())
        except anthropic.APIStatusError as error:
            outcomes.append((type(error).__name__, error.status_code, error.body))
    await client.close()
    return outcomes


async def _responses_outcomes(base_url: str) -> list[Any]:
    """A 429 with retry-after on OpenAI Responses (not streaming), then the retry."""
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key=KEY, max_retries=0)
    outcomes: list[Any] = []
    for _ in range(2):
        try:
            response = await client.responses.create(model="m", input="limited")
            outcomes.append(response.output_text)
        except openai.APIStatusError as error:
            outcomes.append(
                (
                    type(error).__name__,
                    error.status_code,
                    error.response.headers.get("retry-after"),
                    error.body,
                )
            )
    await client.close()
    return outcomes


@pytest.mark.asyncio
async def test_upstream_error_statuses_are_logged_raw_and_replayed_as_they_came(
    fixture_dir: Path,
) -> None:
    with StubServer.from_toml(ERROR_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = [
                await _anthropic_outcomes(proxy.base_url),
                await _responses_outcomes(proxy.base_url),
            ]
    assert recorded[0][0][:2] == ("InternalServerError", 500)
    assert recorded[0][1] == "fine now"
    assert recorded[1][0][:3] == ("RateLimitError", 429, "7")
    assert recorded[1][1] == "fine now"
    # The log holds each error's raw status, kept headers and body, and the call's API.
    statuses = {}
    for path in recording_paths(fixture_dir):
        log = load_session_log(path)
        headers = [e.data for e in log.events if isinstance(e, RequestHeader)]
        finishes = [
            e.data.chunk
            for e in log.events
            if isinstance(e, AssistantChunk) and isinstance(e.data.chunk, Finish)
        ]
        for header, finish in zip(headers, finishes, strict=True):
            if finish.reason == "error":
                raw = json.loads(finish.message or "")
                statuses[header.api] = (
                    finish.code,
                    raw["status"],
                    raw["headers"].get("retry-after"),
                )
                assert json.loads(raw["body"])  # the upstream's own error body, kept whole
    assert statuses == {"messages": ("http-500", 500, None), "responses": ("http-429", 429, "7")}
    async with start_proxy("replay", fixture=fixture_dir) as proxy:
        replayed = [
            await _anthropic_outcomes(proxy.base_url),
            await _responses_outcomes(proxy.base_url),
        ]
    assert replayed == recorded
