"""The SDK adapters (openai, anthropic, gemini) against the stub server, where the wire format
does not matter: chunk stream shape, retries, error mapping, timeouts, cancellation.

Each test runs once per adapter (the ``adapter_name`` fixture in conftest.py); what differs
between the two wire formats is looked up per adapter. Request-body and message-conversion
checks stay in test_llm_openai_adapter.py and test_llm_anthropic_adapter.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

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
    ToolCallDelta,
    ToolCallPart,
    ToolSpec,
    Usage,
    validate_stream,
)
from agentreel.llm._anthropic import AnthropicProvider
from agentreel.llm._gemini import GeminiProvider
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

AdapterProvider = OpenAIProvider | AnthropicProvider | GeminiProvider
Connect = Callable[..., AdapterProvider]


def _options(text: str = "hello") -> GenerateOptions:
    return GenerateOptions(model="stub-model", messages=(Message.user(text),))


async def _collect(provider: AdapterProvider, options: GenerateOptions) -> list[Chunk]:
    chunks = [c async for c in provider.stream(options)]
    validate_stream(chunks)
    return chunks


def _rules(text: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("server_and_provider", [text], indirect=True, ids=["rules"])


ONE_TOOL = """
[[rule]]
tool_calls = [{name = "read_file", arguments = {path = "notes.txt"}}]
chunk_size = 5
"""


READ_FILE_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
# How each wire format sends ToolSpec(read_file, "Read a file", READ_FILE_SCHEMA).
_TOOLS_ON_THE_WIRE: dict[str, list[dict[str, object]]] = {
    "stub": [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file",
                "parameters": READ_FILE_SCHEMA,
            },
        }
    ],
    "stub-anthropic": [
        {"name": "read_file", "description": "Read a file", "input_schema": READ_FILE_SCHEMA}
    ],
    # google-genai 3 sends a JSON-schema declaration under its snake_case name, as public
    # recordings of the real API show (the API takes both spellings).
    "stub-gemini": [
        {
            "functionDeclarations": [
                {
                    "name": "read_file",
                    "description": "Read a file",
                    "parameters_json_schema": READ_FILE_SCHEMA,
                }
            ]
        }
    ],
}


@_rules(ONE_TOOL)
@pytest.mark.asyncio
async def test_adapter_one_tool_call(
    adapter_name: str, server_and_provider: tuple[StubServer, AdapterProvider]
) -> None:
    server, provider = server_and_provider
    tool = ToolSpec(name="read_file", description="Read a file", parameters=READ_FILE_SCHEMA)
    options = GenerateOptions(
        model="stub-model", messages=(Message.user("read it"),), tools=(tool,)
    )
    chunks = await _collect(provider, options)
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
    assert server.requests[0].body["tools"] == _TOOLS_ON_THE_WIRE[adapter_name]


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


# Gemini sends each function call whole, in one part: no argument pieces to interleave.
_INTERLEAVED = {"stub": [1, 2, 1, 2], "stub-anthropic": [1, 2, 1, 2], "stub-gemini": [1, 2]}


@_rules(TWO_TOOLS)
@pytest.mark.asyncio
async def test_adapter_two_tool_calls_with_interleaved_argument_deltas(
    adapter_name: str, server_and_provider: tuple[StubServer, AdapterProvider]
) -> None:
    _, provider = server_and_provider
    chunks = await _collect(provider, _options("do both"))
    tool_deltas = [c for c in chunks if isinstance(c, ToolCallDelta) and c.arguments_delta]
    order = [c.index for c in tool_deltas]
    assert order[:4] == _INTERLEAVED[adapter_name], "argument pieces of the two calls alternate"
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


# Each wire format reports a different extra usage field.
_USAGE: dict[str, tuple[str, Usage]] = {
    "stub": (
        "reasoning_tokens = 3",
        Usage(input_tokens=120, output_tokens=7, cache_read_tokens=100, reasoning_tokens=3),
    ),
    "stub-anthropic": (
        "cache_write_tokens = 5",
        Usage(input_tokens=120, output_tokens=7, cache_read_tokens=100, cache_write_tokens=5),
    ),
    "stub-gemini": (
        "reasoning_tokens = 3",
        Usage(input_tokens=120, output_tokens=7, cache_read_tokens=100, reasoning_tokens=3),
    ),
}


@pytest.mark.asyncio
async def test_adapter_usage_comes_before_finish(adapter_name: str, connect: Connect) -> None:
    extra, expected = _USAGE[adapter_name]
    rules = (
        '[[rule]]\ntext = "ok"\n'
        f"usage = {{input_tokens = 120, output_tokens = 7, cache_read_tokens = 100, {extra}}}"
    )
    with StubServer.from_toml(rules) as server:
        async with connect(server) as provider:
            chunks = await _collect(provider, _options())
    assert chunks[-2] == expected


# The stub's "refusal" finish, in each wire format's own words.
_REFUSAL: dict[str, Finish] = {
    "stub": Finish(
        reason="error",
        code="content_filter",
        message="the model stopped with finish_reason 'content_filter'",
    ),
    "stub-anthropic": Finish(
        reason="error",
        code="refusal",
        message="the model stopped with stop_reason 'refusal'",
    ),
    "stub-gemini": Finish(
        reason="error",
        code="SAFETY",
        message="the model stopped with finishReason 'SAFETY'",
    ),
}


@pytest.mark.parametrize("finish", ["stop", "max-tokens", "refusal"])
@pytest.mark.asyncio
async def test_adapter_finish_reasons(adapter_name: str, connect: Connect, finish: str) -> None:
    expected = _REFUSAL[adapter_name] if finish == "refusal" else Finish(reason=finish)  # type: ignore[arg-type]
    with StubServer.from_toml(f'[[rule]]\ntext = "partial"\nfinish = "{finish}"') as server:
        async with connect(server) as provider:
            chunks = await _collect(provider, _options())
    assert chunks[-1] == expected


@_rules('[[rule]]\nreasoning = "Let me think."\ntext = "Done."')
@pytest.mark.asyncio
async def test_adapter_reasoning_becomes_a_reasoning_block(
    server_and_provider: tuple[StubServer, AdapterProvider],
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
async def test_adapter_429_then_success_honours_retry_after(connect: Connect) -> None:
    notices: list[RetryNotice] = []
    with StubServer.from_toml(RATE_LIMITED_ONCE) as server:
        async with connect(server, on_retry=notices.append) as provider:
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
async def test_adapter_429_with_retry_after_beyond_the_budget_gives_up(connect: Connect) -> None:
    rules = "[[rule]]\nstatus = 429\nretry_after = 30"
    with StubServer.from_toml(rules) as server:
        async with connect(server, retry_budget=1.0) as p:
            with pytest.raises(RateLimitError) as caught:
                await _collect(p, _options())
        assert len(server.requests) == 1
    assert caught.value.status == 429
    assert "retry_budget" in str(caught.value)


@pytest.mark.asyncio
async def test_adapter_500_exhausting_retries_raises_server_error(
    connect: Connect, fast_retries: dict[str, float]
) -> None:
    notices: list[RetryNotice] = []
    with StubServer.from_toml('[[rule]]\nstatus = 500\nerror_message = "boom"') as server:
        async with connect(server, on_retry=notices.append, **fast_retries) as provider:
            with pytest.raises(ServerError) as caught:
                await _collect(provider, _options())
        assert len(server.requests) == 3
    assert caught.value.status == 500
    assert caught.value.code == "server_error"
    assert "boom" in caught.value.message
    assert "gave up after 3 attempts" in caught.value.message
    assert [n.attempt for n in notices] == [1, 2]


@pytest.mark.asyncio
async def test_adapter_401_is_an_authentication_error_without_retries(connect: Connect) -> None:
    with StubServer.from_toml("[[rule]]\nstatus = 401") as server:
        async with connect(server) as provider:
            with pytest.raises(AuthenticationError) as caught:
                await _collect(provider, _options())
        assert len(server.requests) == 1
    assert caught.value.status == 401
    assert "AGENTREEL_STUB_API_KEY" in caught.value.message


@pytest.mark.asyncio
async def test_adapter_unmatched_request_is_a_bad_request_naming_the_request(
    connect: Connect,
) -> None:
    with StubServer.from_toml('[[rule]]\nmatch.last_user = "other"\ntext = "x"') as server:
        async with connect(server) as provider:
            with pytest.raises(BadRequestError) as caught:
                await _collect(provider, _options("unexpected question"))
    assert caught.value.status == 400
    assert "no rule" in caught.value.message
    assert "unexpected question" in caught.value.message


# Frames the stub sends before the cut so that three text deltas got through: anthropic
# spends two more frames (message_start, content_block_start) before the first text.
_FRAMES_BEFORE_CUT = {"stub": 4, "stub-anthropic": 6, "stub-gemini": 3}


@pytest.mark.asyncio
async def test_adapter_stream_cut_midway_raises_stream_interrupted(
    adapter_name: str, connect: Connect
) -> None:
    seen: list[Chunk] = []
    rules = (
        '[[rule]]\ntext = "a long answer that gets cut"\nchunk_size = 2\n'
        f"cut_after = {_FRAMES_BEFORE_CUT[adapter_name]}"
    )
    with StubServer.from_toml(rules) as server:
        async with connect(server) as provider:

            async def consume() -> None:
                async for chunk in provider.stream(_options()):
                    seen.append(chunk)

            with pytest.raises(StreamInterruptedError) as caught:
                await asyncio.wait_for(consume(), timeout=30)
            # The client may see the cut before the server thread books it (gemini did
            # under CI load): wait for the booking, then check what it says.
            assert await asyncio.to_thread(server.wait_for_requests, 1, 30.0)
        assert server.requests[0].outcome == "cut"
    assert caught.value.code == "stream_cut"
    assert [c.text for c in seen if isinstance(c, TextDelta)] == ["a ", "lo", "ng"]
    assert not any(isinstance(c, Finish) for c in seen)
    assert seen[0] == BlockStart(index=0, block_type="text")


@pytest.mark.asyncio
async def test_adapter_slow_stream_raises_timeout(connect: Connect) -> None:
    rules = '[[rule]]\ntext = "slow"\ndelay_ms = 3000'
    with StubServer.from_toml(rules) as server:
        async with connect(server, timeout=0.2) as provider:
            with pytest.raises(ProviderTimeoutError) as caught:
                await asyncio.wait_for(_collect(provider, _options()), timeout=30)
        assert server.wait_for_disconnect()
    assert caught.value.code == "timeout"


LONG_SLOW_TEXT = '[[rule]]\ntext = "' + "word " * 400 + '"\nchunk_size = 5\ndelay_ms = 10'


@pytest.mark.asyncio
async def test_adapter_cancellation_midstream_closes_the_connection(connect: Connect) -> None:
    first_delta = asyncio.Event()
    with StubServer.from_toml(LONG_SLOW_TEXT) as server:
        async with connect(server) as provider:

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
async def test_adapter_closing_the_stream_early_closes_the_connection(connect: Connect) -> None:
    with StubServer.from_toml(LONG_SLOW_TEXT) as server:
        async with connect(server) as provider:
            stream = provider.stream(_options())
            assert isinstance(stream, AsyncIterator)
            async for chunk in stream:
                if isinstance(chunk, TextDelta):
                    break
            await stream.aclose()  # type: ignore[attr-defined]
            assert await asyncio.to_thread(server.wait_for_disconnect, 1, 30.0)
    assert server.requests[0].outcome == "disconnected"


# An error the server reports inside an open stream, after two text deltas; each wire format
# spends a different number of frames before the text and names the error its own way.
_STREAM_ERROR: dict[str, tuple[int, str, str]] = {
    "stub": (3, "melted", "server_error"),
    "stub-anthropic": (5, "Overloaded", "overloaded_error"),
    # Gemini's error frame names its HTTP code (and a google.rpc status).
    "stub-gemini": (2, "melted", "500"),
}


_USAGE_BEFORE_ERROR: dict[str, list[Usage]] = {
    "stub": [],
    "stub-anthropic": [Usage(input_tokens=16, output_tokens=1)],
    # Gemini repeats the usage in every response.
    "stub-gemini": [Usage(input_tokens=16, output_tokens=3)],
}


@pytest.mark.asyncio
async def test_adapter_error_inside_the_stream_raises_a_typed_error(
    adapter_name: str, connect: Connect
) -> None:
    error_after, message, code = _STREAM_ERROR[adapter_name]
    seen: list[Chunk] = []
    rules = (
        '[[rule]]\ntext = "abcdef"\nchunk_size = 2\n'
        f'error_after = {error_after}\nerror_message = "{message}"'
    )
    with StubServer.from_toml(rules) as server:
        async with connect(server) as provider:

            async def consume() -> None:
                async for chunk in provider.stream(_options()):
                    seen.append(chunk)

            with pytest.raises(ServerError) as caught:
                await consume()
        assert len(server.requests) == 1, "a failure after the stream opened is not retried"
    assert caught.value.code == code
    assert message in caught.value.message
    assert [c.text for c in seen if isinstance(c, TextDelta)] == ["ab", "cd"]
    # The usage seen before the error is kept: anthropic's message_start carries the input
    # tokens; the openai stub sends usage only at the end, so there is none to keep.
    usage = [c for c in seen if isinstance(c, Usage)]
    assert usage == _USAGE_BEFORE_ERROR[adapter_name]
    assert seen[-1:] == usage or not usage


def test_llm_error_is_the_base_of_adapter_errors() -> None:
    assert issubclass(StreamInterruptedError, LlmError)
