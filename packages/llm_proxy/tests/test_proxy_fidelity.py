"""Replay answers with the wire metadata a real provider sent, not minted stand-ins: the
response id and model, Chat Completions ``created`` and ``system_fingerprint``, raw stop
reasons (Anthropic ``stop_sequence`` with its sequence, OpenAI ``length``, a Responses
``incomplete_details.reason``), Responses item ids and ``created_at``, thinking signatures
(SPEC 11 "usage and finish reasons kept, ids as recorded").

The upstream is hand-written (``scripted_upstream``) because the stub echoes the request's
model and never sends stop sequences; each test records through the proxy, stops the
upstream, replays, and compares everything the official SDK parsed — nothing stripped.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from agentreel.llm import BlockEnd, Finish, ReasoningPart
from agentreel.llm_proxy import start_proxy
from agentreel.session import AssistantChunk, load_session_log

KEY = "sk-proxy-fidelity-0123456789"
STOP = "</severity>"


def sse_frame(data: Any, event: str | None = None) -> bytes:
    """One SSE frame as the providers send it (``event:`` line only where named)."""
    name = f"event: {event}\n" if event else ""
    return f"{name}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


_MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5-20251001",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 412,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 128,
            "output_tokens": 1,
        },
    },
}


async def _record_then_replay(
    scripted_upstream: Any,
    path: str,
    answer: list[bytes] | dict[str, Any],
    ask: Callable[[str], Awaitable[Any]],
    fixture: Path,
) -> tuple[Any, Any]:
    """What ``ask`` parsed through the recording proxy (upstream answering ``path`` with
    ``answer``) and then through the replaying proxy, the upstream stopped."""
    upstream, stop_upstream = await scripted_upstream({path: answer})
    anthropic_sdk = path == "/v1/messages"  # the openai SDK's base URL ends in /v1
    async with start_proxy("record", upstream=upstream, fixture=fixture) as proxy:
        recorded = await ask(proxy.base_url if anthropic_sdk else proxy.openai_base_url)
    await stop_upstream()
    async with start_proxy("replay", fixture=fixture, report=fixture.parent / "r.json") as proxy:
        replayed = await ask(proxy.base_url if anthropic_sdk else proxy.openai_base_url)
    return recorded, replayed


def _delta(index: int, delta: dict[str, Any]) -> bytes:
    body = {"type": "content_block_delta", "index": index, "delta": delta}
    return sse_frame(body, "content_block_delta")


CLASSIFIER = [
    sse_frame(_MESSAGE_START, "message_start"),
    sse_frame({"type": "ping"}, "ping"),
    sse_frame(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        "content_block_start",
    ),
    _delta(0, {"type": "thinking_delta", "thinking": "A read-only "}),
    _delta(0, {"type": "thinking_delta", "thinking": "command."}),
    _delta(0, {"type": "signature_delta", "signature": "ErUBCkYIBRgCIkB0c2lnbmF0dXJl=="}),
    sse_frame({"type": "content_block_stop", "index": 0}, "content_block_stop"),
    sse_frame(
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        "content_block_start",
    ),
    _delta(1, {"type": "text_delta", "text": "<severity>"}),
    _delta(1, {"type": "text_delta", "text": "low"}),
    sse_frame({"type": "content_block_stop", "index": 1}, "content_block_stop"),
    sse_frame(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "stop_sequence", "stop_sequence": STOP},
            "usage": {"output_tokens": 9},
        },
        "message_delta",
    ),
    sse_frame({"type": "message_stop"}, "message_stop"),
]
"""A Claude Code safety-classifier answer: thinking with a signature, a text verdict cut
by the request's stop sequence, a model name the request did not spell."""


async def _classify(base_url: str) -> list[Any]:
    """Stream the classifier call; every SDK event and the final message, fully dumped."""
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=0)
    seen: list[Any] = []
    async with client.messages.stream(
        model="claude-haiku-4-5",
        max_tokens=64,
        stop_sequences=[STOP],
        messages=[{"role": "user", "content": "classify: ls -la"}],
    ) as stream:
        async for event in stream:
            seen.append(event.model_dump())
        seen.append((await stream.get_final_message()).model_dump())
    await client.close()
    return seen


@pytest.mark.asyncio
async def test_anthropic_replay_keeps_stop_sequence_signature_id_and_model(
    scripted_upstream: Any, fixture_dir: Path
) -> None:
    recorded, replayed = await _record_then_replay(
        scripted_upstream, "/v1/messages", CLASSIFIER, _classify, fixture_dir
    )

    final = recorded[-1]
    assert final["id"] == "msg_01XFDUDYJgAACzvnptvVoYEL"
    assert final["model"] == "claude-haiku-4-5-20251001"
    assert (final["stop_reason"], final["stop_sequence"]) == ("stop_sequence", STOP)
    assert final["content"][0]["signature"] == "ErUBCkYIBRgCIkB0c2lnbmF0dXJl=="
    assert replayed == recorded  # every event, every field, as the upstream sent it

    # The recording holds it once, in the chunk schema: the signature on the reasoning
    # block, the response's wire metadata on the call's finish.
    log = load_session_log(fixture_dir / "session.jsonl")
    chunks = [e.data.chunk for e in log.events if isinstance(e, AssistantChunk)]
    reasoning = [
        c.block for c in chunks if isinstance(c, BlockEnd) and isinstance(c.block, ReasoningPart)
    ]
    assert [r.signature for r in reasoning] == ["ErUBCkYIBRgCIkB0c2lnbmF0dXJl=="]
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.response is not None
    assert (finish.reason, finish.response.stop_reason) == ("stop", "stop_sequence")


