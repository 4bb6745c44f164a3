"""Lanes: side calls under one identity (a title request on another model racing the main
request) bind by what they are, in either arrival order — and which lane is the caller's
session, in the recording and in replay's served logs, never follows arrival order (SPEC
11); a headerless session whose first message is a pending delegating tool call's prompt
is recorded as that call's child."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic
import msgspec
import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import (
    PARENT_HEADER,
    SESSION_HEADER,
    SPAWN_INDEX_HEADER,
    Proxy,
    start_proxy,
)
from agentreel.llm_replay import read_report
from agentreel.session import (
    Normalizer,
    RequestHeader,
    SessionLog,
    harvest_session_logs,
    load_session_log,
    recording_names,
    without_texts,
)

RULES = """
[[rule]]
match.model = "small-model"
text = "Fixing the parser bug"
[[rule]]
match.system_contains = "coding agent"
match.last_user = "fix the bug"
text = "I will read the parser first."
tool_calls = [{ name = "read_file", arguments = { path = "parser.py" } }]
[[rule]]
match.last_tool_result = "def parse"
text = "Fixed."
"""
TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


async def _title(client: openai.AsyncOpenAI) -> str:
    reply = await client.chat.completions.create(
        model="small-model",
        messages=[
            {"role": "system", "content": "Write a five-word title for the conversation."},
            {"role": "user", "content": "fix the bug"},
        ],
    )
    return reply.choices[0].message.content or ""


async def _main(client: openai.AsyncOpenAI) -> list[str]:
    messages: Any = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "fix the bug"},
    ]
    first = await client.chat.completions.create(model="big-model", messages=messages, tools=TOOLS)
    message = first.choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls or []:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "def parse(): ..."})
    second = await client.chat.completions.create(model="big-model", messages=messages, tools=TOOLS)
    return [message.content or "", second.choices[0].message.content or ""]


async def _session(base_url: str, order: str) -> dict[str, Any]:
    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key="sk-lanes-test",
        max_retries=0,
        default_headers={SESSION_HEADER: "one-session"},
    )
    if order == "concurrent":
        title, main = await asyncio.gather(_title(client), _main(client))
    elif order == "title-first":
        title = await _title(client)
        main = await _main(client)
    else:
        main = await _main(client)
        title = await _title(client)
    await client.close()
    return {"title": title, "main": main}


EXPECTED = {"title": "Fixing the parser bug", "main": ["I will read the parser first.", "Fixed."]}


@pytest.mark.asyncio
@pytest.mark.parametrize("recorded_order", ["title-first", "main-first"])
async def test_side_call_lane_binds_by_what_it_is_in_either_order(
    recorded_order: str, tmp_path: Path
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert await _session(proxy.openai_base_url, recorded_order) == EXPECTED
    assert (fixture / "session.1.jsonl").is_file()  # the title call is a lane of its own
    for order in ("title-first", "main-first", "concurrent"):
        report = tmp_path / f"report-{order}.json"
        async with start_proxy("replay", fixture=fixture, report=report) as proxy:
            assert await _session(proxy.openai_base_url, order) == EXPECTED, order
        consumed = sorted((s.calls, s.consumed) for s in read_report(report).scripts)
        assert consumed == [(1, 1), (2, 2)], order


ORDERS = ("title-first", "main-first")


def _goldens(logs: list[SessionLog]) -> list[bytes]:
    """The logs normalized as a harness writes their goldens (ids, times, cwd tokenized)."""
    normalizer = Normalizer.for_logs(str(Path.cwd()), logs)
    return [normalizer.session_log_bytes(log) for log in logs]


def _fixture_logs(fixture: Path) -> list[SessionLog]:
    return [load_session_log(fixture / name) for name in recording_names(fixture)]


def _served_view(logs: list[SessionLog]) -> list[SessionLog]:
    """What replay serves of recorded logs: the request headers without the whole message
    texts a recording keeps for a drift's excerpt (``without_texts``)."""
    return [
        dataclasses.replace(
            log,
            events=[
                msgspec.structs.replace(event, data=without_texts(event.data))
                if isinstance(event, RequestHeader)
                else event
                for event in log.events
            ],
        )
        for log in logs
    ]


