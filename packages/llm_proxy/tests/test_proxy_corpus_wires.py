"""Real answers of the wire APIs beyond the first four (issue 42), recorded and replayed
through the proxy: each parses the same with its official client straight from the
upstream, through record mode and through replay, and the bytes a plain client gets are the
upstream's in record and in replay. Two corpora (provenance and licence in each case and
in ``corpus/README.md``), one round trip:

- ``corpus/wires/``: boto3 ``bedrock-runtime`` (ConverseStream's AWS event-stream,
  Converse, InvokeModel of Titan and Cohere embedding models) and google-genai with
  ``vertexai=True`` (Gemini on Vertex AI, whole and streamed; ``:predict`` of an embedding
  model);
- ``corpus/wires_more/``: Azure OpenAI, OpenAI and Gemini embeddings, Ollama's native API
  and Bedrock InvokeModel with an Anthropic payload — ``openai.AsyncAzureOpenAI`` (chat
  completions and embeddings on a deployment's path with ``api-version`` and the
  ``api-key`` header), ``openai.AsyncOpenAI`` (Azure's ``/openai/v1/`` Responses;
  ``/v1/embeddings``, base64 vectors as the client asks for by default), google-genai
  (``:batchEmbedContents`` on the Gemini API, ``:embedContent`` of a Gemini embedding
  model on Vertex AI), ``ollama.AsyncClient`` (``/api/chat`` and ``/api/generate``, NDJSON
  streams and whole bodies; ``/api/embed`` and the older ``/api/embeddings``), boto3
  ``bedrock-runtime`` (``invoke_model`` and ``invoke_model_with_response_stream``),
  ``anthropic.AsyncAnthropicBedrock`` (the same two, as Messages),
  ``anthropic.AsyncAnthropicVertex`` (Claude's ``:streamRawPredict`` on Vertex AI) and a
  streamed Responses call on Azure's ``/openai/v1/``; a case naming a ``client`` is called
  as ``CLIENTS`` says.

Each case is served by a loopback upstream of its own (``cassette_upstream``), frame by
frame as the cassette holds it (an event stream message by message, an SSE stream frame by
frame).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import anthropic
import boto3
import google.oauth2.credentials
import httpx2
import ollama
import openai
import pytest
from botocore.config import Config
from google import genai
from google.genai import types

from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report

CORPORA = Path(__file__).parent / "corpus"
CASES = [
    f"{corpus}/{path.stem}"
    for corpus in ("wires", "wires_more")
    for path in sorted((CORPORA / corpus).glob("*.json"))
]
KEY = "azure-corpus-more-key-0123456789abcdef"
"""The key the OpenAI-shaped clients send (``api-key`` / bearer): forwarded, never written."""
GEMINI_KEY = "AIzaCorpusMoreKey0123456789abcdefghijk"
TOKEN = "ya29.corpus-wires-token-0123456789"
VERTEX_PROJECT = "pydantic-ai"
KEY_ID = "AKIACORPUSWIRES01234"
SECRET = "corpusWiresSecret0123456789abcdefghijklm"
SECRETS = (KEY, GEMINI_KEY, TOKEN, KEY_ID, SECRET)
PROMPT = "Hello there"
RAW_PROMPT = "Hello again, raw"
ANTHROPIC_VERSION = "bedrock-2023-05-31"


def load(name: str) -> dict[str, Any]:
    """Case ``name`` (``<corpus>/<case>``)."""
    case: dict[str, Any] = json.loads((CORPORA / f"{name}.json").read_text(encoding="utf-8"))
    return case


def _body(case: dict[str, Any]) -> bytes:
    response = case["response"]
    if "body_base64" in response:
        return base64.b64decode(response["body_base64"])
    return str(response["body"]).encode()


def _covered(corpus: str) -> list[dict[str, Any]]:
    cases = [load(name) for name in CASES if name.startswith(f"{corpus}/")]
    for case in cases:
        provenance = case["provenance"]
        assert provenance["repository"]
        assert provenance["path"]
        assert provenance["licence"]
        assert len(provenance["commit"]) == 40
    return cases


def test_the_wires_corpus_covers_each_new_api_with_provenance() -> None:
    cases = _covered("wires")
    assert {(case["api"], case["stream"]) for case in cases} >= {
        ("bedrock-converse", True),
        ("bedrock-converse", False),
        ("bedrock-embed", False),
        ("gemini", True),
        ("gemini", False),
        ("vertex-embed", False),
    }


def test_the_more_corpus_covers_each_api_with_provenance() -> None:
    cases = _covered("wires_more")
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
    azure = [case for case in cases if case["uri"].startswith("/openai/")]
    assert {case["api"] for case in azure} >= {"chat", "responses", "embeddings"}
    uris = {case["uri"] for case in cases}
    assert {"/api/embed", "/api/embeddings", "/openai/v1/responses"} <= uris
    assert any(uri.endswith(":streamRawPredict") for uri in uris)


def _dump(response: Any) -> Any:
    return response.model_dump()


def _bedrock(case: dict[str, Any], base_url: str) -> list[Any]:
    """What boto3 makes of the answer (its ResponseMetadata aside: the server's own):
    Converse and ConverseStream, InvokeModel of an embedding model, or InvokeModel (with
    its response stream) of an Anthropic Messages payload."""
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=base_url,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        config=Config(retries={"max_attempts": 1}, read_timeout=20),
    )
    model = case["model"]
    if case["api"] == "bedrock-invoke":
        payload = json.dumps(
            {
                "anthropic_version": ANTHROPIC_VERSION,
                "max_tokens": 200,
                "messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}],
            }
        )
        if case["stream"]:
            answer = client.invoke_model_with_response_stream(modelId=model, body=payload)
            return list(answer["body"])
        answer = client.invoke_model(modelId=model, body=payload)
        return [json.loads(answer["body"].read())]
    if case["api"] == "bedrock-embed":
        cohere = model.startswith("cohere.")
        embed: dict[str, Any] = (
            {"texts": [PROMPT], "input_type": "search_document"}
            if cohere
            else {"inputText": PROMPT}
        )
        answer = client.invoke_model(modelId=model, body=json.dumps(embed))
        return [json.loads(answer["body"].read())]
    messages = [{"role": "user", "content": [{"text": PROMPT}]}]
    if case["stream"]:
        answer = client.converse_stream(modelId=model, messages=messages)
        return list(answer["stream"])
    answer = client.converse(modelId=model, messages=messages)
    answer.pop("ResponseMetadata")
    return [answer]


async def _anthropic_bedrock(case: dict[str, Any], base_url: str) -> list[Any]:
    """What ``anthropic.AsyncAnthropicBedrock`` makes of an InvokeModel answer: Messages
    events or a Message."""
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


async def _genai(case: dict[str, Any], base_url: str) -> list[Any]:
    """What google-genai makes of the answer: with ``vertexai=True`` for a case under a
    Vertex AI publisher's path (Gemini whole and streamed, ``:predict`` of a text-embedding
    model, ``:embedContent`` of a Gemini one), else on the Gemini API
    (``:batchEmbedContents``)."""
    async with httpx2.AsyncClient() as http:
        if "/publishers/google/" in case["uri"]:
            credentials = google.oauth2.credentials.Credentials(token=TOKEN)  # type: ignore[no-untyped-call]
            client = genai.Client(
                vertexai=True,
                project=VERTEX_PROJECT,
                location="global",
                credentials=credentials,
                http_options=types.HttpOptions(base_url=f"{base_url}/", httpx_async_client=http),
            )
        else:
            options = types.HttpOptions(
                base_url=f"{base_url}/", api_version="v1beta", httpx_async_client=http
            )
            client = genai.Client(api_key=GEMINI_KEY, http_options=options)
        models = client.aio.models
        if case["api"] in ("vertex-embed", "gemini-embed"):
            # A text-embedding model on Vertex AI: google-genai calls :predict for it (for a
            # Gemini embedding model, as the cassette's older client did, it now calls
            # :embedContent); the upstream answers with the cassette's :predict body.
            model = case.get("client_model", case["model"])
            contents = [types.Content(parts=[types.Part(text=PROMPT)])]
            embedded = await models.embed_content(model=model, contents=contents)
            return [embedded.model_dump(exclude={"sdk_http_response"})]
        if case["stream"]:
            stream = await models.generate_content_stream(model=case["model"], contents=PROMPT)
            return [part.model_dump(exclude={"sdk_http_response"}) async for part in stream]
        whole = await models.generate_content(model=case["model"], contents=PROMPT)
        return [whole.model_dump(exclude={"sdk_http_response"})]


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
    InvokeModel of an Anthropic payload, boto3's and the Anthropic SDK's)."""
    api = case["api"]
    if "client" in case:
        return await CLIENTS[case["client"]](case, base_url)
    if api.startswith("bedrock"):
        boto = await asyncio.to_thread(_bedrock, case, base_url)
        if api == "bedrock-invoke":
            return boto + await _anthropic_bedrock(case, base_url)
        return boto
    if api in ("gemini", "vertex-embed", "gemini-embed"):
        return await _genai(case, base_url)
    if api.startswith("ollama"):
        return await _ollama(case, base_url)
    return await _openai(case, base_url)


