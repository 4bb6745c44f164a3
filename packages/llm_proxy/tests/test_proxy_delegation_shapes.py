"""Every way agents delegate, through the proxy with no identity header (SPEC 17, issue 40):
a handoff, a text-protocol delegation, a conversation continued without its tools and a
child's prompt behind a volatile prefix.

Each agent here is a faithful minimal program: it sends, with the plain ``openai`` SDK,
the request shapes its framework sends (the framework itself is too heavy for the default
suite; the source each shape comes from is named at each agent). Each is recorded once per
module through the stub, then replayed: as recorded (clean), with each child's recording
deleted (an ``UnrecordedSessionError`` naming the child, its parent's file, the spawn index
it was recorded with and the delegating call), and with each child's prompt changed (a
``RequestDriftError`` of that child's file, naming its parent — not a drift of the parent).
Recording guesses nothing: the end-of-record guess report stays empty.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import RequestHeaderData, recording_names

# conftest.py's recording_tree fixture (test modules cannot import conftest under importlib mode).
RecordingTree = Callable[
    [Path, Callable[[RequestHeaderData], object]], list[tuple[object, object, int | None]]
]
Prompts = Mapping[str, str]
Agent = Callable[[str, Prompts], Awaitable[str]]


def _client(base_url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=f"{base_url}/v1", api_key="sk-shapes-0123456789", max_retries=0
    )


def _tool(name: str, description: str, *fields: str) -> dict[str, Any]:
    properties = {field: {"type": "string"} for field in fields}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(fields)},
        },
    }


async def _ask(
    client: openai.AsyncOpenAI, system: str, messages: list[Any], tools: list[Any] | None = None
) -> Any:
    sent = [{"role": "system", "content": system}, *messages]
    if tools:
        reply = await client.chat.completions.create(model="gpt-test", messages=sent, tools=tools)
    else:
        reply = await client.chat.completions.create(model="gpt-test", messages=sent)
    return reply.choices[0].message


# -- a handoff: google-adk sub_agents + transfer_to_agent ---------------------------------
# google/adk-python src/google/adk/flows/llm_flows/agent_transfer.py offers every agent of
# a tree `transfer_to_agent(agent_name)`; the receiving agent is then asked with its own
# instruction and the session's events, where another agent's turns are rewritten as user
# content (flows/llm_flows/contents.py, _present_other_agent_message): "For context:" then
# "[coordinator] called tool `transfer_to_agent` with parameters: {...}" and
# "[coordinator] `transfer_to_agent` tool returned result: {...}".

COORDINATOR = "You are the coordinator. Transfer the user to the agent that fits the request."
ALPHA = "You are alpha. You plan picnics."
PICNIC = "Plan a picnic for Saturday."
TRANSFER = _tool("transfer_to_agent", "Transfer the question to another agent.", "agent_name")
ADK_RULES = """
[[rule]]
match = { system_contains = "You are alpha" }
text = "Sandwiches and lemonade at noon."

