"""Azure OpenAI through the proxy (issue 42, SPEC 11), with the official ``openai.AsyncAzureOpenAI``
client: ``/openai/deployments/<deployment>/chat/completions?api-version=…``, the
``/openai/responses`` and ``/openai/v1/`` forms, the key in the ``api-key`` header. The
bodies are Chat Completions and Responses, so recorded and replayed as those: parsed alike,
the bytes served equal to the upstream's, the key forwarded and never written; headerless
children of a parent bound by content in any arrival order."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import openai
import pytest

KEY = "azure-proxy-test-key-0123456789abcdef"
"""The key the test clients send (``api-key``): forwarded upstream, never written."""
VERSION = "2024-10-21"

RULES = """
[[rule]]
name = "ask"
match = { api = "openai", last_user = "weather" }
text = "Let me check."
tool_calls = [{ id = "call_w", name = "get_weather", arguments = { city = "Paris" } }]
chunk_size = 5

[[rule]]
name = "answer"
match = { api = "openai", last_tool_result_regex = "sunny" }
text = "It is sunny in Paris today."
chunk_size = 4

[[rule]]
name = "bytes"
match = { api = "openai", last_user = "bytes" }
text = "every byte as sent"
chunk_size = 5

[[rule]]
name = "responses"
match = { api = "responses", last_user = "haiku" }
text = "Autumn moonlight."
"""

WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _azure(endpoint: str) -> openai.AsyncAzureOpenAI:
    return openai.AsyncAzureOpenAI(
        azure_endpoint=endpoint, api_key=KEY, api_version=VERSION, max_retries=0
    )


async def _conversation(endpoint: str) -> list[Any]:
    """A streamed tool call and its answer on a deployment, a Responses call, and a chat
    call on the ``/openai/v1/`` form: everything the client parsed."""
    seen: list[Any] = []
    async with _azure(endpoint) as client:
        messages: list[Any] = [{"role": "user", "content": "weather?"}]
        stream = await client.chat.completions.create(
            model="gpt-4o-deployment", messages=messages, tools=[WEATHER], stream=True
        )
        chunks = [chunk.model_dump(exclude_none=True) async for chunk in stream]
        seen += chunks
        arguments = "".join(
            call["function"].get("arguments", "")
            for chunk in chunks
            for choice in chunk["choices"]
            for call in choice["delta"].get("tool_calls", [])
        )
        messages.append(
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "call_w",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": arguments},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": "call_w", "content": "sunny, 21C"})
        answer = await client.chat.completions.create(model="gpt-4o-deployment", messages=messages)
        seen.append(answer.model_dump(exclude_none=True))
        haiku = await client.responses.create(model="gpt-4o-deployment", input="a haiku")
        seen.append(haiku.output_text)
    async with openai.AsyncOpenAI(
        base_url=f"{endpoint}/openai/v1/",
        api_key="unused",
        default_headers={"api-key": KEY},
        max_retries=0,
    ) as v1:
        stream = await v1.chat.completions.create(
            model="gpt-4o-deployment",
            messages=[{"role": "user", "content": "weather, v1?"}],
            stream=True,
        )
        seen += [chunk.model_dump(exclude_none=True) async for chunk in stream]
    return seen


async def _raw(endpoint: str) -> bytes:
    url = f"{endpoint}/openai/deployments/gpt-4o-deployment/chat/completions"
    body = {"messages": [{"role": "user", "content": "bytes"}], "stream": True}
    async with httpx2.AsyncClient() as http:
        answer = await http.post(
            url, params={"api-version": VERSION}, headers={"api-key": KEY}, json=body
        )
    assert answer.status_code == 200, answer.text
    return answer.content


@pytest.mark.asyncio
async def test_azure_record_then_replay_parse_alike_and_serve_the_same_bytes(
    wire_round_trip: Any,
) -> None:
    seen = await wire_round_trip(RULES, _conversation, _raw)
    recorded, paths = seen.recorded, [r.path for r in seen.requests]
    sent_keys = {r.headers.get("api-key") for r in seen.requests}
    assert "/openai/deployments/gpt-4o-deployment/chat/completions" in paths
    assert "/openai/responses" in paths
    assert "/openai/v1/chat/completions" in paths
    assert sent_keys == {"<redacted>"}  # forwarded upstream on every call
    assert seen.recorded_bytes.rstrip().endswith(b"data: [DONE]")
    assert recorded[-1]["choices"][0]["finish_reason"] is not None
    assert "Autumn moonlight." in recorded
    assert KEY not in seen.written
    assert '"api":"chat"' in seen.written
    assert '"api":"responses"' in seen.written


MAIN = "You are the main agent. Delegate counting to subagents."
COUNTER = "You are a counting subagent. Answer with a count."
QUESTION = "How many apples and pears are in the baskets?"
PROMPTS = ("Count the apples in basket.txt.", "Count the pears in basket.txt.")

TASK: Any = {
    "type": "function",
    "function": {
        "name": "task",
        "parameters": {"type": "object", "properties": {"prompt": {"type": "string"}}},
    },
}


async def _agent(endpoint: str, *, children_reversed: bool = False) -> str:
    async with _azure(endpoint) as client:
        messages: list[Any] = [
            {"role": "system", "content": MAIN},
            {"role": "user", "content": QUESTION},
        ]
        plan = await client.chat.completions.create(
            model="gpt-4o-deployment", messages=messages, tools=[TASK]
        )
        calls = plan.choices[0].message.tool_calls or []
        prompts = [json.loads(call.function.arguments)["prompt"] for call in calls]  # type: ignore[union-attr]
        assert prompts == list(PROMPTS)
        order = list(reversed(prompts)) if children_reversed else prompts

        async def child(position: int, prompt: str) -> str:
            await asyncio.sleep(0.2 * position)  # arrivals in the order asked for
            answer = await client.chat.completions.create(
                model="gpt-4o-deployment",
                messages=[
                    {"role": "system", "content": COUNTER},
                    {"role": "user", "content": prompt},
                ],
            )
            return answer.choices[0].message.content or ""

        answers = dict(
            zip(
                order,
                await asyncio.gather(*(child(n, p) for n, p in enumerate(order))),
                strict=True,
            )
        )
        messages.append(plan.choices[0].message.model_dump(exclude_none=True))
        messages += [
            {"role": "tool", "tool_call_id": call.id, "content": answers[prompt]}
            for call, prompt in zip(calls, prompts, strict=True)
        ]
        final = await client.chat.completions.create(
            model="gpt-4o-deployment", messages=messages, tools=[TASK]
        )
        return final.choices[0].message.content or ""


@pytest.mark.asyncio
async def test_concurrent_azure_children_bind_by_content_in_reverse_order(
    children_round_trip: Any, counting_rules: Any
) -> None:
    rules = counting_rules("openai", QUESTION, PROMPTS, ("call_apples", "call_pears"))
    replayed = await children_round_trip(rules, _agent, QUESTION, PROMPTS)
    assert sorted((s.calls, s.consumed) for s in replayed.scripts) == [(1, 1), (1, 1), (2, 2)]
