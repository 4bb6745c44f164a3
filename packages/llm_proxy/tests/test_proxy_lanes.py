"""Lanes: side calls under one identity (a title request on another model racing the main
request) bind by what they are, in either arrival order; a headerless session whose first
message is a pending delegating tool call's prompt is recorded as that call's child."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import SESSION_HEADER, start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import harvest_session_logs

RULES = """
[[rule]]
match.model = "small-model"
text = "Fixing the parser bug"
[[rule]]
match.system_contains = "coding agent"
match.last_user = "fix the bug"
text = "I will read the parser first."
tool_calls = [{ name = "read_file", arguments = { path = "parser.py" } }]
[[rule]]
match.last_tool_result = "def parse"
text = "Fixed."
"""
TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


async def _title(client: openai.AsyncOpenAI) -> str:
    reply = await client.chat.completions.create(
        model="small-model",
        messages=[
            {"role": "system", "content": "Write a five-word title for the conversation."},
            {"role": "user", "content": "fix the bug"},
        ],
    )
    return reply.choices[0].message.content or ""


async def _main(client: openai.AsyncOpenAI) -> list[str]:
    messages: Any = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "fix the bug"},
    ]
    first = await client.chat.completions.create(model="big-model", messages=messages, tools=TOOLS)
    message = first.choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls or []:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "def parse(): ..."})
    second = await client.chat.completions.create(model="big-model", messages=messages, tools=TOOLS)
    return [message.content or "", second.choices[0].message.content or ""]


async def _session(base_url: str, order: str) -> dict[str, Any]:
    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key="sk-lanes-test",
        max_retries=0,
        default_headers={SESSION_HEADER: "one-session"},
    )
    if order == "concurrent":
        title, main = await asyncio.gather(_title(client), _main(client))
    elif order == "title-first":
        title = await _title(client)
        main = await _main(client)
    else:
        main = await _main(client)
        title = await _title(client)
    await client.close()
    return {"title": title, "main": main}


EXPECTED = {"title": "Fixing the parser bug", "main": ["I will read the parser first.", "Fixed."]}


@pytest.mark.asyncio
@pytest.mark.parametrize("recorded_order", ["title-first", "main-first"])
async def test_side_call_lane_binds_by_what_it_is_in_either_order(
    recorded_order: str, tmp_path: Path
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert await _session(proxy.openai_base_url, recorded_order) == EXPECTED
    assert (fixture / "session.1.jsonl").is_file()  # the title call is a lane of its own
    for order in ("title-first", "main-first", "concurrent"):
        report = tmp_path / f"report-{order}.json"
        async with start_proxy("replay", fixture=fixture, report=report) as proxy:
            assert await _session(proxy.openai_base_url, order) == EXPECTED, order
        consumed = sorted((s.calls, s.consumed) for s in read_report(report).scripts)
        assert consumed == [(1, 1), (2, 2)], order


CHILD_RULES = """
[[rule]]
match.last_user = "summarize the repo"
tool_calls = [{ name = "task", arguments = { prompt = "list the python files" } }]
[[rule]]
match.last_user = "list the python files"
text = "a.py b.py"
[[rule]]
match.last_tool_result = "a.py"
text = "Two python files."
"""


@pytest.mark.asyncio
async def test_headerless_child_is_recorded_under_its_pending_delegating_call(
    tmp_path: Path,
) -> None:
    root = tmp_path / "sessions"
    with StubServer.from_toml(CHILD_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, sessions_root=root) as proxy:
            client = openai.AsyncOpenAI(
                base_url=proxy.openai_base_url, api_key="sk-child-test", max_retries=0
            )
            messages: Any = [{"role": "user", "content": "summarize the repo"}]
            first = await client.chat.completions.create(model="m", messages=messages)
            (call,) = first.choices[0].message.tool_calls or []
            prompt = json.loads(call.function.arguments)["prompt"]  # type: ignore[union-attr]
            child = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": prompt}]
            )
            messages.append(first.choices[0].message.model_dump(exclude_none=True))
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": child.choices[0].message.content,
                }
            )
            final = await client.chat.completions.create(model="m", messages=messages)
            assert final.choices[0].message.content == "Two python files."
            await client.close()
    parent_log, child_log = harvest_session_logs(root)
    assert parent_log.header.parent_session is None
    assert child_log.header.parent_session == parent_log.header.id
    assert child_log.header.spawn_index == 0
    assert child_log.header.origin == "spawn"
