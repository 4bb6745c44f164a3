"""Vertex AI through the proxy (issue 42, SPEC 11), with the official clients: Claude with
``anthropic.AsyncAnthropicVertex`` (``…/publishers/anthropic/models/<m>:streamRawPredict`` and
``:rawPredict``, Messages bodies, the model in the path) and Gemini with ``google-genai``
``vertexai=True`` (``…/publishers/google/models/<m>:generateContent`` and
``:streamGenerateContent``). Recorded through the stub, replayed keylessly: parsed alike,
the bytes served equal; the access token forwarded and never written."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import google.oauth2.credentials
import httpx2
import pytest
from google import genai
from google.genai import types

TOKEN = "ya29.vertex-proxy-test-token-0123456789"
CLAUDE = "claude-sonnet-4@20250514"
PREFIX = "/v1/projects/proj/locations/us-east5/publishers"

RULES = """
[[rule]]
name = "claude"
match = { api = "anthropic", last_user = "weather" }
text = "Let me check."
tool_calls = [{ id = "toolu_w", name = "get_weather", arguments = { city = "Paris" } }]
chunk_size = 5

[[rule]]
name = "claude-answer"
match = { api = "anthropic", last_tool_result_regex = "sunny" }
text = "It is sunny in Paris today."
chunk_size = 4

