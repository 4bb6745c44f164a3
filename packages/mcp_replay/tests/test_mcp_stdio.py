"""The stdio shim records a real MCP server (written with the SDK, ``mcp_test_server.py``)
and replays it with no server running, per session; drift, unrecorded calls and recorded
calls never made fail naming session, server and tool (SPEC 19)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from agentreel.mcp_replay import (
    MCP_RECORDINGS_DIR,
    SESSION_ENV,
    McpDriftError,
    McpSettings,
    check_replayed,
    stdio_command,
)
from agentreel.mcp_replay._cli import main as cli_main
from agentreel.session import (
    MASKS_VERSION,
    KeyMask,
    Mask,
    RecordSettings,
    rerecord_command,
    secret_sha256,
)

pytestmark = pytest.mark.slow

SERVER_COMMAND = [sys.executable, str(Path(__file__).with_name("mcp_test_server.py"))]
MISSING = ["/nonexistent/mcp-server-echo"]
Recorded = tuple[Path, dict[str, list[str]]]


@asynccontextmanager
async def stdio_session(
    settings: McpSettings, command: list[str], session: str | None
) -> AsyncIterator[ClientSession]:
    argv = stdio_command(settings, "echo", command)
    env = {k: v for k, v in os.environ.items() if k != SESSION_ENV}
    if session is not None:
        env[SESSION_ENV] = session
    parameters = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    async with stdio_client(parameters) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        yield client


async def failure_of(call: Awaitable[object]) -> str:
    """What a failing client call raised, with every error of an exception group."""
    try:
        await call
    except BaseException as exc:  # the SDK's task groups wrap the transport's error
        found: list[str] = []
        stack: list[BaseException] = [exc]
        while stack:
            error = stack.pop()
            found.append(str(error))
            if isinstance(error, BaseExceptionGroup):
                stack += list(error.exceptions)
        return "\n".join(found)
    raise AssertionError("the call did not fail")


def text_of(result: object) -> str:
    content = getattr(result, "content", None) or getattr(result, "contents", None)
    assert content, result
    return str(getattr(content[0], "text", content[0]))


async def calls(
    settings: McpSettings, session: str | None, command: list[str], a: int = 1
) -> list[str]:
    """A connection's calls: the lists, tools (one logs a notification), a resource, a
    prompt, and a read the server answers with a JSON-RPC error."""
    async with stdio_session(settings, command, session) as client:
        tools = await client.list_tools()
        out = [",".join(sorted(t.name for t in tools.tools))]
        out.append(text_of(await client.call_tool("add", {"a": a, "b": 2})))
        out.append(text_of(await client.call_tool("whoami", {})))
        out.append(text_of(await client.call_tool("shout", {"text": "hi"})))
        out.append(text_of(await client.read_resource("note://hello")))
        prompt = await client.get_prompt("greet", {"name": "x"})
        out.append(str(prompt.messages[0].content.text))  # type: ignore[union-attr]
        try:
            await client.read_resource("note://missing")
        except Exception as exc:  # the server's JSON-RPC error, relayed and recorded
            out.append(f"error: {type(exc).__name__}")
        return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """One recording per module: two sessions, each with its own connection."""
    folder = tmp_path_factory.mktemp("scenario")
    settings = McpSettings("record", folder, folder / "state", scenario="mcp-demo")

    async def record() -> dict[str, list[str]]:
        return {
            "parent": await calls(settings, "parent", SERVER_COMMAND),
            "child": await calls(settings, "child", SERVER_COMMAND, a=40),
        }

    return folder, asyncio.run(record())


def replay_settings(recorded: Recorded, tmp_path: Path) -> McpSettings:
    shutil.copytree(recorded[0] / MCP_RECORDINGS_DIR, tmp_path / MCP_RECORDINGS_DIR)
    return McpSettings("replay", tmp_path, tmp_path / "state", scenario="mcp-demo")


def test_record_writes_every_exchange(recorded: Recorded) -> None:
    folder, answers = recorded
    assert answers["parent"][1:4] == ["3", "parent", "HI"]
    assert answers["child"][1:3] == ["42", "child"]
    assert answers["parent"][-1].startswith("error")
    files = sorted(p.name for p in (folder / MCP_RECORDINGS_DIR).iterdir())
    assert files == ["echo.0.jsonl", "echo.1.jsonl"]
    lines = [json.loads(x) for x in (folder / "mcp/echo.0.jsonl").read_text().splitlines()]
    assert lines[0] == {
        "mcp_recording": 2, "masks": MASKS_VERSION, "server": "echo", "session": "parent",
        "transport": "stdio",
    }  # fmt: skip
    methods = [r["message"].get("method") for r in lines[1:] if r["from"] == "client"]
    assert methods == [
        "initialize", "notifications/initialized", "tools/list", "tools/call", "tools/call",
        "tools/call", "resources/read", "prompts/get", "resources/read",
    ]  # fmt: skip
    server = [r["message"] for r in lines[1:] if r["from"] == "server"]
    assert any(m.get("method") == "notifications/message" for m in server)
    assert "error" in server[-1]


def test_a_server_message_keeps_its_key_order(recorded: Recorded) -> None:
    """Written (and so served on replay) in the order the server sent its keys, not sorted:
    an agent may print a structured answer as it got it (Claude Code prints an MCP tool's
    structuredContent), and sorted keys would change what it then sends its model."""
    text = (recorded[0] / "mcp/echo.0.jsonl").read_text()
    answer = next(line for line in text.splitlines() if '"serverInfo"' in line)
    assert answer.index('"jsonrpc"') < answer.index('"id"')  # sorted: id first


@pytest.mark.asyncio
async def test_replay_answers_each_session_with_no_server(
    recorded: Recorded, tmp_path: Path
) -> None:
    settings = replay_settings(recorded, tmp_path)
    # The child connects first this time: identity, not order, binds each to its own.
    child = await calls(settings, "child", MISSING, a=40)
    parent = await calls(settings, "parent", MISSING)
    assert child == recorded[1]["child"]
    assert parent == recorded[1]["parent"]
    check_replayed(tmp_path, settings.state, "mcp-demo")


@pytest.mark.asyncio
async def test_without_identity_connections_bind_by_order_and_content(
    recorded: Recorded, tmp_path: Path
) -> None:
    settings = replay_settings(recorded, tmp_path)
    child = await calls(settings, None, MISSING, a=40)
    parent = await calls(settings, None, MISSING)
    assert child == recorded[1]["child"]
    assert parent == recorded[1]["parent"]
    check_replayed(tmp_path, settings.state, "mcp-demo")


def _check_fails(settings: McpSettings) -> str:
    with pytest.raises(McpDriftError) as caught:
        check_replayed(settings.recordings, settings.state, "mcp-demo")
    message = str(caught.value)
    assert len(message.splitlines()) <= 20, message
    assert f"Re-record: {rerecord_command('mcp-demo')}" in message
    return message


@pytest.mark.asyncio
async def test_a_changed_argument_fails_naming_session_server_tool_and_diff(
    recorded: Recorded, tmp_path: Path
) -> None:
    settings = replay_settings(recorded, tmp_path)
    assert "arguments differ" in await failure_of(calls(settings, "child", MISSING, a=41))
    message = _check_fails(settings)
    assert "server 'echo', session 'child'" in message
    assert "tools/call 'add'" in message
    assert "    a: 40 → 41" in message


@pytest.mark.asyncio
async def test_a_deleted_session_recording_fails_naming_it(
    recorded: Recorded, tmp_path: Path
) -> None:
    settings = replay_settings(recorded, tmp_path)
    (tmp_path / "mcp/echo.1.jsonl").unlink()  # the child's
    assert "no recording of 'echo' for this session holds it" in await failure_of(
        calls(settings, "child", MISSING, a=40)
    )
    message = _check_fails(settings)
    assert "session 'child'" in message
    assert "tools/call 'add'" in message
    assert "    a: 40" in message


@pytest.mark.asyncio
async def test_a_recorded_call_never_made_fails(recorded: Recorded, tmp_path: Path) -> None:
    settings = replay_settings(recorded, tmp_path)
    await calls(settings, "parent", MISSING)
    async with stdio_session(settings, MISSING, "child") as client:
        await client.list_tools()
        assert text_of(await client.call_tool("add", {"a": 40, "b": 2})) == "42"
    message = _check_fails(settings)
    assert "server 'echo', session 'child'" in message
    assert "recorded message 5, tools/call 'whoami', was never made" in message


@pytest.mark.asyncio
async def test_an_unrecorded_call_fails(recorded: Recorded, tmp_path: Path) -> None:
    settings = replay_settings(recorded, tmp_path)
    async with stdio_session(settings, MISSING, "parent") as client:
        await client.list_tools()
        failure = await failure_of(client.list_tools())
        assert "the recording has tools/call 'add' there" in failure
    message = _check_fails(settings)
    assert "session 'parent'" in message
    assert "tools/list" in message


@pytest.mark.asyncio
async def test_a_missing_server_at_record_is_a_named_error(tmp_path: Path) -> None:
    settings = McpSettings("record", tmp_path, tmp_path / "state", scenario="mcp-demo")
    await failure_of(calls(settings, "parent", ["mcp-server-not-installed-here"]))
    failures = list((tmp_path / "state").glob("failure-*.txt"))
    assert len(failures) == 1
    text = failures[0].read_text()
    assert "MCP server 'echo' of scenario 'mcp-demo'" in text
    assert "'mcp-server-not-installed-here'" in text
    assert "install it" in text.lower()


@pytest.mark.asyncio
async def test_the_secret_scan_refuses_a_credential(tmp_path: Path) -> None:
    settings = McpSettings("record", tmp_path, tmp_path / "state", scenario="mcp-demo")

    async def leak() -> None:
        async with stdio_session(settings, SERVER_COMMAND, "parent") as client:
            await client.call_tool("leak", {})

    await failure_of(leak())
    (failure,) = (tmp_path / "state").glob("failure-*.txt")
    assert "refusing to write a credential to mcp/echo.0.jsonl" in failure.read_text()
    assert "ghp_" not in (tmp_path / "mcp/echo.0.jsonl").read_text()


@pytest.mark.asyncio
async def test_the_scenarios_allowed_secret_is_written(tmp_path: Path) -> None:
    """A deliberate fake key the scenario allows by its sha256 ([record] allow_secrets)
    reaches the shim's scan too: written, and replayed."""
    fake = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    allowed = (secret_sha256(fake),)
    record = McpSettings(
        "record",
        tmp_path,
        tmp_path / "s1",
        "mcp-demo",
        record=RecordSettings(allow_secrets=allowed),
    )

    async def leak(settings: McpSettings, command: list[str]) -> str:
        async with stdio_session(settings, command, "parent") as client:
            return text_of(await client.call_tool("leak", {}))

    assert await leak(record, SERVER_COMMAND) == fake
    assert fake in (tmp_path / "mcp/echo.0.jsonl").read_text()
    assert not list((tmp_path / "s1").glob("failure-*.txt"))
    replay = McpSettings("replay", tmp_path, tmp_path / "s2", "mcp-demo")
    assert await leak(replay, MISSING) == fake


