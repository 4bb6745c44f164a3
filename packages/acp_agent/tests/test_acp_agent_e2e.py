"""End to end: the agent as a subprocess, driven by the official ACP client, against the
stub model server through the real ``stub`` (openai adapter) provider.

stdout is read straight from the pipe (every raw line is kept, then fed to the client
connection), so the tests see exactly the bytes an editor sees.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from agentreel.llm import Finish, TextDelta
from agentreel.llm.stub import StubServer
from agentreel.session import (
    AssistantChunk,
    EndSeed,
    RequestHeader,
    SessionLog,
    SubagentStart,
    ToolResult,
    TurnEnd,
    UserMessage,
    harvest_session_logs,
)

RULES = """
[[rule]]
name = "plain"
match = { last_user = "hello" }
text = "Hi there, friend"

[[rule]]
match = { last_user = "write one" }
[[rule.tool_calls]]
id = "w1"
name = "write_file"
arguments = { path = "out/one.txt", content = "first" }

[[rule]]
match = { last_user = "write two" }
[[rule.tool_calls]]
id = "w2"
name = "write_file"
arguments = { path = "two.txt", content = "second" }

[[rule]]
match = { last_tool_result = "wrote" }
text = "written"

[[rule]]
match = { last_tool_result = "rejected" }
text = "not written"

[[rule]]
match = { last_user = "delegate please" }
[[rule.tool_calls]]
id = "s1"
name = "subagent"
arguments = { description = "count", prompt = "spawned task", mode = "spawn" }

[[rule]]
match = { last_user = "spawned task" }
text = "spawn result 42"

[[rule]]
match = { last_tool_result = "spawn result 42" }
text = "parent saw 42"

[[rule]]
match = { last_user = "remember seven" }
text = "noted seven"

[[rule]]
match = { last_user = "fork now" }
[[rule.tool_calls]]
id = "f1"
name = "subagent"
arguments = { description = "continue", prompt = "forked task", mode = "fork" }

[[rule]]
match = { last_user = "forked task" }
text = "fork result seven"

[[rule]]
match = { last_tool_result = "fork result seven" }
text = "fork merged"

[[rule]]
match = { last_user = "fan out" }
[[rule.tool_calls]]
id = "p1"
name = "subagent"
arguments = { description = "a", prompt = "task alpha", mode = "spawn" }
[[rule.tool_calls]]
id = "p2"
name = "subagent"
arguments = { description = "b", prompt = "task beta", mode = "spawn" }

[[rule]]
match = { last_user = "task alpha" }
text = "alpha result"

[[rule]]
match = { last_user = "task beta" }
text = "beta result"

[[rule]]
match = { last_tool_result = "beta result" }
text = "merged alpha and beta"

[[rule]]
match = { last_user = "go slow" }
text = "this answer streams very slowly so that the client can cancel it mid-way through"
chunk_size = 4
delay_ms = 150

