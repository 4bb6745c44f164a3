"""Real provider answers, recorded and replayed through the proxy, parse the same in the
official SDKs and replay byte for byte (SPEC 11: served as the upstream sent it).

Each case in ``corpus/`` is one answer a real provider sent — taken from a public
repository's VCR cassette, with its repository, path, commit and licence in the case — and
is served by a loopback upstream exactly as the cassette holds it. The test parses it with
the official SDK three ways: straight from the upstream, through ``proxy record``, and
through ``proxy replay`` with the upstream stopped; every event / object the SDK gives is
compared whole (``model_dump``), an error by its class, message, status and body, and the
bytes the client received through the proxy are the upstream's, in record and in replay.

One upstream, one record-mode proxy and one replay proxy serve every case of the module
(``corpus_runs``): each case is its own session (``x-agentreel-session-id``) and names
itself to the upstream (``x-corpus-case``), so the cases stay as independent as with a
proxy each — four proxies a case took minutes on a loaded machine.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from aiohttp import web
from anthropic.types import MessageParam
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from openai.types.chat import ChatCompletionMessageParam

from agentreel.llm import Finish
from agentreel.llm.wire import split_frames
from agentreel.llm_proxy import SESSION_HEADER, start_proxy
from agentreel.session import (
    VERBATIM_FILE,
    AssistantChunk,
    SessionLog,
    load_session_log,
    recording_names,
)

CORPUS = Path(__file__).parent / "corpus"
CASES = sorted(path.stem for path in CORPUS.glob("*.json"))
KEY = "sk-corpus-test-0123456789"
CASE_HEADER = "x-corpus-case"
PROMPT = "Hello there"


def _prompt(session: str | None) -> str:
    """The user message: a shared proxy tells the cases' sessions apart by it."""
    return PROMPT if session is None else f"{PROMPT} [{session}]"


def load(name: str) -> dict[str, Any]:
    case: dict[str, Any] = json.loads((CORPUS / f"{name}.json").read_text(encoding="utf-8"))
    return case


def test_the_corpus_covers_what_the_issue_names() -> None:
    cases = [load(name) for name in CASES]
    assert len(cases) >= 20
    kinds = {(case["api"], case["stream"]) for case in cases}
    assert kinds == {
        (api, stream)
        for api in ("chat", "messages", "responses", "gemini")
        for stream in (True, False)
    }
    text = "\n".join(case["response"]["body"] for case in cases)
    for needle in (
        "reasoning_details",
        "prompt_cache_hit_tokens",
        "thinking",
        "tool_use",
        '"function_call"',
        "logprobs",
        '"finish_reason":"length"',
        "thoughtSignature",
        '"functionCall"',
        '"thought": true',
        "usageMetadata",
        '"tool_calls":[{"index":1,',  # streamed parallel tool calls
        "event: response.failed",  # a Responses stream's in-stream error
    ):
        assert needle in text, needle
    assert {case["response"]["status"] for case in cases} >= {200, 400, 429}
    for case in cases:
        provenance = case["provenance"]
        assert provenance["repository"]
        assert provenance["path"]
        assert provenance["licence"]
        assert len(provenance["commit"]) == 40


