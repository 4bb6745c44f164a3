"""The openai adapter through the real ``openai`` SDK against the stub model server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

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
    ToolCallDelta,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
    load_provider,
    validate_stream,
)
from agentreel.llm._openai import OpenAIProvider
from agentreel.llm._retry import RetryNotice
from agentreel.llm.exceptions import (
    AuthenticationError,
    BadRequestError,
    LlmError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
)
from agentreel.llm.stub import StubServer

PROVIDER = "stub"
FAST_RETRIES = {"max_retries": 2, "retry_initial_delay": 0.01, "retry_max_delay": 0.02}


def _options(text: str = "hello", **kwargs: object) -> GenerateOptions:
    return GenerateOptions(model="stub-model", messages=(Message.user(text),), **kwargs)  # type: ignore[arg-type]


def _stub(server: StubServer, **settings: object) -> OpenAIProvider:
    provider = load_provider(PROVIDER, base_url=server.base_url, **settings)
    assert isinstance(provider, OpenAIProvider)
    return provider


async def _collect(provider: OpenAIProvider, options: GenerateOptions) -> list[Chunk]:
    chunks = [c async for c in provider.stream(options)]
    validate_stream(chunks)
    return chunks


@pytest_asyncio.fixture
async def server_and_provider(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[StubServer, OpenAIProvider]]:
    rules: str = request.param
    with StubServer.from_toml(rules) as server:
        provider = _stub(server, **FAST_RETRIES)
        async with provider:
            yield server, provider


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


ONE_TOOL = """
[[rule]]
tool_calls = [{name = "read_file", arguments = {path = "notes.txt"}}]
chunk_size = 5
"""


@_rules(ONE_TOOL)
@pytest.mark.asyncio
async def test_openai_one_tool_call(server_and_provider: tuple[StubServer, OpenAIProvider]) -> None:
    server, provider = server_and_provider
    tool = ToolSpec(
        name="read_file",
        description="Read a file",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    chunks = await _collect(provider, _options("read it", tools=(tool,)))
    ends = [c.block for c in chunks if isinstance(c, BlockEnd)]
    assert len(ends) == 1
    call = ends[0]
    assert isinstance(call, ToolCallPart)
    assert call.name == "read_file"
    assert json.loads(call.arguments) == {"path": "notes.txt"}
    first = next(c for c in chunks if isinstance(c, ToolCallDelta))
    assert first.name == "read_file"
    assert first.id == call.id
    assert chunks[-1] == Finish(reason="tool-calls")
    assert server.requests[0].body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]


TWO_TOOLS = """
[[rule]]
text = "Doing both."
tool_calls = [
  {name = "read_file", arguments = {path = "a.txt"}, id = "call_a"},
  {name = "write_file", arguments = {path = "b.txt", content = "hi there"}, id = "call_b"},
]
interleave = true
chunk_size = 3
"""


@_rules(TWO_TOOLS)
@pytest.mark.asyncio
async def test_openai_two_tool_calls_with_interleaved_argument_deltas(
    server_and_provider: tuple[StubServer, OpenAIProvider],
) -> None:
    _, provider = server_and_provider
    chunks = await _collect(provider, _options("do both"))
    tool_deltas = [c for c in chunks if isinstance(c, ToolCallDelta) and c.arguments_delta]
    order = [c.index for c in tool_deltas]
    assert order[:4] == [1, 2, 1, 2], "argument pieces of the two calls alternate"
    calls = {
        c.block.id: c.block
        for c in chunks
        if isinstance(c, BlockEnd) and isinstance(c.block, ToolCallPart)
    }
    a, b = calls["call_a"], calls["call_b"]
    assert json.loads(a.arguments) == {"path": "a.txt"}
    assert json.loads(b.arguments) == {"path": "b.txt", "content": "hi there"}
    for part in (a, b):
        pieces = "".join(
            c.arguments_delta for c in chunks if isinstance(c, ToolCallDelta) and c.id == part.id
        )
        assert pieces == part.arguments
    assert chunks[-1] == Finish(reason="tool-calls")


USAGE = """
[[rule]]
text = "ok"
usage = {input_tokens = 120, output_tokens = 7, cache_read_tokens = 100, reasoning_tokens = 3}
"""


@_rules(USAGE)
@pytest.mark.asyncio
async def test_openai_usage_comes_before_finish(
    server_and_provider: tuple[StubServer, OpenAIProvider],
) -> None:
    _, provider = server_and_provider
    chunks = await _collect(provider, _options())
    assert chunks[-2] == Usage(
        input_tokens=120, output_tokens=7, cache_read_tokens=100, reasoning_tokens=3
    )


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("stop", Finish(reason="stop")),
        ("max-tokens", Finish(reason="max-tokens")),
        (
            "refusal",
            Finish(
                reason="error",
                code="content_filter",
                message="the model stopped with finish_reason 'content_filter'",
            ),
        ),
    ],
)
@pytest.mark.asyncio
async def test_openai_finish_reasons(finish: str, expected: Finish) -> None:
    with StubServer.from_toml(f'[[rule]]\ntext = "partial"\nfinish = "{finish}"') as server:
        async with _stub(server) as provider:
            chunks = await _collect(provider, _options())
    assert chunks[-1] == expected


@_rules('[[rule]]\nreasoning = "Let me think."\ntext = "Done."')
@pytest.mark.asyncio
async def test_openai_reasoning_content_becomes_a_reasoning_block(
    server_and_provider: tuple[StubServer, OpenAIProvider],
) -> None:
    _, provider = server_and_provider
    chunks = await _collect(provider, _options())
    assert chunks[0] == BlockStart(index=0, block_type="reasoning")
    assert "".join(c.text for c in chunks if isinstance(c, ReasoningDelta)) == "Let me think."
    assert BlockStart(index=1, block_type="text") in chunks


RATE_LIMITED_ONCE = """
[[rule]]
name = "busy"
times = 1
status = 429
retry_after = 0.05