[[rule]]
match = { system_contains = "coordinator" }
tool_calls = [{ name = "transfer_to_agent", arguments = { agent_name = "alpha" } }]
"""


async def _adk(base_url: str, prompts: Prompts) -> str:
    client = _client(base_url)
    try:
        user = {"role": "user", "content": PICNIC}
        asked = await _ask(client, prompts.get(COORDINATOR, COORDINATOR), [user], [TRANSFER])
        (call,) = asked.tool_calls or []
        arguments = json.loads(call.function.arguments)

        def context(text: str) -> dict[str, Any]:
            parts = [{"type": "text", "text": "For context:"}, {"type": "text", "text": text}]
            return {"role": "user", "content": parts}

        said = f"[coordinator] called tool `transfer_to_agent` with parameters: {arguments}"
        returned = "[coordinator] `transfer_to_agent` tool returned result: {'result': None}"
        messages = [user, context(said), context(returned)]
        answer = await _ask(client, prompts.get(ALPHA, ALPHA), messages, [TRANSFER])
        return str(answer.content)
    finally:
        await client.close()


# -- text protocol: crewai Process.hierarchical ------------------------------------------
# crewAI src/crewai/agents/crew_agent_executor.py drives a ReAct text protocol (tools are
# described in the system prompt, not sent as `tools`); the manager delegates with
# `Action: Ask question to coworker` and `Action Input: {"question", "context",
# "coworker"}` (tools/agent_tools/ask_question_tool.py). The coworker is then asked with
# its own role as system prompt and the question wrapped in the task template
# (translations/en.json "task": "\nCurrent Task: {input}...", BaseAgentTool._execute's
# expected output and context); the tool's result goes back to the manager appended to its
# own reply as "\nObservation: ..." (an assistant message).

MANAGER = (
    "You are Crew Manager. You are a seasoned manager with a knack for getting the best out "
    "of your team.\nYour personal goal is: Manage the team to complete the task in the best "
    "way possible.\nYou ONLY have access to the following tools: Ask question to coworker"
)
APPLE_COUNTER = "You are Apple Counter. You count apples.\nYour personal goal is: Count apples"
PEAR_COUNTER = "You are Pear Counter. You count pears.\nYour personal goal is: Count pears"
APPLES_QUESTION = "How many apples are in the basket on the table?"
PEARS_QUESTION = "How many pears are in the basket on the table?"
CONTEXT = "The user wants to know what fruit the basket holds."


def _crew_task(task: str, expected: str, context: str | None = None) -> str:
    shared = f"\n\nThis is the context you're working with:\n{context}" if context else ""
    return (
        f"\nCurrent Task: {task}\n\nThis is the expected criteria for your final answer: "
        f"{expected}\nyou MUST return the actual complete content as the final answer, not a "
        f"summary.{shared}\n\nBegin! This is VERY important to you, use the tools available "
        "and give your best Final Answer, your job depends on it!\n\nThought:"
    )


def _action(question: str, coworker: str) -> str:
    block = json.dumps({"question": question, "context": CONTEXT, "coworker": coworker})
    return (
        f"Thought: I should ask the {coworker}.\nAction: Ask question to coworker\n"
        f"Action Input: {block}"
    )


CREW_RULES = f"""
[[rule]]
match = {{ system_contains = "Apple Counter" }}
text = "Thought: I now know the final answer\\nFinal Answer: 7 apples"

[[rule]]
match = {{ system_contains = "Pear Counter" }}
text = "Thought: I now know the final answer\\nFinal Answer: 3 pears"

[[rule]]
match = {{ system_contains = "Crew Manager", any_message = "Observation: 3 pears" }}
text = "Thought: I now know the final answer\\nFinal Answer: 7 apples and 3 pears."

[[rule]]
match = {{ system_contains = "Crew Manager", any_message = "Observation: 7 apples" }}
text = {json.dumps(_action(PEARS_QUESTION, "Pear Counter"))}

[[rule]]
match = {{ system_contains = "Crew Manager" }}
text = {json.dumps(_action(APPLES_QUESTION, "Apple Counter"))}
"""


async def _crewai(base_url: str, prompts: Prompts) -> str:
    client = _client(base_url)
    roles = {"Apple Counter": APPLE_COUNTER, "Pear Counter": PEAR_COUNTER}
    try:
        messages: list[Any] = [
            {"role": "user", "content": _crew_task("Count the fruit.", "Both counts.")}
        ]
        while True:
            reply = str((await _ask(client, prompts.get(MANAGER, MANAGER), messages)).content)
            if "Final Answer:" in reply:
                return reply.split("Final Answer:", 1)[1].strip()
            block = json.loads(reply.split("Action Input:", 1)[1])
            role = roles[block["coworker"]]
            expected = (
                "Your best answer to your coworker asking you this, accounting for the "
                "context shared."
            )
            asked = [{"role": "user", "content": _crew_task(block["question"], expected, CONTEXT)}]
            answer = str((await _ask(client, prompts.get(role, role), asked)).content)
            result = answer.split("Final Answer:", 1)[1].strip()
            # The executor appends the observation to the manager's own reply.
            observed = {"role": "assistant", "content": f"{reply}\nObservation: {result}"}
            messages = [*messages, observed]
    finally:
        await client.close()


# -- reflection: autogen AssistantAgent(reflect_on_tool_use=True) with AgentTool ----------
# microsoft/autogen python/packages/autogen-agentchat/src/autogen_agentchat/agents/
# _assistant_agent.py: the model's tool calls run (AgentTool runs the child agent on its
# `task`, concurrently), then _reflect_on_tool_use_flow asks the model again with the whole
# context, tool results included, and no tools.

LEAD = "You are the lead. Use your agents, then answer with both counts."
APPLES = "You count apples."
PEARS = "You count pears."
FRUIT = "How many apples and pears are there?"
AGENT_TOOLS = [
    _tool("apples_agent", "Counts apples.", "task"),
    _tool("pears_agent", "Counts pears.", "task"),
]
AUTOGEN_RULES = """
[[rule]]
match = { system_contains = "You count apples" }
text = "There are 7 apples."

[[rule]]
match = { system_contains = "You count pears" }
text = "There are 3 pears."

