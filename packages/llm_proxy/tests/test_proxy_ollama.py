"""Ollama's native API through the proxy (issue 42, SPEC 11), with the official ``ollama``
Python client: ``/api/chat`` (NDJSON streams ending in ``done: true``, whole answers,
tool calls without ids), ``/api/generate`` and ``/api/tags``. Recorded through the stub,
replayed keylessly: parsed alike by the client, the bytes served equal to the upstream's;
headerless children of a parent bound by content in any arrival order."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
import ollama
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy

RULES = """
[[rule]]
name = "ask"
match = { api = "ollama", last_user = "weather" }
reasoning = "The user wants the weather."
tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }]
usage = { input_tokens = 31, output_tokens = 12 }

[[rule]]
name = "answer"
match = { api = "ollama", last_tool_result_regex = "sunny" }
text = "It is sunny in Paris today."
chunk_size = 4
usage = { input_tokens = 55, output_tokens = 7 }

[[rule]]
name = "poem"
match = { api = "ollama", last_user = "poem" }
text = "Roses are red."
chunk_size = 3

[[rule]]
name = "bytes"
match = { api = "ollama", last_user = "bytes" }
text = "every byte as sent"
chunk_size = 5

[[rule]]
name = "broken"
match = { api = "ollama", last_user = "broken" }
text = "half an answer that breaks"
chunk_size = 5
error_after = 2
error_message = "the model melted"
"""

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _dump(response: Any) -> Any:
    return response.model_dump(exclude_none=True)


async def _conversation(host: str) -> list[Any]:
    """A streamed tool call, its result, the streamed answer; a whole chat answer; a
    streamed generate; the listing; an in-stream error — everything the client parsed."""
    async with ollama.AsyncClient(host=host) as client:
        return await _converse(client)


async def _converse(client: ollama.AsyncClient) -> list[Any]:
    seen: list[Any] = []
    messages: list[Any] = [{"role": "user", "content": "weather?"}]
    calls: list[Any] = []
    async for part in await client.chat(
        model="llama3", messages=messages, tools=[WEATHER], stream=True
    ):
        seen.append(_dump(part))
        calls += part.message.tool_calls or []
    assert [call.function.name for call in calls] == ["get_weather"]
    messages.append({"role": "assistant", "content": "", "tool_calls": calls})
    messages.append({"role": "tool", "tool_name": "get_weather", "content": "sunny, 21C"})
    async for part in await client.chat(
        model="llama3", messages=messages, tools=[WEATHER], stream=True
    ):
        seen.append(_dump(part))
    whole = await client.chat(model="llama3", messages=[{"role": "user", "content": "a poem"}])
    seen.append(_dump(whole))
    async for generated in await client.generate(
        model="llama3", prompt="a poem, streamed", stream=True
    ):
        seen.append(_dump(generated))
    seen.append(_dump(await client.list()))
    text = ""
    try:
        async for part in await client.chat(
            model="llama3", messages=[{"role": "user", "content": "broken"}], stream=True
        ):
            text += part.message.content or ""
    except ollama.ResponseError as error:
        seen.append((text, error.error))
    return seen


async def _raw(host: str) -> bytes:
    """The bytes of one streamed chat answer, as the client receives them."""
    body = {"model": "llama3", "messages": [{"role": "user", "content": "bytes"}]}
    async with httpx2.AsyncClient() as http:
        answer = await http.post(f"{host}/api/chat", json=body)
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    return answer.content


@pytest.mark.asyncio
async def test_ollama_record_then_replay_parse_alike_and_serve_the_same_bytes(
    wire_round_trip: Any,
) -> None:
    seen = await wire_round_trip(RULES, _conversation, _raw)
    recorded, replayed_bytes = seen.recorded, seen.recorded_bytes
    assert "/api/generate" in [r.path for r in seen.requests]
    assert replayed_bytes.endswith(b"\n")
    assert json.loads(replayed_bytes.splitlines()[-1])["done"] is True
    # What the client parsed: the tool call, the thinking, the answer, the counts.
    thinking = "".join(part["message"].get("thinking", "") for part in recorded[:4])
    assert thinking.startswith("The user wants the weather.")
    parts = [part for part in recorded if isinstance(part, dict)]
    calls = [call for part in parts for call in part.get("message", {}).get("tool_calls", [])]
    assert calls[0]["function"] == {"name": "get_weather", "arguments": {"city": "Paris"}}
    answer = "".join(part["message"]["content"] for part in parts if "message" in part)
    assert "It is sunny in Paris today." in answer
    assert any(part.get("response") == "Ros" for part in parts)
    assert recorded[-1] == ("half an an", "the model melted")
    assert '"api":"ollama-chat"' in seen.written
    assert '"api":"ollama-generate"' in seen.written


@pytest.mark.asyncio
async def test_an_unserved_ollama_path_answers_in_ollamas_error_shape(fixture_dir: Path) -> None:
    with StubServer.from_toml(RULES) as stub:
        async with (
            start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy,
            ollama.AsyncClient(host=proxy.base_url) as client,
        ):
            with pytest.raises(ollama.ResponseError) as refused:
                await client.pull("llama3")
    assert refused.value.status_code == 404
    assert "POST /api/chat" in refused.value.error


MAIN = "You are the main agent. Delegate counting to subagents."
COUNTER = "You are a counting subagent. Read the basket, then answer."
QUESTION = "How many apples and pears are in the baskets?"
PROMPTS = ("Count the apples in basket.txt.", "Count the pears in basket.txt.")

CHILD_RULES = f"""
[[rule]]
match = {{ api = "ollama", system_contains = "main agent", last_user = "{QUESTION}" }}
tool_calls = [
  {{ name = "task", arguments = {{ prompt = "{PROMPTS[0]}" }} }},
  {{ name = "task", arguments = {{ prompt = "{PROMPTS[1]}" }} }},
]

