"""The anthropic adapter's own wire format, through the real ``anthropic`` SDK and the stub server.

Request bodies, message conversion and settings. Behaviour both adapters share (chunk
stream, retries, errors, cancellation) is tested once for both in test_llm_sdk_adapters.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentreel.llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    GenerateOptions,
    Message,
    TextDelta,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    load_provider,
    validate_stream,
)
from agentreel.llm._anthropic import AnthropicProvider
from agentreel.llm.exceptions import AuthenticationError
from agentreel.llm.stub import StubServer


@pytest.fixture
def adapter_name() -> str:
    """This module tests the anthropic wire format only (conftest.py runs both by default)."""
    return "stub-anthropic"


def _options(text: str = "hello", **kwargs: object) -> GenerateOptions:
    return GenerateOptions(model="stub-model", messages=(Message.user(text),), **kwargs)  # type: ignore[arg-type]


async def _collect(provider: AnthropicProvider, options: GenerateOptions) -> list[Chunk]:
    chunks = [c async for c in provider.stream(options)]
    validate_stream(chunks)
    return chunks


def _rules(text: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("server_and_provider", [text], indirect=True, ids=["rules"])


@_rules('[[rule]]\nmatch.last_user = "hello"\ntext = "Hello there, friend."\nchunk_size = 4')
@pytest.mark.asyncio
async def test_anthropic_plain_text(
    server_and_provider: tuple[StubServer, AnthropicProvider],
) -> None:
    server, provider = server_and_provider
    options = _options("hello", system="be brief", temperature=0.5, max_tokens=50, stop=("END",))
    chunks = await _collect(provider, options)
    assert chunks[0] == BlockStart(index=0, block_type="text")
    deltas = [c.text for c in chunks if isinstance(c, TextDelta)]
    assert deltas == ["Hell", "o th", "ere,", " fri", "end."]
    assert BlockEnd(index=0, block=TextPart("Hello there, friend.")) in chunks
    assert chunks[-1] == Finish(reason="stop")
    body = server.requests[0].body
    assert body["stream"] is True
    assert body["system"] == "be brief"
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    assert body["temperature"] == 0.5
    assert body["max_tokens"] == 50
    assert body["stop_sequences"] == ["END"]
    # The key went out (and the stub's log redacted it): as ``x-api-key`` from anthropic
    # 0.x, as ``authorization`` from anthropic 1 on.
    headers = server.requests[0].headers
    assert headers.get("authorization", headers.get("x-api-key")) == "<redacted>"


@pytest.mark.asyncio
async def test_anthropic_message_conversion_sends_tool_results_as_tool_result_blocks(
    read_file_request: dict[str, Any],
) -> None:
    assert read_file_request["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read a.txt"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "c1", "name": "read_file", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "file body"}],
        },
    ]


@pytest.mark.asyncio
async def test_anthropic_without_a_key_raises_authentication_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = load_provider("anthropic", base_url="http://127.0.0.1:9", model="m")
    with pytest.raises(AuthenticationError) as caught:
        await _collect(provider, _options())  # type: ignore[arg-type]
    assert "ANTHROPIC_API_KEY" in caught.value.message


def test_anthropic_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    provider = load_provider("anthropic")
    assert isinstance(provider, AnthropicProvider)
    assert provider.base_url == "http://127.0.0.1:9"
    assert "sk-ant-test-env" not in repr(provider)


def test_stub_anthropic_provider_strips_v1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTREEL_STUB_URL", "http://127.0.0.1:1234/v1")
    provider = load_provider("stub-anthropic")
    assert isinstance(provider, AnthropicProvider)
    assert provider.base_url == "http://127.0.0.1:1234"


def test_anthropic_conversion_merges_user_turns_and_keeps_is_error() -> None:
    from agentreel.llm import ReasoningPart
    from agentreel.llm._anthropic import to_anthropic_messages

    options = GenerateOptions(
        model="m",
        system="base prompt",
        messages=(
            Message(role="system", content=(TextPart("extra rules"),)),
            Message.user("go"),
            Message(
                role="assistant",
                content=(
                    ReasoningPart("thinking it over"),
                    ToolCallPart(id="t1", name="read_file", arguments='{"path": "x"}'),
                ),
            ),
            Message(
                role="tool",
                content=(ToolResultPart(call_id="t1", content="no such file", is_error=True),),
            ),
            Message.user("and then?"),
        ),
    )
    system, messages = to_anthropic_messages(options)
    assert system == "base prompt\n\nextra rules"
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "x"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "no such file",
                    "is_error": True,
                },
                {"type": "text", "text": "and then?"},
            ],
        },
    ]