async def _upstream(
    case: dict[str, Any] | None, body: str | None = None
) -> tuple[str, web.AppRunner]:
    """A loopback upstream answering every POST with a case's response, frame by frame:
    ``case`` with ``body``, or (``None``) the corpus case the request names in
    ``x-corpus-case``, with its own body."""

    async def answer(request: web.Request) -> web.StreamResponse:
        await request.read()
        if case is None:
            served = load(request.headers[CASE_HEADER])
            return await _answer(request, served, served["response"]["body"])
        assert body is not None
        return await _answer(request, case, body)

    app = web.Application()
    app.router.add_post("/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return f"http://127.0.0.1:{runner.addresses[0][1]}", runner


async def _answer(request: web.Request, case: dict[str, Any], body: str) -> web.StreamResponse:
    response = case["response"]
    headers = {"content-type": response["content_type"]}
    if not case["stream"]:
        return web.Response(status=response["status"], body=body.encode(), headers=headers)
    out = web.StreamResponse(status=response["status"], headers=headers)
    await out.prepare(request)
    for frame in split_frames(body.encode()):
        await out.write(frame)
    await out.write_eof()
    return out


class _Tee(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, sink: bytearray) -> None:
        self._inner = inner
        self._sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._inner:
            self._sink += part
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Capture(httpx2.AsyncBaseTransport):
    """The SDK's transport, keeping every response byte as it came off the wire."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self.body = bytearray()
        self.request: httpx2.Request | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.request = request
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_Tee(response.stream, self.body),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _error(exc: Exception) -> dict[str, Any]:
    return {
        "raised": type(exc).__name__,
        "message": str(exc),
        "status": getattr(exc, "status_code", None),
        "body": getattr(exc, "body", None),
    }


async def parse(
    case: dict[str, Any], base_url: str, headers: dict[str, str] | None = None
) -> tuple[list[Any], bytes]:
    """Everything the official SDK makes of the answer at ``base_url``, and the bytes it
    read (up to where it stopped: it raises at an error frame)."""
    seen, body, _ = await _parse(case, base_url, headers)
    return seen, body


def _session(headers: dict[str, str] | None) -> str | None:
    return (headers or {}).get(SESSION_HEADER)


async def _parse(
    case: dict[str, Any], base_url: str, headers: dict[str, str] | None = None
) -> tuple[list[Any], bytes, httpx2.Request]:
    capture = _Capture()
    http = httpx2.AsyncClient(transport=capture, headers=headers)
    text = _prompt(_session(headers))
    chat_prompt: list[ChatCompletionMessageParam] = [{"role": "user", "content": text}]
    claude_prompt: list[MessageParam] = [{"role": "user", "content": text}]
    model, stream = case["model"], case["stream"]
    seen: list[Any] = []
    try:
        if case["api"] == "gemini":
            await _parse_gemini(case, base_url, http, text, seen)
        elif case["api"] == "messages":
            claude = anthropic.AsyncAnthropic(
                base_url=base_url, api_key=KEY, max_retries=0, http_client=http
            )
            if stream:
                events = await claude.messages.create(
                    model=model,
                    max_tokens=64,
                    messages=claude_prompt,
                    stream=True,
                )
                async for event in events:
                    seen.append(event.model_dump(warnings=False))
            else:
                message = await claude.messages.create(
                    model=model,
                    max_tokens=64,
                    messages=claude_prompt,
                )
                seen.append(message.model_dump(warnings=False))
        else:
            client = openai.AsyncOpenAI(
                base_url=f"{base_url}/v1", api_key=KEY, max_retries=0, http_client=http
            )
            if case["api"] == "chat" and stream:
                chunks = await client.chat.completions.create(
                    model=model,
                    messages=chat_prompt,
                    stream=True,
                )
                async for chunk in chunks:
                    seen.append(chunk.model_dump(warnings=False))
            elif case["api"] == "chat":
                completion = await client.chat.completions.create(
                    model=model,
                    messages=chat_prompt,
                )
                seen.append(completion.model_dump(warnings=False))
            elif stream:
                response_events = await client.responses.create(
                    model=model, input=text, stream=True
                )
                async for response_event in response_events:
                    seen.append(response_event.model_dump(warnings=False))
            else:
                response = await client.responses.create(model=model, input=text)
                seen.append(response.model_dump(warnings=False))
    except (openai.APIError, anthropic.APIError) as exc:
        seen.append(_error(exc))
    except genai_errors.APIError as exc:
        seen.append({**_error(exc), "status": exc.code, "body": exc.details})
    finally:
        await http.aclose()
    assert capture.request is not None
    return seen, bytes(capture.body), capture.request


def _gemini_dump(response: genai_types.GenerateContentResponse) -> Any:
    """Every field google-genai parsed, without the HTTP response it came in (its headers
    name the server that sent it: the loopback upstream or the proxy)."""
    return response.model_dump(exclude={"sdk_http_response"})


async def _parse_gemini(
    case: dict[str, Any], base_url: str, http: httpx2.AsyncClient, text: str, seen: list[Any]
) -> None:
    """google-genai as a user sets it up: its retries off, function calls not run."""
    options = genai_types.HttpOptions(
        base_url=base_url, api_version="v1beta", httpx_async_client=http
    )
    models = genai.Client(api_key=KEY, http_options=options).aio.models
    config = genai_types.GenerateContentConfig(
        automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True)
    )
    if case["stream"]:
        stream = await models.generate_content_stream(
            model=case["model"], contents=text, config=config
        )
        async for response in stream:
            seen.append(_gemini_dump(response))
    else:
        response = await models.generate_content(model=case["model"], contents=text, config=config)
        seen.append(_gemini_dump(response))


async def _fetch(
    base_url: str, request: httpx2.Request, extra: dict[str, str] | None = None
) -> bytes:
    """The whole answer to the SDK's own request, read to the end by a plain client."""
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    headers.update(extra or {})
    # The SDK's request as another session's first request (its own prompt).
    content = request.content.replace(
        _prompt(request.headers.get(SESSION_HEADER)).encode(), _prompt(_session(extra)).encode()
    )
    async with httpx2.AsyncClient() as http:
        query = f"?{request.url.query.decode()}" if request.url.query else ""
        response = await http.post(
            base_url + request.url.path + query, content=content, headers=headers
        )
        return response.content


async def _record_and_replay(case: dict[str, Any], body: str, fixture: Path) -> tuple[Any, ...]:
    """The SDK's parse straight from the upstream, through record mode and through replay
    (upstream stopped); then the whole bytes a plain client gets for the SDK's request,
    through record mode (another fixture) and through its replay."""
    url, runner = await _upstream(case, body)
    raw_fixture = fixture.parent / "raw-fixture"
    try:
        direct = await _parse(case, url)
        async with start_proxy("record", upstream=url, fixture=fixture) as proxy:
            recorded = await parse(case, proxy.base_url)
        assert not proxy.errors, proxy.errors
        async with start_proxy("record", upstream=url, fixture=raw_fixture) as proxy:
            recorded_bytes = await _fetch(proxy.base_url, direct[2])
    finally:
        await runner.cleanup()
    report = fixture.parent / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        replayed = await parse(case, proxy.base_url)
    assert not proxy.errors, proxy.errors
    async with start_proxy("replay", fixture=raw_fixture, report=report) as proxy:
        replayed_bytes = await _fetch(proxy.base_url, direct[2])
    return direct[:2], recorded, replayed, (recorded_bytes, replayed_bytes)


@dataclass(slots=True)
class _Run:
    """One case's results: the SDK's parse straight from the upstream (events, bytes read),
    through record mode and through replay; the whole bytes a plain client got for the
    SDK's request through record mode and through replay; the case's recorded log."""

    direct: tuple[list[Any], bytes] | None = None
    request: httpx2.Request | None = None
    recorded: tuple[list[Any], bytes] | None = None
    replayed: tuple[list[Any], bytes] | None = None
    recorded_bytes: bytes | None = None
    replayed_bytes: bytes | None = None
    log: SessionLog | None = None
    failed: BaseException | None = None


def _headers(name: str, session: str) -> dict[str, str]:
    return {CASE_HEADER: name, SESSION_HEADER: session}


async def _run_corpus(fixture: Path, names: list[str]) -> dict[str, _Run]:
    """Every case through one upstream, one record proxy and then one replay proxy: the
    SDK's session and the plain client's are two sessions a case (``<case>``,
    ``<case>.raw``). A case that fails keeps its exception for its own test."""
    runs = {name: _Run() for name in names}
    url, runner = await _upstream(None)
    try:
        async with start_proxy("record", upstream=url, fixture=fixture) as proxy:
            for name, run in runs.items():
                case = load(name)
                try:
                    run.recorded = await parse(case, proxy.base_url, _headers(name, name))
                    seen, body, run.request = await _parse(case, url, _headers(name, name))
                    run.direct = (seen, body)
                    raw = _headers(name, f"{name}.raw")
                    run.recorded_bytes = await _fetch(proxy.base_url, run.request, raw)
                except Exception as exc:  # this case's test raises it
                    run.failed = exc
        assert not proxy.errors, proxy.errors
    finally:
        await runner.cleanup()
    logs = {
        (fixture / name).read_text(encoding="utf-8"): fixture / name
        for name in recording_names(fixture)
    }
    async with start_proxy("replay", fixture=fixture, report=fixture.parent / "r.json") as proxy:
        for name, run in runs.items():
            if run.failed is not None or run.request is None:
                continue
            mine = [path for text, path in logs.items() if f'{_prompt(name)}"' in text]
            run.log = load_session_log(mine[0]) if len(mine) == 1 else None
            try:
                run.replayed = await parse(load(name), proxy.base_url, _headers(name, name))
                raw = _headers(name, f"{name}.raw")
                run.replayed_bytes = await _fetch(proxy.base_url, run.request, raw)
            except Exception as exc:
                run.failed = exc
    assert not proxy.errors, proxy.errors
    return runs


@pytest.fixture(scope="module")
def corpus_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, _Run]:
    # Only the cases this run selected (``-k``): every one of them, in one pass.
    selected = {
        item.callspec.params["name"]
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.originalname == test_a_real_answer_parses_the_same_recorded_and_replayed.__name__
    }
    names = [name for name in CASES if name in selected]
    return asyncio.run(_run_corpus(tmp_path_factory.mktemp("corpus") / "fixture", names))


