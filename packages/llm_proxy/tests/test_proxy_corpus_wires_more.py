"""Real answers of Azure OpenAI, OpenAI and Gemini embeddings, Ollama's native API and
Bedrock InvokeModel with an Anthropic payload (issue 42), recorded and replayed through the
proxy: each parses the same with its official client straight from the upstream, through
record mode and through replay, and the bytes a plain client gets are the upstream's in
record and in replay (``corpus/wires_more/``; provenance and licence in each case and in
``corpus/README.md``).

Clients: ``openai.AsyncAzureOpenAI`` (chat completions and embeddings on a deployment's
path with ``api-version`` and the ``api-key`` header), ``openai.AsyncOpenAI`` (Azure's
``/openai/v1/`` Responses; ``/v1/embeddings``, base64 vectors as the client asks for by
default), google-genai (``:batchEmbedContents`` on the Gemini API, ``:embedContent`` of a
Gemini embedding model on Vertex AI), ``ollama.AsyncClient`` (``/api/chat`` and
``/api/generate``, NDJSON streams and whole bodies; ``/api/embed`` and the older
``/api/embeddings``), ``anthropic.AsyncAnthropicVertex`` (Claude's ``:streamRawPredict``
on Vertex AI), a streamed Responses call on Azure's ``/openai/v1/``, boto3 ``bedrock-runtime``
(``invoke_model`` and ``invoke_model_with_response_stream``) and
``anthropic.AsyncAnthropicBedrock`` (the same two, as Messages). Each case is served by a
loopback upstream of its own, frame by frame as the cassette holds it.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anthropic
import boto3
import google.oauth2.credentials
import httpx2
import ollama
import openai
import pytest
from aiohttp import web
from botocore.config import Config
from google import genai
from google.genai import types

from agentreel.llm.wire import wire_api
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report

CORPUS = Path(__file__).parent / "corpus" / "wires_more"
CASES = sorted(path.stem for path in CORPUS.glob("*.json"))
KEY = "azure-corpus-more-key-0123456789abcdef"
"""The key the OpenAI-shaped clients send (``api-key`` / bearer): forwarded, never written."""
GEMINI_KEY = "AIzaCorpusMoreKey0123456789abcdefghijk"
TOKEN = "ya29.corpus-more-token-0123456789"
VERTEX_PROJECT = "pydantic-ai"
KEY_ID = "AKIACORPUSMORE012345"
SECRET = "corpusMoreSecret0123456789abcdefghijklmn"
PROMPT = "Hello there"
RAW_PROMPT = "Hello again, raw"
ANTHROPIC_VERSION = "bedrock-2023-05-31"


def load(name: str) -> dict[str, Any]:
    case: dict[str, Any] = json.loads((CORPUS / f"{name}.json").read_text(encoding="utf-8"))
    return case


def _body(case: dict[str, Any]) -> bytes:
    response = case["response"]
    if "body_base64" in response:
        return base64.b64decode(response["body_base64"])
    return str(response["body"]).encode()


def test_the_corpus_covers_each_api_with_provenance() -> None:
    cases = [load(name) for name in CASES]
    assert {(case["api"], case["stream"]) for case in cases} >= {
        ("chat", True),
        ("chat", False),
        ("responses", False),
        ("embeddings", False),
        ("gemini-embed", False),
        ("ollama-chat", True),
        ("ollama-chat", False),
        ("ollama-generate", True),
        ("bedrock-invoke", True),
        ("bedrock-invoke", False),
        ("ollama-embed", False),
        ("responses", True),
        ("messages", True),
    }
    uris = {case["uri"] for case in cases}
    assert {"/api/embed", "/api/embeddings", "/openai/v1/responses"} <= uris
    assert any(uri.endswith(":streamRawPredict") for uri in uris)
    azure = [case for case in cases if case["uri"].startswith("/openai/")]
    assert {case["api"] for case in azure} >= {"chat", "responses", "embeddings"}
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


def _dump(response: Any) -> Any:
    return response.model_dump()


def _azure_version(case: dict[str, Any]) -> str:
    uri: str = case["uri"]
    return parse_qs(urlsplit(uri).query)["api-version"][0]


async def _openai(case: dict[str, Any], base_url: str) -> list[Any]:
    """What the openai client makes of the answer: Azure's client on a deployment's path,
    the plain client on ``/openai/v1/`` (Azure) and ``/v1`` (OpenAI)."""
    model, uri = case["model"], case["uri"]
    if uri.startswith("/openai/deployments/"):
        client: openai.AsyncOpenAI = openai.AsyncAzureOpenAI(
            azure_endpoint=base_url,
            api_key=KEY,
            api_version=_azure_version(case),
            max_retries=0,
        )
    else:
        prefix = "/openai/v1/" if uri.startswith("/openai/v1/") else "/v1/"
        client = openai.AsyncOpenAI(base_url=base_url + prefix, api_key=KEY, max_retries=0)
    async with client:
        if case["api"] == "embeddings":
            return [_dump(await client.embeddings.create(model=model, input=PROMPT))]
        if case["api"] == "responses":
            return [_dump(await client.responses.create(model=model, input=PROMPT))]
        messages: Any = [{"role": "user", "content": PROMPT}]
        if case["stream"]:
            stream = await client.chat.completions.create(
                model=model, messages=messages, stream=True
            )
            return [_dump(chunk) async for chunk in stream]
        return [_dump(await client.chat.completions.create(model=model, messages=messages))]


async def _gemini(case: dict[str, Any], base_url: str) -> list[Any]:
    """google-genai on the Gemini API (``:batchEmbedContents``) or, for a case under a
    Vertex AI publisher's path, with ``vertexai=True`` (``:embedContent``)."""
    async with httpx2.AsyncClient() as http:
        if "/publishers/google/" in case["uri"]:
            options = types.HttpOptions(base_url=f"{base_url}/", httpx_async_client=http)
            credentials = google.oauth2.credentials.Credentials(token=TOKEN)  # type: ignore[no-untyped-call]
            client = genai.Client(
                vertexai=True,
                project=VERTEX_PROJECT,
                location="global",
                credentials=credentials,
                http_options=options,
            )
        else:
            options = types.HttpOptions(
                base_url=f"{base_url}/", api_version="v1beta", httpx_async_client=http
            )
            client = genai.Client(api_key=GEMINI_KEY, http_options=options)
        contents = [types.Content(parts=[types.Part(text=PROMPT)])]
        embedded = await client.aio.models.embed_content(model=case["model"], contents=contents)
        return [embedded.model_dump(exclude={"sdk_http_response"})]