[[rule]]
text = "after the wait"
"""


@pytest.mark.asyncio
async def test_openai_429_then_success_honours_retry_after() -> None:
    notices: list[RetryNotice] = []
    with StubServer.from_toml(RATE_LIMITED_ONCE) as server:
        async with _stub(server, on_retry=notices.append) as provider:
            chunks = await _collect(provider, _options())
        statuses = [r.status for r in server.requests]
    assert statuses == [429, 200]
    assert len(notices) == 1
    assert notices[0].status == 429
    assert notices[0].retry_after == pytest.approx(0.05)
    assert notices[0].delay == pytest.approx(0.05)
    assert isinstance(notices[0].error, RateLimitError)
    assert BlockEnd(index=0, block=TextPart("after the wait")) in chunks


@pytest.mark.asyncio
async def test_openai_429_with_retry_after_beyond_the_budget_gives_up() -> None:
    rules = "[[rule]]\nstatus = 429\nretry_after = 30"
    with StubServer.from_toml(rules) as server:
        async with _stub(server, retry_budget=1.0) as p:
            with pytest.raises(RateLimitError) as caught:
                await _collect(p, _options())
        assert len(server.requests) == 1
    assert caught.value.status == 429
    assert "retry_budget" in str(caught.value)


@pytest.mark.asyncio
async def test_openai_500_exhausting_retries_raises_server_error() -> None:
    notices: list[RetryNotice] = []
    with StubServer.from_toml('[[rule]]\nstatus = 500\nerror_message = "boom"') as server:
        async with _stub(server, on_retry=notices.append, **FAST_RETRIES) as provider:
            with pytest.raises(ServerError) as caught:
                await _collect(provider, _options())
        assert len(server.requests) == 3
    assert caught.value.status == 500
    assert caught.value.code == "server_error"
    assert "boom" in caught.value.message
    assert "gave up after 3 attempts" in caught.value.message
    assert [n.attempt for n in notices] == [1, 2]


@pytest.mark.asyncio
async def test_openai_401_is_an_authentication_error_without_retries() -> None:
    with StubServer.from_toml("[[rule]]\nstatus = 401") as server:
        async with _stub(server) as provider:
            with pytest.raises(AuthenticationError) as caught:
                await _collect(provider, _options())
        assert len(server.requests) == 1
    assert caught.value.status == 401
    assert "AGENTREEL_STUB_API_KEY" in caught.value.message


@pytest.mark.asyncio
async def test_openai_unmatched_request_is_a_bad_request_naming_the_request() -> None:
    with StubServer.from_toml('[[rule]]\nmatch.last_user = "other"\ntext = "x"') as server:
        async with _stub(server) as provider:
            with pytest.raises(BadRequestError) as caught:
                await _collect(provider, _options("unexpected question"))
    assert caught.value.status == 400
    assert "no rule" in caught.value.message
    assert "unexpected question" in caught.value.message


@pytest.mark.asyncio
async def test_openai_stream_cut_midway_raises_stream_interrupted() -> None:
    seen: list[Chunk] = []
    rules = '[[rule]]\ntext = "a long answer that gets cut"\nchunk_size = 2\ncut_after = 4'
    with StubServer.from_toml(rules) as server:
        async with _stub(server) as provider:

            async def consume() -> None:
                async for chunk in provider.stream(_options()):
                    seen.append(chunk)

            with pytest.raises(StreamInterruptedError) as caught:
                await asyncio.wait_for(consume(), timeout=30)
        assert server.requests[0].outcome == "cut"
    assert caught.value.code == "stream_cut"
    assert [c.text for c in seen if isinstance(c, TextDelta)] == ["a ", "lo", "ng"]
    assert not any(isinstance(c, Finish) for c in seen)


@pytest.mark.asyncio
async def test_openai_slow_stream_raises_timeout() -> None:
    rules = '[[rule]]\ntext = "slow"\ndelay_ms = 3000'
    with StubServer.from_toml(rules) as server:
        async with _stub(server, timeout=0.2) as provider:
            with pytest.raises(ProviderTimeoutError) as caught:
                await asyncio.wait_for(_collect(provider, _options()), timeout=30)
        assert server.wait_for_disconnect()
    assert caught.value.code == "timeout"


@pytest.mark.asyncio
async def test_openai_cancellation_midstream_closes_the_connection() -> None:
    rules = '[[rule]]\ntext = "' + "word " * 400 + '"\nchunk_size = 5\ndelay_ms = 10'
    first_delta = asyncio.Event()
    with StubServer.from_toml(rules) as server:
        async with _stub(server) as provider:

            async def consume() -> None:
                async for chunk in provider.stream(_options()):
                    if isinstance(chunk, TextDelta):
                        first_delta.set()

            task = asyncio.create_task(consume())
            await asyncio.wait_for(first_delta.wait(), timeout=30)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=30)
            assert await asyncio.to_thread(server.wait_for_disconnect, 1, 30.0)
        record = server.requests[0]
    assert record.outcome == "disconnected"
    assert record.frames_sent < 400


@pytest.mark.asyncio
async def test_openai_closing_the_stream_early_closes_the_connection() -> None:
    rules = '[[rule]]\ntext = "' + "word " * 400 + '"\nchunk_size = 5\ndelay_ms = 10'
    with StubServer.from_toml(rules) as server:
        async with _stub(server) as provider:
            stream = provider.stream(_options())
            assert isinstance(stream, AsyncIterator)
            async for chunk in stream:
                if isinstance(chunk, TextDelta):
                    break
            await stream.aclose()  # type: ignore[attr-defined]
            assert await asyncio.to_thread(server.wait_for_disconnect, 1, 30.0)
    assert server.requests[0].outcome == "disconnected"


CONVERSATION = """
[[rule]]
match.last_tool_result = "file body"
text = "The file says: file body"
"""


@_rules(CONVERSATION)
@pytest.mark.asyncio
async def test_openai_message_conversion_sends_tool_results_as_role_tool(
    server_and_provider: tuple[StubServer, OpenAIProvider],
) -> None:
    server, provider = server_and_provider
    messages = (
        Message.user("read a.txt"),
        Message(
            role="assistant",
            content=(TextPart("Reading."), ToolCallPart(id="c1", name="read_file", arguments="")),
        ),
        Message(role="tool", content=(ToolResultPart(call_id="c1", content="file body"),)),
    )
    await _collect(provider, GenerateOptions(model="m", messages=messages))
    assert server.requests[0].body["messages"] == [
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


def test_llm_error_is_the_base_of_adapter_errors() -> None:
    assert issubclass(StreamInterruptedError, LlmError)


@pytest.mark.asyncio
async def test_openai_error_inside_the_stream_raises_a_typed_error() -> None:
    seen: list[Chunk] = []
    rules = '[[rule]]\ntext = "abcdef"\nchunk_size = 2\nerror_after = 3\nerror_message = "melted"'
    with StubServer.from_toml(rules) as server:
        async with _stub(server) as provider:

            async def consume() -> None:
                async for chunk in provider.stream(_options()):
                    seen.append(chunk)

            with pytest.raises(ServerError) as caught:
                await consume()
        assert len(server.requests) == 1, "a failure after the stream opened is not retried"
    assert caught.value.code == "server_error"
    assert "melted" in caught.value.message
    assert [c.text for c in seen if isinstance(c, TextDelta)] == ["ab", "cd"]


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