def _wires_request(case: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The path and body of a plain client's request for a ``wires`` case (its own
    prompt)."""
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


def _more_body(case: dict[str, Any]) -> dict[str, Any]:
    """A plain client's request body for a ``wires_more`` case (its own prompt), in the
    API's shape; it goes to the cassette's own path (query included)."""
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


async def _fetch(name: str, case: dict[str, Any], base_url: str) -> bytes:
    """The bytes a plain client gets for case ``name``."""
    if name.startswith("wires/"):
        path, body = _wires_request(case)
        headers = {"authorization": "x"}
    else:
        path, body, headers = case["uri"], _more_body(case), {"api-key": KEY}
    async with httpx2.AsyncClient() as http:
        answer = await http.post(base_url + path, json=body, headers=headers)
    return answer.content


@pytest.mark.asyncio
@pytest.mark.parametrize("name", CASES)
async def test_a_real_answer_parses_alike_and_replays_byte_for_byte(
    name: str,
    tmp_path: Path,
    cassette_upstream: Callable[..., Awaitable[tuple[str, Any]]],
) -> None:
    case = load(name)
    response = case["response"]
    fixture = tmp_path / "fixture"
    url, stop = await cassette_upstream(
        case["api"], case["stream"], response["status"], response["content_type"], _body(case)
    )
    try:
        direct = await parse(case, url)
        direct_bytes = await _fetch(name, case, url)
        async with start_proxy("record", upstream=url, fixture=fixture) as proxy:
            recorded = await parse(case, proxy.base_url)
            recorded_bytes = await _fetch(name, case, proxy.base_url)
        assert not proxy.errors, proxy.errors
    finally:
        await stop()
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        replayed = await parse(case, proxy.base_url)
        replayed_bytes = await _fetch(name, case, proxy.base_url)
    assert read_report(report).ok, read_report(report).errors
    assert direct, "the client made nothing of the answer"
    assert recorded == direct
    assert replayed == direct
    assert direct_bytes == _body(case)
    assert recorded_bytes == direct_bytes
    assert replayed_bytes == direct_bytes
    written = "".join(p.read_text(errors="replace") for p in fixture.rglob("*") if p.is_file())
    for secret in SECRETS:
        assert secret not in written