async def _ollama(case: dict[str, Any], base_url: str) -> list[Any]:
    model, stream = case["model"], case["stream"]
    async with ollama.AsyncClient(host=base_url) as client:
        if case["api"] == "ollama-generate":
            if stream:
                parts = await client.generate(model=model, prompt=PROMPT, stream=True)
                return [_dump(part) async for part in parts]
            return [_dump(await client.generate(model=model, prompt=PROMPT))]
        messages = [{"role": "user", "content": PROMPT}]
        if stream:
            parts = await client.chat(model=model, messages=messages, stream=True)
            return [_dump(part) async for part in parts]
        return [_dump(await client.chat(model=model, messages=messages))]


def _bedrock(case: dict[str, Any], base_url: str) -> list[Any]:
    """What boto3 makes of an InvokeModel answer (an Anthropic Messages payload)."""
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=base_url,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        config=Config(retries={"max_attempts": 1}, read_timeout=20),
    )
    payload = json.dumps(
        {
            "anthropic_version": ANTHROPIC_VERSION,
            "max_tokens": 200,
            "messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}],
        }
    )
    if case["stream"]:
        answer = client.invoke_model_with_response_stream(modelId=case["model"], body=payload)
        return list(answer["body"])
    answer = client.invoke_model(modelId=case["model"], body=payload)
    return [json.loads(answer["body"].read())]


async def _anthropic_bedrock(case: dict[str, Any], base_url: str) -> list[Any]:
    """What ``anthropic.AsyncAnthropicBedrock`` makes of the same answer: Messages events or
    a Message."""
    async with anthropic.AsyncAnthropicBedrock(
        aws_access_key=KEY_ID,
        aws_secret_key=SECRET,
        aws_region="us-east-1",
        base_url=base_url,
        max_retries=0,
    ) as client:
        messages: Any = [{"role": "user", "content": PROMPT}]
        model = case["model"]
        if case["stream"]:
            stream = await client.messages.create(
                model=model, max_tokens=200, messages=messages, stream=True
            )
            return [_dump(event) async for event in stream]
        return [_dump(await client.messages.create(model=model, max_tokens=200, messages=messages))]


async def _ollama_embed(case: dict[str, Any], base_url: str) -> list[Any]:
    async with ollama.AsyncClient(host=base_url) as client:
        return [_dump(await client.embed(model=case["model"], input=PROMPT))]


