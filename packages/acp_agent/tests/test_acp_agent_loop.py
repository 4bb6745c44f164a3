"""The agent loop in process: a scripted provider and a recording channel, no ACP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from agentreel.acp_agent import (
    AgentRuntime,
    AgentSession,
    CancelScope,
    ClientDisconnectedError,
    TurnOutcome,
)
from agentreel.llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    GenerateOptions,
    LlmError,
    ReasoningDelta,
    ReasoningPart,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    Usage,
    validate_stream,
)
from agentreel.session import (
    AssistantChunk,
    AssistantMessage,
    EndSeed,
    Event,
    SessionStore,
    SubagentEnd,
    SubagentStart,
    ToolResult,
    TurnEnd,
    load_session_log,
)

Script = Callable[[GenerateOptions], AsyncIterator[Chunk]]


def text_chunks(text: str) -> list[Chunk]:
    return [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text=text[: len(text) // 2]),
        TextDelta(index=0, text=text[len(text) // 2 :]),
        BlockEnd(index=0, block=TextPart(text)),
        Usage(input_tokens=3, output_tokens=2),
        Finish(reason="stop"),
    ]


def tool_chunks(*calls: tuple[str, str, dict[str, object]]) -> list[Chunk]:
    chunks: list[Chunk] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        raw = json.dumps(arguments)
        chunks += [
            BlockStart(index=index, block_type="tool-call"),
            ToolCallDelta(index=index, id=call_id, name=name, arguments_delta=raw),
            BlockEnd(index=index, block=ToolCallPart(id=call_id, name=name, arguments=raw)),
        ]
    return [*chunks, Finish(reason="tool-calls")]


async def _yield_all(chunks: list[Chunk]) -> AsyncIterator[Chunk]:
    for chunk in chunks:
        await asyncio.sleep(0)
        yield chunk


def last_text(options: GenerateOptions) -> str:
    """The text of the last user or tool message of a request."""
    last = options.messages[-1]
    if last.role == "tool":
        return " ".join(getattr(p, "content", "") for p in last.content)
    return last.text


class ScriptedProvider:
    """Answers each call with ``respond(options)``; remembers every request."""

    def __init__(self, respond: Callable[[GenerateOptions], list[Chunk]]) -> None:
        self.respond = respond
        self.requests: list[GenerateOptions] = []

    def stream(self, options: GenerateOptions) -> AsyncIterator[Chunk]:
        self.requests.append(options)
        return _yield_all(self.respond(options))


class GeneratorProvider:
    """Streams whatever ``generate(options)`` yields (for hanging or failing streams)."""

    def __init__(self, generate: Script) -> None:
        self.generate = generate

    def stream(self, options: GenerateOptions) -> AsyncIterator[Chunk]:
        return self.generate(options)


async def cancel_once_streaming(
    agent: AgentSession, prompt: str, streaming: asyncio.Event
) -> TurnOutcome:
    """Run a turn and cancel it as the editor's ``session/cancel`` does, once ``streaming``
    is set: the cancel scope is marked first, then the turn's task is cancelled."""
    task = asyncio.create_task(agent.run_turn(prompt))
    await streaming.wait()
    agent.cancel_scope.requested = True
    task.cancel()
    return await task


class RecordingChannel:
    def __init__(self, allow: bool = True) -> None:
        self.allow = allow
        self.frames: list[tuple[str, object]] = []

    async def agent_text(self, text: str) -> None:
        self.frames.append(("text", text))

    async def agent_thought(self, text: str) -> None:
        self.frames.append(("thought", text))

    async def tool_call_started(
        self, call: ToolCallPart, title: str, kind: str, path: str | None
    ) -> None:
        self.frames.append(("tool_call", (call.id, title, kind)))

    async def tool_call_running(self, call_id: str) -> None:
        self.frames.append(("running", call_id))

    async def tool_call_finished(self, call_id: str, status: str, output: str) -> None:
        self.frames.append(("finished", (call_id, status, output)))

    async def request_permission(self, call: ToolCallPart, title: str, path: str) -> bool:
        self.frames.append(("permission", (call.id, title)))
        return self.allow


