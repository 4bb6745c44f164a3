"""The anthropic adapter through the real ``anthropic`` SDK against the stub model server."""

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
from agentreel.llm._anthropic import AnthropicProvider
from agentreel.llm._retry import RetryNotice
from agentreel.llm.exceptions import (
    AuthenticationError,
    BadRequestError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
)
from agentreel.llm.stub import StubServer

PROVIDER = "stub-anthropic"
FAST_RETRIES = {"max_retries": 2, "retry_initial_delay": 0.01, "retry_max_delay": 0.02}


def _options(text: str = "hello", **kwargs: object) -> GenerateOptions:
    return GenerateOptions(model="stub-model", messages=(Message.user(text),), **kwargs)  # type: ignore[arg-type]


def _stub(server: StubServer, **settings: object) -> AnthropicProvider:
    provider = load_provider(PROVIDER, base_url=server.base_url, **settings)
    assert isinstance(provider, AnthropicProvider)
    return provider


async def _collect(provider: AnthropicProvider, options: GenerateOptions) -> list[Chunk]:
    chunks = [c async for c in provider.stream(options)]
    validate_stream(chunks)
    return chunks


@pytest_asyncio.fixture
async def server_and_provider(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[StubServer, AnthropicProvider]]:
    rules: str = request.param
    with StubServer.from_toml(rules) as server:
        provider = _stub(server, **FAST_RETRIES)
        async with provider:
            yield server, provider


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
    assert server.requests[0].headers["authorization"] == "<redacted>"


ONE_TOOL = """
[[rule]]
tool_calls = [{name = "read_file", arguments = {path = "notes.txt"}}]
chunk_size = 5
"""


@_rules(ONE_TOOL)
@pytest.mark.asyncio
async def test_anthropic_one_tool_call(
    server_and_provider: tuple[StubServer, AnthropicProvider],
) -> None:
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
            "name": "read_file",
            "description": "Read a file",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
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
async def test_anthropic_two_tool_calls_with_interleaved_argument_deltas(
    server_and_provider: tuple[StubServer, AnthropicProvider],
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
usage = {input_tokens = 120, output_tokens = 7, cache_read_tokens = 100, cache_write_tokens = 5}
"""


@_rules(USAGE)
@pytest.mark.asyncio
async def test_anthropic_usage_comes_before_finish(
    server_and_provider: tuple[StubServer, AnthropicProvider],
) -> None:
    _, provider = server_and_provider
    chunks = await _collect(provider, _options())
    assert chunks[-2] == Usage(
        input_tokens=120, output_tokens=7, cache_read_tokens=100, cache_write_tokens=5
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
                code="refusal",
                message="the model stopped with stop_reason 'refusal'",
            ),
        ),
    ],
)
@pytest.mark.asyncio
async def test_anthropic_finish_reasons(finish: str, expected: Finish) -> None:
    with StubServer.from_toml(f'[[rule]]\ntext = "partial"\nfinish = "{finish}"') as server:
        async with _stub(server) as provider:
            chunks = await _collect(provider, _options())
    assert chunks[-1] == expected


@_rules('[[rule]]\nreasoning = "Let me think."\ntext = "Done."')
@pytest.mark.asyncio
async def test_anthropic_thinking_becomes_a_reasoning_block(
    server_and_provider: tuple[StubServer, AnthropicProvider],
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
async def test_anthropic_429_then_success_honours_retry_after() -> None:
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
async def test_anthropic_429_with_retry_after_beyond_the_budget_gives_up() -> None:
    rules = "[[rule]]\nstatus = 429\nretry_after = 30"
    with StubServer.from_toml(rules) as server:
        async with _stub(server, retry_budget=1.0) as p:
            with pytest.raises(RateLimitError) as caught:
                await _collect(p, _options())
        assert len(server.requests) == 1
    assert caught.value.status == 429
    assert "retry_budget" in str(caught.value)


@pytest.mark.asyncio
async def test_anthropic_500_exhausting_retries_raises_server_error() -> None:
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
async def test_anthropic_401_is_an_authentication_error_without_retries() -> None:
    with StubServer.from_toml("[[rule]]\nstatus = 401") as server:
        async with _stub(server) as provider:
            with pytest.raises(AuthenticationError) as caught:
                await _collect(provider, _options())
        assert len(server.requests) == 1
    assert caught.value.status == 401
    assert "AGENTREEL_STUB_API_KEY" in caught.value.message


@pytest.mark.asyncio
async def test_anthropic_unmatched_request_is_a_bad_request_naming_the_request() -> None:
    with StubServer.from_toml('[[rule]]\nmatch.last_user = "other"\ntext = "x"') as server:
        async with _stub(server) as provider:
            with pytest.raises(BadRequestError) as caught:
                await _collect(provider, _options("unexpected question"))
    assert caught.value.status == 400
    assert "no rule" in caught.value.message
    assert "unexpected question" in caught.value.message


@pytest.mark.asyncio
async def test_anthropic_stream_cut_midway_raises_stream_interrupted() -> None:
    seen: list[Chunk] = []
    rules = '[[rule]]\ntext = "a long answer that gets cut"\nchunk_size = 2\ncut_after = 6'
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
    assert seen[0] == BlockStart(index=0, block_type="text")
    assert not any(isinstance(c, Finish) for c in seen)


@pytest.mark.asyncio
async def test_anthropic_slow_stream_raises_timeout() -> None:
    rules = '[[rule]]\ntext = "slow"\ndelay_ms = 3000'
    with StubServer.from_toml(rules) as server:
        async with _stub(server, timeout=0.2) as provider:
            with pytest.raises(ProviderTimeoutError) as caught:
                await asyncio.wait_for(_collect(provider, _options()), timeout=30)
        assert server.wait_for_disconnect()
    assert caught.value.code == "timeout"


@pytest.mark.asyncio
async def test_anthropic_cancellation_midstream_closes_the_connection() -> None:
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
async def test_anthropic_closing_the_stream_early_closes_the_connection() -> None:
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
async def test_anthropic_message_conversion_sends_tool_results_as_tool_result_blocks(
    server_and_provider: tuple[StubServer, AnthropicProvider],
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


@pytest.mark.asyncio
async def test_anthropic_overloaded_error_event_inside_the_stream_raises_server_error() -> None:
    seen: list[Chunk] = []
    rules = (
        '[[rule]]\ntext = "abcdef"\nchunk_size = 2\nerror_after = 5\nerror_message = "Overloaded"'
    )
    with StubServer.from_toml(rules) as server:
        async with _stub(server) as provider:

            async def consume() -> None:
                async for chunk in provider.stream(_options()):
                    seen.append(chunk)

            with pytest.raises(ServerError) as caught:
                await consume()
        assert len(server.requests) == 1, "a failure after the stream opened is not retried"
    assert caught.value.code == "overloaded_error"
    assert "Overloaded" in caught.value.message
    assert [c.text for c in seen if isinstance(c, TextDelta)] == ["ab", "cd"]


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
