"""Headerless binding names the right session (SPEC 13), for a LangGraph-style fan-out
through the proxy with the plain ``openai`` SDK and no identity headers: a supervisor with
no tools whose reply holds its workers' tasks, the workers concurrently (each a
conversation of its own whose first message is its task, as LangGraph's ``Send`` payloads
are), then the supervisor again with their findings.

Deleting one worker's recording, or changing one worker's task, must fail as an
``UnrecordedSessionError`` naming that live worker by its first message — not as a drift
of another session (the supervisor's next call) — with a hint for a proxied caller
(identity headers), never ``GenerateOptions.session_id``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import recording_names

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


async def _fan_out(base_url: str, tasks: tuple[str, ...] = TASKS) -> str:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-fanout-0123456789")

    async def ask(system: str, messages: list[dict[str, str]]) -> str:
        reply = await client.chat.completions.create(
            model="fruit-model",
            messages=[{"role": "system", "content": system}, *messages],  # type: ignore[list-item]
        )
        return reply.choices[0].message.content or ""

    try:
        question = [{"role": "user", "content": "Compare the fruit."}]
        plan = await ask(LEAD, question)
        assert plan.splitlines() == list(TASKS)
        findings = await asyncio.gather(
            *(ask(RESEARCHER, [{"role": "user", "content": task}]) for task in tasks)
        )
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


def _recorded(fixture: Path) -> None:
    async def record() -> None:
        with StubServer.from_toml(RULES) as stub:
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                assert await _fan_out(proxy.base_url) == "Apples, pears and plums compared."

    asyncio.run(record())
    assert len(recording_names(fixture)) == 4


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


async def _replay_failure(fixture: Path, report: Path, tasks: tuple[str, ...]) -> str:
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        with pytest.raises(openai.BadRequestError) as refused:
            await _fan_out(proxy.base_url, tasks)
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