def _structure(logs: list[SessionLog]) -> list[tuple[object, ...]]:
    """Per log in session order: origin, the position of its parent, spawn index, the
    model of its first call and how many calls it holds."""
    ids = [log.header.id for log in logs]
    shape: list[tuple[object, ...]] = []
    for log in logs:
        header = log.header
        parent = ids.index(header.parent_session) if header.parent_session in ids else None
        requests = [e.data for e in log.events if isinstance(e, RequestHeader)]
        shape.append((header.origin, parent, header.spawn_index, requests[0].model, len(requests)))
    return shape


@pytest.mark.asyncio
async def test_which_lane_is_the_session_does_not_follow_arrival_in_record(
    tmp_path: Path,
) -> None:
    """Recorded in either arrival order, the conversation (two calls, tools) is the session
    and the title call a side lane under it: the same fixture, golden for golden."""
    recorded: dict[str, list[SessionLog]] = {}
    with StubServer.from_toml(RULES) as stub:
        for order in ORDERS:
            fixture = tmp_path / f"fixture-{order}"
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                assert await _session(proxy.openai_base_url, order) == EXPECTED
            recorded[order] = _fixture_logs(fixture)
    for order in ORDERS:
        assert _structure(recorded[order]) == [
            ("main", None, None, "big-model", 2),
            ("spawn", 0, None, "small-model", 1),
        ], order
    assert _goldens(recorded["title-first"]) == _goldens(recorded["main-first"])


@pytest.mark.asyncio
@pytest.mark.parametrize("recorded_order", ORDERS)
async def test_served_logs_mirror_the_recording_in_any_arrival_order(
    recorded_order: str, tmp_path: Path
) -> None:
    """Replayed title-first and conversation-first, the served logs are the recording's
    own, byte for byte once normalized — what a harness compares with its goldens."""
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert await _session(proxy.openai_base_url, recorded_order) == EXPECTED
    served: dict[str, list[SessionLog]] = {}
    for order in ORDERS:
        root = tmp_path / f"served-{order}"
        async with start_proxy("replay", fixture=fixture, sessions_root=root) as proxy:
            assert await _session(proxy.openai_base_url, order) == EXPECTED, order
        served[order] = harvest_session_logs(root)
    expected = _goldens(_served_view(_fixture_logs(fixture)))
    for order in ORDERS:
        assert _goldens(served[order]) == expected, order


@pytest.mark.asyncio
async def test_an_unused_lane_is_named_as_the_goldens_name_it_for_every_recording(
    tmp_path: Path,
) -> None:
    """The failure line names the fixture file and its golden token, never a UUID, so two
    recordings of the same run fail with the same words."""
    lines: list[list[str]] = []
    with StubServer.from_toml(RULES) as stub:
        for number in range(2):
            fixture = tmp_path / f"fixture-{number}"
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                await _session(proxy.openai_base_url, "title-first")
            report = tmp_path / f"report-{number}.json"
            async with start_proxy("replay", fixture=fixture, report=report) as proxy:
                client = openai.AsyncOpenAI(
                    base_url=proxy.openai_base_url,
                    api_key="sk-lanes-test",
                    max_retries=0,
                    default_headers={SESSION_HEADER: "one-session"},
                )
                assert await _main(client) == EXPECTED["main"]
                await client.close()
            lines.append(read_report(report).unconsumed())
    assert (
        lines[0]
        == lines[1]
        == [
            "session.1.jsonl ({{session:1}}, side lane): never bound to a live session; its 1 "
            "call(s) were never requested"
        ]
    )


CHILD_RULES = """
[[rule]]
match.last_user = "summarize the repo"
tool_calls = [{ name = "task", arguments = { prompt = "list the python files" } }]
[[rule]]
match.last_user = "list the python files"
text = "a.py b.py"
[[rule]]
match.last_tool_result = "a.py"
text = "Two python files."
"""