@pytest.mark.asyncio
async def test_a_key_mask_writes_a_volatile_value_of_a_tool_result_as_its_token(
    tmp_path: Path,
) -> None:
    """A key mask (``[[golden_masks]] key``) reaches both sides: each call's ``served_at``
    in the server's answer is written as ``{{served-at}}`` (two calls that differ only
    there write the same bytes), replay serves that, and an argument under the key
    compares masked."""
    # A key named like a header field renames nothing there: the header is agentreel's.
    masks = (KeyMask.checked("served_at", "served-at"), KeyMask.checked("session", "s"))

    async def stamp(settings: McpSettings, command: list[str], served_at: list[int]) -> Any:
        async with stdio_session(settings, command, "parent") as client:
            return [
                (
                    await client.call_tool("stamp", {"text": "hi", "served_at": at})
                ).structured_content
                for at in served_at
            ]

    record = McpSettings("record", tmp_path, tmp_path / "s1", "mcp-demo", masks=masks)
    live = await stamp(record, SERVER_COMMAND, served_at=[100, 201])
    assert live[0]["served_at"] != live[1]["served_at"]
    lines = (tmp_path / "mcp/echo.0.jsonl").read_text().splitlines()
    calls = [line for line in lines if '"stamp"' in line and '"tools/call"' in line]
    answers = [line for line in lines if '"structuredContent"' in line]
    assert len(calls) == len(answers) == 2

    def without_id(line: str) -> object:
        record = json.loads(line)
        record["message"].pop("id")
        return record

    assert without_id(calls[0]) == without_id(calls[1])  # both {{served-at}}
    assert without_id(answers[0]) == without_id(answers[1])
    assert '"served_at":"{{served-at}}"' in answers[0]
    assert json.loads(lines[0])["session"] == "parent"

    replay = McpSettings("replay", tmp_path, tmp_path / "s2", "mcp-demo", masks=masks)
    served = await stamp(replay, MISSING, served_at=[7, 8])
    assert served == [{"text": "hi", "served_at": "{{served-at}}"}] * 2
    check_replayed(tmp_path, replay.state, "mcp-demo")


