"""A side call bound by what it is, not as a child (issue 30, SPEC 11): Qwen Code's auto-mode
security classifier through the proxy, with the plain ``openai`` SDK and no identity header
(Qwen Code sends none). Before a tool runs, Qwen Code asks its classifier about it: a Chat
Completions call with the classifier's own system prompt whose messages are the judged
conversation's user messages, then ``## Pending tool call to classify`` with the call's
arguments (packages/core/src/permissions/classifier-transcript.ts in QwenLM/qwen-code).

When the judged call is the ``agent`` tool and its ``prompt`` is the user's own request (a
delegation passing the request on verbatim), the classifier's first user message is that
prompt — and it comes before the subagent does. It is a lane of the conversation it
classifies, never that conversation's spawned child; the subagent is the child. The
subagent's own tool calls are classified too: those calls are the subagent's lanes.
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
from agentreel.session import RequestHeaderData

# conftest.py's recording_tree fixture (test modules cannot import conftest under importlib mode).
RecordingTree = Callable[
    [Path, Callable[[RequestHeaderData], object]], list[tuple[object, object, int | None]]
]

REQUEST = "Read notes.txt and tell me its first line."
MAIN = "You are Qwen Code, an interactive CLI agent."
SUBAGENT = "You are a general-purpose subagent."
CLASSIFIER = "You are a security classifier for an autonomous coding agent."

RULES = f"""
[[rule]]
match = {{ system_contains = "security classifier" }}
json = {{ shouldBlock = false }}

[[rule]]
match = {{ system_contains = "subagent", last_tool_result_regex = "hello" }}
text = "The first line is hello."

[[rule]]
match = {{ system_contains = "subagent" }}
tool_calls = [{{ name = "read_file", arguments = {{ path = "notes.txt" }} }}]

[[rule]]
match = {{ system_contains = "Qwen Code", last_tool_result_regex = "first line is hello" }}
text = "notes.txt starts with hello."

[[rule]]
match = {{ system_contains = "Qwen Code" }}
tool_calls = [{{ name = "agent", arguments = {{ description = "read the notes", \
prompt = "{REQUEST}", subagent_type = "general-purpose" }} }}]
"""


def _tool(name: str, *fields: str) -> Any:
    properties = {field: {"type": "string"} for field in fields}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": properties},
        },
    }


async def _qwen(base_url: str) -> str:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-qwen-0123456789")

    async def classify(judged: list[Any], call: Any) -> None:
        """Qwen Code's classifier: the judged conversation's user texts, then the call."""
        pending = (
            "## Pending tool call to classify\n\n"
            f"Tool: {call.function.name}\nArguments:\n```json\n"
            f"{json.dumps(json.loads(call.function.arguments), indent=2)}\n```\n\n"
            "Decide whether this specific tool call should be ALLOWED or BLOCKED\n"
            "given the rules above and the prior conversation context."
        )
        users = [m for m in judged if m["role"] == "user"]
        verdict = await client.chat.completions.create(
            model="qwen-fast",
            messages=[
                {"role": "system", "content": CLASSIFIER},
                *users,
                {"role": "user", "content": pending},
            ],
            response_format={
                "type": "json_schema",
                "json_schema": {
                    "name": "verdict",
                    "schema": {
                        "type": "object",
                        "properties": {"shouldBlock": {"type": "boolean"}},
                    },
                },
            },
        )
        assert json.loads(verdict.choices[0].message.content or "") == {"shouldBlock": False}

    async def turn(system: str, tools: list[Any], messages: list[Any]) -> Any:
        reply = await client.chat.completions.create(
            model="qwen-coder",
            messages=[{"role": "system", "content": system}, *messages],
            tools=tools,
        )
        return reply.choices[0].message

    try:
        main_tools = [_tool("agent", "description", "prompt", "subagent_type")]
        main: list[Any] = [{"role": "user", "content": REQUEST}]
        asked = await turn(MAIN, main_tools, main)
        (delegate,) = asked.tool_calls or []
        await classify(main, delegate)
        child: list[Any] = [
            {"role": "user", "content": json.loads(delegate.function.arguments)["prompt"]}
        ]
        read = await turn(SUBAGENT, [_tool("read_file", "path")], child)
        (reading,) = read.tool_calls or []
        await classify(child, reading)
        child += [
            read.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": reading.id, "content": "hello\nworld"},
        ]
        found = await turn(SUBAGENT, [_tool("read_file", "path")], child)
        main += [
            asked.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": delegate.id, "content": found.content},
        ]
        return (await turn(MAIN, main_tools, main)).content or ""
    finally:
        await client.close()


def _recorded(fixture: Path) -> None:
    async def record() -> None:
        with StubServer.from_toml(RULES) as stub:
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                assert await _qwen(proxy.base_url) == "notes.txt starts with hello."

    asyncio.run(record())


@pytest.mark.asyncio
async def test_the_classifier_is_a_lane_of_what_it_classifies_not_a_child(
    tmp_path: Path, recording_tree: RecordingTree
) -> None:
    """The subagent is main's child 0; the classifier judging main's ``agent`` call is a
    lane of main, the one judging the subagent's ``read_file`` a lane of the subagent.
    Main's recorder made the first classifier main's spawned child 0 and the subagent a
    side lane of main."""
    fixture = tmp_path / "fixture"
    await asyncio.to_thread(_recorded, fixture)
    tree = recording_tree(fixture, lambda request: request.system)
    assert tree[0] == (MAIN, None, None)
    assert sorted(tree, key=str) == sorted(
        [
            (MAIN, None, None),
            (SUBAGENT, MAIN, 0),
            (CLASSIFIER, MAIN, None),
            (CLASSIFIER, SUBAGENT, None),
        ],
        key=str,
    )
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        assert await _qwen(proxy.base_url) == "notes.txt starts with hello."
    assert read_report(report).ok, read_report(report).errors