[[rule]]
match = { last_user = "explode" }
status = 400
error_message = "the stub refuses this request"
"""


@pytest.fixture(scope="module")
def stub_server() -> Iterator[StubServer]:
    with StubServer.from_toml(RULES, source="test_acp_agent_e2e rules") as server:
        yield server


class Editor:
    """The client side: records every session update before awaiting anything."""

    def __init__(self, permission_answers: list[str] | None = None) -> None:
        self.answers = list(permission_answers or [])
        self.permission_requests: list[ToolCallUpdate] = []
        self.permission_options: list[list[PermissionOption]] = []
        self.updates: list[Any] = []
        self.text_seen = asyncio.Event()

    async def request_permission(
        self, options: list[PermissionOption], session_id: str, tool_call: ToolCallUpdate, **_: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append(tool_call)
        self.permission_options.append(options)
        answer = self.answers.pop(0)
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)
        if isinstance(update, AgentMessageChunk):
            self.text_seen.set()

    def text(self) -> str:
        return "".join(
            u.content.text
            for u in self.updates
            if isinstance(u, AgentMessageChunk) and hasattr(u.content, "text")
        )


class AgentRun:
    def __init__(self, process: asyncio.subprocess.Process, conn: Any, raw: list[bytes]) -> None:
        self.process = process
        self.conn = conn
        self.raw = raw
        self.exit_code: int | None = None

    def frames(self) -> list[dict[str, Any]]:
        """Every stdout line, parsed; fails on any line that is not a JSON-RPC object."""
        parsed = []
        for line in self.raw:
            frame = json.loads(line)
            assert isinstance(frame, dict), line
            assert frame.get("jsonrpc") == "2.0", line
            parsed.append(frame)
        return parsed


def agent_env(tmp_path: Path, stub: StubServer, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    temp = tmp_path / "tmp"
    home.mkdir(exist_ok=True)
    temp.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "TMPDIR": str(temp),
        "PYTHONDONTWRITEBYTECODE": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "AGENTREEL_PROVIDER": "stub",
        "AGENTREEL_STUB_URL": stub.base_url,
        "AGENTREEL_SESSIONS_ROOT": str(tmp_path / "sessions"),
        "AGENTREEL_LOG_LEVEL": "INFO",
    }
    env.update(extra)
    return env


@asynccontextmanager
async def run_agent(
    tmp_path: Path,
    editor: Editor,
    env: dict[str, str],
    command: tuple[str, ...] = ("-m", "agentreel.acp_agent"),
) -> AsyncIterator[AgentRun]:
    process_cwd = tmp_path / "process-cwd"
    process_cwd.mkdir(exist_ok=True)
    with (tmp_path / "agent.stderr").open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=process_cwd,
        )
    assert process.stdout is not None
    assert process.stdin is not None
    raw: list[bytes] = []
    reader = asyncio.StreamReader()
    stdout = process.stdout

    async def pump() -> None:
        while line := await stdout.readline():
            raw.append(line)
            reader.feed_data(line)
        reader.feed_eof()

    pump_task = asyncio.create_task(pump())
    conn = acp.connect_to_agent(editor, process.stdin, reader)  # type: ignore[arg-type]
    run = AgentRun(process, conn, raw)
    try:
        yield run
        process.stdin.close()
        run.exit_code = await asyncio.wait_for(process.wait(), timeout=30)
        await pump_task
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        pump_task.cancel()
        await conn.close()


async def start(run: AgentRun, workspace: Path) -> str:
    await run.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
    response = await run.conn.new_session(cwd=str(workspace), mcp_servers=[])
    session_id: str = response.session_id
    return session_id


async def prompt(run: AgentRun, session_id: str, text: str) -> str:
    response = await run.conn.prompt(session_id=session_id, prompt=[acp.text_block(text)])
    stop_reason: str = response.stop_reason
    return stop_reason


def make_workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "readme.txt").write_text("hello workspace")
    return workspace


def logs(tmp_path: Path) -> list[SessionLog]:
    return list(harvest_session_logs(tmp_path / "sessions"))


def tree(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def stderr_tail(tmp_path: Path) -> str:
    return (tmp_path / "agent.stderr").read_text()[-3000:]


@pytest.mark.asyncio
async def test_text_turn(tmp_path: Path, stub_server: StubServer) -> None:
    workspace = make_workspace(tmp_path)
    editor = Editor()
    async with run_agent(tmp_path, editor, agent_env(tmp_path, stub_server)) as run:
        session_id = await start(run, workspace)
        assert await prompt(run, session_id, "hello agent") == "end_turn"
    assert run.exit_code == 0, stderr_tail(tmp_path)

    assert editor.text() == "Hi there, friend"
    frames = run.frames()
    assert {f["method"] for f in frames if "method" in f} == {"session/update"}
    assert [f["id"] for f in frames if "id" in f] == [0, 1, 2]
    chunks = [
        f["params"]["update"]["content"]["text"]
        for f in frames
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert "".join(chunks) == "Hi there, friend"
    (main,) = logs(tmp_path)
    assert main.header.id == session_id
    assert main.header.cwd == str(workspace)
    assert isinstance(main.events[-1], TurnEnd)
    assert main.events[-1].data.reason == "completed"


@pytest.mark.asyncio
async def test_system_prompt_setting_reaches_every_request(
    tmp_path: Path, stub_server: StubServer
) -> None:
    """--system-prompt (over AGENTREEL_SYSTEM_PROMPT) is what the model receives, in the
    parent's and a subagent's requests, and what the request headers record."""
    workspace = make_workspace(tmp_path)
    env = agent_env(tmp_path, stub_server, AGENTREEL_SYSTEM_PROMPT="From the environment.")
    command = ("-m", "agentreel.acp_agent", "--system-prompt", "From the flag.")
    first_request = len(stub_server.requests)
    async with run_agent(tmp_path, Editor(), env, command) as run:
        session_id = await start(run, workspace)
        assert await prompt(run, session_id, "delegate please") == "end_turn"
    assert run.exit_code == 0, stderr_tail(tmp_path)

    sent = stub_server.requests[first_request:]
    assert len(sent) == 3  # parent, spawned child, parent again
    assert [r.body["messages"][0] for r in sent] == [
        {"role": "system", "content": "From the flag."}
    ] * 3
    headers = [e.data for log in logs(tmp_path) for e in log.events if isinstance(e, RequestHeader)]
    assert [h.system for h in headers] == ["From the flag."] * 3


@pytest.mark.asyncio
async def test_tool_turn_with_permission_allowed_then_rejected(
    tmp_path: Path, stub_server: StubServer
) -> None:
    workspace = make_workspace(tmp_path)
    editor = Editor(permission_answers=["allow", "reject"])
    async with run_agent(tmp_path, editor, agent_env(tmp_path, stub_server)) as run:
        session_id = await start(run, workspace)
        assert await prompt(run, session_id, "write one") == "end_turn"
        assert await prompt(run, session_id, "write two") == "end_turn"
    assert run.exit_code == 0, stderr_tail(tmp_path)

    assert (workspace / "out" / "one.txt").read_text() == "first"
    assert not (workspace / "two.txt").exists()
    assert [r.tool_call_id for r in editor.permission_requests] == ["w1", "w2"]
    assert {o.kind for o in editor.permission_options[0]} == {"allow_once", "reject_once"}
    assert editor.text() == "writtennot written"
    (main,) = logs(tmp_path)
    results = [e.data for e in main.events if isinstance(e, ToolResult)]
    assert [(r.call_id, r.is_error) for r in results] == [("w1", False), ("w2", True)]
    assert "rejected" in results[1].content
    updates = [
        f["params"]["update"]
        for f in run.frames()
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] in ("tool_call", "tool_call_update")
    ]
    statuses = [(u["toolCallId"], u["sessionUpdate"], u.get("status")) for u in updates]
    assert statuses == [
        ("w1", "tool_call", "pending"),
        ("w1", "tool_call_update", "in_progress"),
        ("w1", "tool_call_update", "completed"),
        ("w2", "tool_call", "pending"),
        ("w2", "tool_call_update", "in_progress"),
        ("w2", "tool_call_update", "failed"),
    ]


@pytest.mark.asyncio
async def test_spawn_and_fork_subagents(tmp_path: Path, stub_server: StubServer) -> None:
    workspace = make_workspace(tmp_path)
    editor = Editor()
    async with run_agent(tmp_path, editor, agent_env(tmp_path, stub_server)) as run:
        session_id = await start(run, workspace)
        assert await prompt(run, session_id, "delegate please") == "end_turn"
        assert await prompt(run, session_id, "remember seven") == "end_turn"
        assert await prompt(run, session_id, "fork now") == "end_turn"
    assert run.exit_code == 0, stderr_tail(tmp_path)

    assert editor.text() == "parent saw 42noted sevenfork merged"
    main, spawned, forked = logs(tmp_path)
    assert main.header.id == session_id
    starts = [e.data for e in main.events if isinstance(e, SubagentStart)]
    assert [(s.child_session, s.spawn_index, s.mode) for s in starts] == [
        (spawned.header.id, 0, "spawn"),
        (forked.header.id, 1, "fork"),
    ]
    assert spawned.header.parent_session == session_id
    assert spawned.header.origin == "spawn"
    assert spawned.header.seed_length == 0
    assert forked.header.parent_session == session_id
    assert forked.header.origin == "fork"
    # The fork child's log starts with the parent's events up to its last completed turn.
    turn_ends = [i for i, e in enumerate(main.events) if isinstance(e, TurnEnd)]
    assert forked.header.seed_length == turn_ends[1] + 1
    assert forked.seed == main.events[: turn_ends[1] + 1]
    assert isinstance(forked.own_events[0], EndSeed)
    results = [e.data.content for e in main.events if isinstance(e, ToolResult)]
    assert results == ["spawn result 42", "fork result seven"]


@pytest.mark.asyncio
async def test_two_parallel_subagents(tmp_path: Path, stub_server: StubServer) -> None:
    workspace = make_workspace(tmp_path)
    editor = Editor()
    async with run_agent(tmp_path, editor, agent_env(tmp_path, stub_server)) as run:
        session_id = await start(run, workspace)
        assert await prompt(run, session_id, "fan out") == "end_turn"
    assert run.exit_code == 0, stderr_tail(tmp_path)

    assert editor.text() == "merged alpha and beta"
    main, first, second = logs(tmp_path)
    by_task = {}
    for child in (first, second):
        assert child.header.parent_session == session_id
        (user,) = [e.data.text for e in child.events if isinstance(e, UserMessage)]
        by_task[user] = child.header.spawn_index
    assert by_task == {"task alpha": 0, "task beta": 1}
    results = [(e.data.call_id, e.data.content) for e in main.events if isinstance(e, ToolResult)]
    assert results == [("p1", "alpha result"), ("p2", "beta result")]


@pytest.mark.asyncio
async def test_cancel_mid_stream(tmp_path: Path, stub_server: StubServer) -> None:
    workspace = make_workspace(tmp_path)
    editor = Editor()
    async with run_agent(tmp_path, editor, agent_env(tmp_path, stub_server)) as run:
        session_id = await start(run, workspace)
        pending = asyncio.create_task(prompt(run, session_id, "go slow"))
        await asyncio.wait_for(editor.text_seen.wait(), timeout=30)
        await run.conn.cancel(session_id=session_id)
        assert await asyncio.wait_for(pending, timeout=30) == "cancelled"
        # The session is still usable after a cancel.
        assert await prompt(run, session_id, "hello again") == "end_turn"
    assert run.exit_code == 0, stderr_tail(tmp_path)

    full = "this answer streams very slowly so that the client can cancel it mid-way through"
    assert not editor.text().startswith(full)
    (main,) = logs(tmp_path)
    reasons = [e.data.reason for e in main.events if isinstance(e, TurnEnd)]
    assert reasons == ["aborted", "completed"]


@pytest.mark.asyncio
async def test_model_error_is_a_clean_turn_end_and_a_json_rpc_error(
    tmp_path: Path, stub_server: StubServer
) -> None:
    workspace = make_workspace(tmp_path)
    editor = Editor()
    async with run_agent(tmp_path, editor, agent_env(tmp_path, stub_server)) as run:
        session_id = await start(run, workspace)
        with pytest.raises(acp.RequestError) as excinfo:
            await prompt(run, session_id, "explode")
        assert await prompt(run, session_id, "hello after the error") == "end_turn"
    assert run.exit_code == 0, stderr_tail(tmp_path)

    assert excinfo.value.code == -32603
    assert str(excinfo.value).count("model call failed") == 1  # said once, not doubled
    assert session_id in str(excinfo.value)
    data = excinfo.value.data
    assert isinstance(data, dict)
    assert data["status"] == 400
    errors = [f for f in run.frames() if "error" in f]
    assert len(errors) == 1
    assert set(errors[0]) == {"jsonrpc", "id", "error"}
    assert set(errors[0]["error"]) >= {"code", "message"}
    (main,) = logs(tmp_path)
    reasons = [e.data.reason for e in main.events if isinstance(e, TurnEnd)]
    assert reasons == ["error", "completed"]


@pytest.mark.asyncio
async def test_stdout_is_protocol_only_and_writes_stay_in_cwd_and_sessions_root(
    tmp_path: Path, stub_server: StubServer
) -> None:
    workspace = make_workspace(tmp_path)
    editor = Editor(permission_answers=["allow"])
    # Stray output after startup (print, or raw writes to fd 1) must not reach stdout.
    (tmp_path / "sitecustom").mkdir()
    (tmp_path / "sitecustom" / "sitecustomize.py").write_text(
        "import atexit, os\n"
        "atexit.register(print, 'print noise at exit')\n"
        "atexit.register(os.write, 1, b'fd noise at exit\\n')\n"
    )
    env = agent_env(tmp_path, stub_server, PYTHONPATH=str(tmp_path / "sitecustom"))
    (tmp_path / "process-cwd").mkdir()
    before = tree(tmp_path)
    async with run_agent(tmp_path, editor, env) as run:
        session_id = await start(run, workspace)
        assert await prompt(run, session_id, "write one") == "end_turn"
        assert await prompt(run, session_id, "fan out") == "end_turn"
    assert run.exit_code == 0, stderr_tail(tmp_path)

    frames = run.frames()  # raises on any non-JSON line
    assert len(frames) == len(run.raw)
    assert all(line.endswith(b"\n") for line in run.raw)
    created = tree(tmp_path) - before
    allowed_roots = (workspace, tmp_path / "sessions", tmp_path / "agent.stderr")
    outside = sorted(
        str(p)
        for p in created
        if not any(p == root or p.is_relative_to(root) for root in allowed_roots)
    )
    assert outside == []
    assert list((tmp_path / "tmp").iterdir()) == []
    assert list((tmp_path / "process-cwd").iterdir()) == []
    assert list((tmp_path / "home").iterdir()) == []
    stderr = (tmp_path / "agent.stderr").read_text()
    assert "print noise at exit" in stderr
    assert "fd noise at exit" in stderr


SPY_WRAPPER = r"""
import json, os, sys
report_to = sys.argv[1]
env_reads = []
class SpyEnviron(type(os.environ)):
    def __getitem__(self, key):
        env_reads.append(key)
        return super().__getitem__(key)
