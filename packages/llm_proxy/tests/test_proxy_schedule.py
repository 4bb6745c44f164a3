"""The recorded schedule through the proxy (SPEC 13), with the real ``openai`` SDK.

A parent conversation starts something asynchronous — a child session (its own identity
headers) or a title call on its own lane (same identity, another system prompt) — keeps
talking to the model, and puts the asynchronous answer into whichever request comes next.
Recorded once through the stub, where the asynchronous call is slow, the answer lands in
a late request; replayed freely it comes back at once and lands early (drift); replayed
with ``schedule="recorded"`` it lands where it did, every time.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any, Literal

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import PARENT_HEADER, SESSION_HEADER, SPAWN_INDEX_HEADER, start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import VERBATIM_FILE

Kind = Literal["child", "title"]
KEY = "sk-schedule-test-key"
PARENT_SYSTEM = "You are the parent conversation."
CHILD_SYSTEM = "You are a child researching for the parent."
TITLE_SYSTEM = "Write a short title for the conversation."
STEPS = 7
PAUSE = 0.03
"""The parent's own work between its calls: long enough for a free replay's child, answered
at once, to land in the parent's second request."""

# Per frame: a parent call streams 4 frames (~80 ms, ~110 ms with its pause), the
# asynchronous one ~3.5x as long, so its answer reaches the parent in a late request.
RULES = """
[[rule]]
name = "parent"
match.system_contains = "parent conversation"
text = "noted"
chunk_size = 100
delay_ms = 20

[[rule]]
name = "child"
match.system_contains = "child researching"
text = "the child found 42"
chunk_size = 100
delay_ms = 70

[[rule]]
name = "title"
match.system_contains = "short title"
text = "A title"
chunk_size = 100
delay_ms = 70
"""


async def _ask(client: openai.AsyncOpenAI, system: str, messages: list[Any]) -> str:
    wire: Any = [{"role": "system", "content": system}, *messages]
    stream = await client.chat.completions.create(model="gpt-test", messages=wire, stream=True)
    text = ""
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
    return text


async def program(base_url: str, kind: Kind) -> int:
    """The parent's conversation; returns the step whose request held the async answer."""
    parent_id = str(uuid.uuid4())

    def client(headers: dict[str, str]) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=base_url + "/v1", api_key=KEY, max_retries=0, default_headers=headers
        )

    parent = client({SESSION_HEADER: parent_id})
    answers: list[str] = []

    # The same caller for a title: a lane of its own, told apart by what it is.
    side = parent
    if kind == "child":
        side = client(
            {SESSION_HEADER: str(uuid.uuid4()), PARENT_HEADER: parent_id, SPAWN_INDEX_HEADER: "0"}
        )

    async def asynchronous() -> None:
        if kind == "child":
            answers.append(await _ask(side, CHILD_SYSTEM, [{"role": "user", "content": "dig"}]))
        else:
            title = [{"role": "user", "content": "Title this: step 1"}]
            answers.append(await _ask(side, TITLE_SYSTEM, title))

    try:
        return await _converse(parent, asynchronous, answers)
    finally:
        await parent.close()
        await side.close()


async def _converse(parent: openai.AsyncOpenAI, asynchronous: Any, answers: list[str]) -> int:
    messages: list[Any] = [{"role": "user", "content": "step 1"}]
    landed = 0
    task: asyncio.Task[None] | None = None
    for step in range(1, STEPS + 1):
        if answers and not landed:
            # Whichever request comes next gets it.
            messages.insert(-1, {"role": "user", "content": f"async answer: {answers[0]}"})
            landed = step
        text = await _ask(parent, PARENT_SYSTEM, messages)
        if step == 1:
            task = asyncio.create_task(asynchronous())
        messages += [
            {"role": "assistant", "content": text},
            {"role": "user", "content": f"step {step + 1}"},
        ]
        await asyncio.sleep(PAUSE)
    assert task is not None
    await task
    return landed


def _times(path: Path, kind: str) -> list[float]:
    lines = path.read_text().splitlines()[1:]
    events = [json.loads(line) for line in lines]
    if kind == "finish":
        return [
            e["time"]
            for e in events
            if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == "finish"
        ]
    return [e["time"] for e in events if e["type"] == "request/header"]


async def _record(tmp_path: Path, kind: Kind) -> tuple[Path, int]:
    """A recording whose parent learnt of the asynchronous answer at the first request it
    started after the proxy saw that answer end. The proxy cannot see when an agent takes
    in what it received: on a loaded machine the parent may start its next request a few
    milliseconds after the end, before the answer reached it — such a recording is
    consistent with no schedule, so it is made again (at most 5 times)."""
    for attempt in range(5):
        fixture = tmp_path / f"fixture-{attempt}"
        with StubServer.from_toml(RULES) as stub:
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                landed = await program(proxy.base_url, kind)
        (ended,) = _times(fixture / "session.1.jsonl", "finish")
        starts = _times(fixture / "session.jsonl", "request/header")
        if landed == 1 + sum(start < ended for start in starts):
            # Recorded late: a free replay, which answers the asynchronous call at once,
            # cannot land it there.
            assert 3 <= landed <= STEPS, landed
            return fixture, landed
    pytest.fail("5 recordings in a row where the parent learnt of the answer late")


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["child", "title"])
@pytest.mark.parametrize("answers", ["as-sent", "re-encoded"])
async def test_async_answer_lands_where_recorded_20_times(
    kind: Kind, answers: str, tmp_path: Path
) -> None:
    """Whether the proxy serves the upstream's frames as kept or re-encodes them from the
    chunks (a recording without ``wire.ndjson``), the hold before the final frames is the
    same, so the answer lands where it did."""
    fixture, landed = await _record(tmp_path, kind)
    if answers == "re-encoded":
        (fixture / VERBATIM_FILE).unlink()
    for run in range(20):
        report = tmp_path / f"report-{run}.json"
        async with start_proxy(
            "replay", fixture=fixture, report=report, schedule="recorded"
        ) as proxy:
            assert await program(proxy.base_url, kind) == landed, f"run {run}"
        consumption = read_report(report)
        assert consumption.errors == [], run
        assert consumption.ok, run


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["child", "title"])
async def test_free_schedule_drifts(kind: Kind, tmp_path: Path) -> None:
    fixture, _ = await _record(tmp_path, kind)
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        with pytest.raises(openai.BadRequestError, match="async answer"):
            await program(proxy.base_url, kind)
