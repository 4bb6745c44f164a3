"""Starting the agent: through a preloading fork server when a scenario opts in, else spawned.

A Python agent pays its imports (the ACP SDK alone is ~0.4 s) in every scenario. With
``[fork_server] enabled = true`` (in ``scenario.toml`` or the fixtures directory's
``agentreel.toml``) the harness starts one fork server per harness process and set of
preloaded modules (``_forkserver_main``: it imports them once), then each run forks one
child of it with its own stdio pipes, an environment built from nothing (the same one a
spawned agent gets), its cwd, its own session and process group (killed at the timeout
exactly like a spawned agent's), and its exit code relayed back.

What a fork cannot reproduce falls back to a plain spawn, with the reason logged once and
kept in the run result — never to a shared process: an agent that is not
``{python} -m NAME`` or ``{python} FILE`` (another interpreter, interpreter options, not
Python), a platform without ``fork`` or descriptor passing, a preload that fails or leaves
a thread running, a server that cannot start. What Python reads once at start-up
(``PYTHON*``, ``LANG``, ``LC_*``) is part of a server's identity: runs that differ in it get
different servers, each started with exactly those values.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from agentreel.brand.exceptions import AgentreelError
from agentreel.snapshot_harness import _forkserver_main as wire
from agentreel.snapshot_harness._result import StartMethod
from agentreel.snapshot_harness.exceptions import AgentCrashError

logger = logging.getLogger("agentreel.snapshot_harness")

SERVER_FILE = Path(wire.__file__)
READY_TIMEOUT = 120.0
# ``python -c`` runs this: the server module is loaded by path, so the harness package
# (and everything it imports) never enters the process the agents are forked from.
BOOTSTRAP = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('_agentreel_forkserver', sys.argv[1])\n"
    "module = importlib.util.module_from_spec(spec)\n"
    "sys.modules[spec.name] = module\n"
    "spec.loader.exec_module(module)\n"
    "sys.exit(module.main(sys.argv[2:]))\n"
)


class AgentProcess(Protocol):
    """What the runner needs of a started agent (``asyncio.subprocess.Process`` is one)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    stdin: asyncio.StreamWriter | None
    stdout: asyncio.StreamReader | None

    async def wait(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ForkPlan:
    """An agent command the fork server can run: ``-m module`` or a script ``path``."""

    module: str | None
    path: str | None
    args: tuple[str, ...]


def plan_fork(command: Sequence[str], interpreter: str = sys.executable) -> ForkPlan | str:
    """How a fork child runs ``command``, or why it cannot (the reason for a plain spawn)."""
    if not command:
        return "the agent command is empty"
    if command[0] != interpreter:
        if Path(command[0]).name.startswith("python"):
            return (
                f"the agent's interpreter {command[0]} is not the harness's {interpreter} "
                "(write {python} in `agent` to use the fork server)"
            )
        return f"the agent {command[0]!r} is not started as a Python program ({{python}} ...)"
    if len(command) < 2:
        return "the agent command is the bare interpreter (no module or script)"
    if command[1] == "-m":
        if len(command) < 3:
            return "the agent command ends at -m (no module name)"
        return ForkPlan(module=command[2], path=None, args=tuple(command[3:]))
    if command[1].startswith("-"):
        return (
            f"the agent command passes interpreter option {command[1]!r}, which a forked "
            "interpreter cannot take"
        )
    return ForkPlan(module=None, path=command[1], args=tuple(command[2:]))


def startup_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The variables the interpreter reads once at start-up: a forked child keeps the
    server's, so they must be the same for a fork to equal a spawn."""
    return {
        key: value
        for key, value in env.items()
        if key.startswith("PYTHON") or key == "LANG" or key.startswith("LC_")
    }


class ForkServerError(AgentreelError):
    """The fork server cannot run this agent; the message is the fallback reason. Internal:
    always caught here and turned into a spawn, so it is no ``HarnessError`` a run could
    fail with."""


class ForkedProcess:
    """An agent forked by the fork server, as the runner sees a process."""

    def __init__(
        self,
        pid: int,
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        status: asyncio.StreamReader,
        transports: list[asyncio.BaseTransport | asyncio.StreamWriter],
        server: ForkServer,
    ) -> None:
        self.pid = pid
        self.stdin: asyncio.StreamWriter | None = stdin
        self.stdout: asyncio.StreamReader | None = stdout
        self.cpu_seconds: float | None = None
        self._status = status
        self._transports = transports
        self._server = server
        self._returncode: int | None = None
        self._exited: asyncio.Future[int] | None = None

    @property
    def returncode(self) -> int | None:
        return self._returncode

    async def wait(self) -> int:
        if self._exited is None:
            self._exited = asyncio.ensure_future(self._read_exit())
        return await asyncio.shield(self._exited)

    async def _read_exit(self) -> int:
        line = await self._status.readline()
        try:
            message = json.loads(line) if line else None
        except ValueError:
            message = None
        if not isinstance(message, dict) or "exit" not in message:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            raise AgentCrashError(
                f"the fork server (pid {self._server.pid}) went away while agent pid "
                f"{self.pid} ran, so its exit code is unknown (the agent's process group was "
                f"killed). The server's log: {self._server.log_path}"
            )
        self._returncode = int(message["exit"])
        self.cpu_seconds = float(message.get("cpu", 0.0))
        if self.stdin is not None:
            self.stdin.close()
        return self._returncode

    def close(self) -> None:
        """Close the pipes' transports (the stdout one only after its end of file)."""
        for transport in self._transports:
            closing = (
                transport.transport.is_closing()
                if isinstance(transport, asyncio.StreamWriter)
                else transport.is_closing()
            )
            if not closing:
                transport.close()


class _WritePipeProtocol(asyncio.streams.FlowControlMixin, asyncio.Protocol):
    """Flow control for the child's stdin pipe, and the close waiter StreamWriter needs."""

    def __init__(self) -> None:
        super().__init__()
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._closed.done():
            self._closed.set_result(None)

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future[None]:
        return self._closed


async def pipe_streams(
    stdin_fd: int, stdout_fd: int
) -> tuple[asyncio.StreamWriter, asyncio.StreamReader, list[asyncio.BaseTransport]]:
    """Asyncio streams over the harness's ends of an agent's stdin and stdout pipes (what
    ``create_subprocess_exec`` makes for a spawned agent), and their transports."""
    loop = asyncio.get_running_loop()
    stdout = asyncio.StreamReader(limit=1 << 16)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stdout), os.fdopen(stdout_fd, "rb", buffering=0)
    )
    write_transport, protocol = await loop.connect_write_pipe(
        _WritePipeProtocol, os.fdopen(stdin_fd, "wb", buffering=0)
    )
    stdin = asyncio.StreamWriter(write_transport, protocol, None, loop)
    return stdin, stdout, [write_transport, read_transport]


