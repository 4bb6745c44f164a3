"""Embeddings through the proxy (issue 42): OpenAI's ``POST /v1/embeddings`` and Ollama's
``POST /api/embed`` (and its older ``/api/embeddings``), with the official clients, on the
stub server (which answers a vector from a hash of each input). Recorded as calls of the
calling session, the input text being the request's content; the upstream body kept
verbatim and served byte for byte; a changed input is a drift naming the session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import ollama
import openai
import pytest
from google import genai
from google.genai import types

from agentreel.llm.stub import StubServer
from agentreel.llm.wire import embedding_vector, pack_vector, unpack_vector
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import RequestHeader, load_session_log, recording_names

RULES = '[[rule]]\ntext = "unused: embeddings take no rule"\n'
INPUTS = ["tea leaves", "hot water"]
RAW_BODY = {"model": "text-embedding-3-small", "input": "bytes as sent"}


async def _openai(base_url: str, inputs: list[str]) -> list[Any]:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-embed-0123456789")
    try:
        many = await client.embeddings.create(model="text-embedding-3-small", input=inputs)
        floats = await client.embeddings.create(
            model="text-embedding-3-small", input=inputs[0], encoding_format="float"
        )
        return [many.model_dump(), floats.model_dump()]
    finally:
        await client.close()


async def _raw(base_url: str) -> bytes:
    async with httpx2.AsyncClient() as http:
        answer = await http.post(f"{base_url}/v1/embeddings", json=RAW_BODY)
    assert answer.status_code == 200, answer.text
    return answer.content


async def _ollama(host: str, inputs: list[str]) -> list[Any]:
    async with ollama.AsyncClient(host=host) as client:
        answer = await client.embed(model="nomic-embed-text", input=inputs)
        # The older endpoint, /api/embeddings: one prompt, one embedding.
        older = await client.embeddings(model="nomic-embed-text", prompt=inputs[0])
    async with httpx2.AsyncClient() as http:
        raw = await http.post(f"{host}/api/embed", json={"model": "m", "input": "raw"})
    return [answer.model_dump(exclude_none=True), raw.content, older.model_dump()]


def _logs(fixture_dir: Path, pattern: str = "*.jsonl") -> str:
    return "".join(path.read_text() for path in fixture_dir.rglob(pattern) if path.is_file())


@pytest.mark.asyncio
async def test_openai_embeddings_record_then_replay_parse_alike_and_serve_the_same_bytes(
    fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(RULES) as stub:
        upstream = await _openai(stub.base_url, INPUTS)
        upstream_bytes = await _raw(stub.base_url)
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await _openai(proxy.base_url, INPUTS)
            recorded_bytes = await _raw(proxy.base_url)
    assert recorded == upstream
    assert recorded_bytes == upstream_bytes
    # The stub's vectors: a hash of each input, as documented.
    assert [item["embedding"] for item in upstream[0]["data"]] == [
        pytest.approx(embedding_vector(text)) for text in INPUTS
    ]
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        replayed = await _openai(proxy.base_url, INPUTS)
        replayed_bytes = await _raw(proxy.base_url)
    assert replayed == recorded
    assert replayed_bytes == recorded_bytes
    assert read_report(report).ok
    logs = _logs(fixture_dir)
    assert '"api":"embeddings"' in logs
    assert "tea leaves" in logs  # the input is the request's content
    assert not any(str(value) in logs for value in upstream[1]["data"][0]["embedding"])
    # Three unrelated inputs: the content binder gives each call its own log, one call each.
    headers = [
        event
        for name in recording_names(fixture_dir)
        for event in load_session_log(fixture_dir / name).events
        if isinstance(event, RequestHeader)
    ]
    assert [event.data.api for event in headers] == ["embeddings"] * 3


@pytest.mark.asyncio
async def test_a_changed_embeddings_input_is_a_drift_naming_the_session(
    fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            await _openai(proxy.base_url, INPUTS)
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        with pytest.raises(openai.APIStatusError) as refused:
            await _openai(proxy.base_url, ["tea leaves", "cold water"])
    message = str(refused.value)
    assert "hot water" in message
    assert "cold water" in message
    (error,) = read_report(report).errors
    assert error.type == "RequestDriftError"
    assert "call 1 of session.jsonl" in error.message


@pytest.mark.asyncio
async def test_ollama_embed_record_then_replay_parse_alike(
    fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(RULES) as stub:
        upstream = await _ollama(stub.base_url, INPUTS)
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await _ollama(proxy.base_url, INPUTS)
    assert recorded == upstream
    assert upstream[0]["embeddings"] == [pytest.approx(embedding_vector(text)) for text in INPUTS]
    assert upstream[2]["embedding"] == pytest.approx(embedding_vector(INPUTS[0]))
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        replayed = await _ollama(proxy.base_url, INPUTS)
    assert replayed == recorded
    assert read_report(report).ok
    assert '"api":"ollama-embed"' in _logs(fixture_dir)


def test_vectors_round_trip_through_base64_float32() -> None:
    vector = embedding_vector("tea", 12)
    assert len(vector) == 12
    assert all(-1 <= value < 1 for value in vector)
    assert embedding_vector("tea", 12) == vector != embedding_vector("coffee", 12)
    assert unpack_vector(pack_vector(vector)) == vector


async def _azure(base_url: str) -> Any:
    client = openai.AsyncAzureOpenAI(
        azure_endpoint=base_url, api_key="azure-key-0123456789", api_version="2024-10-21"
    )
    try:
        answer = await client.embeddings.create(model="embedder", input=INPUTS)
        return answer.model_dump()
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_azure_openai_embeddings_under_the_deployment_path_record_and_replay(
    fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(RULES) as stub:
        upstream = await _azure(stub.base_url)
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await _azure(proxy.base_url)  # POST /openai/deployments/embedder/…
    assert recorded == upstream
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        assert await _azure(proxy.base_url) == recorded
    assert read_report(report).ok
    assert '"api":"embeddings"' in _logs(fixture_dir)
    assert "azure-key-0123456789" not in _logs(fixture_dir)


GEMINI_KEY = "gemini-embed-key-0123456789"


async def _gemini(base_url: str) -> list[Any]:
    """google-genai's embed_content (``:batchEmbedContents``) and the single method raw."""
    async with httpx2.AsyncClient() as http:
        options = types.HttpOptions(
            base_url=base_url, api_version="v1beta", httpx_async_client=http
        )
        client = genai.Client(api_key=GEMINI_KEY, http_options=options)
        contents = [types.Content(parts=[types.Part(text=text)]) for text in INPUTS]
        batch = await client.aio.models.embed_content(
            model="gemini-embedding-001",
            contents=contents,
            config=types.EmbedContentConfig(output_dimensionality=4),
        )
        single = await http.post(
            f"{base_url}/v1beta/models/gemini-embedding-001:embedContent",
            json={"content": {"parts": [{"text": "one tea"}]}},
            headers={"x-goog-api-key": GEMINI_KEY},
        )
        assert single.status_code == 200, single.text
        return [batch.model_dump(exclude={"sdk_http_response"}), single.content]