@pytest.mark.parametrize("name", CASES)
def test_a_real_answer_parses_the_same_recorded_and_replayed(
    name: str, corpus_runs: dict[str, _Run]
) -> None:
    run = corpus_runs[name]
    if run.failed is not None:
        raise run.failed
    case = load(name)
    body = case["response"]["body"]
    direct, recorded, replayed = run.direct, run.recorded, run.replayed
    assert direct is not None
    assert recorded is not None
    assert replayed is not None
    assert body.encode().startswith(direct[1]), "the loopback upstream changed the case"
    # (The bytes the SDK read stop where it raised, which depends on how they were cut
    # into reads; the whole answer is compared below, read to its end.)
    # Every event (or object, or error) the SDK gave, field by field.
    assert recorded[0] == direct[0]
    assert replayed[0] == direct[0]
    assert run.recorded_bytes == body.encode(), "record mode changed the upstream's bytes"
    assert run.replayed_bytes == body.encode(), "replay did not serve the upstream's bytes"
    # The chunks (in-process replay, overrides, drift) say how the call ended as the SDK
    # saw it: an in-stream error frame is an error, [DONE] without a finish_reason is not.
    assert run.log is not None, f"no session {name} was recorded"
    finish = [e.data.chunk for e in run.log.events if isinstance(e, AssistantChunk)][-1]
    assert isinstance(finish, Finish)
    sdk_error = "raised" in direct[0][-1]
    # (A Gemini answer blocked for safety is an error finish in the chunks, as the gemini
    # adapter reports it; google-genai hands it over as a response with that reason.)
    blocked = case["api"] == "gemini" and finish.code == "SAFETY"
    assert (finish.reason == "error") == (sdk_error or blocked), finish