class ForkServer:
    """One fork server process: started with a preload list, serving fork requests."""

    def __init__(self, preload: Sequence[str], startup_env: Mapping[str, str]) -> None:
        self.preload = tuple(preload)
        self.directory = Path(tempfile.mkdtemp(prefix="agentreel-forkserver-"))
        self.log_path = self.directory / "forkserver.log"
        self.pid: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._lock = threading.Lock()
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(self.directory),
            "TMPDIR": str(self.directory),
            **startup_env,
        }
        self._env = env

    def start(self) -> None:
        """Start the server and wait for its preload; ``ForkServerError`` with the reason."""
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self.log_path.open("wb") as log:
                self._process = subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        BOOTSTRAP,
                        str(SERVER_FILE),
                        str(there.fileno()),
                        json.dumps(list(self.preload)),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.directory,
                    env=self._env,
                    pass_fds=(there.fileno(),),
                    start_new_session=True,
                )
        except OSError as exc:
            here.close()
            raise ForkServerError(f"the fork server cannot start: {exc}") from None
        finally:
            there.close()
        self._control = here
        here.settimeout(READY_TIMEOUT)
        try:
            received = wire.read_frame(here)
        except (OSError, ValueError) as exc:
            received = None
            problem = f"{type(exc).__name__}: {exc}"
        else:
            problem = "it exited during its preload"
        here.settimeout(None)
        if received is None:
            self.close()
            raise ForkServerError(
                f"the fork server did not become ready ({problem}); its log: {self._log_tail()}"
            )
        ready, _fds = received
        if not ready.get("ready"):
            self.close()
            raise ForkServerError(str(ready.get("reason", "it refused without a reason")))
        self.pid = int(ready["pid"])

    def _log_tail(self) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(unreadable)"
        lines = text.strip().splitlines()[-20:]
        return "\n".join(lines) if lines else "(empty)"

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    async def spawn(
        self, plan: ForkPlan, *, env: Mapping[str, str], cwd: Path, stderr: IO[bytes]
    ) -> ForkedProcess:
        """Fork one child running ``plan``; ``ForkServerError`` if the server refuses."""
        control = self._control
        if control is None or not self.alive:
            raise ForkServerError("the fork server is not running")
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        status_here, status_there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        request = {
            "module": plan.module,
            "path": plan.path,
            "args": list(plan.args),
            "env": dict(env),
            "cwd": str(cwd),
        }
        frame = wire.encode_frame(request)
        try:
            with self._lock:
                sent = socket.send_fds(
                    control, [frame], [stdin_r, stdout_w, stderr.fileno(), status_there.fileno()]
                )
                if sent < len(frame):
                    control.sendall(frame[sent:])
        except OSError as exc:
            for fd in (stdin_w, stdout_r):
                os.close(fd)
            status_here.close()
            raise ForkServerError(f"the fork server stopped taking requests: {exc}") from None
        finally:
            for fd in (stdin_r, stdout_w):
                os.close(fd)
            status_there.close()
        # The writer is kept: dropping it would close the socket before the exit arrives.
        status, status_writer = await asyncio.open_unix_connection(sock=status_here)
        first = await status.readline()
        try:
            answer = json.loads(first) if first else {}
        except ValueError:
            answer = {}
        if "pid" not in answer:
            for fd in (stdin_w, stdout_r):
                os.close(fd)
            status_writer.close()
            reason = answer.get("refused") or "the fork server exited before forking"
            raise ForkServerError(str(reason))
        stdin, stdout, transports = await pipe_streams(stdin_w, stdout_r)
        return ForkedProcess(
            int(answer["pid"]), stdin, stdout, status, [*transports, status_writer], self
        )

    def close(self) -> None:
        """End the server (it kills any child still running) and remove its directory."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._process is not None:
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()
            self._process = None
        shutil.rmtree(self.directory, ignore_errors=True)


class ForkServers:
    """The fork servers of this harness process: one per preload list and start-up env,
    started on first use; a server that could not start is remembered with its reason."""

    def __init__(self) -> None:
        self._servers: dict[tuple[Any, ...], ForkServer | str] = {}
        self._lock = threading.Lock()

    def get(self, preload: Sequence[str], startup_env: Mapping[str, str]) -> ForkServer:
        key = (tuple(preload), tuple(sorted(startup_env.items())))
        with self._lock:
            known = self._servers.get(key)
            if isinstance(known, ForkServer) and not known.alive:
                known.close()
                known = None  # it died (killed from outside): one more start is allowed
            if known is None:
                server = ForkServer(preload, startup_env)
                try:
                    server.start()
                except ForkServerError as exc:
                    known = str(exc)
                else:
                    known = server
                self._servers[key] = known
        if isinstance(known, str):
            raise ForkServerError(known)
        return known

    def close(self) -> None:
        with self._lock:
            servers = [s for s in self._servers.values() if isinstance(s, ForkServer)]
            self._servers.clear()
        for server in servers:
            server.close()


SERVERS = ForkServers()
atexit.register(SERVERS.close)


def _log_fallback(name: str, reason: str) -> None:
    logger.warning(
        "agentreel: %s: fork server not used (%s); the agent starts as a plain subprocess",
        name,
        reason,
    )


@dataclass(slots=True)
class StartedAgent:
    """A running agent, how it was started, and why not by fork when a fork was asked for."""

    process: AgentProcess
    method: StartMethod
    fallback_reason: str | None

    def kill_group(self) -> None:
        """SIGKILL the agent's whole process group (its own session, forked or spawned)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)


