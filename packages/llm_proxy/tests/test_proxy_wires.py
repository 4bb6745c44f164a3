"""Record through the stub, replay keylessly: each wire API, streaming and not, parsed by the
official SDKs to the same content, chunk for chunk; explicit identity headers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import RequestHeader, harvest_session_logs, rerecord_command

KEY = "sk-proxy-test-0123456789"
"""The key the test clients send: forwarded upstream in record mode, never written."""


def _without_zero_details(value: Any) -> Any:
    """Token-detail counters the chunk union does not carry (audio, predictions) are zero
    upstream and absent in replay; both mean nothing was used."""
    if isinstance(value, dict):
        return {
            k: _without_zero_details(v)
            for k, v in value.items()
            if not (k.endswith("_details") and not any(v.values()))
            and not (
                isinstance(v, int) and v == 0 and k.endswith(("audio_tokens", "prediction_tokens"))
            )
        }
    if isinstance(value, list):
        return [_without_zero_details(v) for v in value]
    return value


def dump(item: Any) -> Any:
    """An SDK object as plain data, without the fields a replay mints anew (response ids,
    timestamps, fingerprints) and zero token-detail counters."""
    data = item.model_dump(exclude_none=True)
    for volatile in ("id", "created", "system_fingerprint", "created_at"):
        data.pop(volatile, None)
    if isinstance(data.get("message"), dict):
        data["message"].pop("id", None)
    return _without_zero_details(data)


WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


async def _chat_conversation(base_url: str, session: str) -> list[Any]:
    """A tool-using Chat Completions conversation; everything the SDK parsed, in order."""
    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key=KEY,
        max_retries=0,
        default_headers={"x-agentreel-session-id": session},
    )
    seen: list[Any] = []
    messages: Any = [{"role": "user", "content": "what's the weather?"}]
    stream = await client.chat.completions.create(
        model="gpt-test",
        messages=messages,
        tools=[WEATHER_TOOL],
        stream=True,
        stream_options={"include_usage": True},
    )
    calls: dict[int, dict[str, str]] = {}
    async for chunk in stream:
        seen.append(dump(chunk))
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += call.id or ""
                entry["name"] += (call.function.name or "") if call.function else ""
                entry["arguments"] += (call.function.arguments or "") if call.function else ""
    assert calls, "the first answer must call get_weather"
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls.values()
            ],
        }
    )
    messages += [
        {"role": "tool", "tool_call_id": c["id"], "content": "sunny, 21C"} for c in calls.values()
    ]
    final = await client.chat.completions.create(
        model="gpt-test",
        messages=messages,
        tools=[WEATHER_TOOL],
    )
    seen.append(dump(final))
    await client.close()
    return seen


async def _messages_conversation(base_url: str, session: str) -> list[Any]:
    """A tool-using Anthropic conversation through ``messages.stream`` (with ?beta=true)."""
    client = anthropic.AsyncAnthropic(
        base_url=base_url,
        api_key=KEY,
        max_retries=0,
        default_headers={"x-agentreel-session-id": session},
    )
    tool: Any = {
        "name": "get_weather",
        "description": "Weather for a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    seen: list[Any] = []
    messages: Any = [{"role": "user", "content": "what's the weather?"}]
    async with client.beta.messages.stream(
        model="claude-test",
        max_tokens=256,
        messages=messages,
        tools=[tool],
    ) as stream:
        async for event in stream:
            seen.append(dump(event))
        first = await stream.get_final_message()
    seen.append(dump(first))
    uses = [block for block in first.content if block.type == "tool_use"]
    assert uses, "the first answer must call get_weather"
    messages.append(
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]}
    )
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": u.id, "content": "sunny, 21C"} for u in uses
            ],
        }
    )
    final = await client.messages.create(
        model="claude-test",
        max_tokens=256,
        messages=messages,
        tools=[tool],
    )
    seen.append(dump(final))
    count = await client.messages.count_tokens(model="claude-test", messages=messages)
    seen.append(count.input_tokens > 0)
    await client.close()
    return seen


@pytest.mark.asyncio
async def test_chat_completions_record_then_replay_parse_alike(
    weather_stub: StubServer, fixture_dir: Path, tmp_path: Path
) -> None:
    async with start_proxy("record", upstream=weather_stub.base_url, fixture=fixture_dir) as proxy:
        recorded = await _chat_conversation(proxy.openai_base_url, "live-1")
    direct = await _chat_conversation(weather_stub.openai_base_url, "direct")
    weather_stub.stop()
    assert recorded == direct  # recording is a pass-through
    assert (fixture_dir / "session.jsonl").is_file()
    assert not (fixture_dir / "session.1.jsonl").exists()
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        replayed = await _chat_conversation(proxy.openai_base_url, "live-2")
    assert replayed == recorded
    text = [c["choices"][0]["delta"].get("content") for c in recorded[:-1] if c.get("choices")]
    assert "".join(t for t in text if t) == "Let me check the weather."
    assert recorded[-2]["usage"]["prompt_tokens"] == 31  # the usage chunk survived
    scripts = read_report(report).scripts
    assert [(s.calls, s.consumed, s.bound_to) for s in scripts] == [(2, 2, "live-2")]


@pytest.mark.asyncio
async def test_anthropic_messages_record_then_replay_parse_alike(
    weather_stub: StubServer, fixture_dir: Path, tmp_path: Path
) -> None:
    async with start_proxy("record", upstream=weather_stub.base_url, fixture=fixture_dir) as proxy:
        recorded = await _messages_conversation(proxy.base_url, "live-1")
    weather_stub.stop()
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        replayed = await _messages_conversation(proxy.base_url, "live-2")
    assert replayed == recorded
    kinds = [e["type"] for e in recorded if isinstance(e, dict) and "type" in e]
    assert "input_json" in kinds or "content_block_delta" in kinds
    final_message = recorded[-2]
    assert final_message["content"][0]["text"] == "It is sunny in Paris today."
    assert final_message["usage"]["input_tokens"] == 55
    assert [(s.calls, s.consumed) for s in read_report(report).scripts] == [(2, 2)]


@pytest.mark.asyncio
async def test_recording_holds_request_headers_chunks_and_no_key(
    weather_stub: StubServer, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    async with start_proxy("record", upstream=weather_stub.base_url, sessions_root=root) as proxy:
        await _chat_conversation(proxy.openai_base_url, "live-1")
    (log,) = harvest_session_logs(root)
    kinds = [type(e).__name__ for e in log.events]
    assert kinds.count("RequestHeader") == 2
    assert kinds[:3] == ["TurnStart", "RequestHeader", "AssistantChunk"]
    headers = [e.data for e in log.events if isinstance(e, RequestHeader)]
    assert headers[0].model == "gpt-test"
    assert [t.name for t in headers[0].tools] == ["get_weather"]
    assert headers[1].message_count == 3
    raw = log.path.read_text()
    assert KEY not in raw
    # The upstream did see the key: record mode forwards auth.
    assert weather_stub.requests[0].headers["authorization"] == "<redacted>"


@pytest.mark.asyncio
async def test_unrecorded_session_is_an_error_in_each_api_format_and_in_the_report(
    weather_stub: StubServer, fixture_dir: Path, tmp_path: Path
) -> None:
    async with start_proxy("record", upstream=weather_stub.base_url, fixture=fixture_dir) as proxy:
        client = openai.AsyncOpenAI(base_url=proxy.openai_base_url, api_key=KEY, max_retries=0)
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}], stream=False
        )
        await client.close()
    weather_stub.stop()
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        client = openai.AsyncOpenAI(base_url=proxy.openai_base_url, api_key="unused", max_retries=0)
        first = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}]
        )
        assert first.choices[0].message.content == "Hello! How can I help?"
        with pytest.raises(openai.BadRequestError) as raised:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hello"}]
            )
        # A headerless request that continues no recorded conversation, when the one
        # recording that starts with it is already bound, is a session the recording does
        # not contain (SPEC 13), named by its first message.
        assert raised.value.code == "UnrecordedSessionError"
        assert "first message 'hello'" in str(raised.value)
        assert rerecord_command("fixture") in str(raised.value)
        await client.close()
        other = anthropic.AsyncAnthropic(
            base_url=proxy.base_url,
            api_key="unused",
            max_retries=0,
            default_headers={"x-agentreel-session-id": "stranger"},
        )
        with pytest.raises(anthropic.BadRequestError) as refused:
            await other.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "hello"}]
            )
        assert "stranger" in str(refused.value)
        assert "made a model call the recording has no script for" in str(refused.value)
        await other.close()
    errors = read_report(report).errors
    assert [e.type for e in errors] == ["UnrecordedSessionError", "UnrecordedSessionError"]


@pytest.mark.asyncio
async def test_upstream_rate_limit_is_passed_through_and_replayed(
    fixture_dir: Path,
) -> None:
    rules = """
