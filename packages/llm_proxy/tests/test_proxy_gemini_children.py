"""Headerless children on the Gemini API (issue 30, SPEC 11 and 13), with the real
google-genai SDK and no identity header at all, shaped as Gemini CLI runs: a router call
(``generateContent`` with the ``{complexity_reasoning, complexity_score}`` schema) before
every turn, subagent turns included; the conversation streamed; a subagent started by the
parent's ``invoke_agent {agent_name, prompt}`` call, whose first user message is that
``prompt`` and which ends with ``complete_task``.

Recorded, the subagent is child 0 of the parent conversation, each router call a side lane
of the conversation it routes (bound by what it is, not as a child — the child's router
call asks about the child's prompt before the child itself does). Replayed, deleting the
child's recording is an ``UnrecordedSessionError`` naming the child (its first message) and
its parent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from google import genai
from google.genai import errors, types

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import (
    RequestHeader,
    RequestHeaderData,
    load_session_log,
    recording_names,
    session_file_name,
)

# conftest.py's recording_tree fixture (test modules cannot import conftest under importlib mode).
RecordingTree = Callable[
    [Path, Callable[[RequestHeaderData], object]], list[tuple[object, object, int | None]]
]

KEY = "gemini-children-test-key-0123456789"
QUESTION = "Investigate what notes.txt says."
PROMPT = "Read notes.txt and report its first line."
MAIN = "You are the main agent. Delegate investigations."
INVESTIGATOR = "You are codebase_investigator. Finish with complete_task."
ROUTER = "You route requests by complexity."

RULES = f"""
[[rule]]
match = {{ api = "gemini", model = "gemini-flash-lite", stream = false }}
json = {{ complexity_reasoning = "a lookup", complexity_score = 2 }}

[[rule]]
match = {{ api = "gemini", system_contains = "codebase_investigator", last_user = "{PROMPT}" }}
tool_calls = [{{ name = "complete_task", arguments = {{ result = "The first line is hello." }} }}]

[[rule]]
match = {{ api = "gemini", system_contains = "main agent", last_user = "{QUESTION}" }}
tool_calls = [{{ name = "invoke_agent", arguments = {{ agent_name = "codebase_investigator", \
prompt = "{PROMPT}" }} }}]

[[rule]]
match = {{ api = "gemini", system_contains = "main agent", last_tool_result_regex = "hello" }}
text = "notes.txt begins with hello."
"""


def _tool(name: str, *fields: str) -> types.Tool:
    properties = {field: {"type": "string"} for field in fields}
    return types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name=name,
                description=f"The {name} tool.",
                parameters_json_schema={"type": "object", "properties": properties},
            )
        ]
    )


@asynccontextmanager
async def _client(base_url: str) -> AsyncIterator[genai.Client]:
    """google-genai as Gemini CLI's requests come: no identity header at all."""
    async with httpx2.AsyncClient() as http:
        options = types.HttpOptions(
            base_url=base_url, api_version="v1beta", httpx_async_client=http
        )
        yield genai.Client(api_key=KEY, http_options=options)


