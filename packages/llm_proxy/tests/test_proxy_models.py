"""``GET /v1/models`` and ``count_tokens`` are no model calls: record mode passes them
through to the upstream (the client gets what the upstream sent, status included) and
keeps the models listing in the fixture; replay answers from the recording."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import anthropic
import openai
import pytest
from aiohttp import web

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report

KEY = "sk-proxy-test-0123456789"
LISTED_RULES = """
[[rule]]
match.model = "gpt-listed"
text = "never asked"

[[rule]]
match.model = "claude-listed"
text = "never asked"

[[rule]]
text = "answered"
"""
LISTED = ["claude-listed", "gpt-listed"]


async def _listed(base_url: str) -> tuple[list[str], list[str]]:
    """The model ids as the ``openai`` and the ``anthropic`` SDK list them."""
    oa = openai.AsyncOpenAI(base_url=base_url + "/v1", api_key=KEY, max_retries=0)
    an = anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=0)
    try:
        return [m.id async for m in oa.models.list()], [m.id async for m in an.models.list()]
    finally:
        await oa.close()
        await an.close()


async def _raw(url: str) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, await response.read()


async def _ask(base_url: str) -> str:
    client = openai.AsyncOpenAI(base_url=base_url + "/v1", api_key=KEY, max_retries=0)
    try:
        reply = await client.chat.completions.create(
            model="gpt-used", messages=[{"role": "user", "content": "hi"}]
        )
    finally:
        await client.close()
    return reply.choices[0].message.content or ""


@pytest.mark.asyncio
async def test_models_are_passed_through_while_recording_and_replayed_as_recorded(
    tmp_path: Path,
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(LISTED_RULES) as stub:
        upstream = await _raw(stub.base_url + "/v1/models")
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            # Before any call, at the root and under a /s/<token>/ prefix: the upstream's
            # listing, byte for byte (not the models seen so far, which are none).
            assert await _raw(proxy.base_url + "/v1/models") == upstream
            assert await _raw(proxy.url_for("child-1") + "/v1/models") == upstream
            assert await _listed(proxy.base_url) == (LISTED, LISTED)
            assert await _ask(proxy.base_url) == "answered"
        assert len(stub.requests) == 1  # listing models is no model call
    assert (fixture / "models.json").is_file()
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        assert await _raw(proxy.base_url + "/v1/models") == upstream
        assert await _listed(proxy.url_for("child-1")) == (LISTED, LISTED)
        assert await _ask(proxy.base_url) == "answered"
    assert read_report(report).ok


@pytest.mark.asyncio
async def test_a_recording_without_a_listing_lists_its_calls_models(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(LISTED_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert await _ask(proxy.base_url) == "answered"
    assert not (fixture / "models.json").exists()
    async with start_proxy("replay", fixture=fixture) as proxy:
        assert await _listed(proxy.base_url) == (["gpt-used"], ["gpt-used"])


@pytest.mark.asyncio
async def test_an_upstream_error_listing_models_reaches_the_client_and_replays(
    tmp_path: Path,
) -> None:
    refused = b'{"error":{"message":"bad key for listing","type":"invalid_request_error"}}'

    async def models(request: web.Request) -> web.Response:
        return web.Response(status=401, body=refused, content_type="application/json")

    async def chat(request: web.Request) -> web.Response:
        message = {"role": "assistant", "content": "answered"}
        return web.json_response(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-used",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        )

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    upstream = f"http://127.0.0.1:{runner.addresses[0][1]}"

    async def refused_listing(base_url: str) -> str:
        client = openai.AsyncOpenAI(base_url=base_url + "/v1", api_key=KEY, max_retries=0)
        try:
            with pytest.raises(openai.AuthenticationError) as raised:
                await client.models.list()
        finally:
            await client.close()
        return raised.value.message

    fixture = tmp_path / "fixture"
    try:
        async with start_proxy("record", upstream=upstream, fixture=fixture) as proxy:
            assert await _raw(proxy.base_url + "/v1/models") == (401, refused)
            recorded = await refused_listing(proxy.base_url)
            assert await _ask(proxy.base_url) == "answered"
    finally:
        await runner.cleanup()
    assert "bad key for listing" in recorded
    async with start_proxy("replay", fixture=fixture) as proxy:
        assert await _raw(proxy.base_url + "/v1/models") == (401, refused)
        assert await refused_listing(proxy.base_url) == recorded


@pytest.mark.asyncio
async def test_count_tokens_is_forwarded_while_recording_and_answered_in_replay(
    tmp_path: Path,
) -> None:
    async def count(base_url: str) -> int:
        client = anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=0)
        try:
            counted = await client.messages.count_tokens(
                model="claude-x",
                system="two words",
                messages=[{"role": "user", "content": "one two three four five"}],
            )
        finally:
            await client.close()
        return counted.input_tokens

    fixture = tmp_path / "fixture"
    with StubServer.from_toml(LISTED_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            # The stub's count (a token per word: 2 + 5), not the proxy's own estimate.
            assert await count(proxy.base_url) == 7
            assert await _ask(proxy.base_url) == "answered"
        assert len(stub.requests) == 1
    async with start_proxy("replay", fixture=fixture) as proxy:
        # Replay answers from the request alone (the upstream is gone): the same number
        # for the same request, every time.
        replayed = await count(proxy.base_url)
        assert replayed >= 1
        assert await count(proxy.url_for("child")) == replayed
