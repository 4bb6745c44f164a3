"""Property: random session trees with lanes, over HTTP, in random arrival orders — every
session and lane gets exactly its own recorded script; removing a recording fails loudly
(``UnrecordedSessionError`` in the HTTP error and in the report), never with another
session's answer.

Two variants: callers that send agentreel's identity headers, and headerless callers
placed by conversation chaining and content alone (a child by its parent's pending
delegating tool call). Children start as soon as their parent's delegating call is
answered, so they race the parent's later calls and its title lane; a title lane asks the
very question its conversation opens with, so lanes differ by model and system prompt, not
by their text."""

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

from agentreel.llm.stub import RuleSet, StubServer, rules_from_mapping
from agentreel.llm_proxy import PARENT_HEADER, SESSION_HEADER, SPAWN_INDEX_HEADER, start_proxy
from agentreel.llm_replay import FixtureError, read_report
from agentreel.session import RequestHeader, load_session_log, recording_names, session_file_name

GENERIC_RULES: list[dict[str, Any]] = [
    {
        "match": {"model": "small", "last_user_regex": "(?P<q>q-[0-9]+-[0-9]+)"},
        "text": "title for {{q}}",
    },
    {
        "match": {"last_user_regex": "(?P<q>q-[0-9]+-[0-9]+)"},
        "text": "answer to {{q}}",
        "chunk_size": 5,
    },
]
DELEGATE: Any = {
    "type": "function",
    "function": {
        "name": "delegate",
        "description": "Hand a task to a subagent",
        "parameters": {"type": "object", "properties": {"prompt": {"type": "string"}}},
    },
}


@dataclass(frozen=True)
class Node:
    index: int
    parent: int | None  # index of the parent node
    spawn_index: int | None
    calls: int  # of its conversation (the main lane)
    title: bool  # whether it also has a title lane (one call, another model)


@dataclass(frozen=True)
class Tree:
    nodes: tuple[Node, ...]
    headers: bool  # identity headers sent, or chaining and content alone

    def children(self, node: Node) -> list[Node]:
        return [n for n in self.nodes if n.parent == node.index]


@st.composite
def trees(draw: st.DrawFn) -> Tree:
    headers = draw(st.booleans())
    count = draw(st.integers(min_value=1, max_value=4))
    nodes: list[Node] = []
    children: dict[int, int] = {}
    for index in range(count):
        parent = draw(st.one_of(st.none(), st.integers(0, index - 1))) if index else None
        spawn = None
        if parent is not None:
            spawn = children.get(parent, 0)
            children[parent] = spawn + 1
        nodes.append(Node(index, parent, spawn, draw(st.integers(1, 2)), draw(st.booleans())))
    return Tree(tuple(nodes), headers)


def _question(node: Node, call: int) -> str:
    return f"q-{node.index}-{call}"


def _rules(tree: Tree) -> RuleSet:
    """The stub's rules: a parent's first call delegates its children's first questions,
    in spawn order; everything else is answered by its question."""
    rules = [
        {
            "match": {"last_user_regex": f"^{_question(node, 0)}$", "model": "big"},
            "text": f"answer to {_question(node, 0)}",
            "tool_calls": [
                {"name": "delegate", "arguments": {"prompt": _question(child, 0)}}
                for child in tree.children(node)
            ],
        }
        for node in tree.nodes
        if tree.children(node)
    ]
    return rules_from_mapping({"rule": [*rules, *GENERIC_RULES]})


Outcome = list[Any]


async def _ask(client: openai.AsyncOpenAI, model: str, messages: list[Any], tools: bool) -> Any:
    extra: Any = {"tools": [DELEGATE]} if tools else {}
    try:
        reply = await client.chat.completions.create(model=model, messages=messages, **extra)
    except openai.BadRequestError as error:
        return error
    return reply.choices[0].message


