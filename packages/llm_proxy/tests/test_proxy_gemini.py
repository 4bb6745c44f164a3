"""The Gemini API through the proxy (SPEC 11), with the real google-genai SDK: record through
the stub, replay keylessly, parsed alike; the key (header or ``?key=``) never written; errors
in Gemini's own format."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from google import genai
from google.genai import errors, types

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report

KEY = "gemini-proxy-test-key-0123456789"
"""The key the test clients send: forwarded upstream in record mode, never written."""

RULES = """
[[rule]]
name = "route"
match = { api = "gemini", model = "gemini-flash-lite", stream = false }
json = { complexity_reasoning = "a lookup", complexity_score = 2 }

[[rule]]
name = "ask"
match = { api = "gemini", last_user = "weather" }
reasoning = "The user wants the weather."
text = "Let me check."
tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }]
chunk_size = 5
usage = { input_tokens = 31, output_tokens = 12, reasoning_tokens = 4 }

[[rule]]
name = "answer"
match = { api = "gemini", last_tool_result_regex = "sunny" }
text = "It is sunny in Paris today."
chunk_size = 4
usage = { input_tokens = 55, output_tokens = 7 }

[[rule]]
name = "flaky"
match = { api = "gemini", last_user = "flaky" }
times = 1
status = 429
retry_after = 2