[[rule]]
match = { system_contains = "You are the lead", has_tools = false }
text = "7 apples and 3 pears."

[[rule]]
match = { system_contains = "You are the lead" }
tool_calls = [
  { name = "apples_agent", arguments = { task = "Count the apples in the basket." } },
  { name = "pears_agent", arguments = { task = "Count the pears in the basket." } },
]
"""


async def _autogen(base_url: str, prompts: Prompts) -> str:
    client = _client(base_url)
    children = {"apples_agent": APPLES, "pears_agent": PEARS}
    try:
        messages: list[Any] = [{"role": "user", "content": FRUIT}]
        asked = await _ask(client, prompts.get(LEAD, LEAD), messages, AGENT_TOOLS)
        calls = asked.tool_calls or []

        async def run(call: Any) -> str:
            system = children[call.function.name]
            task = json.loads(call.function.arguments)["task"]
            answer = await _ask(
                client, prompts.get(system, system), [{"role": "user", "content": task}]
            )
            return str(answer.content)

        results = await asyncio.gather(*(run(call) for call in calls))
        messages += [
            asked.model_dump(exclude_none=True),
            *(
                {"role": "tool", "tool_call_id": call.id, "content": result}
                for call, result in zip(calls, results, strict=True)
            ),
        ]
        reflected = await _ask(client, prompts.get(LEAD, LEAD), messages)  # no tools
        return str(reflected.content)
    finally:
        await client.close()


# -- a prompt behind a volatile prefix: GitHub Copilot CLI --------------------------------
# Issue 40 observed `copilot --acp` 1.0.102 (bring-your-own-model, no identity header)
# starting its sub-agent with the delegated prompt behind a `<current_datetime>` block; the
# sub-agent was recorded as session.jsonl and its parent as a side lane. The closed-source
# CLI is not run here: this sends that shape (a `task` tool call, then a conversation with
# tools whose first message is the date block and the prompt).

COPILOT = "You are the GitHub Copilot CLI, a terminal assistant."
EXPLORER = "You are an explore agent. Answer from the repository."
SUMMARY = "Summarize what notes.txt says about the release date."
COPILOT_TOOLS = [_tool("task", "Start a sub-agent.", "description", "prompt", "agent_type")]
EXPLORER_TOOLS = [_tool("view", "Read a file.", "path")]
COPILOT_RULES = f"""
[[rule]]
match = {{ system_contains = "explore agent" }}
text = "The release is on Friday."

[[rule]]
match = {{ system_contains = "Copilot", last_tool_result = "Friday" }}
text = "notes.txt says the release is on Friday."

[[rule]]
match = {{ system_contains = "Copilot" }}
tool_calls = [{{ name = "task", arguments = {{ description = "read notes", \
prompt = "{SUMMARY}", agent_type = "explore" }} }}]
"""


async def _copilot(base_url: str, prompts: Prompts) -> str:
    client = _client(base_url)
    try:
        messages: list[Any] = [{"role": "user", "content": "When is the release?"}]
        asked = await _ask(client, prompts.get(COPILOT, COPILOT), messages, COPILOT_TOOLS)
        (call,) = asked.tool_calls or []
        prompt = json.loads(call.function.arguments)["prompt"]
        dated = f"<current_datetime>2026-12-04T21:50:07.123Z</current_datetime>\n\n{prompt}"
        child = await _ask(
            client,
            prompts.get(EXPLORER, EXPLORER),
            [{"role": "user", "content": dated}],
            EXPLORER_TOOLS,
        )
        messages += [
            asked.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": str(child.content)},
        ]
        final = await _ask(client, prompts.get(COPILOT, COPILOT), messages, COPILOT_TOOLS)
        return str(final.content)
    finally:
        await client.close()


# -- a time in the delegated prompt: Claude Code's Task -----------------------------------
# Issue 43's interop scenarios asked Claude Code's Task subagent "what 12:00 UTC is in
# Tokyo": the proxy masks the time in the child's first message ({{time}} {{timezone}}),
# and the parent's Task call, compared unmasked, no longer held it, so the child was
# recorded as a side lane of nobody. The parent's call is compared as masked as the child.

LEAD_TIME = "You are the lead. Delegate time questions."
CLOCK = "You are the clock agent. Convert times."
TIME_TASK = "Ask what 12:00 UTC is in Tokyo, then report it."
TIME_TOOLS = [_tool("Task", "Start a subagent.", "description", "prompt")]
TIME_RULES = f"""
[[rule]]
match = {{ system_contains = "clock agent" }}
text = "It is 21:00 in Tokyo."

