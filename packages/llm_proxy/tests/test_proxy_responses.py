"""The OpenAI Responses API through the proxy: ``responses.stream`` with a tool call, and
the ``responses-lite`` shape (namespaced tools in an ``additional_tools`` input item),
recorded through the stub and replayed to the same SDK-parsed events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import SESSION_HEADER, start_proxy
from agentreel.llm_replay import read_report

RULES = """
[[rule]]
match.last_user = "weather"
text = "Checking."
tool_calls = [{ name = "get_weather", arguments = { city = "Oslo" } }]
chunk_size = 4
usage = { input_tokens = 20, output_tokens = 9 }
[[rule]]
match.last_tool_result_regex = "snow"
text = "It snows in Oslo."
chunk_size = 5
[[rule]]
match.last_user = "lite"
tool_calls = [{ name = "files.read", arguments = { path = "a.txt" } }]
"""

TOOL: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _without_ids(value: Any) -> Any:
    """Response and item ids are minted per response; call ids (recorded) stay."""
    if isinstance(value, dict):
        return {
            k: _without_ids(v) for k, v in value.items() if k not in ("id", "item_id", "created_at")
        }
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def _event(event: Any) -> Any:
    return _without_ids(event.model_dump(exclude_none=True, warnings=False))


async def _conversation(base_url: str) -> list[Any]:
    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key="sk-responses-test",
        max_retries=0,
        default_headers={SESSION_HEADER: "responses-user"},
    )
    seen: list[Any] = []
    items: Any = [{"role": "user", "content": "what is the weather?"}]
    async with client.responses.stream(model="gpt-test", input=items, tools=[TOOL]) as stream:
        async for event in stream:
            seen.append(_event(event))
        first = await stream.get_final_response()
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Oslo"})]
    items += [c.model_dump(exclude_none=True, warnings=False) for c in calls]
    items += [
        {"type": "function_call_output", "call_id": c.call_id, "output": "snow"} for c in calls
    ]
    final = await client.responses.create(model="gpt-test", input=items, tools=[TOOL])
    seen.append(final.output_text)
    lite: Any = [
        {"id": "item_0123456789abcdef", "role": "user", "content": "lite mode"},
        {
            "type": "additional_tools",
            "tools": [{"type": "namespace", "name": "files", "tools": [{**TOOL, "name": "read"}]}],
        },
    ]
    # Same identity, another conversation: a lane of its own, bound by what it is.
    namespaced = await client.responses.create(model="gpt-test", input=lite, stream=False)
    seen.append(
        [
            item.model_dump(exclude_none=True, exclude={"id"}, warnings=False)
            for item in namespaced.output
        ]
    )
    await client.close()
    return seen


@pytest.mark.asyncio
async def test_responses_stream_with_tool_calls_records_and_replays(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            recorded = await _conversation(proxy.openai_base_url)
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        replayed = await _conversation(proxy.openai_base_url)
    assert replayed == recorded
    deltas = [e["delta"] for e in recorded[:-2] if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == "Checking."
    assert recorded[-2] == "It snows in Oslo."
    (call,) = recorded[-1]
    assert (call["name"], call["namespace"]) == ("read", "files")
    completed = [
        e for e in recorded if isinstance(e, dict) and e.get("type") == "response.completed"
    ]
    assert completed[0]["response"]["usage"]["input_tokens"] == 20
    consumed = [(s.calls, s.consumed) for s in read_report(report).scripts]
    assert sorted(consumed) == [(1, 1), (2, 2)]
