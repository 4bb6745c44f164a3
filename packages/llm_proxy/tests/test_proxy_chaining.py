"""Conversation chaining (SPEC 11, identity rule 4): without identity headers, a request
continues the lane whose previous request and recorded reply it starts with. Two
concurrent conversations with the same signature — same model, system prompt, tools and
first message — are told apart by it, which the lane signature alone cannot do; and where
the requests cannot tell them apart at all, replay fails loudly instead of guessing."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from aiohttp import web

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import (
    MASKS_VERSION,
    RECORDING_FORMAT,
    VERBATIM_FILE,
    TurnEnd,
    load_session_log,
    recording_names,
)

KEY = "sk-proxy-chaining-0123456789"
SYSTEM = "You are a helper. Wait for your task, then do it."
RULES = """
[[rule]]
match.last_user = "ready?"
text = "Ready. What is the task?"
[[rule]]
match.last_user = "summarize alpha.txt"
text = "alpha.txt is about the first letter."
[[rule]]
match.last_user = "summarize beta.txt"
text = "beta.txt is about the second letter."
"""
TASKS = ("summarize alpha.txt", "summarize beta.txt")
ANSWERS = {
    "summarize alpha.txt": ["Ready. What is the task?", "alpha.txt is about the first letter."],
    "summarize beta.txt": ["Ready. What is the task?", "beta.txt is about the second letter."],
}

Ask = Callable[[list[Any]], Awaitable[str]]


def _asker(api: str, base_url: str) -> tuple[Ask, Any]:
    """One headerless client of ``api``; ``ask(messages)`` returns the reply's text."""
    if api == "openai":
        chat = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key=KEY, max_retries=0)

        async def ask_chat(messages: list[Any]) -> str:
            stream = await chat.chat.completions.create(
                model="helper-model",
                messages=[{"role": "system", "content": SYSTEM}, *messages],
                stream=True,
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

        return ask_chat, chat
    messages_client = anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=0)

    async def ask_messages(messages: list[Any]) -> str:
        async with messages_client.messages.stream(
            model="helper-model",
            max_tokens=64,
            system=SYSTEM,
            messages=messages,
        ) as events:
            return await events.get_final_text()

    return ask_messages, messages_client


def _second_turn(first: str, task: str) -> list[Any]:
    return [
        {"role": "user", "content": "ready?"},
        {"role": "assistant", "content": first},
        {"role": "user", "content": task},
    ]


async def _conversation(ask: Ask, task: str) -> list[str]:
    """Two turns: the same opening for every helper, then its own task."""
    first = await ask([{"role": "user", "content": "ready?"}])
    return [first, await ask(_second_turn(first, task))]