[[rule]]
name = "broken"
match = { api = "gemini", last_user = "broken" }
text = "half an answer that breaks"
chunk_size = 5
error_after = 2
error_message = "the model melted"
"""

WEATHER = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="get_weather",
            description="Weather for a city",
            parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        )
    ]
)


@asynccontextmanager
async def _client(base_url: str, session: str) -> AsyncIterator[genai.Client]:
    """google-genai as a user sets it up (its own retries off), keyed by session header."""
    async with httpx2.AsyncClient() as http:
        options = types.HttpOptions(
            base_url=base_url,
            api_version="v1beta",
            headers={"x-agentreel-session-id": session},
            httpx_async_client=http,
        )
        yield genai.Client(api_key=KEY, http_options=options)


def _written_files(directory: Path) -> set[str]:
    return {path.name for path in directory.rglob("*") if path.is_file()}


def _written(directory: Path) -> str:
    """Every file a recording wrote, as one text."""
    return "".join(path.read_text() for path in directory.rglob("*") if path.is_file())


def _dump(response: Any) -> Any:
    """What the SDK parsed, without the HTTP response it came in (headers differ)."""
    return response.model_dump(
        exclude_none=True, exclude={"sdk_http_response", "automatic_function_calling_history"}
    )


async def _conversation(base_url: str, session: str) -> list[Any]:
    """The router's structured call, a streamed tool call, the tool result, the answer, a
    token count and the models listing; everything the SDK parsed, in order."""
    seen: list[Any] = []
    async with _client(base_url, session) as client:
        models = client.aio.models
        routed = await models.generate_content(
            model="gemini-flash-lite",
            contents="how hard is: weather in Paris?",
            config=types.GenerateContentConfig(
                response_mime_type="application/json",
                response_json_schema={"type": "object"},
                system_instruction="You route requests.",
            ),
        )
        seen.append(_dump(routed))
        config = types.GenerateContentConfig(
            tools=[WEATHER],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        contents: list[Any] = [types.Content(role="user", parts=[types.Part(text="weather?")])]
        stream = await models.generate_content_stream(
            model="gemini-pro", contents=contents, config=config
        )
        answer: list[types.Part] = []
        async for response in stream:
            seen.append(_dump(response))
            for candidate in response.candidates or []:
                answer += (candidate.content.parts if candidate.content else None) or []
        calls = [part.function_call for part in answer if part.function_call is not None]
        assert calls, "the first answer must call get_weather"
        contents.append(types.Content(role="model", parts=answer))
        contents.append(
            types.Content(
                role="user",
                parts=[
                    types.Part.from_function_response(
                        name=call.name or "", response={"output": "sunny, 21C"}
                    )
                    for call in calls
                ],
            )
        )
        stream = await models.generate_content_stream(
            model="gemini-pro", contents=contents, config=config
        )
        seen += [_dump(response) async for response in stream]
        counted = await models.count_tokens(model="gemini-pro", contents="three words here")
        seen.append(counted.total_tokens is not None and counted.total_tokens > 0)
        seen.append([model.name async for model in await models.list()])
    return seen


@pytest.mark.asyncio
async def test_gemini_record_then_replay_parse_alike(fixture_dir: Path, tmp_path: Path) -> None:
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await _conversation(proxy.base_url, "live-1")
        direct = await _conversation(stub.base_url, "direct")
        paths = [r.path for r in stub.requests]
        sent_keys = {r.headers.get("x-goog-api-key") for r in stub.requests}
    assert recorded == direct  # recording is a pass-through
    assert paths[:3] == [
        "/v1beta/models/gemini-flash-lite:generateContent",
        "/v1beta/models/gemini-pro:streamGenerateContent",
        "/v1beta/models/gemini-pro:streamGenerateContent",
    ]
    assert sent_keys == {"<redacted>"}  # record forwarded the key upstream
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        replayed = await _conversation(proxy.base_url, "live-2")
    assert replayed == recorded
    routed = recorded[0]["candidates"][0]["content"]["parts"][0]["text"]
    assert json.loads(routed) == {"complexity_reasoning": "a lookup", "complexity_score": 2}
    thoughts = [
        part.get("text")
        for response in recorded[1:]
        if isinstance(response, dict)
        for part in response.get("candidates", [{}])[0].get("content", {}).get("parts", [])
        if part.get("thought")
    ]
    assert "".join(t for t in thoughts if t) == "The user wants the weather."
    assert recorded[-3]["usage_metadata"]["prompt_token_count"] == 55
    assert recorded[-1] == ["models/gemini-flash-lite"]
    scripts = read_report(report).scripts
    # The router call is its own lane (another model, another system prompt), not a turn.
    assert sorted((s.calls, s.consumed) for s in scripts) == [(1, 1), (2, 2)]
    written = _written(fixture_dir)
    assert KEY not in written
    assert '"api":"gemini"' in written


@pytest.mark.asyncio
async def test_gemini_key_in_the_url_is_forwarded_and_never_written(fixture_dir: Path) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "weather?"}]}]}
    with StubServer.from_toml(RULES) as stub:
        async with (
            start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy,
            httpx2.AsyncClient() as http,
        ):
            url = f"{proxy.base_url}/v1beta/models/gemini-pro:streamGenerateContent"
            answer = await http.post(url, params={"alt": "sse", "key": KEY}, json=body)
            listed = await http.get(f"{proxy.base_url}/v1beta/models", params={"key": KEY})
        assert answer.status_code == 200
        assert answer.text.startswith("data: {")
        assert listed.json()["models"][0]["name"] == "models/gemini-flash-lite"
    written = _written(fixture_dir)
    assert KEY not in written
    assert "models.json" in _written_files(fixture_dir)


@pytest.mark.asyncio
async def test_gemini_errors_replay_as_the_same_sdk_errors(fixture_dir: Path) -> None:
    """An upstream 429 and an in-stream error come back from replay as the same
    google-genai errors; a call the recording lacks is a Gemini-format error naming it."""

    async def outcomes(base_url: str) -> list[Any]:
        seen: list[Any] = []
        async with _client(base_url, "errors") as client:
            try:
                await client.aio.models.generate_content(model="gemini-pro", contents="flaky")
            except errors.ClientError as error:
                seen.append((error.code, error.status))
            text = ""
            try:
                stream = await client.aio.models.generate_content_stream(
                    model="gemini-pro", contents="broken"
                )
                async for response in stream:
                    text += response.text or ""
            except errors.ServerError as error:
                seen.append((text, error.code, error.message))
        return seen

    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await outcomes(proxy.base_url)
    async with start_proxy("replay", fixture=fixture_dir) as proxy:
        replayed = await outcomes(proxy.base_url)
        async with _client(proxy.base_url, "stranger") as client:
            with pytest.raises(errors.ClientError) as refused:
                await client.aio.models.generate_content(model="gemini-pro", contents="hello")
    assert recorded == [(429, "RESOURCE_EXHAUSTED"), ("half an an", 500, "the model melted")]
    assert replayed == recorded
    assert refused.value.code == 400
    assert refused.value.status == "INVALID_ARGUMENT"
    assert "stranger" in (refused.value.message or "")


@pytest.mark.asyncio
async def test_unknown_gemini_method_is_a_gemini_404(fixture_dir: Path) -> None:
    with StubServer.from_toml(RULES) as stub:
        async with (
            start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy,
            httpx2.AsyncClient() as http,
        ):
            answer = await http.post(f"{proxy.base_url}/v1beta/models/m:predict", json={})
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert (error["code"], error["status"]) == (404, "NOT_FOUND")
    assert ":streamGenerateContent" in error["message"]