@pytest.mark.asyncio
async def test_a_last_frame_without_its_blank_line_is_recorded_whole(tmp_path: Path) -> None:
    """Derived from a corpus case (its last terminator removed, as some servers end a
    stream): the SDK reads the last event, so record mode must too — it recorded a cut and
    the client got RemoteProtocolError, in record and in replay."""
    case = load("messages-anthropic-stream-tool-use")
    body = case["response"]["body"].removesuffix("\n\n")
    direct, recorded, replayed, (_, replayed_bytes) = await _record_and_replay(
        case, body, tmp_path / "fixture"
    )
    assert direct[0][-1]["type"] == "message_delta"  # the SDK drops the unterminated frame
    assert recorded[0] == direct[0]  # not a RemoteProtocolError: the proxy saw the stop
    assert replayed[0] == direct[0]
    assert replayed_bytes == body.encode()


@pytest.mark.asyncio
async def test_an_overridden_corpus_call_streams_its_prefix_and_raises(tmp_path: Path) -> None:
    """A ``throw`` override on a recorded real answer is re-encoded from its chunks: the
    client gets the text of the chunks before it, then the connection error."""
    case = load("chat-openrouter-stream-reasoning")
    fixture = tmp_path / "fixture"
    direct, _, _, _ = await _record_and_replay(case, case["response"]["body"], fixture)
    throw = {"action": "throw", "session": 0, "call": 1, "chunks": 4}
    (fixture / "replay.override.json").write_text(json.dumps({"overrides": [throw]}))
    async with start_proxy("replay", fixture=fixture, report=tmp_path / "r.json") as proxy:
        replayed, _ = await parse(case, proxy.base_url)
    assert replayed[-1]["raised"] == "APIConnectionError"
    deltas = [chunk["choices"][0]["delta"] for chunk in replayed[:-1] if chunk["choices"]]
    reasoning = "".join(delta.get("reasoning_content") or "" for delta in deltas)
    recorded_reasoning = "".join(
        (chunk["choices"][0]["delta"].get("reasoning") or "")
        for chunk in direct[0]
        if chunk["choices"]
    )
    # block start + three reasoning deltas before the throw, as the chunks recorded them
    assert reasoning
    assert recorded_reasoning.startswith(reasoning)
    assert len([d for d in deltas if d.get("reasoning_content")]) == 3


@pytest.mark.asyncio
@pytest.mark.parametrize("name", [name for name in CASES if "stream-error" in name])
async def test_an_in_stream_error_re_encoded_from_the_chunks_is_the_same_error(
    name: str, tmp_path: Path
) -> None:
    """Without the answers as sent (a recording from before ``wire.ndjson``, or a call an
    override re-encodes) an in-stream error frame is served from the chunks: the SDK
    raises the same error (class, message, status, body)."""
    case = load(name)
    fixture = tmp_path / "fixture"
    direct, _, _, _ = await _record_and_replay(case, case["response"]["body"], fixture)
    (fixture / VERBATIM_FILE).unlink()
    async with start_proxy("replay", fixture=fixture, report=tmp_path / "r.json") as proxy:
        replayed, _ = await parse(case, proxy.base_url)
    assert "raised" in direct[0][-1], direct[0][-1]
    assert replayed[-1] == direct[0][-1]
