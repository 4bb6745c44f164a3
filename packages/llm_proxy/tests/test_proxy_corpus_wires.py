"""Real answers of the wire APIs beyond the first four (issue 42), recorded and replayed
through the proxy: each parses the same with its official client straight from the
upstream, through record mode and through replay, and the bytes a plain client gets are the
upstream's in record and in replay (``corpus/wires/``, provenance and licence in each case:
``corpus/README.md``).

Clients: boto3 ``bedrock-runtime`` (ConverseStream's AWS event-stream, Converse, InvokeModel
of Titan and Cohere embedding models) and google-genai with ``vertexai=True`` (Gemini on
Vertex AI, whole and streamed; ``:predict`` of an embedding model). Each case is served by a
loopback upstream of its own, as the cassette holds it (an event stream message by message,
an SSE stream frame by frame).
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import google.oauth2.credentials
import httpx2
import pytest
from aiohttp import web
from botocore.config import Config
from google import genai
from google.genai import types

from agentreel.llm.wire import wire_api
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report

CORPUS = Path(__file__).parent / "corpus" / "wires"
CASES = sorted(path.stem for path in CORPUS.glob("*.json"))
TOKEN = "ya29.corpus-wires-token-0123456789"
KEY_ID = "AKIACORPUSWIRES01234"
SECRET = "corpusWiresSecret0123456789abcdefghijklm"
PROMPT = "Hello there"
RAW_PROMPT = "Hello again, raw"


def load(name: str) -> dict[str, Any]:
    case: dict[str, Any] = json.loads((CORPUS / f"{name}.json").read_text(encoding="utf-8"))
    return case


def _body(case: dict[str, Any]) -> bytes:
    response = case["response"]
    if "body_base64" in response:
        return base64.b64decode(response["body_base64"])
    return str(response["body"]).encode()


def test_the_wires_corpus_covers_each_new_api_with_provenance() -> None:
    cases = [load(name) for name in CASES]
    assert {(case["api"], case["stream"]) for case in cases} >= {
        ("bedrock-converse", True),
        ("bedrock-converse", False),
        ("bedrock-embed", False),
        ("gemini", True),
        ("gemini", False),
        ("vertex-embed", False),
    }
    for case in cases:
        provenance = case["provenance"]
        assert provenance["repository"]
        assert provenance["path"]
        assert provenance["licence"]
        assert len(provenance["commit"]) == 40


async def _upstream(case: dict[str, Any]) -> tuple[str, web.AppRunner]:
    """A loopback upstream answering every POST with the case's answer, frame by frame."""
    spec = wire_api(case["api"])
    response = case["response"]
    headers = {"content-type": response["content_type"]}

    async def answer(request: web.Request) -> web.StreamResponse:
        await request.read()
        if not case["stream"]:
            return web.Response(status=response["status"], body=_body(case), headers=headers)
        out = web.StreamResponse(status=response["status"], headers=headers)
        await out.prepare(request)
        for frame in spec.split_frames(_body(case)):
            await out.write(frame)
        await out.write_eof()
        return out

    app = web.Application()
    app.router.add_post("/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return f"http://127.0.0.1:{runner.addresses[0][1]}", runner


def _bedrock(case: dict[str, Any], base_url: str) -> list[Any]:
    """What boto3 makes of the answer (its ResponseMetadata aside: the server's own)."""
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=base_url,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        config=Config(retries={"max_attempts": 1}, read_timeout=20),
    )
    model = case["model"]
    if case["api"] == "bedrock-embed":
        cohere = model.startswith("cohere.")
        payload = (
            {"texts": [PROMPT], "input_type": "search_document"}
            if cohere
            else {"inputText": PROMPT}
        )
        answer = client.invoke_model(modelId=model, body=json.dumps(payload))
        return [json.loads(answer["body"].read())]
    messages = [{"role": "user", "content": [{"text": PROMPT}]}]
    if case["stream"]:
        answer = client.converse_stream(modelId=model, messages=messages)
        return list(answer["stream"])
    answer = client.converse(modelId=model, messages=messages)
    answer.pop("ResponseMetadata")
    return [answer]