async def _agent(base_url: str) -> str:
    """The parent's turn (routed), its ``invoke_agent`` call, the subagent's turn (routed
    too) ending with ``complete_task``, then the parent's answer."""
    async with _client(base_url) as client:
        models = client.aio.models

        async def route(text: str) -> None:
            routed = await models.generate_content(
                model="gemini-flash-lite",
                contents=text,
                config=types.GenerateContentConfig(
                    system_instruction=ROUTER,
                    response_mime_type="application/json",
                    response_json_schema={
                        "type": "object",
                        "properties": {
                            "complexity_reasoning": {"type": "string"},
                            "complexity_score": {"type": "integer"},
                        },
                    },
                ),
            )
            assert json.loads(routed.text or "")["complexity_score"] == 2

        async def turn(system: str, tools: types.Tool, contents: list[Any]) -> list[types.Part]:
            config = types.GenerateContentConfig(
                system_instruction=system,
                tools=[tools],
                automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            )
            stream = await models.generate_content_stream(
                model="gemini-pro", contents=contents, config=config
            )
            parts: list[types.Part] = []
            async for response in stream:
                for candidate in response.candidates or []:
                    parts += (candidate.content.parts if candidate.content else None) or []
            return parts

        def call_of(parts: list[types.Part], name: str) -> types.FunctionCall:
            (call,) = [p.function_call for p in parts if p.function_call is not None]
            assert call.name == name
            return call

        await route(QUESTION)
        history: list[Any] = [types.Content(role="user", parts=[types.Part(text=QUESTION)])]
        answer = await turn(MAIN, _tool("invoke_agent", "agent_name", "prompt"), history)
        invoke = call_of(answer, "invoke_agent")
        prompt = (invoke.args or {})["prompt"]
        await route(prompt)
        child = [types.Content(role="user", parts=[types.Part(text=prompt)])]
        finished = await turn(INVESTIGATOR, _tool("complete_task", "result"), child)
        done = call_of(finished, "complete_task")
        history += [
            types.Content(role="model", parts=answer),
            types.Content(
                role="user",
                parts=[
                    types.Part.from_function_response(
                        name="invoke_agent", response={"output": (done.args or {})["result"]}
                    )
                ],
            ),
        ]
        final = await turn(MAIN, _tool("invoke_agent", "agent_name", "prompt"), history)
        return "".join(part.text or "" for part in final)


def _recorded(fixture: Path) -> None:
    async def record() -> None:
        with StubServer.from_toml(RULES) as stub:
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                assert await _agent(proxy.base_url) == "notes.txt begins with hello."

    asyncio.run(record())


Name = tuple[str | None, str]


def _system(log: Any) -> str | None:
    return next(e.data for e in log.events if isinstance(e, RequestHeader)).system


def _name(request: RequestHeaderData) -> Name:
    """A recording by its first request's system prompt and first user message."""
    return request.system, next(m.preview for m in request.messages if m.role == "user")


@pytest.mark.asyncio
async def test_an_invoke_agent_child_is_recorded_as_child_0_and_routers_as_lanes(
    tmp_path: Path, recording_tree: RecordingTree
) -> None:
    fixture = tmp_path / "fixture"
    await asyncio.to_thread(_recorded, fixture)
    parent, child = (MAIN, QUESTION), (INVESTIGATOR, PROMPT)
    tree = {name: (parent, index) for name, parent, index in recording_tree(fixture, _name)}
    assert tree == {
        parent: (None, None),
        child: (parent, 0),
        (ROUTER, QUESTION): (parent, None),  # the parent's router: its side lane
        (ROUTER, PROMPT): (child, None),  # the child's router: the child's side lane
    }
    main = load_session_log(fixture / "session.jsonl")
    assert main.header.parent_session is None
    assert next(e.data for e in main.events if isinstance(e, RequestHeader)).system == MAIN
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        assert await _agent(proxy.base_url) == "notes.txt begins with hello."
    assert read_report(report).ok, read_report(report).errors


@pytest.mark.asyncio
async def test_a_deleted_invoke_agent_child_names_it_and_its_parent(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    await asyncio.to_thread(_recorded, fixture)
    # The child's recording: its conversation and its router lane (a side lane under it).
    logs = [load_session_log(fixture / name) for name in recording_names(fixture)]
    (child,) = [log.header.id for log in logs if _system(log) == INVESTIGATOR]
    kept = [log for log in logs if child not in (log.header.id, log.header.parent_session)]
    assert len(kept) == len(logs) - 2
    texts = [log.path.read_bytes() for log in kept]
    for name in recording_names(fixture):
        (fixture / name).unlink()
    for position, text in enumerate(texts):
        (fixture / session_file_name(position)).write_bytes(text)
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        with pytest.raises(errors.ClientError) as refused:
            await _agent(proxy.base_url)
    message = str(refused.value.message)  # the whole message (str() cuts it)
    assert "UnrecordedSessionError" in json.dumps(
        [error.type for error in read_report(report).errors]
    )
    assert f"first message {PROMPT!r}" in message
    assert "parent session.jsonl ({{session:main}})" in message
    assert "RequestDriftError" not in message