_OPEN_RUNTIMES: list[AgentRuntime] = []


@pytest.fixture(autouse=True)
def _close_runtimes() -> Iterator[None]:
    yield
    while _OPEN_RUNTIMES:
        _OPEN_RUNTIMES.pop().close_all()


def make_agent(
    tmp_path: Path, provider: object, channel: RecordingChannel | None = None, max_steps: int = 8
) -> tuple[AgentSession, RecordingChannel, Path]:
    workspace = tmp_path / "work"
    workspace.mkdir(exist_ok=True)
    runtime = AgentRuntime(
        store=SessionStore(tmp_path / "sessions"),
        provider=provider,  # type: ignore[arg-type]
        model="test-model",
        max_steps=max_steps,
    )
    _OPEN_RUNTIMES.append(runtime)
    channel = channel or RecordingChannel()
    agent = runtime.open_main(str(workspace), lambda _sid: channel)
    return agent, channel, workspace


def event_types(events: list[Event]) -> list[str]:
    return [type(e).__name__ for e in events]


def logs_by_id(root: Path) -> dict[str, list[Event]]:
    return {path.stem: load_session_log(path).events for path in root.rglob("*.jsonl")}


@pytest.mark.asyncio
async def test_text_turn_writes_the_turn_and_streams_text(tmp_path: Path) -> None:
    provider = ScriptedProvider(lambda options: text_chunks("hello there"))
    agent, channel, _ = make_agent(tmp_path, provider)
    outcome = await agent.run_turn("say hi")
    agent.runtime.close_all()

    assert outcome == TurnOutcome("end_turn", text="hello there")
    assert [f for f in channel.frames if f[0] == "text"] == [("text", "hello"), ("text", " there")]
    log = load_session_log(agent.session.path)
    assert event_types(log.events) == [
        "TurnStart",
        "UserMessage",
        "StepStart",
        "RequestHeader",
        *["AssistantChunk"] * 6,
        "AssistantMessage",
        "StepEnd",
        "TurnEnd",
    ]
    chunks = [e.data.chunk for e in log.events if isinstance(e, AssistantChunk)]
    assert chunks == text_chunks("hello there")
    request = provider.requests[0]
    assert request.session_id == agent.session.id
    assert request.parent_session_id is None
    assert request.spawn_index is None
    assert request.model == "test-model"


@pytest.mark.asyncio
async def test_reasoning_streams_as_thoughts_and_stays_in_the_message(tmp_path: Path) -> None:
    chunks: list[Chunk] = [
        BlockStart(index=0, block_type="reasoning"),
        ReasoningDelta(index=0, text="let me think"),
        BlockEnd(index=0, block=ReasoningPart("let me think")),
        BlockStart(index=1, block_type="text"),
        TextDelta(index=1, text="answer"),
        BlockEnd(index=1, block=TextPart("answer")),
        Finish(reason="stop"),
    ]
    validate_stream(chunks)
    agent, channel, _ = make_agent(tmp_path, ScriptedProvider(lambda options: chunks))
    outcome = await agent.run_turn("think")
    assert outcome.text == "answer"
    assert ("thought", "let me think") in channel.frames
    (message,) = [e.data.message for e in agent.session.events if isinstance(e, AssistantMessage)]
    assert message.content == (ReasoningPart("let me think"), TextPart("answer"))


@pytest.mark.asyncio
async def test_second_turn_sends_the_whole_conversation(tmp_path: Path) -> None:
    provider = ScriptedProvider(lambda options: text_chunks(f"answer {len(options.messages)}"))
    agent, _, _ = make_agent(tmp_path, provider)
    await agent.run_turn("one")
    outcome = await agent.run_turn("two")
    assert outcome.text == "answer 3"
    assert [m.role for m in provider.requests[1].messages] == ["user", "assistant", "user"]
    turn_ends = [e for e in agent.session.events if isinstance(e, TurnEnd)]
    assert [(e.data.turn, e.data.reason) for e in turn_ends] == [(0, "completed"), (1, "completed")]


