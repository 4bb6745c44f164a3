"""A scenario's ``[[mcp_servers]]`` in a run (SPEC 19): the settings of MCP record or
replay for the run, the ACP ``mcpServers`` the agent is given in ``session/new`` (the stdio
shim's command line; the endpoint's URL, started for the run), the recordings a record
run made, their writing into the scenario, and the check after a replay."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from acp.schema import EnvVariable, HttpMcpServer, McpServerStdio, SseMcpServer

from agentreel.mcp_replay import (
    MCP_RECORDING_PATTERN,
    MCP_RECORDINGS_DIR,
    McpDriftError,
    McpEndpoint,
    McpSettings,
    check_replayed,
    recording_failures,
    start_endpoint,
    stdio_command,
)
from agentreel.snapshot_harness._layout import write_files
from agentreel.snapshot_harness._scenario import MCP_TOKEN, McpServerConfig, Mode, Scenario
from agentreel.snapshot_harness.exceptions import McpMismatchError, RecordError, RecordSetupError

AcpMcpServers = list[HttpMcpServer | SseMcpServer | McpServerStdio]
# A server's name → what reaches it through agentreel: the shim's argv (stdio) or a URL.
McpReach = Mapping[str, list[str] | str]
# Where a record run's MCP recordings go before the fixture is written, and a run's state.
_RECORD_DIR = "mcp-record"
_STATE_DIR = "mcp-state"
# How long an HTTP server's `start` command has to accept connections, and to exit.
_START_TIMEOUT = 30.0


def mcp_settings(scenario: Scenario, mode: Mode, run_dir: Path, cwd: Path) -> McpSettings | None:
    """The run's MCP settings, or None for a scenario that declares no server."""
    if not scenario.mcp_servers:
        return None
    # Absolute: the shims run in the agent's cwd, not where the harness was started.
    run_dir = run_dir.resolve()
    return McpSettings(
        mode="record" if mode == "record" else "replay",
        recordings=run_dir / _RECORD_DIR if mode == "record" else scenario.directory.resolve(),
        state=run_dir / _STATE_DIR,
        scenario=scenario.name,
        cwd=str(cwd),
        masks=scenario.golden_masks,
        record=scenario.record.settings,
    )


@asynccontextmanager
async def _endpoint(scenario: Scenario, settings: McpSettings) -> AsyncIterator[McpEndpoint | None]:
    """The endpoint in front of the scenario's HTTP servers (None: it has none). Recording,
    the servers with a ``start`` command run meanwhile, each on a free port (``{port}``),
    in the scenario directory; the endpoint opens once each accepts connections."""
    http = [server for server in scenario.mcp_servers if server.url is not None]
    if not http:
        yield None
        return
    async with contextlib.AsyncExitStack() as stack:
        urls: dict[str, str] = {}
        for server in http:
            port: int | None = None
            if server.start and settings.mode == "record":
                port = await stack.enter_async_context(_started(scenario, server))
            urls[server.name] = server.url_at(port)
        endpoint = await start_endpoint(settings, urls)
        stack.push_async_callback(endpoint.close)
        yield endpoint


@asynccontextmanager
async def _started(scenario: Scenario, server: McpServerConfig) -> AsyncIterator[int]:
    """``server``'s ``start`` command running on a free port until the block ends."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    command = scenario.mcp_command(server, port)
    where = f"{scenario.name}: MCP server {server.name!r}"
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=scenario.directory,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise RecordSetupError(
            f"{where}: its `start` command {shlex.join(command)} could not start ({exc}); "
            f"install what it needs or fix `start` in {scenario.toml_path}"
        ) from None
    try:
        await _accepting(process, port, where, command)
        yield port
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), _START_TIMEOUT)
            except TimeoutError:
                process.kill()
                await process.wait()


async def _accepting(
    process: asyncio.subprocess.Process, port: int, where: str, command: list[str]
) -> None:
    """Wait until ``port`` accepts a connection; the process ending first is an error."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _START_TIMEOUT
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if process.returncode is not None or loop.time() > deadline:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                stderr = await process.stderr.read() if process.stderr else b""
                tail = stderr.decode(errors="replace").strip().splitlines()[-5:]
                raise RecordSetupError(
                    f"{where}: its `start` command {shlex.join(command)} did not accept "
                    f"connections on port {port} within {_START_TIMEOUT:.0f}s "
                    f"(exit status {process.returncode}); its stderr ends:\n"
                    + "\n".join(tail or ["(nothing)"])
                ) from None
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return