[[rule]]
match.last_user = "flaky"
times = 1
status = 429
retry_after = 2
[[rule]]
match.last_user = "flaky"
text = "fine now"
"""

    async def call_twice(base_url: str) -> list[Any]:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        outcomes: list[Any] = []
        for _ in range(2):
            try:
                stream = await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "flaky"}], stream=True
                )
                outcomes.append(
                    "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
                )
            except openai.RateLimitError as error:
                outcomes.append(
                    (error.status_code, error.response.headers.get("retry-after"), error.message)
                )
        await client.close()
        return outcomes

    with StubServer.from_toml(rules) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await call_twice(proxy.openai_base_url)
    async with start_proxy("replay", fixture=fixture_dir) as proxy:
        replayed = await call_twice(proxy.openai_base_url)
    assert recorded[0][:2] == (429, "2")
    assert recorded[1] == "fine now"
    assert replayed == recorded


@pytest.mark.asyncio
async def test_cut_stream_is_cut_again_in_replay(fixture_dir: Path) -> None:
    rules = """
[[rule]]
text = "this stream is cut half way through"
chunk_size = 4
cut_after = 4
"""

    async def read(base_url: str) -> tuple[str, str]:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        text = ""
        try:
            stream = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "go"}], stream=True
            )
            async for chunk in stream:
                text += chunk.choices[0].delta.content or "" if chunk.choices else ""
        except openai.APIError as error:
            await client.close()
            return text, type(error).__name__
        await client.close()
        return text, "completed"

    with StubServer.from_toml(rules) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await read(proxy.openai_base_url)
    async with start_proxy("replay", fixture=fixture_dir) as proxy:
        replayed = await read(proxy.openai_base_url)
    assert recorded[1] != "completed"
    assert recorded[0] == "this stream "
    assert replayed == recorded


@pytest.mark.asyncio
@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_an_overridden_call_streams_its_prefix_and_the_others_replay_as_recorded(
    api: str, weather_stub: StubServer, fixture_dir: Path, tmp_path: Path
) -> None:
    """An overridden call streams chunk by chunk as the provider yields it (so a hang's
    prefix reaches the client, tested in test_proxy_signals.py); the other calls of the
    fixture still parse as recorded, and the overridden one gives its prefix, then a cut."""

    async def conversation(proxy: Any) -> list[Any]:
        if api == "chat":
            return await _chat_conversation(proxy.openai_base_url, "live-1")
        return await _messages_conversation(proxy.base_url, "live-1")

    async def other(proxy: Any) -> str:
        client = openai.AsyncOpenAI(
            base_url=proxy.openai_base_url,
            api_key=KEY,
            max_retries=0,
            default_headers={"x-agentreel-session-id": "other"},
        )
        stream = await client.chat.completions.create(
            model="other-model", messages=[{"role": "user", "content": "hello"}], stream=True
        )
        text = ""
        try:
            async for chunk in stream:
                text += "".join(c.delta.content or "" for c in chunk.choices)
        except openai.APIConnectionError:
            text += "<cut>"
        await client.close()
        return text

    async with start_proxy("record", upstream=weather_stub.base_url, fixture=fixture_dir) as proxy:
        recorded = await conversation(proxy)
        assert await other(proxy) == "Hello! How can I help?"
    weather_stub.stop()
    files = ["session.jsonl", "session.1.jsonl"]
    other_file = next(
        n for n, name in enumerate(files) if b"other-model" in (fixture_dir / name).read_bytes()
    )
    throw = {"action": "throw", "session": other_file, "call": 1, "chunks": 3}
    (fixture_dir / "replay.override.json").write_text(json.dumps({"overrides": [throw]}))
    async with start_proxy("replay", fixture=fixture_dir) as proxy:
        assert await conversation(proxy) == recorded
        # The overridden call: its first chunks (block start, two deltas), then cut.
        assert await other(proxy) == "Hello! How can I<cut>"
