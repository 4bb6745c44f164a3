"""Bad input gets a clear HTTP error in the caller's API format, and loses nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from agentreel.llm import Finish, TextDelta
from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.session import AssistantChunk, harvest_session_logs


@pytest.mark.asyncio
async def test_unknown_paths_websocket_and_head_get_a_json_404_naming_the_supported_paths(
    weather_stub: StubServer, tmp_path: Path
) -> None:
    async with (
        start_proxy(
            "record", upstream=weather_stub.base_url, sessions_root=tmp_path / "s"
        ) as proxy,
        aiohttp.ClientSession() as http,
    ):
        for method, path, headers in [
            ("GET", "/v1/unknown", {}),
            ("HEAD", "/", {}),
            ("GET", "/v1/responses", {"Upgrade": "websocket", "Connection": "Upgrade"}),
            ("POST", "/v2/chat/completions", {}),
        ]:
            async with http.request(method, proxy.base_url + path, headers=headers) as response:
                assert response.status == 404, (method, path)
                assert response.content_type == "application/json"
                if method != "HEAD":
                    message = (await response.json())["error"]["message"]
                    assert "POST /v1/chat/completions" in message
                    assert "POST /v1/responses" in message
        async with http.get(
            proxy.base_url + "/v1/responses",
            headers={"Upgrade": "websocket", "Connection": "Upgrade"},
        ) as response:
            assert "Upgrade: websocket" in (await response.json())["error"]["message"]
    assert weather_stub.requests == []  # nothing was forwarded


@pytest.mark.asyncio
async def test_malformed_json_and_oversize_bodies_are_errors_in_the_api_format(
    weather_stub: StubServer, tmp_path: Path
) -> None:
    async with (
        start_proxy(
            "record",
            upstream=weather_stub.base_url,
            sessions_root=tmp_path / "s",
            max_body_bytes=1000,
        ) as proxy,
        aiohttp.ClientSession() as http,
    ):
        async with http.post(
            proxy.base_url + "/v1/chat/completions", data=b"{not json"
        ) as response:
            assert response.status == 400
            error = (await response.json())["error"]
            assert "not JSON" in error["message"]
        async with http.post(proxy.base_url + "/v1/messages?beta=true", data=b"[1, 2]") as response:
            assert response.status == 400
            body = await response.json()
            assert body["type"] == "error"  # Anthropic's error shape
            assert "not a JSON object" in body["error"]["message"]
        big = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]})
        async with http.post(proxy.base_url + "/v1/chat/completions", data=big) as response:
            assert response.status == 413
            assert "max_body_bytes" in (await response.json())["error"]["message"]
    assert weather_stub.requests == []
    assert harvest_session_logs(tmp_path / "s") == []


@pytest.mark.asyncio
async def test_client_leaving_mid_stream_still_records_the_whole_call(tmp_path: Path) -> None:
    rules = """
[[rule]]
text = "a slow answer streamed in many little pieces"
chunk_size = 2
delay_ms = 15
"""
    root = tmp_path / "sessions"
    with StubServer.from_toml(rules) as stub:
        async with start_proxy("record", upstream=stub.base_url, sessions_root=root) as proxy:
            async with aiohttp.ClientSession() as http:
                body = {
                    "model": "m",
                    "stream": True,
                    "messages": [{"role": "user", "content": "go"}],
                }
                async with http.post(
                    proxy.openai_base_url + "/chat/completions", json=body
                ) as response:
                    assert response.status == 200
                    await response.content.readany()  # the first bytes, then hang up
            assert await asyncio.to_thread(stub.wait_for_requests, 1, 30.0)
    (log,) = harvest_session_logs(root)
    chunks = [e.data.chunk for e in log.events if isinstance(e, AssistantChunk)]
    text = "".join(c.text for c in chunks if isinstance(c, TextDelta))
    assert text == "a slow answer streamed in many little pieces"
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].reason == "stop"
