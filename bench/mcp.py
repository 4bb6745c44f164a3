"""19. A replayed MCP call vs the real stdio server, per call.

One stdio connection of a small server written with the official SDK (one ``add`` tool)
is recorded through ``agentreel.mcp_replay``'s shim with N calls; then the same N calls go
over a pipe, as JSON-RPC lines, to the real server and to the replaying shim (no server
runs). Wall time per call after the handshake, medians. Target: replay ≤ 0.5× the server
it replaces.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentreel.mcp_replay import McpSettings, stdio_command
from bench._common import BenchResult, Settings

TARGET = 0.5
SERVER = """
from mcp.server.mcpserver import MCPServer
app = MCPServer("bench")
@app.tool()
def add(a: int, b: int) -> int:
    return a + b
app.run()
"""
_HANDSHAKE = [
    {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]  # fmt: skip


def _per_call(argv: list[str], calls: int) -> float:
    """Seconds per ``tools/call`` over a pipe to ``argv``, after the handshake."""
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        for message in _HANDSHAKE:
            process.stdin.write((json.dumps(message) + "\n").encode())
            process.stdin.flush()
        process.stdout.readline()
        started = time.perf_counter()
        for i in range(calls):
            call = {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                    "params": {"name": "add", "arguments": {"a": i, "b": 1}}}  # fmt: skip
            process.stdin.write((json.dumps(call) + "\n").encode())
            process.stdin.flush()
            answer = json.loads(process.stdout.readline())
            if "result" not in answer:
                raise AssertionError(f"call {i + 1} was not answered: {answer}")
        elapsed = time.perf_counter() - started
    finally:
        process.stdin.close()
        process.wait(timeout=30)
    return elapsed / calls


def run(settings: Settings) -> BenchResult:
    result = BenchResult("mcp", "19. MCP: a replayed call vs the real stdio server")
    calls = 40 if settings.quick else 200
    repeats = settings.scaled(5, 2)
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-mcp-") as tmp_text:
        tmp = Path(tmp_text)
        server = tmp / "server.py"
        server.write_text(SERVER)
        real = [sys.executable, str(server)]
        record = McpSettings("record", tmp, tmp / "record-state")
        _per_call(stdio_command(record, "bench", real), calls)
        live: list[float] = []
        replayed: list[float] = []
        for n in range(repeats):
            replay = McpSettings("replay", tmp, tmp / f"replay-state-{n}")
            live.append(_per_call(real, calls))
            replayed.append(_per_call(stdio_command(replay, "bench", ["absent"]), calls))
    server_s = result.median("server_s", live)
    replay_s = result.median("replay_s", replayed)
    result.figure(f"real stdio server, per call ({calls} calls)", server_s * 1e3, "ms")
    result.figure("replayed from the recording, per call", replay_s * 1e3, "ms")
    result.target("replayed MCP call / real stdio server call", replay_s / server_s, TARGET)
    result.notes.append(
        "wall time per tools/call over a pipe after the handshake, medians; the server is "
        "the SDK's MCPServer with one tool; replay runs no server"
    )
    return result