@contextlib.asynccontextmanager
async def started_agent(
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    stderr: IO[bytes],
    fork_preload: Sequence[str] | None,
    name: str = "agent",
) -> AsyncIterator[StartedAgent]:
    """Start the agent (forked when ``fork_preload`` is given and a fork can stand in for a
    spawn), yield it, and release its pipes afterwards. ``OSError`` if it cannot start;
    ``name`` (the scenario) is what a logged fallback names."""
    reason: str | None = None
    if fork_preload is not None:
        forked = await _try_fork(command, env=env, cwd=cwd, stderr=stderr, preload=fork_preload)
        if isinstance(forked, ForkedProcess):
            try:
                yield StartedAgent(forked, "fork", None)
            finally:
                forked.close()
            return
        reason = forked
        _log_fallback(name, reason)
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
    )
    yield StartedAgent(process, "spawn", reason)


async def _try_fork(
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    stderr: IO[bytes],
    preload: Sequence[str],
) -> ForkedProcess | str:
    if not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
        return "this platform has no fork or descriptor passing"
    plan = plan_fork(command)
    if isinstance(plan, str):
        return plan
    try:
        server = SERVERS.get(preload, startup_environment(env))
        return await server.spawn(plan, env=env, cwd=cwd, stderr=stderr)
    except ForkServerError as exc:
        return str(exc)
