"""Headerless binding names the right session (SPEC 13), for a LangGraph-style fan-out
through the proxy with the plain ``openai`` SDK and no identity headers: a supervisor with
no tools whose reply holds its workers' tasks, the workers as concurrent tasks started one
after another in the reverse of the order named (each a conversation of its own whose
first message is its task, as LangGraph's ``Send`` payloads are), then the supervisor again
with their findings.

The recording holds the tree as it happened (SPEC 13: the session whose reply a caller's
first message comes from is its parent): the supervisor is the main session and each
worker its child, numbered 0, 1, 2 in the order the supervisor's reply named their tasks —
whatever order they arrived in, and even when each worker makes more calls than the
supervisor (which once made a worker the main session and the supervisor its side lane).
Deleting one worker's recording, or changing one worker's task, must fail as an
``UnrecordedSessionError`` naming that live worker by its first message (and, for the
deleted one, the supervisor as its parent) — not as a drift of another session (the
supervisor's next call) — with a hint for a proxied caller (identity headers), never
``GenerateOptions.session_id``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import RequestHeaderData, recording_names

# conftest.py's recording_tree fixture (test modules cannot import conftest under importlib mode).
RecordingTree = Callable[
    [Path, Callable[[RequestHeaderData], object]], list[tuple[object, object, int | None]]
]

LEAD = "You are the lead. Split the question into research tasks, one a line."
RESEARCHER = "You are a researcher. Answer your task in one sentence."
TASKS = ("Research apples.", "Research pears.", "Research plums.")
RULES = """
[[rule]]
match = { system_contains = "You are the lead", last_user = "Compare the fruit." }
text = "Research apples.\\nResearch pears.\\nResearch plums."
[[rule]]
match = { system_contains = "You are the lead" }
text = "Apples, pears and plums compared."
[[rule]]
match = { last_user_regex = "Research (?P<fruit>[a-z]+)" }
text = "Findings on {{fruit}}: they grow on trees."
"""
# Workers that think twice: each makes two calls, the supervisor two as well — the worker
# with its tools now ranks before the supervisor among one caller's lanes.
DELIBERATE = """
[[rule]]
match = { last_tool_result_regex = "^Check (?P<fruit>[a-z]+)" }
text = "Findings on {{fruit}}: they grow on trees."
[[rule]]
match = { last_user_regex = "Research (?P<fruit>[a-z]+)", has_tools = true }
tool_calls = [{ name = "check", arguments = { fruit = "{{fruit}}" } }]
"""
CHECK_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "check",
        "description": "Check a fruit.",
        "parameters": {"type": "object", "properties": {"fruit": {"type": "string"}}},
    },
}


async def _fan_out(
    base_url: str, tasks: tuple[str, ...] = TASKS, *, deliberate: bool = False
) -> str:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-fanout-0123456789")

    async def ask(system: str, messages: list[Any]) -> str:
        reply = await client.chat.completions.create(
            model="fruit-model",
            messages=[{"role": "system", "content": system}, *messages],
        )
        return reply.choices[0].message.content or ""

    # The workers start in the reverse of the order the supervisor named them, each once
    # the worker started before it is done (or failed): every run, not only when the
    # machine keeps up. Sleeps 50 ms apart made that order likely only; under load the
    # worker a test deletes came after both others, whose recorded requests were then all
    # served, so the nearest recorded request its UnrecordedSessionError showed — of the
    # requests left — was the supervisor's next one.
    done = [asyncio.Event() for _ in tasks]

    async def work(n: int, task: str) -> str:
        if n + 1 < len(tasks):
            await done[n + 1].wait()
        try:
            return await think(task)
        finally:
            done[n].set()

    async def think(task: str) -> str:
        if not deliberate:
            return await ask(RESEARCHER, [{"role": "user", "content": task}])
        messages: list[Any] = [
            {"role": "system", "content": RESEARCHER},
            {"role": "user", "content": task},
        ]
        first = await client.chat.completions.create(
            model="fruit-model",
            messages=messages,
            tools=[CHECK_TOOL],
        )
        (call,) = first.choices[0].message.tool_calls or []
        fruit = json.loads(call.function.arguments)["fruit"]  # type: ignore[union-attr]
        messages += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": f"Check {fruit}"},
        ]
        second = await client.chat.completions.create(
            model="fruit-model",
            messages=messages,
            tools=[CHECK_TOOL],
        )
        return second.choices[0].message.content or ""

    try:
        question = [{"role": "user", "content": "Compare the fruit."}]
        plan = await ask(LEAD, question)
        assert plan.splitlines() == list(TASKS)
        # Every worker ends before the client closes (a failed one's error raised then):
        # none is left mid-request on a closed client.
        outcomes = await asyncio.gather(
            *(work(n, task) for n, task in enumerate(tasks)), return_exceptions=True
        )
        findings = [outcome for outcome in outcomes if isinstance(outcome, str)]
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return await ask(
            LEAD,
            [
                *question,
                {"role": "assistant", "content": plan},
                {"role": "user", "content": "Findings:\n" + "\n".join(findings)},
            ],
        )
    finally:
        await client.close()


def _recorded(fixture: Path, *, deliberate: bool = False) -> None:
    rules = DELIBERATE + RULES if deliberate else RULES

    async def record() -> None:
        with StubServer.from_toml(rules) as stub:
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                answer = await _fan_out(proxy.base_url, deliberate=deliberate)
                assert answer == "Apples, pears and plums compared."

    asyncio.run(record())
    assert len(recording_names(fixture)) == 4


def _first_message(request: RequestHeaderData) -> str:
    return next(m.preview for m in request.messages if m.role == "user")


def _remove_worker(fixture: Path, task: str) -> None:
    """Delete the recording of the worker given ``task``; later files move down a number,
    as a fixture's recordings stay contiguous."""
    names = recording_names(fixture)
    (gone,) = [
        name
        for name in names
        if task in (text := (fixture / name).read_text()) and RESEARCHER in text
    ]
    (fixture / gone).unlink()
    following = names[names.index(gone) + 1 :]
    for previous, name in zip([gone, *following], following, strict=False):
        (fixture / name).rename(fixture / previous)