@pytest.mark.asyncio
async def test_anthropic_non_streaming_replay_keeps_the_recorded_message(
    scripted_upstream: Any, fixture_dir: Path
) -> None:
    message = {
        **_MESSAGE_START["message"],  # type: ignore[dict-item]
        "content": [
            {"type": "thinking", "thinking": "Short.", "signature": "EqQBCgIYAhIM"},
            {"type": "text", "text": "<severity>high"},
        ],
        "stop_reason": "stop_sequence",
        "stop_sequence": STOP,
        "usage": {
            "input_tokens": 40,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 7,
        },
    }

    async def ask(base_url: str) -> Any:
        client = anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=0)
        answer = await client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=64,
            stop_sequences=[STOP],
            messages=[{"role": "user", "content": "classify: rm -rf /"}],
        )
        await client.close()
        return answer.model_dump()

    recorded, replayed = await _record_then_replay(
        scripted_upstream, "/v1/messages", message, ask, fixture_dir
    )
    assert recorded["stop_sequence"] == STOP
    assert recorded["content"][0]["signature"] == "EqQBCgIYAhIM"
    assert replayed == recorded


def _chat_chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion.chunk",
        "created": 1741570283,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_eb9dce56a8",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
        **extra,
    }


_CHAT_USAGE = {
    "prompt_tokens": 19,
    "completion_tokens": 3,
    "total_tokens": 22,
    "prompt_tokens_details": {"cached_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0},
}
CHAT = [
    sse_frame(_chat_chunk({"role": "assistant", "content": ""})),
    sse_frame(_chat_chunk({"content": "Once upon"})),
    sse_frame(_chat_chunk({"content": " a"})),
    sse_frame(_chat_chunk({}, "length")),
    sse_frame({**_chat_chunk({}), "choices": [], "usage": _CHAT_USAGE}),
    b"data: [DONE]\n\n",
]
"""A Chat Completions answer cut by ``max_tokens``, from a dated model snapshot."""


@pytest.mark.asyncio
async def test_chat_replay_keeps_id_model_created_fingerprint_and_length(
    scripted_upstream: Any, fixture_dir: Path
) -> None:
    async def ask(base_url: str) -> list[Any]:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        stream = await client.chat.completions.create(
            model="gpt-4o",
            max_tokens=3,
            messages=[{"role": "user", "content": "tell me a story"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        seen = [chunk.model_dump() async for chunk in stream]
        await client.close()
        return seen

    recorded, replayed = await _record_then_replay(
        scripted_upstream, "/v1/chat/completions", CHAT, ask, fixture_dir
    )
    assert {(c["id"], c["model"], c["created"], c["system_fingerprint"]) for c in recorded} == {
        ("chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "gpt-4o-2024-08-06", 1741570283, "fp_eb9dce56a8")
    }
    assert recorded[3]["choices"][0]["finish_reason"] == "length"
    assert replayed == recorded


@pytest.mark.asyncio
async def test_chat_non_streaming_replay_keeps_the_recorded_completion(
    scripted_upstream: Any, fixture_dir: Path
) -> None:
    completion = {
        **{k: v for k, v in _chat_chunk({}).items() if k not in ("choices", "usage")},
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Once upon a",
                    "refusal": None,
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": "length",
            }
        ],
        "usage": _CHAT_USAGE,
    }

    async def ask(base_url: str) -> Any:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        answer = await client.chat.completions.create(
            model="gpt-4o", max_tokens=3, messages=[{"role": "user", "content": "a story"}]
        )
        await client.close()
        return answer.model_dump()

    recorded, replayed = await _record_then_replay(
        scripted_upstream, "/v1/chat/completions", completion, ask, fixture_dir
    )
    assert (recorded["id"], recorded["model"]) == (completion["id"], "gpt-4o-2024-08-06")
    assert replayed == recorded


_RESP_ID = "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b"
_REASONING_ID = "rs_67ccd2bf17f0819081ff3bb2cf6508e6"
_MESSAGE_ID = "msg_67ccd2bf17f0819081ff3bb2cf6508e6"
_RESP_USAGE = {
    "input_tokens": 36,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 87,
    "output_tokens_details": {"reasoning_tokens": 64},
    "total_tokens": 123,
}


def _response(status: str, output: list[Any], usage: Any = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": _RESP_ID,
        "object": "response",
        "created_at": 1741476542,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "model": "gpt-5-mini-2025-08-07",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
        **extra,
    }


def _message_item(text: dict[str, Any]) -> dict[str, Any]:
    """A finished Responses message output item holding one ``output_text`` part."""
    return {
        "id": _MESSAGE_ID,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [text],
    }


def _responses_stream() -> list[bytes]:
    summary = {"type": "summary_text", "text": "Counting."}
    text = {"type": "output_text", "text": "One, two.", "annotations": []}
    reasoning = {"id": _REASONING_ID, "type": "reasoning", "summary": [summary]}
    message = _message_item(text)
    at_r = {"item_id": _REASONING_ID, "output_index": 0, "summary_index": 0}
    at_m = {"item_id": _MESSAGE_ID, "output_index": 1, "content_index": 0}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": _response("in_progress", [])}),
        ("response.in_progress", {"response": _response("in_progress", [])}),
        (
            "response.output_item.added",
            {"output_index": 0, "item": {**reasoning, "summary": []}},
        ),
        ("response.reasoning_summary_part.added", {**at_r, "part": {**summary, "text": ""}}),
        ("response.reasoning_summary_text.delta", {**at_r, "delta": "Counting."}),
        ("response.reasoning_summary_text.done", {**at_r, "text": "Counting."}),
        ("response.reasoning_summary_part.done", {**at_r, "part": summary}),
        ("response.output_item.done", {"output_index": 0, "item": reasoning}),
        (
            "response.output_item.added",
            {
                "output_index": 1,
                "item": {**message, "status": "in_progress", "content": []},
            },
        ),
        ("response.content_part.added", {**at_m, "part": {**text, "text": ""}}),
        ("response.output_text.delta", {**at_m, "delta": "One,", "logprobs": []}),
        ("response.output_text.delta", {**at_m, "delta": " two.", "logprobs": []}),
        ("response.output_text.done", {**at_m, "text": "One, two.", "logprobs": []}),
        ("response.content_part.done", {**at_m, "part": text}),
        ("response.output_item.done", {"output_index": 1, "item": message}),
        (
            "response.completed",
            {"response": _response("completed", [reasoning, message], _RESP_USAGE)},
        ),
    ]
    return [
        sse_frame({"type": kind, "sequence_number": n, **payload}, kind)
        for n, (kind, payload) in enumerate(events)
    ]


@pytest.mark.asyncio
async def test_responses_replay_keeps_response_and_item_ids_model_and_created_at(
    scripted_upstream: Any, fixture_dir: Path
) -> None:
    async def ask(base_url: str) -> list[Any]:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        stream = await client.responses.create(model="gpt-5-mini", input="count", stream=True)
        seen = [event.model_dump() async for event in stream]
        await client.close()
        return seen

    recorded, replayed = await _record_then_replay(
        scripted_upstream, "/v1/responses", _responses_stream(), ask, fixture_dir
    )
    final = recorded[-1]["response"]
    assert (final["id"], final["model"], final["created_at"]) == (
        _RESP_ID,
        "gpt-5-mini-2025-08-07",
        1741476542,
    )
    assert [item["id"] for item in final["output"]] == [_REASONING_ID, _MESSAGE_ID]
    assert replayed == recorded


@pytest.mark.asyncio
async def test_responses_non_streaming_replay_keeps_an_incomplete_reason(
    scripted_upstream: Any, fixture_dir: Path
) -> None:
    text = {"type": "output_text", "text": "I can't", "annotations": []}
    message = _message_item(text)
    body = _response(
        "incomplete", [message], _RESP_USAGE, incomplete_details={"reason": "content_filter"}
    )

    async def ask(base_url: str) -> Any:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        answer = await client.responses.create(model="gpt-5-mini", input="something unsafe")
        await client.close()
        return answer.model_dump()

    recorded, replayed = await _record_then_replay(
        scripted_upstream, "/v1/responses", body, ask, fixture_dir
    )
    assert recorded["incomplete_details"] == {"reason": "content_filter"}
    assert replayed == recorded


@pytest.mark.asyncio
async def test_a_call_replayed_chunk_by_chunk_keeps_the_recorded_id_and_model(
    scripted_upstream: Any, fixture_dir: Path
) -> None:
    """An overridden call (here ``throw`` after 3 chunks) is sent as the provider yields it,
    before its finish: its frames still carry the recorded id, model and created."""

    async def ask(base_url: str) -> list[Any]:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
        stream = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "a story"}], stream=True
        )
        seen: list[Any] = []
        try:
            async for chunk in stream:
                seen.append(chunk.model_dump())
        except openai.APIConnectionError:
            seen.append("<cut>")
        await client.close()
        return seen

    upstream, stop_upstream = await scripted_upstream({"/v1/chat/completions": CHAT})
    async with start_proxy("record", upstream=upstream, fixture=fixture_dir) as proxy:
        recorded = await ask(proxy.openai_base_url)
    await stop_upstream()
    throw = {"action": "throw", "session": 0, "call": 1, "chunks": 3}
    (fixture_dir / "replay.override.json").write_text(json.dumps({"overrides": [throw]}))
    async with start_proxy("replay", fixture=fixture_dir) as proxy:
        replayed = await ask(proxy.openai_base_url)
    # The block start and two text deltas, as recorded (every field), then the cut.
    assert replayed == [*recorded[:3], "<cut>"]