async def _program(base_url: str, tree: Tree, seed: int) -> dict[str, Outcome]:
    jitter = random.Random(seed)
    ids = {node.index: str(uuid.uuid4()) for node in tree.nodes}
    delegated = {node.index: asyncio.Event() for node in tree.nodes}
    results: dict[str, Outcome] = {}

    async def pause() -> None:
        await asyncio.sleep(jitter.random() * 0.01)

    async def conversation(client: openai.AsyncOpenAI, node: Node) -> Outcome:
        messages: list[Any] = [{"role": "system", "content": "You are agent."}]
        answers: Outcome = []
        for call in range(node.calls):
            await pause()
            messages.append({"role": "user", "content": _question(node, call)})
            reply = await _ask(client, "big", messages, tools=True)
            if isinstance(reply, openai.BadRequestError):
                answers.append(reply)
                break
            answers.append(reply.content)
            messages.append(reply.model_dump(exclude_none=True))
            for tool_call in reply.tool_calls or []:
                messages.append(
                    {"role": "tool", "tool_call_id": tool_call.id, "content": "started"}
                )
            if call == 0:
                delegated[node.index].set()  # its children start now, racing what follows
        delegated[node.index].set()
        return answers

    async def title(client: openai.AsyncOpenAI, node: Node) -> Outcome:
        await pause()
        messages = [
            {"role": "system", "content": "Write a title."},
            {"role": "user", "content": _question(node, 0)},
        ]
        reply = await _ask(client, "small", messages, tools=False)
        return [reply if isinstance(reply, openai.BadRequestError) else reply.content]

    async def run(node: Node) -> None:
        headers: dict[str, str] = {}
        if node.parent is not None:
            await delegated[node.parent].wait()
        if tree.headers:
            headers[SESSION_HEADER] = ids[node.index]
            if node.parent is not None:
                headers[PARENT_HEADER] = ids[node.parent]
                headers[SPAWN_INDEX_HEADER] = str(node.spawn_index)
        client = openai.AsyncOpenAI(
            base_url=base_url, api_key="sk-property", max_retries=0, default_headers=headers
        )
        lanes = [("main", conversation(client, node))]
        if node.title:
            lanes.append(("title", title(client, node)))
        jitter.shuffle(lanes)
        outcomes = await asyncio.gather(*(lane for _, lane in lanes))
        for (name, _), outcome in zip(lanes, outcomes, strict=True):
            results[f"{node.index}-{name}"] = outcome
        await client.close()

    order = list(tree.nodes)
    jitter.shuffle(order)
    await asyncio.gather(*(run(node) for node in order))
    return results


def _expected(tree: Tree) -> dict[str, Outcome]:
    expected: dict[str, Outcome] = {}
    for node in tree.nodes:
        expected[f"{node.index}-main"] = [
            f"answer to {_question(node, call)}" for call in range(node.calls)
        ]
        if node.title:
            expected[f"{node.index}-title"] = [f"title for {_question(node, 0)}"]
    return expected


@pytest.mark.slow
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(tree=trees(), seeds=st.lists(st.integers(0, 10_000), min_size=2, max_size=2))
def test_random_trees_with_lanes_each_get_their_own_script(tree: Tree, seeds: list[int]) -> None:
    asyncio.run(_check(tree, seeds))


async def _check(tree: Tree, seeds: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp_text:
        fixture = Path(tmp_text) / "fixture"
        with StubServer(_rules(tree)) as stub:
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                assert await _program(proxy.openai_base_url, tree, seeds[0]) == _expected(tree)
        names = recording_names(fixture)
        assert len(names) == sum(1 + node.title for node in tree.nodes)
        async with start_proxy("replay", fixture=fixture) as proxy:
            assert await _program(proxy.openai_base_url, tree, seeds[1]) == _expected(tree)

        target = _removed(tree)
        if target is None:  # the last recording goes: a lane or session nothing else needs
            removed = [names[-1]]
        else:  # a childless child's recordings go: its session and its title lane
            removed = [n for n in names if _first_question(fixture / n) == _question(target, 0)]
        for name in removed:
            (fixture / name).unlink()
        kept = [n for n in names if n not in removed]
        for number, name in enumerate(kept):  # a fixture numbers its files without gaps
            (fixture / name).rename(fixture / session_file_name(number))
        if len(removed) == len(names):  # nothing left to replay: the fixture is refused
            with pytest.raises(FixtureError, match=r"session\.jsonl"):
                async with start_proxy("replay", fixture=fixture):
                    pass
            return
        report = Path(tmp_text) / "report.json"
        async with start_proxy("replay", fixture=fixture, report=report) as proxy:
            outcome = await _program(proxy.openai_base_url, tree, seeds[1])
        expected = _expected(tree)
        refused: dict[str, str] = {}
        for key, answers in outcome.items():
            for position, answer in enumerate(answers):
                if isinstance(answer, openai.BadRequestError):
                    refused[key] = _error_type(answer)
                else:  # whatever is answered is the caller's own recorded answer
                    assert answer == expected[key][position], (key, answer)
        assert refused, "a request whose recording was removed must fail"
        reported = {error.type for error in read_report(report).errors}
        assert reported == set(refused.values()), (reported, refused)
        if target is not None:
            # A caller with lineage headers whose recording is gone is unrecorded, by name.
            lanes = {f"{target.index}-main"} | (
                {f"{target.index}-title"} if target.title else set()
            )
            assert refused == dict.fromkeys(lanes, "UnrecordedSessionError"), refused


def _removed(tree: Tree) -> Node | None:
    """With identity headers, the last child that has no children of its own."""
    if not tree.headers:
        return None
    leaves = [n for n in tree.nodes if n.parent is not None and not tree.children(n)]
    return leaves[-1] if leaves else None


def _first_question(path: Path) -> str:
    log = load_session_log(path)
    header = next(e.data for e in log.events if isinstance(e, RequestHeader))
    return header.messages[0].preview


def _error_type(error: openai.BadRequestError) -> str:
    """The replay error's type, as the API error body names it (its ``code``)."""
    body: Any = error.body
    kind = body.get("code") if isinstance(body, dict) else None
    assert isinstance(kind, str), body
    assert kind.endswith("Error"), body
    return kind