@pytest.mark.asyncio
async def test_headerless_child_is_recorded_under_its_pending_delegating_call(
    tmp_path: Path,
) -> None:
    root = tmp_path / "sessions"
    with StubServer.from_toml(CHILD_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, sessions_root=root) as proxy:
            client = openai.AsyncOpenAI(
                base_url=proxy.openai_base_url, api_key="sk-child-test", max_retries=0
            )
            messages: Any = [{"role": "user", "content": "summarize the repo"}]
            first = await client.chat.completions.create(model="m", messages=messages)
            (call,) = first.choices[0].message.tool_calls or []
            prompt = json.loads(call.function.arguments)["prompt"]  # type: ignore[union-attr]
            child = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": prompt}]
            )
            messages.append(first.choices[0].message.model_dump(exclude_none=True))
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": child.choices[0].message.content,
                }
            )
            final = await client.chat.completions.create(model="m", messages=messages)
            assert final.choices[0].message.content == "Two python files."
            await client.close()
    parent_log, child_log = harvest_session_logs(root)
    assert parent_log.header.parent_session is None
    assert child_log.header.parent_session == parent_log.header.id
    assert child_log.header.spawn_index == 0
    assert child_log.header.origin == "spawn"


FRUIT_RULES = """
[[rule]]
match.last_user = "apples and pears"
tool_calls = [
  { name = "Task", arguments = { prompt = "count the apples" } },
  { name = "Task", arguments = { prompt = "count the pears" } },
]
[[rule]]
match.last_user = "count the apples"
text = "7 apples"
[[rule]]
match.last_user = "count the pears"
text = "3 pears"
"""
FRUIT_ORDERS = ("apples-first", "pears-first")


async def _claude_subagents(base_url: str, order: str) -> list[str]:
    """Claude Code's headers: the parent's ``X-Claude-Code-Session-Id``, each subagent's own
    ``x-claude-code-agent-id`` beside it — no spawn index; the children's requests reach the
    proxy in ``order``, the second only once the first was answered."""
    session = str(uuid.uuid4())

    def client(**headers: str) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            base_url=base_url,
            api_key="sk-claude-subagents",
            max_retries=0,
            default_headers={"X-Claude-Code-Session-Id": session, **headers},
        )

    parent = client()
    plan = await parent.messages.create(
        model="claude-test",
        max_tokens=64,
        system="You delegate counting.",
        messages=[{"role": "user", "content": "apples and pears"}],
        tools=[
            {"name": "Task", "description": "Run a subagent", "input_schema": {"type": "object"}}
        ],
    )
    prompts = [str(block.input["prompt"]) for block in plan.content if block.type == "tool_use"]
    answers: dict[str, str] = {}
    for prompt in prompts if order == "apples-first" else reversed(prompts):
        child = client(**{"x-claude-code-agent-id": str(uuid.uuid4())})
        reply = await child.messages.create(
            model="claude-test",
            max_tokens=64,
            system="You count one fruit.",
            messages=[{"role": "user", "content": prompt}],
        )
        answers[prompt] = "".join(b.text for b in reply.content if b.type == "text")
        await child.close()
    await parent.close()
    return [answers[prompt] for prompt in prompts]


@pytest.mark.asyncio
async def test_native_header_children_are_numbered_by_their_delegating_calls_not_arrival(
    tmp_path: Path,
) -> None:
    """Two Claude-style subagents recorded in opposite arrival orders give the same fixture:
    each child in the same file, spawn indexes 0 and 1 in the order the parent issued the
    Task calls (SPEC 4), golden for golden."""
    recorded: dict[str, list[SessionLog]] = {}
    with StubServer.from_toml(FRUIT_RULES) as stub:
        for order in FRUIT_ORDERS:
            fixture = tmp_path / f"fixture-{order}"
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                assert await _claude_subagents(proxy.base_url, order) == ["7 apples", "3 pears"]
            recorded[order] = _fixture_logs(fixture)
    for order in FRUIT_ORDERS:
        logs = recorded[order]
        assert _structure(logs) == [
            ("main", None, None, "claude-test", 1),
            ("spawn", 0, 0, "claude-test", 1),
            ("spawn", 0, 1, "claude-test", 1),
        ], order
        firsts = [
            next(e.data for e in log.events if isinstance(e, RequestHeader)).messages[0].preview
            for log in logs[1:]
        ]
        assert firsts == ["count the apples", "count the pears"], order
    assert _goldens(recorded["apples-first"]) == _goldens(recorded["pears-first"])


