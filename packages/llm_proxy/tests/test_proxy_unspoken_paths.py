"""A call on a path the proxy does not speak is named as such (issue 41): a Cohere client's
``POST /v2/chat`` pointed at the proxy did reach it, so the run never says "no model call
reached the proxy"; it says which request, what it looks like, and what is supported.

A boto3 ``bedrock-runtime`` client (strands-agents' default model) was the example of an
unspoken client until Bedrock Converse was spoken (issue 42): it now records, and nothing
about it is named as unspoken."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import boto3
import pytest
from botocore.config import Config

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy

RULES = '[[rule]]\nmatch.last_user = "hello"\ntext = "Hi there."\n'
COHERE_BODY = {"model": "command-r", "messages": [{"role": "user", "content": "hello"}]}


async def _cohere_chat(base_url: str) -> int:
    """What Cohere's v2 client sends for a chat, pointed at the proxy."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(base_url + "/v2/chat", json=COHERE_BODY) as response,
    ):
        return response.status


def _converse(base_url: str) -> str:
    client = boto3.client(
        "bedrock-runtime",
        endpoint_url=base_url,
        region_name="us-east-1",
        aws_access_key_id="AKIAAGENTREELFAKE00",
        aws_secret_access_key="agentreel-fake-secret",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )
    response = client.converse_stream(
        modelId="stub-model", messages=[{"role": "user", "content": [{"text": "hello"}]}]
    )
    text = ""
    for event in response["stream"]:
        text += event.get("contentBlockDelta", {}).get("delta", {}).get("text", "")
    return text


@pytest.fixture(autouse=True)
def _no_aws_setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS profile, config file or instance metadata of this machine is consulted."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.asyncio
async def test_an_unspoken_client_alone_is_named_not_told_no_call_reached(
    tmp_path: Path,
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert await _cohere_chat(proxy.base_url) == 404
    assert proxy.errors[0].startswith(
        "record: 1 request on paths agentreel does not speak "
        "(`POST /v2/chat` looks like Cohere) — supported: "
        "POST /v1/chat/completions"
    )
    assert "AWS Bedrock Converse" in proxy.errors[0]
    assert "nothing was written" in proxy.errors[0]
    assert not any("no model call reached the proxy" in error for error in proxy.errors)
    assert not fixture.exists()


@pytest.mark.asyncio
async def test_beside_served_calls_an_unspoken_call_is_a_warning(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    body = {"model": "stub-model", "messages": [{"role": "user", "content": "hello"}]}
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            async with (
                aiohttp.ClientSession() as http,
                http.post(proxy.openai_base_url + "/chat/completions", json=body) as response,
            ):
                assert response.status == 200
            assert await _cohere_chat(proxy.base_url) == 404
    assert proxy.errors == []
    assert (fixture / "session.jsonl").is_file()
    unspoken = [w for w in proxy.warnings if "agentreel does not speak" in w]
    assert len(unspoken) == 1
    assert unspoken[0].startswith(
        f"record (fixture {fixture}): 1 request on paths agentreel does not speak "
        "(`POST /v2/chat` looks like Cohere) — supported: "
    )


@pytest.mark.asyncio
async def test_a_bedrock_client_alone_now_records_and_nothing_is_unspoken(
    tmp_path: Path,
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            text = await asyncio.to_thread(_converse, proxy.base_url)
    assert text == "Hi there."
    assert proxy.errors == []
    assert not any("does not speak" in warning for warning in proxy.warnings)
    assert (fixture / "session.jsonl").is_file()
