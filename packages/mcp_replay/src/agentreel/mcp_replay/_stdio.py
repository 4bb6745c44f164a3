"""The stdio shim: one process per connection, standing where the agent expects the MCP
server. Record: starts the real server and relays JSON-RPC lines both ways, writing each.
Replay: runs nothing and answers every line from the session's recording (SPEC 19)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from collections.abc import Sequence
from typing import IO, Any

from agentreel.mcp_replay._layout import SESSION_ENV
from agentreel.mcp_replay._recording import ConnectionRecorder, encode, load_recordings
from agentreel.mcp_replay._replay import ConnectionReplay, RunState
from agentreel.mcp_replay._settings import McpSettings
from agentreel.mcp_replay.exceptions import (
    McpDriftError,
    McpReplayError,
    McpServerMissingError,
)

# JSON-RPC's "internal error": what a client gets for a call replay cannot answer.
_REPLAY_ERROR_CODE = -32603
_LINE_LIMIT = 64 * 1024 * 1024


def _session() -> str | None:
    return os.environ.get(SESSION_ENV) or None


def replay_stdio(settings: McpSettings, server: str, source: IO[bytes], sink: IO[bytes]) -> int:
    """Answer every JSON-RPC line of ``source`` from the recording, until it ends."""
    state = RunState(settings.state)
    masking = settings.masking
    connection = ConnectionReplay(
        server,
        load_recordings(settings.recordings, server, masking),
        state,
        _session(),
        masking,
        settings.scenario,
    )
    try:
        for line in source:
            if not line.strip():
                continue
            message = json.loads(line)
            try:
                replies = connection.answer(message)
            except McpDriftError as exc:
                replies = []
                if "id" in message and "method" in message:
                    error = {"code": _REPLAY_ERROR_CODE, "message": str(exc)}
                    replies = [{"jsonrpc": "2.0", "id": message["id"], "error": error}]
                print(str(exc), file=sys.stderr)
            if replies:
                sink.write("".join(encode(r) + "\n" for r in replies).encode())
                sink.flush()
    finally:
        connection.close()
    return 1 if connection.failed else 0


def missing_server(server: str, command: Sequence[str], scenario: str | None) -> str:
    where = f" of scenario {scenario!r}" if scenario else ""
    return (
        f"MCP server {server!r}{where}: cannot start {command[0]!r} (not found on PATH or "
        "not executable). Install it, or fix the server's command in [[mcp_servers]]; "
        "replay does not need it, record does"
    )


async def record_stdio(settings: McpSettings, server: str, command: Sequence[str]) -> int:
    """Start ``command``, relay stdin → server → stdout, and write every message."""
    if not command:
        raise McpServerMissingError(missing_server(server, ["(no command)"], settings.scenario))
    if shutil.which(command[0]) is None:
        raise McpServerMissingError(missing_server(server, command, settings.scenario))
    recorder = ConnectionRecorder(
        settings.recordings, server, "stdio", _session(), settings.masking, settings.scan
    )
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=_LINE_LIMIT,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    failure: list[BaseException] = []

    def write(side: str, line: bytes) -> None:
        try:
            message: Any = json.loads(line)
        except json.JSONDecodeError:
            return  # not JSON-RPC (a server's stray print): relayed, not recorded
        if isinstance(message, dict):
            (recorder.client if side == "client" else recorder.server)(message)

    async def upstream() -> None:
        assert process.stdin is not None
        while line := await reader.readline():
            try:
                write("client", line)
            except McpReplayError as exc:
                failure.append(exc)
                break
            process.stdin.write(line)
            await process.stdin.drain()
        process.stdin.close()

    async def downstream() -> None:
        assert process.stdout is not None
        out = sys.stdout.buffer
        while line := await process.stdout.readline():
            try:
                write("server", line)
            except McpReplayError as exc:
                failure.append(exc)
                process.kill()
                break
            out.write(line)
            out.flush()

    pump = asyncio.ensure_future(upstream())
    await downstream()
    pump.cancel()
    await process.wait()
    recorder.close()
    if failure:
        RunState(settings.state).fail(server, str(failure[0]))
        print(str(failure[0]), file=sys.stderr)
        return 1
    return 0