@pytest.mark.asyncio
async def test_masks_cwd_and_install_paths_are_written_as_tokens(tmp_path: Path) -> None:
    """What is written holds no run-specific text; replay gives the live run's cwd back. A
    scenario mask applies to what the client sends (compared), not to the server's answer:
    replay serves that as the agent got it when recording (which its model recording holds)."""
    masks = (Mask.checked(r"run-[0-9]+", "run"),)
    site = f"{sys.prefix}/lib/python3.11/site-packages/pkg/x.py"

    async def echo(settings: McpSettings, command: list[str], run: str) -> str:
        async with stdio_session(settings, command, "parent") as client:
            text = f"{settings.cwd}/notes.txt {run} {site}"
            return text_of(await client.call_tool("echo", {"text": text}))

    first = str(tmp_path / "first-cwd")
    record = McpSettings("record", tmp_path, tmp_path / "s1", "mcp-demo", first, masks)
    assert await echo(record, SERVER_COMMAND, "run-123") == f"{first}/notes.txt run-123 {site}"
    lines = (tmp_path / "mcp/echo.0.jsonl").read_text().splitlines()
    (call,) = [line for line in lines if '"from":"client"' in line and "tools/call" in line]
    assert "{{cwd}}/notes.txt {{run}} {{site-packages}}/pkg/x.py" in call
    (answer_line,) = [line for line in lines if '"from":"server"' in line and "notes.txt" in line]
    assert "{{cwd}}/notes.txt run-123 {{site-packages}}/pkg/x.py" in answer_line
    written = "\n".join(lines)
    assert first not in written
    assert sys.prefix not in written

    second = str(tmp_path / "second-cwd")
    replay = McpSettings("replay", tmp_path, tmp_path / "s2", "mcp-demo", second, masks)
    answer = await echo(replay, MISSING, "run-456")
    assert answer == f"{second}/notes.txt run-123 {{{{site-packages}}}}/pkg/x.py"
    check_replayed(tmp_path, replay.state, "mcp-demo")