@pytest.mark.asyncio
async def test_read_and_list_tools_feed_results_back(tmp_path: Path) -> None:
    def respond(options: GenerateOptions) -> list[Chunk]:
        if options.messages[-1].role == "user":
            return tool_chunks(
                ("c1", "list_files", {"path": "."}), ("c2", "read_file", {"path": "notes.txt"})
            )
        return text_chunks("done reading")

    provider = ScriptedProvider(respond)
    agent, channel, workspace = make_agent(tmp_path, provider)
    (workspace / "notes.txt").write_text("remember the milk")
    (workspace / "sub").mkdir()
    outcome = await agent.run_turn("look around")

    assert outcome.text == "done reading"
    results = {e.data.call_id: e.data for e in agent.session.events if isinstance(e, ToolResult)}
    assert results["c1"].content == "notes.txt\nsub/"
    assert results["c2"].content == "remember the milk"
    assert not results["c1"].is_error
    assert not results["c2"].is_error
    second = provider.requests[1]
    assert [m.role for m in second.messages] == ["user", "assistant", "tool", "tool"]
    assert ("tool_call", ("c2", "Read notes.txt", "read")) in channel.frames
    assert ("finished", ("c2", "completed", "remember the milk")) in channel.frames


@pytest.mark.asyncio
@pytest.mark.parametrize("allow", [True, False])
async def test_write_file_asks_permission_and_respects_the_answer(
    tmp_path: Path, allow: bool
) -> None:
    def respond(options: GenerateOptions) -> list[Chunk]:
        if options.messages[-1].role == "user":
            return tool_chunks(("w1", "write_file", {"path": "out/a.txt", "content": "new"}))
        return text_chunks("ok")

    agent, channel, workspace = make_agent(
        tmp_path, ScriptedProvider(respond), RecordingChannel(allow=allow)
    )
    outcome = await agent.run_turn("write it")
    assert outcome.stop_reason == "end_turn"
    assert ("permission", ("w1", "Write out/a.txt")) in channel.frames
    (result,) = [e.data for e in agent.session.events if isinstance(e, ToolResult)]
    if allow:
        assert (workspace / "out" / "a.txt").read_text() == "new"
        assert not result.is_error
    else:
        assert not (workspace / "out").exists()
        assert result.is_error
        assert "rejected" in result.content