[[rule]]
match = {{ api = "ollama", system_contains = "counting subagent", last_user = "{PROMPTS[0]}" }}
tool_calls = [{{ name = "read_file", arguments = {{ path = "apples" }} }}]

[[rule]]
match = {{ api = "ollama", system_contains = "counting subagent", last_user = "{PROMPTS[1]}" }}
tool_calls = [{{ name = "read_file", arguments = {{ path = "pears" }} }}]

[[rule]]
match = {{ api = "ollama", system_contains = "counting subagent", last_tool_result = "apple" }}
text = "7 apples."

[[rule]]
match = {{ api = "ollama", system_contains = "counting subagent", last_tool_result = "pear" }}
text = "3 pears."

[[rule]]
match = {{ api = "ollama", system_contains = "main agent", last_tool_result_regex = "pears" }}
text = "7 apples and 3 pears."
"""


def _tool(name: str, field: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": {field: {"type": "string"}}},
        },
    }


async def _child(client: ollama.AsyncClient, prompt: str) -> str:
    messages: list[Any] = [
        {"role": "system", "content": COUNTER},
        {"role": "user", "content": prompt},
    ]
    tools = [_tool("read_file", "path")]
    first = await client.chat(model="llama3", messages=messages, tools=tools)
    (call,) = first.message.tool_calls or []
    fruit = call.function.arguments["path"]
    messages.append(first.message)
    messages.append({"role": "tool", "tool_name": "read_file", "content": f"{fruit} " * 2})
    done = await client.chat(model="llama3", messages=messages, tools=tools)
    return done.message.content or ""


async def _agent(host: str, *, children_reversed: bool = False) -> str:
    async with ollama.AsyncClient(host=host) as client:
        return await _delegate(client, children_reversed)


async def _delegate(client: ollama.AsyncClient, children_reversed: bool) -> str:
    messages: list[Any] = [
        {"role": "system", "content": MAIN},
        {"role": "user", "content": QUESTION},
    ]
    tools = [_tool("task", "prompt")]
    plan = await client.chat(model="llama3", messages=messages, tools=tools)
    calls = plan.message.tool_calls or []
    prompts = [call.function.arguments["prompt"] for call in calls]
    assert prompts == list(PROMPTS)
    order = list(reversed(prompts)) if children_reversed else prompts

    async def child(position: int, prompt: str) -> str:
        # The second child's first request goes out once the first one's has.
        await asyncio.sleep(0.2 * position)
        return await _child(client, prompt)

    answers = dict(
        zip(order, await asyncio.gather(*(child(n, p) for n, p in enumerate(order))), strict=True)
    )
    messages.append(plan.message)
    messages += [{"role": "tool", "tool_name": "task", "content": answers[p]} for p in prompts]
    final = await client.chat(model="llama3", messages=messages, tools=tools)
    return final.message.content or ""


@pytest.mark.asyncio
async def test_concurrent_ollama_children_bind_by_content_in_reverse_order(
    children_round_trip: Any,
) -> None:
    replayed = await children_round_trip(CHILD_RULES, _agent, QUESTION, PROMPTS)
    assert sorted((s.calls, s.consumed) for s in replayed.scripts) == [(2, 2)] * 3