[[rule]]
name = "gemini"
match = { api = "gemini", last_user = "haiku" }
text = "Autumn moonlight, a worm digs silently."
chunk_size = 6
"""

WEATHER: Any = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


async def _conversation(base: str) -> list[Any]:
    """Claude streamed with a tool call, its answer whole; Gemini whole and streamed."""
    seen: list[Any] = []
    async with anthropic.AsyncAnthropicVertex(
        region="us-east5",
        project_id="proj",
        access_token=TOKEN,
        base_url=f"{base}/v1",
        max_retries=0,
    ) as claude:
        messages: list[Any] = [{"role": "user", "content": "weather?"}]
        stream = await claude.messages.create(
            model=CLAUDE, max_tokens=100, messages=messages, tools=[WEATHER], stream=True
        )
        events = [event.model_dump(exclude_none=True) async for event in stream]
        seen += events
        use = next(
            event["content_block"]
            for event in events
            if event["type"] == "content_block_start"
            and event["content_block"]["type"] == "tool_use"
        )
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me check."},
                    {**use, "input": {"city": "Paris"}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "sunny"}],
            }
        )
        answer = await claude.messages.create(
            model=CLAUDE, max_tokens=100, messages=messages, tools=[WEATHER]
        )
        seen.append(answer.model_dump(exclude_none=True))
    credentials = google.oauth2.credentials.Credentials(token=TOKEN)  # type: ignore[no-untyped-call]
    async with httpx2.AsyncClient() as http:
        gemini = genai.Client(
            vertexai=True,
            project="proj",
            location="us-central1",
            credentials=credentials,
            http_options=types.HttpOptions(base_url=f"{base}/", httpx_async_client=http),
        )
        models = gemini.aio.models
        whole = await models.generate_content(model="gemini-2.5-flash", contents="a haiku")
        seen.append(whole.text)
        streamed = await models.generate_content_stream(
            model="gemini-2.5-flash", contents="a streamed haiku"
        )
        seen.append([part.text async for part in streamed])
    return seen


async def _raw(base: str) -> bytes:
    body = {
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "weather?"}],
    }
    async with httpx2.AsyncClient() as http:
        answer = await http.post(
            f"{base}{PREFIX}/anthropic/models/{CLAUDE}:streamRawPredict",
            headers={"authorization": f"Bearer {TOKEN}"},
            json=body,
        )
    assert answer.status_code == 200, answer.text
    return answer.content


@pytest.mark.asyncio
async def test_vertex_claude_and_gemini_record_then_replay_parse_alike(
    wire_round_trip: Any,
) -> None:
    seen = await wire_round_trip(RULES, _conversation, _raw)
    recorded, paths = seen.recorded, [r.path for r in seen.requests]
    assert f"{PREFIX}/anthropic/models/{CLAUDE}:streamRawPredict" in paths
    assert f"{PREFIX}/anthropic/models/{CLAUDE}:rawPredict" in paths
    assert any(":streamGenerateContent" in path and "/publishers/google/" in path for path in paths)
    assert recorded[-2] == "Autumn moonlight, a worm digs silently."
    assert "".join(recorded[-1]) == "Autumn moonlight, a worm digs silently."
    assert TOKEN not in seen.written
    # The model Vertex names in the path is the recorded request's model.
    assert f'"model":"{CLAUDE}"' in seen.written
    assert '"api":"messages"' in seen.written
    assert '"api":"gemini"' in seen.written


QUESTION = "How many apples and pears are in the basket?"
PROMPTS = ("Count the apples.", "Count the pears.")
MAIN = "You are the main agent. Delegate counting."
COUNTER = "You are a counting subagent."


TASK: Any = {
    "name": "task",
    "description": "Delegate to a subagent",
    "input_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
}


async def _children(order: list[str], ask: Any) -> dict[str, str]:
    """The children asked concurrently, arriving in ``order``."""

    async def child(position: int, prompt: str) -> str:
        await asyncio.sleep(0.2 * position)  # arrivals in the order asked for
        return str(await ask(prompt))

    answers = await asyncio.gather(*(child(n, p) for n, p in enumerate(order)))
    return dict(zip(order, answers, strict=True))


async def _claude_agent(base: str, *, children_reversed: bool = False) -> str:
    """Claude on Vertex (as Claude Code with CLAUDE_CODE_USE_VERTEX): a streamed parent
    that delegates to two concurrent headerless children, then sums their answers."""
    async with anthropic.AsyncAnthropicVertex(
        region="us-east5", project_id="proj", access_token=TOKEN, base_url=f"{base}/v1"
    ) as claude:
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        async with claude.messages.stream(
            model=CLAUDE, max_tokens=100, system=MAIN, messages=messages, tools=[TASK]
        ) as stream:
            plan = await stream.get_final_message()
        calls = [block for block in plan.content if block.type == "tool_use"]
        prompts = [str(call.input["prompt"]) for call in calls]
        assert prompts == list(PROMPTS)

        async def ask(prompt: str) -> str:
            answer = await claude.messages.create(
                model=CLAUDE,
                max_tokens=100,
                system=COUNTER,
                messages=[{"role": "user", "content": prompt}],
            )
            return "".join(b.text for b in answer.content if b.type == "text")

        answers = await _children(list(reversed(prompts)) if children_reversed else prompts, ask)
        messages.append({"role": "assistant", "content": plan.model_dump()["content"]})
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call.id, "content": answers[prompt]}
                    for call, prompt in zip(calls, prompts, strict=True)
                ],
            }
        )
        final = await claude.messages.create(
            model=CLAUDE, max_tokens=100, system=MAIN, messages=messages, tools=[TASK]
        )
        return "".join(b.text for b in final.content if b.type == "text")


async def _gemini_agent(base: str, *, children_reversed: bool = False) -> str:
    """Gemini on Vertex (google-genai ``vertexai=True``, as google-adk runs): the same
    delegation, the parent streamed."""
    credentials = google.oauth2.credentials.Credentials(token=TOKEN)  # type: ignore[no-untyped-call]
    task = types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="task",
                description="Delegate to a subagent",
                parameters_json_schema=TASK["input_schema"],
            )
        ]
    )
    async with httpx2.AsyncClient() as http:
        models = genai.Client(
            vertexai=True,
            project="proj",
            location="us-central1",
            credentials=credentials,
            http_options=types.HttpOptions(base_url=f"{base}/", httpx_async_client=http),
        ).aio.models
        parent = types.GenerateContentConfig(
            system_instruction=MAIN,
            tools=[task],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        history: list[Any] = [types.Content(role="user", parts=[types.Part(text=QUESTION)])]
        stream = await models.generate_content_stream(
            model="gemini-2.5-pro", contents=history, config=parent
        )
        parts: list[types.Part] = []
        async for response in stream:
            for candidate in response.candidates or []:
                parts += (candidate.content.parts if candidate.content else None) or []
        calls = [part.function_call for part in parts if part.function_call is not None]
        prompts = [str((call.args or {})["prompt"]) for call in calls]
        assert prompts == list(PROMPTS)

        async def ask(prompt: str) -> str:
            answer = await models.generate_content(
                model="gemini-2.5-flash",
                contents=prompt,
                config=types.GenerateContentConfig(system_instruction=COUNTER),
            )
            return answer.text or ""

        answers = await _children(list(reversed(prompts)) if children_reversed else prompts, ask)
        history += [
            types.Content(role="model", parts=parts),
            types.Content(
                role="user",
                parts=[
                    types.Part.from_function_response(
                        name="task", response={"output": answers[prompt]}
                    )
                    for prompt in prompts
                ],
            ),
        ]
        final = await models.generate_content(
            model="gemini-2.5-pro", contents=history, config=parent
        )
        return final.text or ""


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("api", "agent"), [("anthropic", _claude_agent), ("gemini", _gemini_agent)]
)
async def test_concurrent_vertex_children_bind_by_content_in_reverse_order(
    children_round_trip: Any, counting_rules: Any, api: str, agent: Any
) -> None:
    rules = counting_rules(api, QUESTION, PROMPTS, ("toolu_apples", "toolu_pears"))
    replayed = await children_round_trip(rules, agent, QUESTION, PROMPTS)
    assert sorted((s.calls, s.consumed) for s in replayed.scripts) == [(1, 1), (1, 1), (2, 2)]