@asynccontextmanager
async def acp_mcp_servers(
    scenario: Scenario, settings: McpSettings | None
) -> AsyncIterator[AcpMcpServers]:
    """What ``session/new`` passes as ``mcpServers``; the HTTP endpoint runs meanwhile."""
    if settings is None:
        yield []
        return
    async with _endpoint(scenario, settings) as endpoint:
        servers: AcpMcpServers = []
        for server in scenario.mcp_servers:
            if server.url is None:
                argv = stdio_command(settings, server.name, scenario.mcp_command(server))
                env = [EnvVariable(name=k, value=v) for k, v in server.env.items()]
                servers.append(
                    McpServerStdio(name=server.name, command=argv[0], args=argv[1:], env=env)
                )
            else:
                assert endpoint is not None
                url = endpoint.url_for(server.name, server.transport)
                if server.transport == "sse":
                    servers.append(SseMcpServer(name=server.name, url=url, headers=[], type="sse"))
                else:
                    servers.append(
                        HttpMcpServer(name=server.name, url=url, headers=[], type="http")
                    )
        yield servers


@asynccontextmanager
async def mcp_reach(scenario: Scenario, settings: McpSettings | None) -> AsyncIterator[McpReach]:
    """What ``{mcp:<name>}`` expands to in a command scenario; the HTTP endpoint runs
    meanwhile. A stdio server's own ``env`` is set by ``env`` ahead of its command (the shim
    starts it only when recording)."""
    if settings is None:
        yield {}
        return
    async with _endpoint(scenario, settings) as endpoint:
        reach: dict[str, list[str] | str] = {}
        for server in scenario.mcp_servers:
            if server.url is None:
                command = scenario.mcp_command(server)
                if server.env:
                    command = ["env", *(f"{k}={v}" for k, v in server.env.items()), *command]
                reach[server.name] = stdio_command(settings, server.name, command)
            else:
                assert endpoint is not None
                reach[server.name] = endpoint.url_for(server.name, server.transport)
        yield reach


def expand_mcp(text: str, reach: McpReach) -> str:
    """``text`` with each ``{mcp:<name>}`` as one string: the URL, or the shim's command
    line shell-quoted (names were checked when the scenario was read)."""

    def one(found: re.Match[str]) -> str:
        value = reach[found.group(1)]
        return value if isinstance(value, str) else shlex.join(value)

    return MCP_TOKEN.sub(one, text)


def expand_mcp_argv(argv: Sequence[str], reach: McpReach) -> list[str]:
    """An argv with ``{mcp:<name>}`` expanded: an argument that is only the placeholder of a
    stdio server becomes the shim's arguments, one each; any other is ``expand_mcp``'d."""
    expanded: list[str] = []
    for part in argv:
        whole = MCP_TOKEN.fullmatch(part)
        value = reach.get(whole.group(1)) if whole else None
        if isinstance(value, list):
            expanded += value
        else:
            expanded.append(expand_mcp(part, reach) if reach else part)
    return expanded


def recorded_mcp_files(settings: McpSettings | None) -> dict[str, bytes]:
    """A record run's MCP recordings, ``mcp/<server>.<n>.jsonl`` → bytes."""
    if settings is None or settings.mode != "record":
        return {}
    folder = settings.recordings / MCP_RECORDINGS_DIR
    if not folder.is_dir():
        return {}
    return {
        f"{MCP_RECORDINGS_DIR}/{path.name}": path.read_bytes()
        for path in sorted(folder.iterdir())
        if MCP_RECORDING_PATTERN.fullmatch(path.name)
    }


def split_mcp_files(files: dict[str, bytes]) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """``(the other recordings, the MCP ones by their name in mcp/)``."""
    prefix = f"{MCP_RECORDINGS_DIR}/"
    mcp = {k.removeprefix(prefix): v for k, v in files.items() if k.startswith(prefix)}
    return {k: v for k, v in files.items() if not k.startswith(prefix)}, mcp


def write_mcp_files(directory: Path, files: dict[str, bytes]) -> None:
    """Write a recording's MCP files into ``directory/mcp/``, deleting stale ones."""
    if files or (directory / MCP_RECORDINGS_DIR).is_dir():
        write_files(directory / MCP_RECORDINGS_DIR, files, keep_pattern=MCP_RECORDING_PATTERN)


def check_mcp(settings: McpSettings | None, *, failures_only: bool = False) -> None:
    """After a replay: ``McpMismatchError`` for a call that drifted or was not recorded,
    or (unless ``failures_only``: the run failed anyway) a recorded call never made. After
    a record: ``RecordError`` for what a shim or the endpoint refused (a credential in what
    it would write, a server that is not installed), so nothing is written."""
    if settings is None:
        return
    if settings.mode == "record":
        failures = recording_failures(settings.state)
        if failures:
            raise RecordError(
                f"{settings.scenario}: recording its MCP servers failed, nothing was "
                f"written:\n{failures[0]}"
            )
        return
    try:
        if failures_only:
            if settings.state.is_dir() and any(settings.state.glob("failure-*.txt")):
                check_replayed(settings.recordings, settings.state, settings.scenario)
        else:
            check_replayed(settings.recordings, settings.state, settings.scenario)
    except McpDriftError as exc:
        raise McpMismatchError(str(exc)) from None
