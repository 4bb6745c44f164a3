"""Vertex AI through the proxy (issue 42, SPEC 11), with the official clients: Claude with
``anthropic.AsyncAnthropicVertex`` (``…/publishers/anthropic/models/<m>:streamRawPredict`` and
``:rawPredict``, Messages bodies, the model in the path) and Gemini with ``google-genai``
``vertexai=True`` (``…/publishers/google/models/<m>:generateContent`` and
``:streamGenerateContent``). Recorded through the stub, replayed keylessly: parsed alike,
the bytes served equal; the access token forwarded and never written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import google.oauth2.credentials
import httpx2
import pytest
from google import genai
from google.genai import types

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report

TOKEN = "ya29.vertex-proxy-test-token-0123456789"
CLAUDE = "claude-sonnet-4@20250514"
PREFIX = "/v1/projects/proj/locations/us-east5/publishers"

RULES = """
[[rule]]
name = "claude"
match = { api = "anthropic", last_user = "weather" }
text = "Let me check."
tool_calls = [{ id = "toolu_w", name = "get_weather", arguments = { city = "Paris" } }]
chunk_size = 5

[[rule]]
name = "claude-answer"
match = { api = "anthropic", last_tool_result_regex = "sunny" }
text = "It is sunny in Paris today."
chunk_size = 4

[[rule]]
name = "gemini"
match = { api = "gemini", last_user = "haiku" }
text = "Autumn moonlight, a worm digs silently."
chunk_size = 6
"""

WEATHER: Any = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _written(directory: Path) -> str:
    return "".join(path.read_text() for path in directory.rglob("*") if path.is_file())


async def _conversation(base: str) -> list[Any]:
    """Claude streamed with a tool call, its answer whole; Gemini whole and streamed."""
    seen: list[Any] = []
    async with anthropic.AsyncAnthropicVertex(
        region="us-east5",
        project_id="proj",
        access_token=TOKEN,
        base_url=f"{base}/v1",
        max_retries=0,
    ) as claude:
        messages: list[Any] = [{"role": "user", "content": "weather?"}]
        stream = await claude.messages.create(
            model=CLAUDE, max_tokens=100, messages=messages, tools=[WEATHER], stream=True
        )
        events = [event.model_dump(exclude_none=True) async for event in stream]
        seen += events
        use = next(
            event["content_block"]
            for event in events
            if event["type"] == "content_block_start"
            and event["content_block"]["type"] == "tool_use"
        )
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me check."},
                    {**use, "input": {"city": "Paris"}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "sunny"}],
            }
        )
        answer = await claude.messages.create(
            model=CLAUDE, max_tokens=100, messages=messages, tools=[WEATHER]
        )
        seen.append(answer.model_dump(exclude_none=True))
    credentials = google.oauth2.credentials.Credentials(token=TOKEN)  # type: ignore[no-untyped-call]
    async with httpx2.AsyncClient() as http:
        gemini = genai.Client(
            vertexai=True,
            project="proj",
            location="us-central1",
            credentials=credentials,
            http_options=types.HttpOptions(base_url=f"{base}/", httpx_async_client=http),
        )
        models = gemini.aio.models
        whole = await models.generate_content(model="gemini-2.5-flash", contents="a haiku")
        seen.append(whole.text)
        streamed = await models.generate_content_stream(
            model="gemini-2.5-flash", contents="a streamed haiku"
        )
        seen.append([part.text async for part in streamed])
    return seen


async def _raw(base: str) -> bytes:
    body = {
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "weather?"}],
    }
    async with httpx2.AsyncClient() as http:
        answer = await http.post(
            f"{base}{PREFIX}/anthropic/models/{CLAUDE}:streamRawPredict",
            headers={"authorization": f"Bearer {TOKEN}"},
            json=body,
        )
    assert answer.status_code == 200, answer.text
    return answer.content


@pytest.mark.asyncio
async def test_vertex_claude_and_gemini_record_then_replay_parse_alike(
    fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(RULES) as stub:
        direct = await _conversation(stub.base_url)
        direct_bytes = await _raw(stub.base_url)
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await _conversation(proxy.base_url)
            recorded_bytes = await _raw(proxy.base_url)
        paths = [r.path for r in stub.requests]
    assert recorded == direct  # recording is a pass-through
    assert recorded_bytes == direct_bytes
    assert f"{PREFIX}/anthropic/models/{CLAUDE}:streamRawPredict" in paths
    assert f"{PREFIX}/anthropic/models/{CLAUDE}:rawPredict" in paths
    assert any(":streamGenerateContent" in path and "/publishers/google/" in path for path in paths)
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        replayed = await _conversation(proxy.base_url)
        replayed_bytes = await _raw(proxy.base_url)
    assert replayed == recorded
    assert replayed_bytes == recorded_bytes
    assert recorded[-2] == "Autumn moonlight, a worm digs silently."
    assert "".join(recorded[-1]) == "Autumn moonlight, a worm digs silently."
    replayed_report = read_report(report)
    assert replayed_report.ok, replayed_report.errors
    written = _written(fixture_dir)
    assert TOKEN not in written
    # The model Vertex names in the path is the recorded request's model.
    assert f'"model":"{CLAUDE}"' in written
    assert '"api":"messages"' in written
    assert '"api":"gemini"' in written