[[rule]]
match = {{ system_contains = "the lead", last_tool_result = "Tokyo" }}
text = "The subagent says: 21:00 in Tokyo."

[[rule]]
match = {{ system_contains = "the lead" }}
tool_calls = [{{ name = "Task", arguments = {{ description = "convert", \
prompt = "{TIME_TASK}" }} }}]
"""


async def _timed_task(base_url: str, prompts: Prompts) -> str:
    client = _client(base_url)
    try:
        messages: list[Any] = [{"role": "user", "content": "What is noon UTC in Tokyo?"}]
        asked = await _ask(client, prompts.get(LEAD_TIME, LEAD_TIME), messages, TIME_TOOLS)
        (call,) = asked.tool_calls or []
        prompt = json.loads(call.function.arguments)["prompt"]
        child = await _ask(
            client, prompts.get(CLOCK, CLOCK), [{"role": "user", "content": prompt}], TIME_TOOLS
        )
        messages += [
            asked.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": str(child.content)},
        ]
        final = await _ask(client, prompts.get(LEAD_TIME, LEAD_TIME), messages, TIME_TOOLS)
        return str(final.content)
    finally:
        await client.close()


# -- the shapes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Child:
    prompt: str
    """Its system prompt (what a changed child changes)."""
    spawn_index: int
    said: str
    """What the error quotes of the delegating call."""


@dataclass(frozen=True)
class Shape:
    rules: str
    agent: Agent
    answer: str
    parent: str
    parent_calls: int
    children: tuple[Child, ...]


SHAPES = {
    "handoff-adk": Shape(
        ADK_RULES,
        _adk,
        "Sandwiches and lemonade at noon.",
        COORDINATOR,
        1,
        (Child(ALPHA, 0, """tool transfer_to_agent('{"agent_name":"alpha"}')"""),),
    ),
    "text-protocol-crewai": Shape(
        CREW_RULES,
        _crewai,
        "7 apples and 3 pears.",
        MANAGER,
        3,
        (
            Child(APPLE_COUNTER, 0, "text action Ask question to coworker("),
            Child(PEAR_COUNTER, 1, "text action Ask question to coworker("),
        ),
    ),
    "prefix-copilot": Shape(
        COPILOT_RULES,
        _copilot,
        "notes.txt says the release is on Friday.",
        COPILOT,
        2,
        (Child(EXPLORER, 0, "tool task("),),
    ),
    "time-in-prompt-task": Shape(
        TIME_RULES,
        _timed_task,
        "The subagent says: 21:00 in Tokyo.",
        LEAD_TIME,
        2,
        (Child(CLOCK, 0, "tool Task("),),
    ),
    "reflection-autogen": Shape(
        AUTOGEN_RULES,
        _autogen,
        "7 apples and 3 pears.",
        LEAD,
        2,
        (
            Child(APPLES, 0, "tool apples_agent("),
            Child(PEARS, 1, "tool pears_agent("),
        ),
    ),
}


@dataclass(frozen=True)
class Recorded:
    fixture: Path
    warnings: list[str]


@pytest.fixture(scope="module", params=sorted(SHAPES))
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One recording per shape for the module, made through the stub with no header."""
    name: str = request.param
    shape = SHAPES[name]
    fixture = tmp_path_factory.mktemp(name) / "fixture"

    async def record() -> list[str]:
        with StubServer.from_toml(shape.rules) as stub:
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                assert await shape.agent(proxy.base_url, {}) == shape.answer
            return list(proxy.warnings)

    return name, shape, Recorded(fixture, asyncio.run(record()))


def _system(request: RequestHeaderData) -> object:
    return request.system


async def _replay(shape: Shape, fixture: Path, tmp_path: Path, prompts: Prompts) -> Any:
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        try:
            answer: str | None = await shape.agent(proxy.base_url, prompts)
        except openai.APIStatusError:
            answer = None
    return answer, read_report(report)


