"""The openai adapter's own wire format, through the real ``openai`` SDK and the stub server.

Request bodies, message conversion and settings. Behaviour both adapters share (chunk
stream, retries, errors, cancellation) is tested once for both in test_llm_sdk_adapters.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentreel.llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    GenerateOptions,
    Message,
    ReasoningDelta,
    TextDelta,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    load_provider,
    validate_stream,
)
from agentreel.llm._openai import OpenAIProvider
from agentreel.llm.exceptions import (
    AuthenticationError,
    BadRequestError,
    LlmError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
)
from agentreel.llm.stub import StubServer

# conftest.py's RawSseServer (test modules cannot import conftest under importlib mode).
RawSseServer = Any


@pytest.fixture
def adapter_name() -> str:
    """This module tests the openai wire format only (conftest.py runs both by default)."""
    return "stub"


def _options(text: str = "hello", **kwargs: object) -> GenerateOptions:
    return GenerateOptions(model="stub-model", messages=(Message.user(text),), **kwargs)  # type: ignore[arg-type]


async def _collect(provider: OpenAIProvider, options: GenerateOptions) -> list[Chunk]:
    chunks = [c async for c in provider.stream(options)]
    validate_stream(chunks)
    return chunks


def _rules(text: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("server_and_provider", [text], indirect=True, ids=["rules"])


@_rules('[[rule]]\nmatch.last_user = "hello"\ntext = "Hello there, friend."\nchunk_size = 4')
@pytest.mark.asyncio
async def test_openai_plain_text(server_and_provider: tuple[StubServer, OpenAIProvider]) -> None:
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
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello"},
    ]
    assert body["temperature"] == 0.5
    assert body["max_completion_tokens"] == 50
    assert body["stop"] == ["END"]
    assert server.requests[0].headers["authorization"] == "<redacted>"


@pytest.mark.asyncio
async def test_openai_message_conversion_sends_tool_results_as_role_tool(
    read_file_request: dict[str, Any],
) -> None:
    assert read_file_request["messages"] == [
        {"role": "user", "content": "read a.txt"},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "file body"},
    ]


@pytest.mark.asyncio
async def test_openai_without_a_key_raises_authentication_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = load_provider("openai", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(AuthenticationError) as caught:
        await _collect(provider, _options())  # type: ignore[arg-type]
    assert "OPENAI_API_KEY" in caught.value.message


def test_openai_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    provider = load_provider("openai")
    assert isinstance(provider, OpenAIProvider)
    assert provider.base_url == "http://127.0.0.1:9/v1"
    assert "sk-test-env" not in repr(provider)


def test_stub_provider_needs_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTREEL_STUB_URL", raising=False)
    with pytest.raises(ValueError, match="AGENTREEL_STUB_URL"):
        load_provider("stub")
    monkeypatch.setenv("AGENTREEL_STUB_URL", "http://127.0.0.1:1234")
    provider = load_provider("stub")
    assert isinstance(provider, OpenAIProvider)
    assert provider.base_url == "http://127.0.0.1:1234/v1"


def test_openai_conversion_drops_reasoning_and_splits_tool_results() -> None:
    from agentreel.llm import ReasoningPart
    from agentreel.llm._openai import to_openai_messages

    options = GenerateOptions(
        model="m",
        messages=(
            Message(
                role="assistant",
                content=(
                    ReasoningPart("hidden"),
                    ToolCallPart(id="a", name="x", arguments='{"n":1}'),
                    ToolCallPart(id="b", name="y", arguments='{"n":2}'),
                ),
            ),
            Message(
                role="tool",
                content=(
                    ToolResultPart(call_id="a", content="one"),
                    ToolResultPart(call_id="b", content="two", is_error=True),
                ),
            ),
        ),
    )
    assert to_openai_messages(options) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "x", "arguments": '{"n":1}'}},
                {"id": "b", "type": "function", "function": {"name": "y", "arguments": '{"n":2}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "one"},
        {"role": "tool", "tool_call_id": "b", "content": "two"},
    ]


# Real OpenAI-compatible servers (RawSseServer): shapes the stub does not send.


def _sse(payload: object) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _chunk(delta: dict[str, object], finish_reason: str | None = None, **extra: object) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return _sse(
        {
            "id": "gen-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "routed/model",
            "choices": [choice],
            **extra,
        }
    )


_USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
_DONE = b"data: [DONE]\n\n"


def _raw_provider(server: RawSseServer) -> OpenAIProvider:
    return OpenAIProvider(
        base_url=server.base_url, api_key="k", model="routed/model", max_retries=0
    )


async def _consume(provider: OpenAIProvider, seen: list[Chunk]) -> None:
    async with provider:
        async for chunk in provider.stream(_options()):
            seen.append(chunk)


@pytest.mark.asyncio
async def test_openai_done_without_finish_reason_is_a_finished_stream_with_usage(
    raw_sse_server: Callable[..., RawSseServer],
) -> None:
    # OpenRouter-routed models: text, a usage chunk, [DONE] — and never a finish_reason.
    frames = [
        _chunk({"role": "assistant", "content": "Hi "}),
        _chunk({"content": "there"}),
        _sse(
            {
                "id": "gen-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "routed/model",
                "choices": [],
                "usage": _USAGE,
            }
        ),
        _DONE,
    ]
    seen: list[Chunk] = []
    with raw_sse_server(frames) as server:
        await _consume(_raw_provider(server), seen)
    validate_stream(seen)
    assert BlockEnd(index=0, block=TextPart("Hi there")) in seen
    assert seen[-2:] == [Usage(input_tokens=11, output_tokens=7), Finish(reason="stop")]


@pytest.mark.asyncio
async def test_openai_done_without_finish_reason_after_tool_calls_finishes_tool_calls(
    raw_sse_server: Callable[..., RawSseServer],
) -> None:
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path":'},
    }
    more = {"index": 0, "function": {"arguments": '"a.txt"}'}}
    frames = [_chunk({"tool_calls": [call]}), _chunk({"tool_calls": [more]}), _DONE]
    seen: list[Chunk] = []
    with raw_sse_server(frames) as server:
        await _consume(_raw_provider(server), seen)
    validate_stream(seen)
    part = ToolCallPart(id="call_1", name="read_file", arguments='{"path":"a.txt"}')
    assert seen[-2:] == [BlockEnd(index=0, block=part), Finish(reason="tool-calls")]


@pytest.mark.parametrize("ending", ["close", "drop"])
@pytest.mark.asyncio
async def test_openai_stream_ending_before_done_is_a_cut_not_a_finish(
    raw_sse_server: Callable[..., RawSseServer], ending: str
) -> None:
    # The same stream without its [DONE]: the server closed (or the connection dropped)
    # before finishing, so the call did not finish however cleanly the body ended.
    frames = [_chunk({"role": "assistant", "content": "Hi "}), _chunk({"content": "there"})]
    seen: list[Chunk] = []
    with (
        raw_sse_server(frames, ending=ending) as server,
        pytest.raises(StreamInterruptedError) as caught,
    ):
        await _consume(_raw_provider(server), seen)
    assert caught.value.code == "stream_cut"
    assert "retry" in caught.value.message
    assert [c.text for c in seen if isinstance(c, TextDelta)] == ["Hi ", "there"]
    assert not any(isinstance(c, Finish) for c in seen)


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        (502, ServerError),
        (429, RateLimitError),
        ("rate_limit_exceeded", RateLimitError),
        (400, BadRequestError),
    ],
)
@pytest.mark.asyncio
async def test_openai_error_chunk_midstream_keeps_reasoning_and_usage_and_types_its_code(
    raw_sse_server: Callable[..., RawSseServer], code: object, error_type: type[LlmError]
) -> None:
    # OpenRouter's mid-stream error: an error object (numeric or named code) beside a
    # finish_reason "error", with the usage so far, after some reasoning had streamed.
    frames = [
        _chunk({"role": "assistant", "reasoning": "think"}),
        _chunk({"reasoning": "ing"}),
        _chunk(
            {"content": ""},
            "error",
            usage=_USAGE,
            error={"code": code, "message": "Provider disconnected"},
        ),
    ]
    seen: list[Chunk] = []
    with raw_sse_server(frames) as server, pytest.raises(error_type) as caught:
        await _consume(_raw_provider(server), seen)
    assert caught.value.code == str(code)
    assert "Provider disconnected" in caught.value.message
    assert [c.text for c in seen if isinstance(c, ReasoningDelta)] == ["think", "ing"]
    assert seen[-1] == Usage(input_tokens=11, output_tokens=7)
