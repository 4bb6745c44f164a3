"""Replay answers with the wire metadata a real provider sent, not minted stand-ins: the
response id and model, Chat Completions ``created`` and ``system_fingerprint``, raw stop
reasons (Anthropic ``stop_sequence`` with its sequence, OpenAI ``length``), thinking
signatures (SPEC 11 "usage and finish reasons kept, ids as recorded").

The upstream is hand-written (``scripted_upstream``) because the stub echoes the request's
model and never sends stop sequences; each test records through the proxy, stops the
upstream, replays, and compares everything the official SDK parsed — nothing stripped.
"""

from __future__ import annotations

import json
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
    scripted_upstream: Any, fixture_dir: Path, tmp_path: Path
) -> None:
    upstream, stop_upstream = await scripted_upstream({"/v1/messages": CLASSIFIER})
    async with start_proxy("record", upstream=upstream, fixture=fixture_dir) as proxy:
        recorded = await _classify(proxy.base_url)
    await stop_upstream()
    async with start_proxy("replay", fixture=fixture_dir, report=tmp_path / "r.json") as proxy:
        replayed = await _classify(proxy.base_url)

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
    scripted_upstream: Any, fixture_dir: Path, tmp_path: Path
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

    upstream, stop_upstream = await scripted_upstream({"/v1/messages": message})
    async with start_proxy("record", upstream=upstream, fixture=fixture_dir) as proxy:
        recorded = await ask(proxy.base_url)
    await stop_upstream()
    async with start_proxy("replay", fixture=fixture_dir, report=tmp_path / "r.json") as proxy:
        replayed = await ask(proxy.base_url)
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
    scripted_upstream: Any, fixture_dir: Path, tmp_path: Path
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

    upstream, stop_upstream = await scripted_upstream({"/v1/chat/completions": CHAT})
    async with start_proxy("record", upstream=upstream, fixture=fixture_dir) as proxy:
        recorded = await ask(proxy.openai_base_url)
    await stop_upstream()
    async with start_proxy("replay", fixture=fixture_dir, report=tmp_path / "r.json") as proxy:
        replayed = await ask(proxy.openai_base_url)
    assert {(c["id"], c["model"], c["created"], c["system_fingerprint"]) for c in recorded} == {
        ("chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "gpt-4o-2024-08-06", 1741570283, "fp_eb9dce56a8")
    }
    assert recorded[3]["choices"][0]["finish_reason"] == "length"
    assert replayed == recorded


@pytest.mark.asyncio
async def test_chat_non_streaming_replay_keeps_the_recorded_completion(
    scripted_upstream: Any, fixture_dir: Path, tmp_path: Path
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

    upstream, stop_upstream = await scripted_upstream({"/v1/chat/completions": completion})
    async with start_proxy("record", upstream=upstream, fixture=fixture_dir) as proxy:
        recorded = await ask(proxy.openai_base_url)
    await stop_upstream()
    async with start_proxy("replay", fixture=fixture_dir, report=tmp_path / "r.json") as proxy:
        replayed = await ask(proxy.openai_base_url)
    assert (recorded["id"], recorded["model"]) == (completion["id"], "gpt-4o-2024-08-06")
    assert replayed == recorded