async def _codex_subagents(base_url: str, order: str) -> list[str]:
    """Codex 2.6's headers: each conversation's own ``thread-id``, a child's
    ``x-codex-parent-thread-id`` naming its parent; every conversation, the children's too,
    starts with the same ``<environment_context>`` user message, the prompt comes second."""
    environment = "<environment_context>\n  <cwd>/work/project</cwd>\n</environment_context>"
    parent_id = str(uuid.uuid4())

    def client(**headers: str) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            base_url=base_url, api_key="sk-codex-subagents", max_retries=0, default_headers=headers
        )

    parent = client(**{"thread-id": parent_id})
    plan = await parent.messages.create(
        model="codex-test",
        max_tokens=64,
        system="You delegate counting.",
        messages=[
            {"role": "user", "content": environment},
            {"role": "user", "content": "apples and pears"},
        ],
        tools=[
            {"name": "Task", "description": "Spawn an agent", "input_schema": {"type": "object"}}
        ],
    )
    prompts = [str(block.input["prompt"]) for block in plan.content if block.type == "tool_use"]
    answers: dict[str, str] = {}
    for prompt in prompts if order == "apples-first" else reversed(prompts):
        child = client(**{"thread-id": str(uuid.uuid4()), "x-codex-parent-thread-id": parent_id})
        reply = await child.messages.create(
            model="codex-test",
            max_tokens=64,
            system="You count one fruit.",
            messages=[
                {"role": "user", "content": environment},
                {"role": "user", "content": prompt},
            ],
        )
        answers[prompt] = "".join(b.text for b in reply.content if b.type == "text")
        await child.close()
    await parent.close()
    return [answers[prompt] for prompt in prompts]