@pytest.mark.asyncio
async def test_paths_escaping_the_workspace_are_tool_errors(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("top secret")

    def respond(options: GenerateOptions) -> list[Chunk]:
        if options.messages[-1].role == "user":
            return tool_chunks(
                ("e1", "read_file", {"path": "../secret.txt"}),
                ("e2", "read_file", {"path": "link.txt"}),
                ("e3", "write_file", {"path": str(outside), "content": "pwned"}),
                ("e4", "list_files", {"path": "/"}),
                ("e5", "read_file", {"path": 7}),
                ("e6", "no_such_tool", {}),
            )
        return text_chunks("ok")

    agent, channel, workspace = make_agent(tmp_path, ScriptedProvider(respond))
    (workspace / "link.txt").symlink_to(outside)
    outcome = await agent.run_turn("escape")

    assert outcome.stop_reason == "end_turn"
    assert outside.read_text() == "top secret"
    results = {e.data.call_id: e.data for e in agent.session.events if isinstance(e, ToolResult)}
    assert all(r.is_error for r in results.values())
    for call_id in ("e1", "e2", "e3", "e4"):
        assert "outside the workspace" in results[call_id].content
    assert "top secret" not in json.dumps([r.content for r in results.values()])
    assert not [f for f in channel.frames if f[0] == "permission"]


@pytest.mark.asyncio
async def test_spawn_subagent_runs_a_child_session(tmp_path: Path) -> None:
    def respond(options: GenerateOptions) -> list[Chunk]:
        if options.parent_session_id is not None:
            return text_chunks("child says 42")
        if options.messages[-1].role == "user":
            return tool_chunks(
                ("s1", "subagent", {"description": "d", "prompt": "compute", "mode": "spawn"})
            )
        return text_chunks(f"parent got: {last_text(options)}")

    provider = ScriptedProvider(respond)
    agent, channel, _ = make_agent(tmp_path, provider)
    outcome = await agent.run_turn("delegate")
    agent.runtime.close_all()

    assert outcome.text == "parent got: child says 42"
    starts = [e.data for e in agent.session.events if isinstance(e, SubagentStart)]
    ends = [e.data for e in agent.session.events if isinstance(e, SubagentEnd)]
    assert [(s.spawn_index, s.mode) for s in starts] == [(0, "spawn")]
    assert [(e.child_session, e.outcome) for e in ends] == [(starts[0].child_session, "completed")]
    child_log = load_session_log(agent.session.path.with_name(f"{starts[0].child_session}.jsonl"))
    assert child_log.header.parent_session == agent.session.id
    assert child_log.header.spawn_index == 0
    assert child_log.header.origin == "spawn"
    assert child_log.header.seed_length == 0
    child_request = next(r for r in provider.requests if r.parent_session_id is not None)
    assert child_request.session_id == child_log.header.id
    assert child_request.spawn_index == 0
    assert [m.text for m in child_request.messages] == ["compute"]
    assert ("finished", ("s1", "completed", "child says 42")) in channel.frames
    # The child's text is not streamed to the editor: only the parent's is.
    streamed = "".join(str(text) for kind, text in channel.frames if kind == "text")
    assert streamed == "parent got: child says 42"


@pytest.mark.asyncio
async def test_a_subagents_write_asks_the_editor_for_permission(tmp_path: Path) -> None:
    """A child's updates are not streamed, but its writes still go through the editor's
    permission prompt: a rejection reaches the child as an error result, nothing is written."""

    def respond(options: GenerateOptions) -> list[Chunk]:
        last = options.messages[-1]
        if options.parent_session_id is not None:
            if last.role == "user":
                return tool_chunks(("cw", "write_file", {"path": "child.txt", "content": "x"}))
            return text_chunks(f"child saw: {last_text(options)[:40]}")
        if last.role == "user":
            return tool_chunks(
                ("s1", "subagent", {"description": "d", "prompt": "write it", "mode": "spawn"})
            )
        return text_chunks("parent done")

    agent, channel, workspace = make_agent(
        tmp_path, ScriptedProvider(respond), RecordingChannel(allow=False)
    )
    outcome = await agent.run_turn("delegate a write")
    agent.runtime.close_all()

    assert outcome.text == "parent done"
    assert [f for f in channel.frames if f[0] == "permission"] == [
        ("permission", ("cw", "Write child.txt"))
    ]
    assert not (workspace / "child.txt").exists()
    (start,) = [e.data for e in agent.session.events if isinstance(e, SubagentStart)]
    child = load_session_log(agent.session.path.with_name(f"{start.child_session}.jsonl"))
    (result,) = [e.data for e in child.events if isinstance(e, ToolResult)]
    assert result.call_id == "cw"
    assert result.is_error
    assert "rejected" in result.content


@pytest.mark.asyncio
async def test_fork_child_starts_from_the_parents_last_completed_turn(tmp_path: Path) -> None:
    def respond(options: GenerateOptions) -> list[Chunk]:
        if options.parent_session_id is not None:
            return text_chunks("forked answer")
        last = options.messages[-1]
        if last.role == "user" and last.text == "first":
            return text_chunks("first answer")
        if last.role == "user":
            return tool_chunks(
                ("f1", "subagent", {"description": "d", "prompt": "go on", "mode": "fork"})
            )
        return text_chunks("parent done")

    provider = ScriptedProvider(respond)
    agent, _, _ = make_agent(tmp_path, provider)
    await agent.run_turn("first")
    parent_events_after_turn_0 = agent.session.events
    await agent.run_turn("second")
    agent.runtime.close_all()

    (start,) = [e.data for e in agent.session.events if isinstance(e, SubagentStart)]
    assert start.mode == "fork"
    child = load_session_log(agent.session.path.with_name(f"{start.child_session}.jsonl"))
    assert child.header.origin == "fork"
    assert child.header.seed_length == len(parent_events_after_turn_0)
    assert child.seed == parent_events_after_turn_0
    assert isinstance(child.own_events[0], EndSeed)
    # The child continues the turn numbering and sees the parent's first turn.
    child_request = next(r for r in provider.requests if r.parent_session_id is not None)
    assert [(m.role, m.text) for m in child_request.messages] == [
        ("user", "first"),
        ("assistant", "first answer"),
        ("user", "go on"),
    ]
    own_turn_ends = [e for e in child.own_events if isinstance(e, TurnEnd)]
    assert [e.data.turn for e in own_turn_ends] == [1]


@pytest.mark.asyncio
async def test_parallel_subagents_run_concurrently_with_ordered_spawn_indexes(
    tmp_path: Path,
) -> None:
    started: set[str] = set()
    both_started = asyncio.Event()
    parents: list[AgentSession] = []
    starts_logged_at_child_call: list[int] = []

    async def child_stream(options: GenerateOptions) -> AsyncIterator[Chunk]:
        assert options.session_id is not None
        starts_logged_at_child_call.append(
            sum(isinstance(e, SubagentStart) for e in parents[0].session.events)
        )
        started.add(options.session_id)
        if len(started) == 2:
            both_started.set()
        # Each child waits for the other: a sequential runner would time out here.
        await asyncio.wait_for(both_started.wait(), timeout=10)
        for chunk in text_chunks(f"result for {last_text(options)}"):
            yield chunk

    class ParallelProvider(ScriptedProvider):
        def stream(self, options: GenerateOptions) -> AsyncIterator[Chunk]:
            if options.parent_session_id is not None:
                self.requests.append(options)
                return child_stream(options)
            return super().stream(options)

    def respond(options: GenerateOptions) -> list[Chunk]:
        if options.messages[-1].role == "user":
            return tool_chunks(
                ("p1", "subagent", {"description": "a", "prompt": "task A", "mode": "spawn"}),
                ("p2", "subagent", {"description": "b", "prompt": "task B", "mode": "spawn"}),
            )
        return text_chunks("merged")

    provider = ParallelProvider(respond)
    agent, _, _ = make_agent(tmp_path, provider)
    parents.append(agent)
    outcome = await agent.run_turn("fan out")
    agent.runtime.close_all()

    assert outcome.text == "merged"
    starts = [e.data for e in agent.session.events if isinstance(e, SubagentStart)]
    assert [s.spawn_index for s in starts] == [0, 1]
    # Both spawn indexes were assigned (and logged) before either child made its call.
    assert starts_logged_at_child_call == [2, 2]
    results = [e.data for e in agent.session.events if isinstance(e, ToolResult)]
    assert [(r.call_id, r.content) for r in results] == [
        ("p1", "result for task A"),
        ("p2", "result for task B"),
    ]
    for start, task in zip(starts, ["task A", "task B"], strict=True):
        child = load_session_log(agent.session.path.with_name(f"{start.child_session}.jsonl"))
        assert child.header.parent_session == agent.session.id
        assert child.header.spawn_index == start.spawn_index
        request = next(r for r in provider.requests if r.session_id == child.header.id)
        assert request.spawn_index == start.spawn_index
        assert request.parent_session_id == agent.session.id
        assert request.messages[-1].text == task


@pytest.mark.asyncio
async def test_cancel_mid_stream_aborts_the_turn(tmp_path: Path) -> None:
    streaming = asyncio.Event()

    async def hang(options: GenerateOptions) -> AsyncIterator[Chunk]:
        yield BlockStart(index=0, block_type="text")
        yield TextDelta(index=0, text="partial")
        streaming.set()
        await asyncio.Event().wait()
        yield Finish(reason="stop")  # pragma: no cover

    agent, channel, _ = make_agent(tmp_path, GeneratorProvider(hang))
    outcome = await cancel_once_streaming(agent, "wait forever", streaming)

    assert outcome.stop_reason == "cancelled"
    assert ("text", "partial") in channel.frames
    events = agent.session.events
    assert isinstance(events[-1], TurnEnd)
    assert events[-1].data.reason == "aborted"
    assert event_types(events)[-2] == "StepEnd"


@pytest.mark.asyncio
async def test_cancel_during_subagents_cancels_the_children(tmp_path: Path) -> None:
    children_streaming = asyncio.Event()
    count = 0

    async def hang(options: GenerateOptions) -> AsyncIterator[Chunk]:
        nonlocal count
        yield BlockStart(index=0, block_type="text")
        count += 1
        if count == 2:
            children_streaming.set()
        await asyncio.Event().wait()
        yield Finish(reason="stop")  # pragma: no cover

    class Provider(ScriptedProvider):
        def stream(self, options: GenerateOptions) -> AsyncIterator[Chunk]:
            if options.parent_session_id is not None:
                return hang(options)
            return super().stream(options)

    provider = Provider(
        lambda options: tool_chunks(
            ("k1", "subagent", {"description": "a", "prompt": "A", "mode": "spawn"}),
            ("k2", "subagent", {"description": "b", "prompt": "B", "mode": "fork"}),
        )
    )
    agent, _, _ = make_agent(tmp_path, provider)
    outcome = await cancel_once_streaming(agent, "fan out", children_streaming)
    agent.runtime.close_all()

    assert outcome.stop_reason == "cancelled"
    events = agent.session.events
    ends = [e.data.outcome for e in events if isinstance(e, SubagentEnd)]
    assert ends == ["cancelled", "cancelled"]
    results = [e.data for e in events if isinstance(e, ToolResult)]
    assert [r.is_error for r in results] == [True, True]
    assert isinstance(events[-1], TurnEnd)
    assert events[-1].data.reason == "aborted"
    for start in [e.data for e in events if isinstance(e, SubagentStart)]:
        child = load_session_log(agent.session.path.with_name(f"{start.child_session}.jsonl"))
        last = child.events[-1]
        assert isinstance(last, TurnEnd)
        assert last.data.reason == "aborted"


@pytest.mark.asyncio
async def test_model_error_ends_the_turn_cleanly_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    calls = 0

    def respond(options: GenerateOptions) -> list[Chunk]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise LlmError("server_error", 500, "upstream exploded")
        if calls == 2:
            return [Finish(reason="error", message="stream failed", code="overloaded")]
        return text_chunks("recovered")

    agent, _, _ = make_agent(tmp_path, ScriptedProvider(respond))
    first = await agent.run_turn("one")
    second = await agent.run_turn("two")
    third = await agent.run_turn("three")

    assert first.stop_reason == "error"
    assert first.llm_error is not None
    assert first.llm_error.code == "server_error"
    assert "upstream exploded" in (first.error or "")
    assert agent.id in (first.error or "")
    assert second.stop_reason == "error"
    assert second.llm_error is not None
    assert second.llm_error.code == "overloaded"
    assert third == TurnOutcome("end_turn", text="recovered")
    reasons = [e.data.reason for e in agent.session.events if isinstance(e, TurnEnd)]
    assert reasons == ["error", "error", "completed"]


@pytest.mark.asyncio
async def test_max_steps_ends_the_turn_with_max_turns(tmp_path: Path) -> None:
    provider = ScriptedProvider(lambda options: tool_chunks(("m", "list_files", {})))
    agent, _, _ = make_agent(tmp_path, provider, max_steps=3)
    outcome = await agent.run_turn("loop forever")
    assert outcome.stop_reason == "max_turn_requests"
    assert len(provider.requests) == 3
    last = agent.session.events[-1]
    assert isinstance(last, TurnEnd)
    assert last.data.reason == "max-turns"


@pytest.mark.asyncio
async def test_a_failing_child_is_an_error_result_for_the_parent(tmp_path: Path) -> None:
    def respond(options: GenerateOptions) -> list[Chunk]:
        if options.parent_session_id is not None:
            raise LlmError("rate_limited", 429, "slow down")
        if options.messages[-1].role == "user":
            return tool_chunks(
                ("x1", "subagent", {"description": "d", "prompt": "p", "mode": "spawn"}),
                ("x2", "subagent", {"description": "d", "prompt": "p", "mode": "sideways"}),
            )
        return text_chunks("handled")

    agent, _, _ = make_agent(tmp_path, ScriptedProvider(respond))
    outcome = await agent.run_turn("go")
    assert outcome.text == "handled"
    results = {e.data.call_id: e.data for e in agent.session.events if isinstance(e, ToolResult)}
    assert results["x1"].is_error
    assert "slow down" in results["x1"].content
    assert results["x2"].is_error
    assert "mode" in results["x2"].content
    ends = [e.data.outcome for e in agent.session.events if isinstance(e, SubagentEnd)]
    assert ends == ["error"]


def test_cancel_scope_defaults_to_interrupted() -> None:
    assert CancelScope().requested is False


def call_chunks(events: list[Event]) -> list[Chunk]:
    return [e.data.chunk for e in events if isinstance(e, AssistantChunk)]


@pytest.mark.asyncio
async def test_every_recorded_call_ends_with_finish_even_on_cancel_and_error(
    tmp_path: Path,
) -> None:
    streaming = asyncio.Event()
    mode = "hang"

    async def stream(options: GenerateOptions) -> AsyncIterator[Chunk]:
        yield BlockStart(index=0, block_type="text")
        yield TextDelta(index=0, text="part")
        if mode == "hang":
            streaming.set()
            await asyncio.Event().wait()
        raise LlmError("stream_cut", None, "the connection dropped")

    agent, _, _ = make_agent(tmp_path, GeneratorProvider(stream))
    assert (await cancel_once_streaming(agent, "one", streaming)).stop_reason == "cancelled"
    mode = "cut"
    assert (await agent.run_turn("two")).stop_reason == "error"

    chunks = call_chunks(agent.session.events)
    finishes = [c for c in chunks if isinstance(c, Finish)]
    assert finishes == [
        Finish(reason="aborted", message="cancelled by the client"),
        Finish(reason="error", message="the connection dropped", code="stream_cut"),
    ]
    validate_stream(chunks[:3])
    validate_stream(chunks[3:])


@pytest.mark.asyncio
async def test_a_provider_finishing_aborted_ends_the_turn_as_cancelled(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        lambda options: [
            BlockStart(index=0, block_type="text"),
            TextDelta(index=0, text="cut"),
            Finish(reason="aborted", message="cancelled by the client"),
        ]
    )
    agent, _, _ = make_agent(tmp_path, provider)
    outcome = await agent.run_turn("replayed cancel")
    assert outcome.stop_reason == "cancelled"
    last = agent.session.events[-1]
    assert isinstance(last, TurnEnd)
    assert last.data.reason == "aborted"
    # The aborted finish is the recorded one: nothing synthetic is added after it.
    assert len([c for c in call_chunks(agent.session.events) if isinstance(c, Finish)]) == 1


@pytest.mark.asyncio
async def test_a_vanished_client_interrupts_the_turn(tmp_path: Path) -> None:
    class GoneChannel(RecordingChannel):
        async def agent_text(self, text: str) -> None:
            raise ClientDisconnectedError("session x: the client connection closed")

    agent, _, _ = make_agent(
        tmp_path, ScriptedProvider(lambda options: text_chunks("hello")), GoneChannel()
    )
    outcome = await agent.run_turn("anyone there?")
    assert outcome.stop_reason == "cancelled"
    events = agent.session.events
    last = events[-1]
    assert isinstance(last, TurnEnd)
    assert last.data.reason == "interrupted"
    assert call_chunks(events)[-1] == Finish(reason="aborted", message="interrupted")
