"""Real provider answers, recorded and replayed through the proxy, parse the same in the
official SDKs and replay byte for byte (SPEC 11: served as the upstream sent it).

Each case in ``corpus/`` is one answer a real provider sent — taken from a public
repository's VCR cassette, with its repository, path, commit and licence in the case — and
is served by a loopback upstream exactly as the cassette holds it. The test parses it with
the official SDK three ways: straight from the upstream, through ``proxy record``, and
through ``proxy replay`` with the upstream stopped; every event / object the SDK gives is
compared whole (``model_dump``), an error by its class, message, status and body, and the
bytes the client received through the proxy are the upstream's, in record and in replay.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from aiohttp import web
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam

from agentreel.llm import Finish
from agentreel.llm.wire import split_frames
from agentreel.llm_proxy import start_proxy
from agentreel.session import AssistantChunk, load_session_log

CORPUS = Path(__file__).parent / "corpus"
CASES = sorted(path.stem for path in CORPUS.glob("*.json"))
KEY = "sk-corpus-test-0123456789"
CHAT_PROMPT: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hello there"}]
CLAUDE_PROMPT: list[MessageParam] = [{"role": "user", "content": "Hello there"}]


def load(name: str) -> dict[str, Any]:
    case: dict[str, Any] = json.loads((CORPUS / f"{name}.json").read_text(encoding="utf-8"))
    return case


def test_the_corpus_covers_what_the_issue_names() -> None:
    cases = [load(name) for name in CASES]
    assert len(cases) >= 20
    kinds = {(case["api"], case["stream"]) for case in cases}
    assert kinds == {
        (api, stream) for api in ("chat", "messages", "responses") for stream in (True, False)
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
    ):
        assert needle in text, needle
    assert {case["response"]["status"] for case in cases} >= {200, 400, 429}
    for case in cases:
        provenance = case["provenance"]
        assert provenance["repository"]
        assert provenance["path"]
        assert provenance["licence"]
        assert len(provenance["commit"]) == 40


async def _upstream(case: dict[str, Any], body: str) -> tuple[str, web.AppRunner]:
    """A loopback upstream answering every POST with the case's response, frame by frame."""
    response = case["response"]

    async def answer(request: web.Request) -> web.StreamResponse:
        await request.read()
        headers = {"content-type": response["content_type"]}
        if not case["stream"]:
            return web.Response(status=response["status"], body=body.encode(), headers=headers)
        out = web.StreamResponse(status=response["status"], headers=headers)
        await out.prepare(request)
        for frame in split_frames(body.encode()):
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


async def parse(case: dict[str, Any], base_url: str) -> tuple[list[Any], bytes]:
    """Everything the official SDK makes of the answer at ``base_url``, and the bytes it
    read (up to where it stopped: it raises at an error frame)."""
    seen, body, _ = await _parse(case, base_url)
    return seen, body


async def _parse(case: dict[str, Any], base_url: str) -> tuple[list[Any], bytes, httpx2.Request]:
    capture = _Capture()
    http = httpx2.AsyncClient(transport=capture)
    model, stream = case["model"], case["stream"]
    seen: list[Any] = []
    try:
        if case["api"] == "messages":
            claude = anthropic.AsyncAnthropic(
                base_url=base_url, api_key=KEY, max_retries=0, http_client=http
            )
            if stream:
                events = await claude.messages.create(
                    model=model,
                    max_tokens=64,
                    messages=CLAUDE_PROMPT,
                    stream=True,
                )
                async for event in events:
                    seen.append(event.model_dump(warnings=False))
            else:
                message = await claude.messages.create(
                    model=model,
                    max_tokens=64,
                    messages=CLAUDE_PROMPT,
                )
                seen.append(message.model_dump(warnings=False))
        else:
            client = openai.AsyncOpenAI(
                base_url=f"{base_url}/v1", api_key=KEY, max_retries=0, http_client=http
            )
            if case["api"] == "chat" and stream:
                chunks = await client.chat.completions.create(
                    model=model,
                    messages=CHAT_PROMPT,
                    stream=True,
                )
                async for chunk in chunks:
                    seen.append(chunk.model_dump(warnings=False))
            elif case["api"] == "chat":
                completion = await client.chat.completions.create(
                    model=model,
                    messages=CHAT_PROMPT,
                )
                seen.append(completion.model_dump(warnings=False))
            elif stream:
                response_events = await client.responses.create(
                    model=model, input="Hello there", stream=True
                )
                async for response_event in response_events:
                    seen.append(response_event.model_dump(warnings=False))
            else:
                response = await client.responses.create(model=model, input="Hello there")
                seen.append(response.model_dump(warnings=False))
    except (openai.APIError, anthropic.APIError) as exc:
        seen.append(_error(exc))
    finally:
        await http.aclose()
    assert capture.request is not None
    return seen, bytes(capture.body), capture.request


async def _fetch(base_url: str, request: httpx2.Request) -> bytes:
    """The whole answer to the SDK's own request, read to the end by a plain client."""
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    async with httpx2.AsyncClient() as http:
        response = await http.post(
            base_url + request.url.path, content=request.content, headers=headers
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


@pytest.mark.asyncio
@pytest.mark.parametrize("name", CASES)
async def test_a_real_answer_parses_the_same_recorded_and_replayed(
    name: str, tmp_path: Path
) -> None:
    case = load(name)
    body = case["response"]["body"]
    direct, recorded, replayed, (recorded_bytes, replayed_bytes) = await _record_and_replay(
        case, body, tmp_path / "fixture"
    )
    assert body.encode().startswith(direct[1]), "the loopback upstream changed the case"
    # (The bytes the SDK read stop where it raised, which depends on how they were cut
    # into reads; the whole answer is compared below, read to its end.)
    # Every event (or object, or error) the SDK gave, field by field.
    assert recorded[0] == direct[0]
    assert replayed[0] == direct[0]
    assert recorded_bytes == body.encode(), "record mode changed the upstream's bytes"
    assert replayed_bytes == body.encode(), "replay did not serve the upstream's bytes"
    # The chunks (in-process replay, overrides, drift) say how the call ended as the SDK
    # saw it: an in-stream error frame is an error, [DONE] without a finish_reason is not.
    log = load_session_log(tmp_path / "fixture" / "session.jsonl")
    finish = [e.data.chunk for e in log.events if isinstance(e, AssistantChunk)][-1]
    assert isinstance(finish, Finish)
    sdk_error = "raised" in direct[0][-1]
    assert (finish.reason == "error") == sdk_error, finish


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