@pytest.mark.asyncio
@pytest.mark.parametrize("order", FRUIT_ORDERS)
async def test_a_header_named_child_starting_as_its_parent_did_is_numbered_by_its_call(
    order: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A child whose header names its parent and whose first user message is the parent's
    own first (Codex's environment context) is no side call restating the parent: it is
    numbered by the delegating call its prompt comes from. codex-subagent re-recorded on
    a97f67b's rule came out spawn index 1 under a parent with one child (the golden check
    of nox -s interop), as the arrival fallback numbers it."""
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(FRUIT_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert await _codex_subagents(proxy.base_url, order) == ["7 apples", "3 pears"]
    logs = _fixture_logs(fixture)
    assert _structure(logs) == [
        ("main", None, None, "codex-test", 1),
        ("spawn", 0, 0, "codex-test", 1),
        ("spawn", 0, 1, "codex-test", 1),
    ]
    prompts = [
        next(e.data for e in log.events if isinstance(e, RequestHeader)).messages[1].preview
        for log in logs[1:]
    ]
    assert prompts == ["count the apples", "count the pears"]
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    assert proxy.warnings == []  # numbered by its call: no guess to report


@pytest.mark.asyncio
async def test_a_native_child_without_a_delegating_call_falls_back_to_arrival_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "sessions"
    with StubServer.from_toml('[[rule]]\ntext = "ok"\n') as stub:
        async with start_proxy("record", upstream=stub.base_url, sessions_root=root) as proxy:
            for headers in (
                {"X-Claude-Code-Session-Id": "parent-1"},
                {"X-Claude-Code-Session-Id": "parent-1", "x-claude-code-agent-id": "agent-1"},
            ):
                model = anthropic.AsyncAnthropic(
                    base_url=proxy.base_url,
                    api_key="sk-claude-fallback",
                    max_retries=0,
                    default_headers=headers,
                )
                await model.messages.create(
                    model="claude-test",
                    max_tokens=16,
                    messages=[{"role": "user", "content": f"hello from {len(headers)}"}],
                )
                await model.close()
    parent_log, child_log = harvest_session_logs(root)
    assert child_log.header.parent_session == parent_log.header.id
    assert child_log.header.spawn_index == 0
    # Not a warning mid-run: said once, at the end, by the run (the command prints it).
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    (warning,) = proxy.warnings
    assert warning.startswith(f"record (session logs under {root}): session.1.jsonl ")
    assert "session 'agent-1' (from x-claude-code-agent-id), parent 'parent-1'" in warning
    assert f"recorded session {child_log.header.id}" in warning
    assert f"its parent (session.jsonl, recorded session {parent_log.header.id})" in warning
    assert "no pending delegating tool call of that parent" in warning
    assert f"the header {SPAWN_INDEX_HEADER}: N" in warning
    assert proxy.errors == []


@pytest.mark.asyncio
async def test_a_named_childs_title_lane_on_its_prompt_stays_its_side_lane(tmp_path: Path) -> None:
    """A child named by headers whose title call (first) asks its delegated prompt, then its
    conversation asks it too: one child, spawn index 0, its title a side lane under it —
    not a second child of the parent claiming the same delegating call."""
    rules = (
        '[[rule]]\nmatch.last_user = "plan"\n'
        'tool_calls = [{ name = "delegate", arguments = { prompt = "count the apples" } }]\n'
        '[[rule]]\nmatch.model = "small-model"\ntext = "Counting apples"\n'
        '[[rule]]\nmatch.last_user = "count the apples"\ntext = "7 apples"\n'
    )
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(rules) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:

            async def ask(headers: dict[str, str], model: str, system: str, text: str) -> Any:
                client = openai.AsyncOpenAI(
                    base_url=proxy.openai_base_url,
                    api_key="sk-title-lane",
                    max_retries=0,
                    default_headers=headers,
                )
                messages: Any = [
                    {"role": "system", "content": system},
                    {"role": "user", "content": text},
                ]
                extra: Any = {"tools": TOOLS} if model == "big-model" else {}
                reply = await client.chat.completions.create(
                    model=model, messages=messages, **extra
                )
                await client.close()
                return reply.choices[0].message

            await ask({SESSION_HEADER: "parent"}, "big-model", "Plan.", "plan")
            child = {SESSION_HEADER: "child", PARENT_HEADER: "parent", SPAWN_INDEX_HEADER: "0"}
            title = await ask(child, "small-model", "Write a title.", "count the apples")
            answer = await ask(child, "big-model", "Count.", "count the apples")
            assert (title.content, answer.content) == ("Counting apples", "7 apples")
    assert _structure(_fixture_logs(fixture)) == [
        ("main", None, None, "big-model", 1),
        ("spawn", 0, 0, "big-model", 1),
        ("spawn", 1, None, "small-model", 1),
    ]


SHARED_RULES = """
[[rule]]
match.last_user = "read the notes"
tool_calls = [{ id = "toolu_task", name = "Agent", arguments = { prompt = "Read notes.txt." } }]
[[rule]]
match.model = "small-model"
text = "Reading notes"
[[rule]]
match.last_user = "Read notes.txt."
text = "alpha beta"
[[rule]]
match.last_tool_result = "alpha beta"
text = "The notes say alpha beta."
"""
SHARED_TOOLS: Any = [
    {"name": "Agent", "description": "Run a subagent", "input_schema": {"type": "object"}},
    {"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}},
]


CHILD_SYSTEM = "You are an agent for Claude Code."


async def _shared_identity_session(base_url: str, child_system: str = CHILD_SYSTEM) -> list[str]:
    """Claude Code 0.23.1's shape: every request, the Task child's too, carries the parent's
    session id in ``metadata.user_id`` and no header; the child's first user message is a
    ``<system-reminder>`` part, then the Agent call's prompt; a title call (another model,
    no tools) asks the same prompt."""
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="sk-shared-id", max_retries=0)
    # Closed even when a request fails (the deleted-child test expects one to): an open
    # connection would be collected during a later test and fail it as unraisable.
    async with client:
        return await _shared_identity_turns(client, child_system)


async def _shared_identity_turns(
    client: anthropic.AsyncAnthropic, child_system: str = CHILD_SYSTEM
) -> list[str]:
    metadata: Any = {"user_id": json.dumps({"device_id": "d", "session_id": str(uuid.uuid4())})}

    async def ask(system: str, messages: Any, *, model: str = "claude-test") -> Any:
        tools: Any = SHARED_TOOLS if model == "claude-test" else anthropic.NOT_GIVEN
        return await client.messages.create(
            model=model,
            max_tokens=64,
            system=system,
            messages=messages,
            tools=tools,
            metadata=metadata,
        )

    history: Any = [{"role": "user", "content": "read the notes"}]
    plan = await ask("You are Claude Code.", history)
    (call,) = [block for block in plan.content if block.type == "tool_use"]
    prompt = str(call.input["prompt"])
    reminder = {"type": "text", "text": "<system-reminder>\nToday is a day.\n</system-reminder>"}
    task = {"type": "text", "text": prompt}
    child_messages: Any = [{"role": "user", "content": [reminder, task]}]
    title = await ask("Write a title.", [{"role": "user", "content": prompt}], model="small-model")
    child = await ask(child_system, child_messages)
    found = "".join(b.text for b in child.content if b.type == "text")
    history += [
        {"role": "assistant", "content": [b.model_dump() for b in plan.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": found}],
        },
    ]
    final = await ask("You are Claude Code.", history)
    texts = [b.text for b in [*title.content, *final.content] if b.type == "text"]
    return [found, *texts]


async def _a_child_and_a_side_lane_recorded_and_replayed(
    tmp_path: Path,
    rules: str,
    session: Callable[[Proxy], Awaitable[list[str]]],
    expected: list[str],
    *,
    models: tuple[str, str, str],
) -> None:
    """Record ``session`` through the stub: main (two calls), its child (spawn index 0) and
    its side lane (no spawn index), of these ``models``; replay it: each request bound to
    its own script, every script consumed."""
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(rules) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert await session(proxy) == expected
    main, child, side = models
    assert _structure(_fixture_logs(fixture)) == [
        ("main", None, None, main, 2),
        ("spawn", 0, 0, child, 1),
        ("spawn", 0, None, side, 1),
    ]
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        assert await session(proxy) == expected
    replayed = read_report(report)
    assert replayed.errors == []
    assert sorted((s.calls, s.consumed) for s in replayed.scripts) == [(1, 1), (1, 1), (2, 2)]


@pytest.mark.asyncio
async def test_a_child_sharing_its_parents_identity_is_its_child_not_a_side_lane(
    tmp_path: Path,
) -> None:
    """Claude Code 0.23.1's Task child sends its parent's metadata.user_id session id and no
    header: a new conversation with tools under that identity whose first message holds the
    prompt of the parent's pending Agent call is the parent's child, spawn index 0 — it was
    recorded as a side lane — while the title call asking the same prompt stays a side lane.
    Replay binds each request to its own script."""
    await _a_child_and_a_side_lane_recorded_and_replayed(
        tmp_path,
        SHARED_RULES,
        lambda proxy: _shared_identity_session(proxy.base_url),
        ["alpha beta", "Reading notes", "The notes say alpha beta."],
        models=("claude-test", "claude-test", "small-model"),
    )


@pytest.mark.asyncio
async def test_a_deleted_shared_identity_child_is_unrecorded_naming_it_and_its_parent(
    tmp_path: Path,
) -> None:
    """The same child with its recording deleted: its first request, under the parent's
    identity, is an UnrecordedSessionError naming the child (its first message, spawn index
    0) and the parent's script and delegating call, first, in at most 20 lines — it was
    bound to the parent's lane and reported as a drift of the parent's next call."""
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(SHARED_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            await _shared_identity_session(proxy.base_url)
    (fixture / "session.1.jsonl").unlink()  # the child; the title lane takes its number
    (fixture / "session.2.jsonl").rename(fixture / "session.1.jsonl")
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        with pytest.raises(anthropic.APIStatusError):
            await _shared_identity_session(proxy.base_url)
    first = read_report(report).errors[0]
    assert first.type == "UnrecordedSessionError", first.message
    line = first.message.splitlines()[0]
    assert "spawn index 0), first message " in line, line
    assert "Read notes.txt." in line, line
    assert "the Agent call that session.jsonl" in line, line
    assert """(tool Agent('{"prompt":"Read notes.txt."}'))""" in line, line
    # The delegating call says what was expected, not a diff against the parent's call 2.
    assert "nearest recorded request" not in first.message, first.message
    assert len(first.message.splitlines()) <= 20, first.message


@pytest.mark.asyncio
async def test_a_changed_shared_identity_child_prompt_is_that_childs_drift(
    tmp_path: Path,
) -> None:
    """The same child with its system prompt changed (``claude -p`` with an edited agent
    definition): a RequestDriftError of the child's own recording, naming its parent — it
    was reported as a drift of the parent's call 2."""
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(SHARED_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            await _shared_identity_session(proxy.base_url)
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        with pytest.raises(anthropic.APIStatusError):
            await _shared_identity_session(proxy.base_url, "You are a reviewer for Claude Code.")
    first = read_report(report).errors[0]
    assert first.type == "RequestDriftError", first.message
    line = first.message.splitlines()[0]
    assert "call 1 of session.1.jsonl ({{session:1}}), child 0 of session.jsonl" in line, line


VIBE_RULES = """
[[rule]]
match.lane = "title"
text = "Notes via subagent"
[[rule]]
match = { last_user = "delegate", tool_offered = "run_typescript" }
call_subagent = { prompt = "Read 'notes.txt' and say what it says.", agent = "reader" }
[[rule]]
match.last_user = "Read 'notes.txt'"
text = "It says tangerine."
[[rule]]
match.last_tool_result = "success"
text = "The child says tangerine."
"""
VIBE_TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "run_typescript",
            "description": "Executes TypeScript code in a sandbox environment.",
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string"}},
                "required": ["code"],
            },
        },
    }
]


