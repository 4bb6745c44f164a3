"""Headerless children on the OpenAI Responses API (SPEC 11 and 13), with the real ``openai``
SDK and no identity header at all: the parent's ``task {prompt}`` calls start two
subagents, each a new conversation whose first input is that call's ``prompt`` (its own
instructions, a tool call of its own, then its answer), run concurrently; the parent answers
from their outputs.

Recorded, each child is the parent's child, numbered by the parent's delegating calls (not
by which child's request came first); replayed with the children's requests in the other
order, each child gets its own answers. Deleting a child's recording is an
``UnrecordedSessionError`` naming that child (its first message) and its parent — not a
drift of the other child, nor of the parent.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import (
    RequestHeader,
    load_session_log,
    recording_names,
    session_file_name,
)

MAIN = "You are the main agent. Delegate counting to subagents."
COUNTER = "You are a counting subagent. Read the basket, then answer."
QUESTION = "How many apples and pears are in the baskets?"
PROMPTS = ("Count the apples in basket.txt.", "Count the pears in basket.txt.")

RULES = f"""
[[rule]]
match = {{ api = "responses", system_contains = "main agent", last_user = "{QUESTION}" }}
tool_calls = [
  {{ id = "call_apples", name = "task", arguments = {{ prompt = "{PROMPTS[0]}" }} }},
  {{ id = "call_pears", name = "task", arguments = {{ prompt = "{PROMPTS[1]}" }} }},
]

[[rule]]
match = {{ api = "responses", system_contains = "counting subagent", last_user = "{PROMPTS[0]}" }}
tool_calls = [{{ id = "call_read_apples", name = "read_file", arguments = {{ path = "apples" }} }}]

[[rule]]
match = {{ api = "responses", system_contains = "counting subagent", last_user = "{PROMPTS[1]}" }}
tool_calls = [{{ id = "call_read_pears", name = "read_file", arguments = {{ path = "pears" }} }}]

[[rule]]
match = {{ api = "responses", system_contains = "counting subagent", last_tool_result = "apple" }}
text = "7 apples."

[[rule]]
match = {{ api = "responses", system_contains = "counting subagent", last_tool_result = "pear" }}
text = "3 pears."

[[rule]]
match = {{ api = "responses", system_contains = "main agent", last_tool_result_regex = "pears" }}
text = "7 apples and 3 pears."
"""


def _tool(name: str, field: str) -> Any:
    return {
        "type": "function",
        "name": name,
        "description": f"The {name} tool.",
        "parameters": {"type": "object", "properties": {field: {"type": "string"}}},
    }


def _calls(response: Any) -> list[Any]:
    return [item for item in response.output if item.type == "function_call"]


async def _child(client: openai.AsyncOpenAI, prompt: str) -> str:
    """A subagent: its own conversation, first input the delegated prompt."""
    items: Any = [{"role": "user", "content": prompt}]
    tools = [_tool("read_file", "path")]
    first = await client.responses.create(
        model="gpt-test", instructions=COUNTER, input=items, tools=tools
    )
    (call,) = _calls(first)
    fruit = json.loads(call.arguments)["path"]
    items += [call.model_dump(exclude_none=True, warnings=False)]
    items += [{"type": "function_call_output", "call_id": call.call_id, "output": f"{fruit} " * 2}]
    done = await client.responses.create(
        model="gpt-test", instructions=COUNTER, input=items, tools=tools
    )
    return done.output_text


async def _agent(base_url: str, *, children_reversed: bool = False) -> str:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-responses-children", max_retries=0)
    try:
        items: Any = [{"role": "user", "content": QUESTION}]
        tools = [_tool("task", "prompt")]
        plan = await client.responses.create(
            model="gpt-test", instructions=MAIN, input=items, tools=tools
        )
        calls = _calls(plan)
        prompts = [json.loads(call.arguments)["prompt"] for call in calls]
        assert prompts == list(PROMPTS)
        order = list(reversed(prompts)) if children_reversed else prompts

        async def child(position: int, prompt: str) -> str:
            # The second child's first request goes out once the first one's has: the
            # arrival order is the one asked for, whatever the scheduling.
            await asyncio.sleep(0.2 * position)
            return await _child(client, prompt)

        answers = dict(
            zip(
                order,
                await asyncio.gather(*(child(n, p) for n, p in enumerate(order))),
                strict=True,
            )
        )
        items += [call.model_dump(exclude_none=True, warnings=False) for call in calls]
        items += [
            {"type": "function_call_output", "call_id": call.call_id, "output": answers[prompt]}
            for call, prompt in zip(calls, prompts, strict=True)
        ]
        final = await client.responses.create(
            model="gpt-test", instructions=MAIN, input=items, tools=tools
        )
        return final.output_text
    finally:
        await client.close()


def _recorded(fixture: Path) -> None:
    async def record() -> None:
        with StubServer.from_toml(RULES) as stub:
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                assert await _agent(proxy.openai_base_url) == "7 apples and 3 pears."

    asyncio.run(record())


def _first_user(log: Any) -> str:
    request = next(e.data for e in log.events if isinstance(e, RequestHeader))
    return str(next(m.preview for m in request.messages if m.role == "user"))


def _tree(fixture: Path) -> dict[str, tuple[str | None, int | None, int]]:
    """Each recording by its first user message: its parent's, its spawn index and how
    many calls it holds."""
    logs = [load_session_log(fixture / name) for name in recording_names(fixture)]
    names = {log.header.id: _first_user(log) for log in logs}
    return {
        names[log.header.id]: (
            names[log.header.parent_session] if log.header.parent_session else None,
            log.header.spawn_index,
            sum(isinstance(e, RequestHeader) for e in log.events),
        )
        for log in logs
    }


@pytest.mark.asyncio
async def test_headerless_responses_children_are_children_in_any_arrival_order(
    tmp_path: Path,
) -> None:
    fixture = tmp_path / "fixture"
    await asyncio.to_thread(_recorded, fixture)
    assert _tree(fixture) == {
        QUESTION: (None, None, 2),
        PROMPTS[0]: (QUESTION, 0, 2),
        PROMPTS[1]: (QUESTION, 1, 2),
    }
    main = load_session_log(fixture / "session.jsonl")
    assert _first_user(main) == QUESTION
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        answer = await _agent(proxy.openai_base_url, children_reversed=True)
    assert answer == "7 apples and 3 pears."
    replayed = read_report(report)
    assert replayed.ok, replayed.errors
    assert sorted((s.calls, s.consumed) for s in replayed.scripts) == [(2, 2)] * 3


@pytest.mark.asyncio
async def test_a_deleted_responses_child_names_it_and_its_parent(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    await asyncio.to_thread(_recorded, fixture)
    logs = [load_session_log(fixture / name) for name in recording_names(fixture)]
    kept = [log.path.read_bytes() for log in logs if _first_user(log) != PROMPTS[1]]
    assert len(kept) == 2
    for name in recording_names(fixture):
        (fixture / name).unlink()
    for position, text in enumerate(kept):
        (fixture / session_file_name(position)).write_bytes(text)
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        with pytest.raises(openai.BadRequestError) as refused:
            await _agent(proxy.openai_base_url, children_reversed=True)
    message = str(refused.value)
    (error,) = read_report(report).errors
    assert error.type == "UnrecordedSessionError"
    for said in (message, error.message):
        assert f"first message {PROMPTS[1]!r}" in said
        assert "parent session.jsonl ({{session:main}})" in said
    assert "RequestDriftError" not in message