def test_the_check_command_names_a_call_never_made(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = replay_settings(recorded, tmp_path)
    argv = ["check", "--recordings", str(tmp_path), "--state", str(settings.state)]
    assert cli_main([*argv, "--scenario", "mcp-demo"]) == 1
    err = capsys.readouterr().err
    assert "session 'parent'" in err
    assert "recorded message 1, initialize, was never made" in err


@pytest.mark.asyncio
async def test_machine_facts_in_a_tool_result_are_written_masked_and_replay_on_another_machine(
    tmp_path: Path,
) -> None:
    """The built-in masks (SPEC 13) apply to what is written: a call holding this machine's
    user and host names, its HOME and the time of the call is written with
    ``{{user}}@{{hostname}}``, ``{{home}}``, ``{{date}}``; the server's answer with this
    machine's user, host and HOME as tokens. Replay on another machine, on another day —
    another HOME, user, host label, time — compares its live call through the same masks,
    and serves the answer with the replaying machine's user and HOME (as the cwd is given
    back), the rest as the agent got it when recording."""
    host = socket.gethostname()

    def text_at(user: str, when: datetime) -> str:
        return (
            f"{user}@{host} Hostname: {user}-box-7 read /home/{user}/notes.txt "
            f"at {when.isoformat(timespec='seconds')} ({when:%A, %B} {when.day}, {when.year})"
        )

    async def echo(settings: McpSettings, command: list[str], user: str, when: datetime) -> str:
        env = {**os.environ, "HOME": f"/home/{user}", "USER": user, "LOGNAME": user}
        env[SESSION_ENV] = "main"
        argv = stdio_command(settings, "echo", command)
        parameters = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
        async with (
            stdio_client(parameters) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            return text_of(await client.call_tool("echo", {"text": text_at(user, when)}))

    now = datetime.now(UTC)
    record = McpSettings("record", tmp_path, tmp_path / "s1", "mcp-demo")
    assert await echo(record, SERVER_COMMAND, "alice", now) == text_at("alice", now)
    written = (tmp_path / "mcp/echo.0.jsonl").read_text()
    (call,) = [line for line in written.splitlines() if "notes.txt" in line and "client" in line]
    (answer,) = [line for line in written.splitlines() if "notes.txt" in line and "server" in line]
    assert (
        "{{user}}@{{hostname}} Hostname: {{hostname}} read {{home}}/notes.txt at {{date}} "
        "({{date}})"
    ) in call
    assert "{{user}}@{{hostname}} Hostname: alice-box-7 read {{home}}/notes.txt" in answer
    assert "alice@" not in written
    assert "/home/alice" not in written
    assert f"@{host}" not in written
    assert now.date().isoformat() not in call

    # Another machine (HOME, user, host label) on another day (a leap day, years on).
    other = datetime(2028, 2, 29, 23, 59, 59, tzinfo=UTC)
    replay = McpSettings("replay", tmp_path, tmp_path / "s2", "mcp-demo")
    served = await echo(replay, MISSING, "bob", other)
    assert served == text_at("alice", now).replace("alice@", "bob@").replace("/alice/", "/bob/")
    check_replayed(tmp_path, replay.state, "mcp-demo")
