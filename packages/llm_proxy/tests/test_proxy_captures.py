"""A live value the model must name back (Codex's ``wait_agent`` naming the child's agent
id, a fresh UUID each run): recorded as ``{{agent-id:1}}``, replayed as the live value.

A program through the proxy with the official ``openai`` SDK (Responses API): the model
calls ``spawn_agent``; the program answers with a new agent id; the model calls
``wait_agent`` naming it, split across argument deltas. Replayed with another id, the
served call names the live one; without the capture it names the record run's id, which
the program (as Codex does) does not know.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import SESSION_HEADER, start_proxy
from agentreel.llm_replay import Capture, read_report

RULES = """
[[rule]]
match.last_user = "delegate"
tool_calls = [{ id = "call_spawn", name = "spawn_agent", arguments = { message = "read" } }]
[[rule]]
match.last_tool_result_regex = '"agent_id":"(?P<agent>[0-9a-f-]{36})"'
tool_calls = [{ id = "call_wait", name = "wait_agent", arguments = { targets = ["{{agent}}"] } }]
chunk_size = 5
[[rule]]
match.last_tool_result_regex = "completed"
text = "The helper is done."
"""
AGENT_ID = Capture.checked(r'"agent_id"\s*:\s*"([0-9a-f-]{36})"', "agent-id")
TOOLS: Any = [
    {"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}}
    for name in ("spawn_agent", "wait_agent")
]


async def _delegate(base_url: str, agent_id: str, named: list[str]) -> None:
    """The conversation; ``named`` gets the agent ids ``wait_agent`` named."""
    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key="sk-capture-test",
        max_retries=0,
        default_headers={SESSION_HEADER: "parent"},
    )
    try:
        items: Any = [{"role": "user", "content": "delegate the reading"}]
        for answer in (
            json.dumps({"agent_id": agent_id, "nickname": "Boole"}, separators=(",", ":")),
            None,
        ):
            async with client.responses.stream(model="m", input=items, tools=TOOLS) as stream:
                response = await stream.get_final_response()
            (call,) = [item for item in response.output if item.type == "function_call"]
            items.append(call.model_dump(exclude_none=True, warnings=False))
            if answer is None:
                named += json.loads(call.arguments)["targets"]
                known = named == [agent_id]
                answer = json.dumps(
                    {"status": {t: "completed" if known else "not_found" for t in named}}
                )
            items.append(
                {"type": "function_call_output", "call_id": call.call_id, "output": answer}
            )
        final = await client.responses.create(model="m", input=items, tools=TOOLS)
        assert final.output_text == "The helper is done."
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_a_captured_agent_id_is_served_as_the_live_one(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    recorded_id, live_id = str(uuid.uuid4()), str(uuid.uuid4())
    named: list[str] = []
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy(
            "record", upstream=stub.base_url, fixture=fixture, captures=[AGENT_ID]
        ) as proxy:
            await _delegate(proxy.openai_base_url, recorded_id, named)
    assert named == [recorded_id]  # the client got the upstream's answer as it was
    recording = (fixture / "session.jsonl").read_text().splitlines()
    answers = [line for line in recording if '"type":"assistant/chunk"' in line]
    assert not [line for line in answers if recorded_id in line]
    assert any('{\\"targets\\":[\\"{{agent-id:1}}\\"]}' in line for line in answers)

    report = tmp_path / "report.json"
    named.clear()
    async with start_proxy("replay", fixture=fixture, report=report, captures=[AGENT_ID]) as proxy:
        await _delegate(proxy.openai_base_url, live_id, named)
    assert named == [live_id]
    assert [(s.calls, s.consumed) for s in read_report(report).scripts] == [(3, 3)]


@pytest.mark.asyncio
async def test_without_the_capture_replay_names_the_record_runs_id(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    recorded_id, live_id = str(uuid.uuid4()), str(uuid.uuid4())
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            await _delegate(proxy.openai_base_url, recorded_id, [])
    named: list[str] = []
    async with start_proxy("replay", fixture=fixture, report=tmp_path / "r.json") as proxy:
        # The id of a child that no longer exists: Codex answers "not_found", and its next
        # request is not the recorded one.
        with pytest.raises(openai.BadRequestError, match="not_found"):
            await _delegate(proxy.openai_base_url, live_id, named)
    assert named == [recorded_id]