async def _vertex(case: dict[str, Any], base_url: str) -> list[Any]:
    credentials = google.oauth2.credentials.Credentials(token=TOKEN)  # type: ignore[no-untyped-call]
    async with httpx2.AsyncClient() as http:
        models = genai.Client(
            vertexai=True,
            project="pydantic-ai",
            location="global",
            credentials=credentials,
            http_options=types.HttpOptions(base_url=f"{base_url}/", httpx_async_client=http),
        ).aio.models
        if case["api"] == "vertex-embed":
            # A text-embedding model: google-genai calls :predict for it (for a Gemini
            # embedding model, as the cassette's older client did, it now calls
            # :embedContent); the upstream answers with the cassette's :predict body.
            model = case.get("client_model", case["model"])
            embedded = await models.embed_content(
                model=model, contents=[types.Content(parts=[types.Part(text=PROMPT)])]
            )
            return [embedded.model_dump(exclude={"sdk_http_response"})]
        if case["stream"]:
            stream = await models.generate_content_stream(model=case["model"], contents=PROMPT)
            return [part.model_dump(exclude={"sdk_http_response"}) async for part in stream]
        whole = await models.generate_content(model=case["model"], contents=PROMPT)
        return [whole.model_dump(exclude={"sdk_http_response"})]


async def parse(case: dict[str, Any], base_url: str) -> list[Any]:
    """Everything the official client makes of the answer at ``base_url``."""
    if case["api"].startswith("bedrock"):
        return await asyncio.to_thread(_bedrock, case, base_url)
    return await _vertex(case, base_url)


def _raw_request(case: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The path and body of a plain client's request for the case (its own prompt)."""
    model, api = case["model"], case["api"]
    vertex = "/v1beta1/projects/pydantic-ai/locations/global/publishers/google/models"
    if api == "bedrock-embed":
        cohere = model.startswith("cohere.")
        body: dict[str, Any] = (
            {"texts": [RAW_PROMPT], "input_type": "search_document"}
            if cohere
            else {"inputText": RAW_PROMPT}
        )
        return f"/model/{quote(model, safe='')}/invoke", body
    if api == "bedrock-converse":
        operation = "converse-stream" if case["stream"] else "converse"
        body = {"messages": [{"role": "user", "content": [{"text": RAW_PROMPT}]}]}
        return f"/model/{quote(model, safe='')}/{operation}", body
    if api == "vertex-embed":
        return f"{vertex}/{model}:predict", {"instances": [{"content": RAW_PROMPT}]}
    method = "streamGenerateContent?alt=sse" if case["stream"] else "generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": RAW_PROMPT}]}]}
    return f"{vertex}/{model}:{method}", body


async def _fetch(case: dict[str, Any], base_url: str) -> bytes:
    path, body = _raw_request(case)
    async with httpx2.AsyncClient() as http:
        answer = await http.post(base_url + path, json=body, headers={"authorization": "x"})
    return answer.content


@pytest.mark.asyncio
@pytest.mark.parametrize("name", CASES)
async def test_a_real_answer_parses_alike_and_replays_byte_for_byte(
    name: str, tmp_path: Path
) -> None:
    case = load(name)
    fixture = tmp_path / "fixture"
    url, runner = await _upstream(case)
    try:
        direct = await parse(case, url)
        direct_bytes = await _fetch(case, url)
        async with start_proxy("record", upstream=url, fixture=fixture) as proxy:
            recorded = await parse(case, proxy.base_url)
            recorded_bytes = await _fetch(case, proxy.base_url)
        assert not proxy.errors, proxy.errors
    finally:
        await runner.cleanup()
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        replayed = await parse(case, proxy.base_url)
        replayed_bytes = await _fetch(case, proxy.base_url)
    assert read_report(report).ok, read_report(report).errors
    assert direct, "the client made nothing of the answer"
    assert recorded == direct
    assert replayed == direct
    assert direct_bytes == _body(case)
    assert recorded_bytes == direct_bytes
    assert replayed_bytes == direct_bytes
    written = "".join(p.read_text(errors="replace") for p in fixture.rglob("*") if p.is_file())
    for secret in (TOKEN, KEY_ID, SECRET):
        assert secret not in written