async def _ollama_embeddings(case: dict[str, Any], base_url: str) -> list[Any]:
    """The ``ollama`` client's older ``embeddings`` call (``/api/embeddings``)."""
    async with ollama.AsyncClient(host=base_url) as client:
        return [_dump(await client.embeddings(model=case["model"], prompt=PROMPT))]


async def _responses_stream(case: dict[str, Any], base_url: str) -> list[Any]:
    """A streamed Responses call on Azure's ``/openai/v1/``."""
    client = openai.AsyncOpenAI(base_url=base_url + "/openai/v1/", api_key=KEY, max_retries=0)
    async with client:
        stream = await client.responses.create(model=case["model"], input=PROMPT, stream=True)
        return [_dump(event) async for event in stream]


async def _anthropic_vertex(case: dict[str, Any], base_url: str) -> list[Any]:
    """``anthropic.AsyncAnthropicVertex`` streaming Messages (``:streamRawPredict``) from
    the project and region the case's path names."""
    project, region = case["uri"].split("/")[3], case["uri"].split("/")[5]
    async with anthropic.AsyncAnthropicVertex(
        region=region,
        project_id=project,
        access_token=TOKEN,
        base_url=f"{base_url}/v1",
        max_retries=0,
    ) as client:
        messages: Any = [{"role": "user", "content": PROMPT}]
        stream = await client.messages.create(
            model=case["model"], max_tokens=200, messages=messages, stream=True
        )
        return [_dump(event) async for event in stream]


CLIENTS: dict[str, Callable[[dict[str, Any], str], Awaitable[list[Any]]]] = {
    "ollama.embed": _ollama_embed,
    "ollama.embeddings": _ollama_embeddings,
    "openai.responses.stream": _responses_stream,
    "anthropic.vertex": _anthropic_vertex,
}
"""The official client call a case names (its ``client``), for the cases whose API and
shape alone do not say how it is called."""


async def parse(case: dict[str, Any], base_url: str) -> list[Any]:
    """Everything the official client makes of the answer at ``base_url`` (for Bedrock
    InvokeModel, boto3's and the Anthropic SDK's)."""
    api = case["api"]
    if "client" in case:
        return await CLIENTS[case["client"]](case, base_url)
    if api == "bedrock-invoke":
        boto = await asyncio.to_thread(_bedrock, case, base_url)
        return boto + await _anthropic_bedrock(case, base_url)
    if api.startswith("ollama"):
        return await _ollama(case, base_url)
    if api == "gemini-embed":
        return await _gemini(case, base_url)
    return await _openai(case, base_url)


def _raw_body(case: dict[str, Any]) -> dict[str, Any]:
    """A plain client's request body for the case (its own prompt), in the API's shape."""
    api, model, stream = case["api"], case["model"], case["stream"]
    messages = [{"role": "user", "content": RAW_PROMPT}]
    if api == "chat":
        return {"messages": messages, "stream": stream}
    if api == "responses":
        return {"model": model, "input": RAW_PROMPT, "stream": stream}
    if api == "messages":  # Claude on Vertex AI: the model is the path's
        return {
            "anthropic_version": "vertex-2023-10-16",
            "max_tokens": 200,
            "messages": messages,
            "stream": stream,
        }
    if api == "ollama-embed" and case["uri"] == "/api/embeddings":
        return {"model": model, "prompt": RAW_PROMPT}
    if api in ("embeddings", "ollama-embed"):
        return {"model": model, "input": RAW_PROMPT}
    if api == "gemini-embed":
        content = {"parts": [{"text": RAW_PROMPT}]}
        if case["uri"].endswith(":embedContent"):
            return {"content": content}
        return {"requests": [{"model": f"models/{model}", "content": content}]}
    if api == "ollama-chat":
        return {"model": model, "messages": messages, "stream": stream}
    if api == "ollama-generate":
        return {"model": model, "prompt": RAW_PROMPT, "stream": stream}
    return {"anthropic_version": ANTHROPIC_VERSION, "max_tokens": 200, "messages": messages}


async def _fetch(case: dict[str, Any], base_url: str) -> bytes:
    """The bytes a plain client gets on the cassette's own path (query included)."""
    async with httpx2.AsyncClient() as http:
        answer = await http.post(
            base_url + case["uri"], json=_raw_body(case), headers={"api-key": KEY}
        )
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
    for secret in (KEY, GEMINI_KEY, TOKEN, KEY_ID, SECRET):
        assert secret not in written