@pytest.mark.asyncio
async def test_gemini_embed_content_record_then_replay_parse_alike_and_serve_the_same_bytes(
    fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(RULES) as stub:
        upstream = await _gemini(stub.base_url)
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await _gemini(proxy.base_url)
    assert recorded == upstream
    assert [item["values"] for item in upstream[0]["embeddings"]] == [
        pytest.approx(embedding_vector(text, 4)) for text in INPUTS
    ]
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        replayed = await _gemini(proxy.base_url)
    assert replayed == recorded  # the single answer's bytes included
    assert read_report(report).ok
    logs = _logs(fixture_dir)
    assert '"api":"gemini-embed"' in logs
    assert "one tea" in logs
    assert GEMINI_KEY not in _logs(fixture_dir, "*")


CHAT_RULES = '[[rule]]\nmatch = { api = "openai" }\ntext = "Steep them."\n'


async def _agent(base_url: str) -> list[Any]:
    """An agent that embeds its question between two chat calls, naming its session."""
    client = openai.AsyncOpenAI(
        base_url=f"{base_url}/v1",
        api_key="sk-embed-0123456789",
        default_headers={"x-agentreel-session-id": "agent-main"},
    )
    try:
        seen: list[Any] = []
        ask = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "tea?"}]
        )
        seen.append(ask.choices[0].message.content)
        vector = await client.embeddings.create(model="text-embedding-3-small", input="tea?")
        seen.append(vector.data[0].embedding)
        again = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "more tea?"}]
        )
        seen.append(again.choices[0].message.content)
        return seen
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_an_embeddings_call_binds_within_the_session_that_made_it(
    fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(CHAT_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await _agent(proxy.base_url)
    # Bound as the content binder binds any call of a named session: each new conversation
    # (the embedding's input is one) a lane under the session's main log.
    logs = {name: load_session_log(fixture_dir / name) for name in recording_names(fixture_dir)}
    main = logs.pop("session.jsonl")
    apis = {
        next(e.data.api for e in log.events if isinstance(e, RequestHeader)): log.header
        for log in logs.values()
    }
    assert sorted(str(api) for api in apis) == ["chat", "embeddings"]
    assert apis["embeddings"].parent_session == main.header.id
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        assert await _agent(proxy.base_url) == recorded
    assert read_report(report).ok