os.environ.__class__ = SpyEnviron
from agentreel.acp_agent._main import main
code = main([])
with open(report_to, "w") as f:
    json.dump({"modules": sorted(sys.modules), "env_reads": env_reads}, f)
sys.exit(code)
"""


@pytest.mark.asyncio
async def test_replay_run_imports_no_provider_sdk_and_reads_no_key(
    tmp_path: Path, stub_server: StubServer
) -> None:
    # Record: a parent that spawns a child, through the stub server.
    record_dir = tmp_path / "record"
    record_dir.mkdir()
    recorder = Editor()
    async with run_agent(record_dir, recorder, agent_env(record_dir, stub_server)) as run:
        session_id = await start(run, make_workspace(record_dir))
        assert await prompt(run, session_id, "delegate please") == "end_turn"
    assert run.exit_code == 0, stderr_tail(record_dir)
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    main_log, *children = logs(record_dir)
    (fixture / "session.jsonl").write_bytes(main_log.path.read_bytes())
    for number, child in enumerate(children, start=1):
        (fixture / f"session.{number}.jsonl").write_bytes(child.path.read_bytes())
    assert len(children) == 1

    # Replay: keyless, no stub server, canary keys in the environment.
    replay_dir = tmp_path / "replay"
    replay_dir.mkdir()
    report = replay_dir / "replay-report.json"
    spy = replay_dir / "spy.json"
    env = agent_env(replay_dir, stub_server)
    del env["AGENTREEL_STUB_URL"]
    env.update(
        AGENTREEL_PROVIDER="replay",
        AGENTREEL_REPLAY_DIR=str(fixture),
        AGENTREEL_REPLAY_REPORT=str(report),
        OPENAI_API_KEY="sk-canary-openai",
        ANTHROPIC_API_KEY="sk-canary-anthropic",
    )
    editor = Editor()
    command = ("-c", SPY_WRAPPER, str(spy))
    async with run_agent(replay_dir, editor, env, command=command) as run:
        session_id = await start(run, make_workspace(replay_dir))
        assert await prompt(run, session_id, "delegate please") == "end_turn"
    assert run.exit_code == 0, stderr_tail(replay_dir)

    assert editor.text() == recorder.text() == "parent saw 42"
    seen = json.loads(spy.read_text())
    sdk_modules = [
        m for m in seen["modules"] if m.split(".")[0] in ("openai", "anthropic", "httpx")
    ]
    assert sdk_modules == []
    assert "agentreel.llm_replay" in seen["modules"]
    key_reads = [k for k in seen["env_reads"] if "KEY" in k or "TOKEN" in k]
    assert key_reads == []
    consumption = json.loads(report.read_text())
    assert consumption["errors"] == []
    assert [(s["calls"], s["consumed"]) for s in consumption["scripts"]] == [(2, 2), (1, 1)]
    replayed_main, replayed_child = logs(replay_dir)
    assert replayed_child.header.parent_session == replayed_main.header.id
    assert replayed_child.header.spawn_index == 0


@pytest.mark.asyncio
async def test_stdin_eof_mid_turn_flushes_the_sessions_and_exits_zero(
    tmp_path: Path, stub_server: StubServer
) -> None:
    workspace = make_workspace(tmp_path)
    editor = Editor()
    async with run_agent(tmp_path, editor, agent_env(tmp_path, stub_server)) as run:
        session_id = await start(run, workspace)
        pending = asyncio.create_task(prompt(run, session_id, "go slow"))
        await asyncio.wait_for(editor.text_seen.wait(), timeout=30)
        assert run.process.stdin is not None
        run.process.stdin.close()
        assert await asyncio.wait_for(run.process.wait(), timeout=30) == 0
        # The prompt in flight is answered before the connection closes.
        assert await asyncio.wait_for(pending, timeout=30) == "cancelled"
    assert run.exit_code == 0, stderr_tail(tmp_path)

    (main,) = logs(tmp_path)
    assert main.torn_tail is None
    last = main.events[-1]
    assert isinstance(last, TurnEnd)
    assert last.data.reason == "interrupted"


@pytest.mark.asyncio
async def test_spawn_agent_process_drives_the_console_script(
    tmp_path: Path, stub_server: StubServer
) -> None:
    """The SDK's own spawn helper works too: explicit env, stderr to a file."""
    workspace = make_workspace(tmp_path)
    editor = Editor()
    script = Path(sys.executable).with_name("agentreel-acp-agent")
    with (tmp_path / "agent.stderr").open("wb") as stderr:
        async with acp.spawn_agent_process(
            editor,  # type: ignore[arg-type]
            str(script),
            env=agent_env(tmp_path, stub_server),
            cwd=workspace,
            transport_kwargs={"stderr": stderr},
        ) as (conn, process):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            response = await conn.prompt(
                session_id=session.session_id, prompt=[acp.text_block("hello there")]
            )
            assert response.stop_reason == "end_turn"
    assert process.returncode == 0, stderr_tail(tmp_path)
    assert editor.text() == "Hi there, friend"