def _copy(fixture: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "fixture"
    shutil.copytree(fixture, copy)
    return copy


@pytest.mark.asyncio
async def test_the_recorded_tree_is_what_the_conversations_say_and_replays(
    recorded: Any, tmp_path: Path, recording_tree: RecordingTree
) -> None:
    """The conversation the user's prompt went to is main; each child is its child with
    the spawn index of its delegating call (a handoff's transfer call, a text protocol's
    argument block, an agent-as-tool call); the reflection call is the lead's call 2, not a
    session of its own. Nothing was guessed, and the recording replays clean."""
    name, shape, made = recorded
    tree = recording_tree(made.fixture, _system)
    assert tree == [
        (shape.parent, None, None),
        *((child.prompt, shape.parent, child.spawn_index) for child in shape.children),
    ], name
    assert made.warnings == []
    answer, report = await _replay(shape, made.fixture, tmp_path, {})
    assert answer == shape.answer
    assert report.ok, report.errors
    assert [s.consumed for s in report.scripts] == [shape.parent_calls] + [1] * len(shape.children)


@pytest.mark.asyncio
async def test_a_deleted_child_recording_names_that_child_and_its_parent(
    recorded: Any, tmp_path: Path
) -> None:
    """Each child's recording deleted (the files after it renumbered, as if it was never
    recorded): the first error is that child's UnrecordedSessionError — its parent's file,
    the spawn index it was recorded with, the delegating call — not a drift of another
    session, and it shows no unrelated nearest request."""
    name, shape, made = recorded
    for position, child in enumerate(shape.children, 1):
        fixture = _copy(made.fixture, tmp_path / f"deleted-{position}")
        names = recording_names(fixture)
        (fixture / names[position]).unlink()
        for later in range(position + 1, len(names)):
            (fixture / names[later]).rename(fixture / names[later - 1])
        answer, report = await _replay(shape, fixture, tmp_path / f"deleted-{position}", {})
        assert answer is None, name
        first = report.errors[0]
        assert first.type == "UnrecordedSessionError", (name, first.message)
        line = first.message.splitlines()[0]
        assert (
            f"(parent session.jsonl ({{{{session:main}}}}), spawn index {child.spawn_index})"
            in line
        ), (name, line)
        assert f"handed on ({child.said}" in line, (name, line)
        assert "nearest recorded request" not in first.message, first.message
        assert len(first.message.splitlines()) <= 20, first.message


@pytest.mark.asyncio
async def test_a_changed_child_prompt_is_that_childs_drift(recorded: Any, tmp_path: Path) -> None:
    """Each child's system prompt changed: a RequestDriftError of that child's recording,
    naming its parent — not the parent's drift, nor an unrecorded session."""
    name, shape, made = recorded
    for position, child in enumerate(shape.children, 1):
        changed = {child.prompt: child.prompt.replace("You", "Now you", 1)}
        answer, report = await _replay(
            shape, made.fixture, tmp_path / f"changed-{position}", changed
        )
        assert answer is None, name
        first = report.errors[0]
        assert first.type == "RequestDriftError", (name, first.message)
        line = first.message.splitlines()[0]
        expected = (
            f"call 1 of session.{position}.jsonl ({{{{session:{position}}}}}), child "
            f"{child.spawn_index} of session.jsonl ({{{{session:main}}}})"
        )
        assert expected in line, (name, line)


GUESS_RULES = """
[[rule]]
match = { system_contains = "You are the writer" }
text = "A picnic plan."

[[rule]]
match = { system_contains = "You are the planner" }
tool_calls = [
  { name = "weather", arguments = { day = "Saturday" } },
  { name = "park", arguments = { city = "Paris" } },
]
"""


@pytest.mark.asyncio
async def test_a_handoff_picked_among_ordinary_calls_is_in_the_guess_report(
    tmp_path: Path, recording_tree: RecordingTree
) -> None:
    """A conversation carried on verbatim under another system prompt after a reply of two
    ordinary tool calls (no transfer): the receiver is the planner's child, by the last of
    them — a guess the end-of-record report names, with both files."""
    planner, writer = "You are the planner.", "You are the writer."
    fixture = tmp_path / "fixture"

    async def agent(base_url: str) -> str:
        client = _client(base_url)
        try:
            tools = [_tool("weather", "Weather.", "day"), _tool("park", "Parks.", "city")]
            messages: list[Any] = [{"role": "user", "content": PICNIC}]
            asked = await _ask(client, planner, messages, tools)
            messages += [
                asked.model_dump(exclude_none=True),
                *(
                    {"role": "tool", "tool_call_id": call.id, "content": "fine"}
                    for call in asked.tool_calls or []
                ),
            ]
            written = await _ask(client, writer, messages, [_tool("save", "Save.", "text")])
            return str(written.content)
        finally:
            await client.close()

    with StubServer.from_toml(GUESS_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert await agent(proxy.base_url) == "A picnic plan."
    assert recording_tree(fixture, _system) == [(planner, None, None), (writer, planner, 0)]
    (guess,) = proxy.warnings
    assert "session.1.jsonl" in guess, guess
    assert "(session.jsonl)" in guess, guess
    assert "tool park(" in guess, guess
    assert "the last of 2 tool calls" in guess, guess
