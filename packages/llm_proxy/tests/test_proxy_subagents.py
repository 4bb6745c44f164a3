"""A plain SDK program — a parent and two concurrent subagents (asyncio.gather) — recorded
once through the proxy and replayed 20 times with the stub stopped: every session gets its
own script, whatever order the children's requests arrive in."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from pathlib import Path
from typing import Any, Literal

import anthropic
import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import PARENT_HEADER, SESSION_HEADER, SPAWN_INDEX_HEADER, start_proxy
from agentreel.llm_replay import read_report

Api = Literal["chat", "messages"]
KEY = "sk-subagent-test-key"

RULES = """
[[rule]]
name = "plan"
match.last_user = "apples and pears"
text = "Delegating both counts."
tool_calls = [
  { name = "delegate", arguments = { task = "count the apples" } },
  { name = "delegate", arguments = { task = "count the pears" } },
]
[[rule]]
name = "apples"
match.last_user = "count the apples"
text = "There are 7 apples."
chunk_size = 3
[[rule]]
name = "pears"
match.last_user = "count the pears"
text = "There are 3 pears."
chunk_size = 3
[[rule]]
name = "sum"
match.last_tool_result_regex = "(?s)7 apples.*3 pears"
text = "7 apples and 3 pears."
"""

PARENT_SYSTEM = "You coordinate counting work and delegate each count."
CHILD_SYSTEM = "You count one kind of fruit."
DELEGATE: dict[str, Any] = {
    "name": "delegate",
    "description": "Hand a task to a subagent",
    "schema": {"type": "object", "properties": {"task": {"type": "string"}}},
}


class Model:
    """One conversation turn against the proxy in either wire API, SDK-parsed."""

    def __init__(self, api: Api, base_url: str, headers: dict[str, str]) -> None:
        self.api = api
        if api == "chat":
            self._openai = openai.AsyncOpenAI(
                base_url=base_url + "/v1", api_key=KEY, max_retries=0, default_headers=headers
            )
        else:
            self._anthropic = anthropic.AsyncAnthropic(
                base_url=base_url, api_key=KEY, max_retries=0, default_headers=headers
            )

    async def ask(
        self, system: str, messages: list[Any], tools: bool
    ) -> tuple[str, list[tuple[str, str]]]:
        """(text, [(call id, task)]) of one streamed answer."""
        if self.api == "chat":
            return await self._ask_chat(system, messages, tools)
        return await self._ask_messages(system, messages, tools)

    async def _ask_chat(
        self, system: str, messages: list[Any], tools: bool
    ) -> tuple[str, list[tuple[str, str]]]:
        extra: Any = {}
        if tools:
            function = {"name": DELEGATE["name"], "description": DELEGATE["description"]}
            function["parameters"] = DELEGATE["schema"]
            extra["tools"] = [{"type": "function", "function": function}]
        wire: Any = [{"role": "system", "content": system}, *messages]
        stream = await self._openai.chat.completions.create(
            model="gpt-test", messages=wire, stream=True, **extra
        )
        text = ""
        calls: dict[int, list[str]] = {}
        async for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for call in choice.delta.tool_calls or []:
                    entry = calls.setdefault(call.index, ["", ""])
                    entry[0] += call.id or ""
                    if call.function is not None:
                        entry[1] += call.function.arguments or ""
        return text, [(cid, json.loads(args)["task"]) for cid, args in calls.values()]

    async def _ask_messages(
        self, system: str, messages: list[Any], tools: bool
    ) -> tuple[str, list[tuple[str, str]]]:
        extra: Any = {}
        if tools:
            extra["tools"] = [
                {
                    "name": DELEGATE["name"],
                    "description": DELEGATE["description"],
                    "input_schema": DELEGATE["schema"],
                }
            ]
        async with self._anthropic.messages.stream(
            model="claude-test", max_tokens=512, system=system, messages=messages, **extra
        ) as stream:
            message = await stream.get_final_message()
        text = "".join(b.text for b in message.content if b.type == "text")
        uses = [(b.id, str(b.input["task"])) for b in message.content if b.type == "tool_use"]
        return text, uses

    def assistant_turn(self, text: str, calls: list[tuple[str, str]]) -> list[Any]:
        if self.api == "chat":
            wire_calls = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": "delegate", "arguments": json.dumps({"task": task})},
                }
                for cid, task in calls
            ]
            return [{"role": "assistant", "content": text, "tool_calls": wire_calls}]
        blocks: list[Any] = [{"type": "text", "text": text}]
        blocks += [
            {"type": "tool_use", "id": cid, "name": "delegate", "input": {"task": task}}
            for cid, task in calls
        ]
        return [{"role": "assistant", "content": blocks}]

    def results(self, answers: list[tuple[str, str]]) -> list[Any]:
        if self.api == "chat":
            return [{"role": "tool", "tool_call_id": cid, "content": text} for cid, text in answers]
        blocks = [{"type": "tool_result", "tool_use_id": c, "content": t} for c, t in answers]
        return [{"role": "user", "content": blocks}]

    async def close(self) -> None:
        if self.api == "chat":
            await self._openai.close()
        else:
            await self._anthropic.close()


async def run_program(
    api: Api, base_url: str, *, identity: bool, jitter: random.Random | None = None
) -> dict[str, str]:
    """Parent → two concurrent children → parent; what each session was told."""
    parent_id = str(uuid.uuid4())
    parent_headers = {SESSION_HEADER: parent_id} if identity else {}
    parent = Model(api, base_url, parent_headers)
    messages: list[Any] = [{"role": "user", "content": "How many apples and pears are there?"}]
    text, calls = await parent.ask(PARENT_SYSTEM, messages, tools=True)
    assert len(calls) == 2

    async def child(index: int, task: str) -> str:
        headers = (
            {
                SESSION_HEADER: str(uuid.uuid4()),
                PARENT_HEADER: parent_id,
                SPAWN_INDEX_HEADER: str(index),
            }
            if identity
            else {}
        )
        if jitter is not None:
            await asyncio.sleep(jitter.random() * 0.02)
        model = Model(api, base_url, headers)
        answer, _ = await model.ask(CHILD_SYSTEM, [{"role": "user", "content": task}], tools=False)
        await model.close()
        return answer

    answers = await asyncio.gather(*(child(i, task) for i, (_, task) in enumerate(calls)))
    messages += parent.assistant_turn(text, calls)
    messages += parent.results([(cid, a) for (cid, _), a in zip(calls, answers, strict=True)])
    final, _ = await parent.ask(PARENT_SYSTEM, messages, tools=True)
    await parent.close()
    return {"plan": text, "apples": answers[0], "pears": answers[1], "final": final}


EXPECTED = {
    "plan": "Delegating both counts.",
    "apples": "There are 7 apples.",
    "pears": "There are 3 pears.",
    "final": "7 apples and 3 pears.",
}


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("api", ["chat", "messages"])
@pytest.mark.parametrize("identity", [True, False], ids=["identity-headers", "no-headers"])
async def test_parent_and_concurrent_children_replay_20_times(
    api: Api, identity: bool, tmp_path: Path
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            recorded = await run_program(api, proxy.base_url, identity=identity)
    assert recorded == EXPECTED
    assert (fixture / "session.2.jsonl").is_file()
    assert not (fixture / "session.3.jsonl").exists()
    jitter = random.Random(1234)
    for run in range(20):
        report = tmp_path / f"report-{run}.json"
        async with start_proxy("replay", fixture=fixture, report=report) as proxy:
            replayed = await run_program(api, proxy.base_url, identity=identity, jitter=jitter)
        assert replayed == EXPECTED, f"run {run}"
        scripts = read_report(report).scripts
        assert [(s.calls, s.consumed) for s in scripts] == [(2, 2), (1, 1), (1, 1)], run
        assert read_report(report).errors == []
