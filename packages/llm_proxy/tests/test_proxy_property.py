"""Property: random session trees with lanes, over HTTP, in random arrival orders — every
session and lane gets exactly its own recorded script; removing a recording fails loudly,
never with another session's answer."""

from __future__ import annotations

import asyncio
import random
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import PARENT_HEADER, SESSION_HEADER, SPAWN_INDEX_HEADER, start_proxy
from agentreel.llm_replay import FixtureError
from agentreel.session import recording_names

RULES = """
[[rule]]
match.last_user_regex = "(?P<q>q-[0-9]+-[a-z]+-[0-9]+)"
text = "answer to {{q}}"
chunk_size = 5
"""


@dataclass(frozen=True)
class Lane:
    name: str  # "main" or "title"
    calls: int


@dataclass(frozen=True)
class Node:
    index: int
    parent: int | None  # index of the parent node
    spawn_index: int | None
    lanes: tuple[Lane, ...]


@st.composite
def trees(draw: st.DrawFn) -> list[Node]:
    count = draw(st.integers(min_value=1, max_value=4))
    nodes: list[Node] = []
    children: dict[int, int] = {}
    for index in range(count):
        parent = draw(st.one_of(st.none(), st.integers(0, index - 1))) if index else None
        spawn = None
        if parent is not None:
            spawn = children.get(parent, 0)
            children[parent] = spawn + 1
        lanes = [Lane("main", draw(st.integers(1, 2)))]
        if draw(st.booleans()):
            lanes.append(Lane("title", 1))
        nodes.append(Node(index, parent, spawn, tuple(lanes)))
    return nodes


def _question(node: Node, lane: Lane, call: int) -> str:
    return f"q-{node.index}-{lane.name}-{call}"


async def _lane(client: openai.AsyncOpenAI, node: Node, lane: Lane, jitter: random.Random) -> Any:
    system = "You are agent." if lane.name == "main" else "Write a title."
    model = "big" if lane.name == "main" else "small"
    messages: list[Any] = [{"role": "system", "content": system}]
    answers: list[Any] = []
    for call in range(lane.calls):
        await asyncio.sleep(jitter.random() * 0.01)
        messages.append({"role": "user", "content": _question(node, lane, call)})
        try:
            reply = await client.chat.completions.create(model=model, messages=messages)
        except openai.BadRequestError as error:
            answers.append(("error", str(error)))
            return answers
        text = reply.choices[0].message.content
        answers.append(text)
        messages.append({"role": "assistant", "content": text})
    return answers


async def _program(base_url: str, nodes: list[Node], seed: int) -> dict[str, Any]:
    jitter = random.Random(seed)
    ids = {node.index: str(uuid.uuid4()) for node in nodes}
    done: dict[int, asyncio.Event] = {node.index: asyncio.Event() for node in nodes}
    results: dict[str, Any] = {}

    async def run(node: Node) -> None:
        if node.parent is not None:
            await done[node.parent].wait()  # a child starts once its parent has made its calls
        headers = {SESSION_HEADER: ids[node.index]}
        if node.parent is not None:
            headers[PARENT_HEADER] = ids[node.parent]
            headers[SPAWN_INDEX_HEADER] = str(node.spawn_index)
        client = openai.AsyncOpenAI(
            base_url=base_url, api_key="sk-property", max_retries=0, default_headers=headers
        )
        lanes = list(node.lanes)
        jitter.shuffle(lanes)
        outcomes = await asyncio.gather(*(_lane(client, node, lane, jitter) for lane in lanes))
        for lane, outcome in zip(lanes, outcomes, strict=True):
            results[f"{node.index}-{lane.name}"] = outcome
        done[node.index].set()
        await client.close()

    order = list(nodes)
    jitter.shuffle(order)
    await asyncio.gather(*(run(node) for node in order))
    return results


def _expected(nodes: list[Node]) -> dict[str, Any]:
    return {
        f"{n.index}-{lane.name}": [f"answer to {_question(n, lane, c)}" for c in range(lane.calls)]
        for n in nodes
        for lane in n.lanes
    }


@pytest.mark.slow
@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(nodes=trees(), seeds=st.lists(st.integers(0, 10_000), min_size=2, max_size=2))
def test_random_trees_with_lanes_each_get_their_own_script(
    nodes: list[Node], seeds: list[int]
) -> None:
    asyncio.run(_check(nodes, seeds))


async def _check(nodes: list[Node], seeds: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp_text:
        fixture = Path(tmp_text) / "fixture"
        with StubServer.from_toml(RULES) as stub:
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                assert await _program(proxy.openai_base_url, nodes, seeds[0]) == _expected(nodes)
        assert len(recording_names(fixture)) == sum(len(n.lanes) for n in nodes)
        async with start_proxy("replay", fixture=fixture) as proxy:
            assert await _program(proxy.openai_base_url, nodes, seeds[1]) == _expected(nodes)

        names = recording_names(fixture)
        (fixture / names[-1]).unlink()
        if len(names) == 1:  # nothing left to replay: the fixture itself is refused
            with pytest.raises(FixtureError, match=r"session\.jsonl"):
                async with start_proxy("replay", fixture=fixture):
                    pass
            return
        async with start_proxy("replay", fixture=fixture) as proxy:
            outcome = await _program(proxy.openai_base_url, nodes, seeds[1])
        expected = _expected(nodes)
        failures = 0
        for key, answers in outcome.items():
            for position, answer in enumerate(answers):
                if isinstance(answer, tuple):
                    failures += 1
                    assert answer[0] == "error"
                else:  # whatever is answered is the caller's own recorded answer
                    assert answer == expected[key][position], (key, answer)
        assert failures >= 1, "a request whose recording was removed must fail"
