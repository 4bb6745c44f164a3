"""Embeddings on the clouds' own paths through the proxy (issue 42), with the official
clients on the stub server: Vertex AI ``:predict`` of a text-embedding model (google-genai,
``vertexai=True``) and Bedrock InvokeModel of Titan and Cohere embedding models (boto3
``bedrock-runtime``). Each: parse(upstream) == parse(record) == parse(replay), the bytes
served equal, the input text the call's content, no credential written."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import boto3
import google.oauth2.credentials
import httpx2
import pytest
from botocore.config import Config
from google import genai
from google.genai import types

from agentreel.llm.stub import StubServer
from agentreel.llm.wire import embedding_vector
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report

RULES = '[[rule]]\ntext = "unused: embeddings take no rule"\n'
INPUTS = ["tea leaves", "hot water"]
TOKEN = "ya29.vertex-embed-token-0123456789"
KEY_ID = "AKIAEMBEDTEST0123456"
SECRET = "embedSecretKey0123456789abcdefghijklmnop"


def _logs(fixture_dir: Path, pattern: str = "*") -> str:
    return "".join(path.read_text() for path in fixture_dir.rglob(pattern) if path.is_file())


async def _vertex(base: str) -> list[Any]:
    credentials = google.oauth2.credentials.Credentials(token=TOKEN)  # type: ignore[no-untyped-call]
    async with httpx2.AsyncClient() as http:
        client = genai.Client(
            vertexai=True,
            project="proj",
            location="us-central1",
            credentials=credentials,
            http_options=types.HttpOptions(base_url=f"{base}/", httpx_async_client=http),
        )
        answer = await client.aio.models.embed_content(
            model="text-embedding-005",
            contents=[types.Content(parts=[types.Part(text=text)]) for text in INPUTS],
            config=types.EmbedContentConfig(output_dimensionality=4, task_type="RETRIEVAL_QUERY"),
        )
        gemini = await client.aio.models.embed_content(
            model="gemini-embedding-001", contents="one tea, gemini"
        )  # a Gemini embedding model on Vertex AI: :embedContent under the publisher's path
        raw = await http.post(
            f"{base}/v1/projects/proj/locations/us-central1/publishers/google/models/"
            "text-embedding-005:predict",
            json={"instances": [{"content": "one tea"}]},
            headers={"authorization": f"Bearer {TOKEN}"},
        )
        assert raw.status_code == 200, raw.text
        return [
            answer.model_dump(exclude={"sdk_http_response"}),
            gemini.model_dump(exclude={"sdk_http_response"}),
            raw.content,
        ]


@pytest.mark.asyncio
async def test_vertex_predict_embeddings_record_then_replay_parse_alike_and_serve_the_same_bytes(
    fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(RULES) as stub:
        upstream = await _vertex(stub.base_url)
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await _vertex(proxy.base_url)
    assert recorded == upstream
    assert [item["values"] for item in upstream[0]["embeddings"]] == [
        pytest.approx(embedding_vector(text, 4)) for text in INPUTS
    ]
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        replayed = await _vertex(proxy.base_url)
    assert replayed == recorded  # the raw :predict answer's bytes included
    assert read_report(report).ok
    logs = _logs(fixture_dir)
    assert '"api":"vertex-embed"' in logs
    assert '"api":"gemini-embed"' in logs  # the Gemini embedding model's :embedContent
    assert "one tea" in logs
    assert "RETRIEVAL_QUERY" in logs
    assert TOKEN not in logs


def _bedrock(endpoint: str) -> list[Any]:
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=endpoint,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        config=Config(retries={"max_attempts": 1}, read_timeout=20),
    )
    seen: list[Any] = []
    titan = client.invoke_model(
        modelId="amazon.titan-embed-text-v2:0",
        body=json.dumps({"inputText": INPUTS[0], "dimensions": 4, "normalize": True}),
    )
    seen.append(titan["body"].read())
    cohere = client.invoke_model(
        modelId="cohere.embed-english-v3",
        body=json.dumps({"texts": INPUTS, "input_type": "search_document"}),
    )
    seen.append(cohere["body"].read())
    by_type = client.invoke_model(
        modelId="cohere.embed-english-v3",
        body=json.dumps(
            {"texts": ["cold water"], "input_type": "search_query", "embedding_types": ["float"]}
        ),
    )
    seen.append(by_type["body"].read())
    return seen


@pytest.mark.asyncio
async def test_bedrock_titan_and_cohere_embeddings_record_then_replay_serve_the_same_bytes(
    fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(RULES) as stub:
        upstream = _bedrock(stub.base_url)
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await asyncio.to_thread(_bedrock, proxy.base_url)
    assert recorded == upstream
    titan, cohere, by_type = (json.loads(body) for body in upstream)
    assert titan["embedding"] == pytest.approx(embedding_vector(INPUTS[0], 4))
    assert cohere["embeddings"] == [pytest.approx(embedding_vector(text)) for text in INPUTS]
    assert by_type["embeddings"]["float"] == [pytest.approx(embedding_vector("cold water"))]
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        replayed = await asyncio.to_thread(_bedrock, proxy.base_url)
    assert replayed == recorded
    assert read_report(report).ok
    logs = _logs(fixture_dir)
    assert _logs(fixture_dir, "*.jsonl").count('"api":"bedrock-embed"') == 3
    assert '\\"family\\":\\"cohere\\"' in logs
    assert '\\"family\\":\\"titan\\"' in logs
    assert KEY_ID not in logs
    assert SECRET not in logs


def test_a_bedrock_embeddings_answer_re_encodes_in_its_family() -> None:
    from agentreel.llm.wire import wire_api

    spec = wire_api("bedrock-embed")
    for body, answer in (
        ({"inputText": "tea"}, {"embedding": [0.5, -0.25], "inputTextTokenCount": 1}),
        (
            {"texts": ["tea", "milk"], "input_type": "search_query"},
            {"id": "x", "texts": ["tea", "milk"], "embeddings": [[0.5], [0.25]]},
        ),
    ):
        request = spec.parse(body, "m", False)
        chunks = spec.decoder("").body(answer)
        again = json.loads(spec.encode_body(request, chunks, "x", None))
        assert spec.decoder("").body(again) == chunks
        key = "embedding" if "inputText" in body else "embeddings"
        assert again[key] == answer[key]