async def _replay_failure(
    fixture: Path, report: Path, tasks: tuple[str, ...], *, deliberate: bool = False
) -> str:
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        with pytest.raises(openai.BadRequestError) as refused:
            await _fan_out(proxy.base_url, tasks, deliberate=deliberate)
    return str(refused.value)


def _the_worker_is_named(message: str, report: Path, task: str) -> None:
    assert "UnrecordedSessionError" in json.dumps(
        [error.type for error in read_report(report).errors]
    )
    assert f"first message {task!r}" in message
    assert "RequestDriftError" not in message
    assert "You are the lead" not in message  # not a drift against the supervisor
    assert "x-agentreel-session-id" in message
    assert "GenerateOptions" not in message


@pytest.mark.asyncio
async def test_a_deleted_worker_recording_names_that_worker(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    await asyncio.to_thread(_recorded, fixture)
    _remove_worker(fixture, "Research pears.")
    report = tmp_path / "report.json"
    message = await _replay_failure(fixture, report, TASKS)
    _the_worker_is_named(message, report, "Research pears.")
    # Named by its parent's file and the delegating payload, not compared with another
    # session's next request (the lead's call 2, which says nothing about the worker).
    assert "parent session.jsonl ({{session:main}})" in message
    assert "session.jsonl ({{session:main}}) handed on (text 'Research pears.')" in message
    assert "nearest recorded" not in message


@pytest.mark.asyncio
async def test_a_changed_worker_task_names_that_worker(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    await asyncio.to_thread(_recorded, fixture)
    report = tmp_path / "report.json"
    changed = ("Research apples.", "Research quinces.", "Research plums.")
    message = await _replay_failure(fixture, report, changed)
    _the_worker_is_named(message, report, "Research quinces.")


@pytest.mark.asyncio
async def test_the_fan_out_replays_as_recorded(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    await asyncio.to_thread(_recorded, fixture)
    for run in range(3):
        report = tmp_path / f"report-{run}.json"
        async with start_proxy("replay", fixture=fixture, report=report) as proxy:
            assert await _fan_out(proxy.base_url) == "Apples, pears and plums compared."
        assert read_report(report).ok, read_report(report).errors


@pytest.mark.asyncio
@pytest.mark.parametrize("deliberate", [False, True], ids=["one-call", "two-calls"])
async def test_the_supervisor_is_recorded_as_its_workers_parent(
    tmp_path: Path, deliberate: bool, recording_tree: RecordingTree
) -> None:
    """The supervisor, whose reply holds the workers' tasks, is the main session; each
    worker is its child, spawn index = where its task stood in that reply (the workers
    start in the reverse order) — also when the workers make as many calls as the
    supervisor and have tools, which made one of them the main session before."""
    fixture = tmp_path / "fixture"
    await asyncio.to_thread(_recorded, fixture, deliberate=deliberate)
    question = "Compare the fruit."
    tree = recording_tree(fixture, _first_message)
    assert sorted(tree, key=str) == sorted(
        [(question, None, None), *((task, question, n) for n, task in enumerate(TASKS))], key=str
    )
    assert tree[0] == (question, None, None)  # session.jsonl is the supervisor's


@pytest.mark.asyncio
async def test_a_deleted_worker_names_its_supervisor_as_parent(
    tmp_path: Path, recording_tree: RecordingTree
) -> None:
    """Workers that outrank the supervisor by calls and tools: deleting one's recording
    names that worker and the supervisor's recorded session as its parent."""
    fixture = tmp_path / "fixture"
    await asyncio.to_thread(_recorded, fixture, deliberate=True)
    supervisor = recording_tree(fixture, _first_message)[0][0]
    assert supervisor == "Compare the fruit."  # the supervisor is the main session
    _remove_worker(fixture, "Research pears.")
    report = tmp_path / "report.json"
    message = await _replay_failure(fixture, report, TASKS, deliberate=True)
    _the_worker_is_named(message, report, "Research pears.")
    assert "parent session.jsonl ({{session:main}})" in message
    for run in range(2):
        replay = tmp_path / f"intact-{run}"
        await asyncio.to_thread(_recorded, replay, deliberate=True)
        async with start_proxy("replay", fixture=replay, report=report) as proxy:
            answer = await _fan_out(proxy.base_url, deliberate=True)
        assert answer == "Apples, pears and plums compared."
        assert read_report(report).ok, read_report(report).errors