class ClosableProvider:
    """A provider with both shutdown hooks the agent knows: sync ``close`` (replay's
    report) and async ``aclose`` (the SDK adapters' HTTP pool)."""

    def __init__(self) -> None:
        self.closed: list[str] = []

    def stream(self, options: Any) -> AsyncIterator[Any]:
        raise AssertionError("no model call is made in this test")

    def close(self) -> None:
        self.closed.append("close")

    async def aclose(self) -> None:
        self.closed.append("aclose")


@pytest.mark.asyncio
async def test_serving_until_stdin_eof_closes_the_providers_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On stdin EOF both hooks run: the sync ``close`` and the awaited ``aclose``."""
    from agentreel.acp_agent import AgentConfig, _server, serve

    provider = ClosableProvider()
    original = _server.ReferenceAgent

    def agent_with_provider(config: AgentConfig) -> _server.ReferenceAgent:
        return original(config, provider=provider)

    monkeypatch.setattr(_server, "ReferenceAgent", agent_with_provider)
    stdin_path = tmp_path / "stdin"
    stdin_path.write_bytes(b"")
    stdout_path = tmp_path / "stdout"
    with stdin_path.open("rb") as stdin, stdout_path.open("wb") as stdout:
        await serve(AgentConfig(sessions_root=tmp_path / "sessions"), stdin, stdout)

    assert provider.closed == ["close", "aclose"]
    assert stdout_path.read_bytes() == b""


# -- stopping: SIGTERM / SIGINT like stdin EOF (ACP clients close stdin and signal at once) --


async def _close_and_signal(run: AgentRun, signum: int) -> None:
    assert run.process.stdin is not None
    run.process.stdin.close()
    run.process.send_signal(signum)


def _logged_text(log: SessionLog) -> str:
    return "".join(
        event.data.chunk.text
        for event in log.events
        if isinstance(event, AssistantChunk) and isinstance(event.data.chunk, TextDelta)
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.asyncio
async def test_signal_mid_stream_while_recording_keeps_every_event_and_answers_the_prompt(
    tmp_path: Path, stub_server: StubServer, signum: int
) -> None:
    workspace = make_workspace(tmp_path)
    editor = Editor()
    async with run_agent(tmp_path, editor, agent_env(tmp_path, stub_server)) as run:
        session_id = await start(run, workspace)
        pending = asyncio.create_task(prompt(run, session_id, "go slow"))
        await asyncio.wait_for(editor.text_seen.wait(), timeout=30)
        await _close_and_signal(run, signum)
        assert await asyncio.wait_for(pending, timeout=30) == "cancelled"
        assert await asyncio.wait_for(run.process.wait(), timeout=30) == 0
    assert run.exit_code == 0, stderr_tail(tmp_path)

    (main,) = logs(tmp_path)
    assert main.torn_tail is None
    # Everything the editor saw was logged first (the default SIGTERM action loses the
    # unflushed turn: the log would hold its header only).
    seen = editor.text()
    assert seen
    assert _logged_text(main).startswith(seen)
    finish = [e.data.chunk for e in main.events if isinstance(e, AssistantChunk)][-1]
    assert isinstance(finish, Finish)
    assert finish.reason == "aborted"
    last = main.events[-1]
    assert isinstance(last, TurnEnd)
    assert last.data.reason == "interrupted"


@pytest.mark.asyncio
async def test_sigterm_mid_hang_while_replaying_writes_the_log_and_the_report(
    tmp_path: Path, stub_server: StubServer
) -> None:
    record_dir = tmp_path / "record"
    record_dir.mkdir()
    async with run_agent(record_dir, Editor(), agent_env(record_dir, stub_server)) as run:
        session_id = await start(run, make_workspace(record_dir))
        assert await prompt(run, session_id, "hello") == "end_turn"
    assert run.exit_code == 0, stderr_tail(record_dir)
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (recorded,) = logs(record_dir)
    (fixture / "session.jsonl").write_bytes(recorded.path.read_bytes())
    # The recorded call streams its first text delta, then hangs until cancelled.
    overrides = {"overrides": [{"action": "hang", "session": 0, "call": 1, "chunks": 2}]}
    (fixture / "replay.override.json").write_text(json.dumps(overrides))

    replay_dir = tmp_path / "replay"
    replay_dir.mkdir()
    report = replay_dir / "replay-report.json"
    env = agent_env(replay_dir, stub_server)
    del env["AGENTREEL_STUB_URL"]
    env.update(
        AGENTREEL_PROVIDER="replay",
        AGENTREEL_REPLAY_DIR=str(fixture),
        AGENTREEL_REPLAY_REPORT=str(report),
    )
    editor = Editor()
    async with run_agent(replay_dir, editor, env) as run:
        session_id = await start(run, make_workspace(replay_dir))
        pending = asyncio.create_task(prompt(run, session_id, "hello"))
        await asyncio.wait_for(editor.text_seen.wait(), timeout=30)
        await _close_and_signal(run, signal.SIGTERM)
        assert await asyncio.wait_for(pending, timeout=30) == "cancelled"
    assert run.exit_code == 0, stderr_tail(replay_dir)

    (main,) = logs(replay_dir)
    assert _logged_text(main) == editor.text() != ""
    last = main.events[-1]
    assert isinstance(last, TurnEnd)
    assert last.data.reason == "interrupted"
    consumption = json.loads(report.read_text())
    assert [(s["calls"], s["consumed"]) for s in consumption["scripts"]] == [(1, 1)]
    assert consumption["errors"] == []


@pytest.mark.asyncio
async def test_broken_recording_is_named_in_the_json_rpc_message_of_session_new(
    tmp_path: Path, stub_server: StubServer
) -> None:
    fixture = tmp_path / "empty-fixture"
    fixture.mkdir()  # no session.jsonl: the replay provider cannot load it
    env = agent_env(tmp_path, stub_server)
    env.update(AGENTREEL_PROVIDER="replay", AGENTREEL_REPLAY_DIR=str(fixture))
    async with run_agent(tmp_path, Editor(), env) as run:
        await run.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        with pytest.raises(acp.RequestError) as caught:
            await run.conn.new_session(cwd=str(make_workspace(tmp_path)), mcp_servers=[])
    message = str(caught.value)
    assert "Internal error" not in message
    assert f"missing {fixture / 'session.jsonl'}" in message
    assert "FixtureError" in message
    stderr = stderr_tail(tmp_path)
    assert "Traceback" not in stderr  # an expected failure is one line, not a traceback
    assert stderr.count("missing ") == 1