async def _helpers(api: str, base_url: str, order: str) -> dict[str, list[str]]:
    """Both helpers concurrently (``gather``), or both openings first and then beta's
    second turn before alpha's (``swapped``)."""
    ask, client = _asker(api, base_url)
    try:
        if order == "gather":
            results = await asyncio.gather(*(_conversation(ask, task) for task in TASKS))
            return dict(zip(TASKS, results, strict=True))
        openings = await asyncio.gather(
            *(ask([{"role": "user", "content": "ready?"}]) for _ in TASKS)
        )
        beta = await ask(_second_turn(openings[1], TASKS[1]))
        alpha = await ask(_second_turn(openings[0], TASKS[0]))
        return {TASKS[0]: [openings[0], alpha], TASKS[1]: [openings[1], beta]}
    finally:
        await client.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_same_signature_conversations_chain_to_their_own_lanes(
    api: str, fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            assert await _helpers(api, proxy.base_url, "gather") == ANSWERS
    # Two conversations, each its own lane, whatever the arrival order was.
    assert recording_names(fixture_dir) == ["session.jsonl", "session.1.jsonl"]
    for name in recording_names(fixture_dir):
        text = (fixture_dir / name).read_text()
        assert ("summarize alpha.txt" in text) != ("summarize beta.txt" in text), name
    for run in range(6):
        order = "gather" if run % 2 == 0 else "swapped"
        report = tmp_path / f"report-{run}.json"
        async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
            assert await _helpers(api, proxy.base_url, order) == ANSWERS, order
        outcome = read_report(report)
        assert outcome.ok, (order, outcome.errors, outcome.unconsumed())
        assert sorted((s.calls, s.consumed) for s in outcome.scripts) == [(2, 2), (2, 2)]


DIVERGING_RULES = """
[[rule]]
match.last_user = "ready?"
times = 1
text = "Ready, I am the first helper."
[[rule]]
match.last_user = "ready?"
text = "Ready, I am the second helper."
"""


@pytest.mark.asyncio
async def test_identical_openings_with_different_recorded_replies_fail_loudly(
    fixture_dir: Path, tmp_path: Path
) -> None:
    async def two_openings(base_url: str) -> list[str]:
        ask, client = _asker("openai", base_url)
        try:
            return [await ask([{"role": "user", "content": "ready?"}]) for _ in range(2)]
        finally:
            await client.close()

    with StubServer.from_toml(DIVERGING_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await two_openings(proxy.base_url)
    assert recorded == ["Ready, I am the first helper.", "Ready, I am the second helper."]
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        ask, client = _asker("openai", proxy.base_url)
        with pytest.raises(openai.BadRequestError) as refused:
            await ask([{"role": "user", "content": "ready?"}])
        await client.close()
    assert "cannot be told from the request" in str(refused.value)
    (error,) = read_report(report).errors
    assert error.type == "UnrecordedSessionError"


def _chat_frames(text: str) -> list[bytes]:
    """A Chat Completions stream answering ``text``, through ``data: [DONE]``."""
    chunks: list[dict[str, Any]] = [
        {"delta": {"role": "assistant", "content": text}, "finish_reason": None},
        {"delta": {}, "finish_reason": "stop"},
    ]
    frames = [
        b"data: "
        + json.dumps(
            {
                "id": "chatcmpl-held",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "helper-model",
                "choices": [{"index": 0, **chunk}],
            }
        ).encode()
        + b"\n\n"
        for chunk in chunks
    ]
    return [*frames, b"data: [DONE]\n\n"]


@pytest.mark.asyncio
async def test_a_stream_ended_by_done_is_chained_before_its_body_ends(
    fixture_dir: Path, scripted_upstream: Callable[..., Any]
) -> None:
    """The openai SDK is done with a stream at ``data: [DONE]``: it waits at most 0.1 s for
    the body's end, then sends its next request. An upstream whose body ends later (a
    loaded stub thread, a slow network) must not make that next request a conversation of
    its own: the call is recorded as finished at ``[DONE]``, so the next request continues
    its lane. Before, the lane was still busy until the body's end, and the conversation's
    second call was recorded as a lane (session file) of its own."""
    replies = ["Ready. What is the task?", "alpha.txt is about the first letter."]
    requests: list[int] = []
    next_request = asyncio.Event()
    held_until_next: list[bool] = []

    async def answer(request: web.Request) -> web.StreamResponse:
        turn = len(requests)
        requests.append(turn)
        next_request.set()
        next_request.clear()
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"".join(_chat_frames(replies[turn])))
        if turn == 0:
            # The body's end is held until the conversation's next request has arrived
            # (bounded, so a client that waits for the end fails the test, not hangs it).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(next_request.wait(), 60)
            held_until_next.append(len(requests) > 1)
        await response.write_eof()
        return response

    upstream, _ = await scripted_upstream({"/v1/chat/completions": answer})  # stopped at teardown
    async with start_proxy("record", upstream=upstream, fixture=fixture_dir) as proxy:
        ask, client = _asker("openai", proxy.base_url)
        try:
            first = await ask([{"role": "user", "content": "ready?"}])
            second = await ask(_second_turn(first, TASKS[0]))
        finally:
            await client.close()
    assert [first, second] == replies
    assert held_until_next == [True]  # the second request came while the first body was open
    assert recording_names(fixture_dir) == ["session.jsonl"]
    log = load_session_log(fixture_dir / "session.jsonl")
    ends = [event.data.reason for event in log.events if isinstance(event, TurnEnd)]
    assert ends == ["completed", "completed"]


@pytest.mark.asyncio
async def test_a_body_broken_after_done_is_kept_as_a_complete_call(
    fixture_dir: Path, tmp_path: Path, scripted_upstream: Callable[..., Any]
) -> None:
    """The upstream's connection breaks after ``data: [DONE]`` (no end of the chunked
    body): the call finished at ``[DONE]``, so its answer is kept whole (``wire.ndjson``
    not marked cut, which would make replay break the stream off) and replays as sent."""

    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"".join(_chat_frames("Ready. What is the task?")))
        assert request.transport is not None
        request.transport.close()
        return response

    upstream, stop = await scripted_upstream({"/v1/chat/completions": answer})
    async with start_proxy("record", upstream=upstream, fixture=fixture_dir) as proxy:
        ask, client = _asker("openai", proxy.base_url)
        try:
            recorded = await ask([{"role": "user", "content": "ready?"}])
        finally:
            await client.close()
    await stop()  # replay below runs with nothing listening upstream
    assert recorded == "Ready. What is the task?"
    log = load_session_log(fixture_dir / "session.jsonl")
    assert [e.data.reason for e in log.events if isinstance(e, TurnEnd)] == ["completed"]
    stamp, kept = (fixture_dir / VERBATIM_FILE).read_text().splitlines()
    assert json.loads(stamp) == {"format": RECORDING_FORMAT, "masks": MASKS_VERSION}
    assert json.loads(kept).get("cut") in (None, False), kept
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        ask, client = _asker("openai", proxy.base_url)
        try:
            assert await ask([{"role": "user", "content": "ready?"}]) == recorded
        finally:
            await client.close()
    assert read_report(report).ok