async def _vibe_session(base_url: str) -> list[str]:
    """mistral-vibe 3.0's shape: parent, child and title calls all send the parent's
    ``x-affinity``; the parent spawns its child from code (``run_typescript`` calling
    ``tools.agents.spawn({name, message})``), and the child's first message is that
    ``message`` — a literal inside the call's ``code`` argument, not an argument of its own."""
    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key="sk-vibe-shape",
        max_retries=0,
        default_headers={"x-affinity": "vibe-session-1"},
    )
    system: Any = {"role": "system", "content": "You help users get complex tasks done."}
    messages: Any = [system, {"role": "user", "content": "delegate the read"}]
    spawn = await client.chat.completions.create(model="m", messages=messages, tools=VIBE_TOOLS)
    (call,) = spawn.choices[0].message.tool_calls or []
    code = json.loads(call.function.arguments)["code"]  # type: ignore[union-attr]
    prompt = json.loads(code[code.index("{") : code.rindex("}") + 1])["message"]
    child = await client.chat.completions.create(
        model="m", messages=[system, {"role": "user", "content": prompt}], tools=VIBE_TOOLS
    )
    title = await client.chat.completions.create(
        model="m",
        messages=[
            {"role": "system", "content": "Reply with a short title for the session."},
            {"role": "user", "content": f"user: {prompt}"},
        ],
    )
    messages.append(spawn.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": '{"type":"success"}'})
    final = await client.chat.completions.create(model="m", messages=messages, tools=VIBE_TOOLS)
    await client.close()
    return [str(reply.choices[0].message.content) for reply in (child, title, final)]


@pytest.mark.asyncio
async def test_a_child_spawned_from_code_under_its_parents_identity_is_its_child(
    tmp_path: Path,
) -> None:
    """mistral-vibe's child shares its parent's x-affinity and its prompt is a string
    literal inside the parent's run_typescript code: it is the parent's child, spawn index
    0 (it was a side lane: the delegating call's only argument is the whole code), and the
    title call stays a side lane. Replay binds each request to its own script."""
    await _a_child_and_a_side_lane_recorded_and_replayed(
        tmp_path,
        VIBE_RULES,
        lambda proxy: _vibe_session(proxy.openai_base_url),
        ["It says tangerine.", "Notes via subagent", "The child says tangerine."],
        models=("m", "m", "m"),
    )


CLASSIFIER_RULES = """
[[rule]]
match.model = "small-model"
text = "Reading the notes"
[[rule]]
match.system_contains = "security monitor"
text = "<severity>0</severity>"
[[rule]]
match.last_user = "read the notes"
tool_calls = [{ id = "toolu_bash", name = "Bash", arguments = { command = "cat notes.txt" } }]
[[rule]]
match.last_tool_result = "alpha beta"
text = "The notes say alpha beta."
"""
MONITOR = "You are a security monitor for autonomous AI coding agents."


async def _classified_session(base_url: str, monitor: str = MONITOR) -> list[str]:
    """Claude Code 0.101's auto mode: every request sends ``X-Claude-Code-Session-Id``; a
    title call races the conversation's first call; before its Bash call runs, a classifier
    (another model and system prompt, no tools) judges it; then the conversation's call 2."""
    client = anthropic.AsyncAnthropic(
        base_url=base_url,
        api_key="sk-classified",
        max_retries=0,
        default_headers={"X-Claude-Code-Session-Id": str(uuid.uuid4())},
    )
    async with client:

        async def ask(system: str, messages: Any, model: str = "claude-test") -> Any:
            tools: Any = SHARED_TOOLS if model == "claude-test" else anthropic.NOT_GIVEN
            return await client.messages.create(
                model=model, max_tokens=64, system=system, messages=messages, tools=tools
            )

        history: Any = [{"role": "user", "content": "read the notes"}]
        title, plan = await asyncio.gather(
            ask("Name the session.", history, "small-model"), ask("You are Claude Code.", history)
        )
        (call,) = [block for block in plan.content if block.type == "tool_use"]
        transcript = f'<transcript>\n{{"Bash":"{call.input["command"]}"}}\n</transcript>'
        verdict = await ask(monitor, [{"role": "user", "content": transcript}], "classifier-model")
        history += [
            {"role": "assistant", "content": [b.model_dump() for b in plan.content]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call.id, "content": "alpha beta"}
                ],
            },
        ]
        final = await ask("You are Claude Code.", history)
        return [
            b.text for b in [*title.content, *verdict.content, *final.content] if b.type == "text"
        ]


@pytest.mark.asyncio
async def test_a_changed_classifier_call_is_its_own_lanes_drift_not_the_conversations(
    tmp_path: Path,
) -> None:
    """The classifier lane of a caller whose conversation and title lane share its identity,
    its system prompt changed at replay (Claude Code's names ``$USER`` when it is set, as a
    trial replay under another user sets it): a RequestDriftError of the classifier's own
    recording naming its system prompt — it was bound to the conversation as its call 2 and
    reported as another model, tools and messages (claude-code-101-read's trial 1)."""
    fixture = tmp_path / "fixture"
    expected = ["Reading the notes", "<severity>0</severity>", "The notes say alpha beta."]
    with StubServer.from_toml(CLASSIFIER_RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert await _classified_session(proxy.base_url) == expected
    (classifier,) = [
        name
        for name in recording_names(fixture)
        if _structure([load_session_log(fixture / name)])[0][3] == "classifier-model"
    ]
    report = tmp_path / "report.json"
    named = MONITOR + "\n\n## Session Context\n\n- **User identity**: `reel-trial-a`."
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        with pytest.raises(anthropic.APIStatusError):
            await _classified_session(proxy.base_url, named)
    first = read_report(report).errors[0]
    assert first.type == "RequestDriftError", first.message
    assert f"call 1 of {classifier}" in first.message.splitlines()[0], first.message
    assert "system prompt differs" in first.message, first.message
    assert "model:" not in first.message, first.message
