"""The fork server process: import an agent's modules once, then fork one child per run.

Standard library only, and loaded by file path (never as part of the harness package), so
a forked agent inherits nothing but the interpreter, what it preloaded and this module.
``_forkserver`` (the harness side) starts it as
``python -c BOOTSTRAP <this file> <control fd> <preload JSON>``.

Protocol on the control socket (``AF_UNIX``, stream; frames are a 4-byte big-endian length
and a JSON object):

- server → harness, once: ``{"ready": true, "pid": N}`` after the preload, or
  ``{"ready": false, "reason": "..."}`` (an import failed, a thread is alive, ...).
- harness → server, per run: ``{"module": NAME | null, "path": FILE | null, "args": [...],
  "env": {...}, "cwd": DIR}`` carrying four descriptors: the child's
  stdin, stdout, stderr and its own status socket.

On the status socket (one JSON line each): ``{"pid": N}`` once the child runs, or
``{"refused": "..."}`` when the server cannot guarantee a clean child (a thread alive);
later ``{"exit": CODE, "cpu": SECONDS}`` (``CODE`` negative for a signal, as
``subprocess`` reports it; ``cpu`` the child's user + system time).

The child starts a new session (its pid is its process group), takes the three stdio
descriptors as 0, 1 and 2, closes every descriptor of the server, replaces the whole
environment with the one it was sent, changes to its cwd and then leaves the server's
frames and runs the agent as ``python -m NAME`` or ``python FILE`` would, then exits as
the interpreter would, without its final module teardown (``_exit_status``). When the
control socket closes (the harness exited or died) the server kills the process group of
every child still running, reaps it and exits.
"""

from __future__ import annotations

import _io
import atexit
import contextlib
import gc
import importlib
import io
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import types
from dataclasses import dataclass
from typing import Any

_LENGTH = struct.Struct(">I")
MAX_FRAME = 1 << 24
STDIO_FDS = 3  # stdin, stdout, stderr; then the status socket


def encode_frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return _LENGTH.pack(len(body)) + body


def read_frame(sock: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any], list[int]] | None:
    """One frame and the descriptors sent with it; ``None`` at end of stream."""
    header, fds = _read_exact(sock, _LENGTH.size, max_fds)
    if header is None:
        for fd in fds:
            os.close(fd)
        return None
    (length,) = _LENGTH.unpack(header)
    if length > MAX_FRAME:
        raise ValueError(f"fork server frame of {length} bytes exceeds {MAX_FRAME}")
    body, more = _read_exact(sock, length, max_fds)
    fds += more
    if body is None:
        for fd in fds:
            os.close(fd)
        return None
    message = json.loads(body)
    if not isinstance(message, dict):
        raise ValueError("fork server frame is not a JSON object")
    return message, fds


def _read_exact(sock: socket.socket, size: int, max_fds: int) -> tuple[bytes | None, list[int]]:
    data = b""
    fds: list[int] = []
    while len(data) < size:
        if max_fds:
            chunk, received, _flags, _addr = socket.recv_fds(sock, size - len(data), max_fds)
            fds += received
        else:
            chunk = sock.recv(size - len(data))
        if not chunk:
            return None, fds
        data += chunk
    return data, fds


def preload(names: list[str]) -> None:
    """Import each module; ``module:function`` also calls the function (no arguments)."""
    for name in names:
        module_name, _, function = name.partition(":")
        module = importlib.import_module(module_name)
        if function:
            getattr(module, function)()


def threads_alive() -> list[str]:
    """Names of the threads besides this one (a fork would copy their locks, not them)."""
    current = threading.current_thread()
    return [thread.name for thread in threading.enumerate() if thread is not current]


@dataclass(slots=True)
class ChildPlan:
    """What a forked child runs once it has left the server's frames."""

    module: str | None
    path: str | None
    args: list[str]


@dataclass(slots=True)
class _Child:
    status: socket.socket
    started: float


class Server:
    """The accept-fork-reap loop (single-threaded; SIGCHLD wakes it through a pipe)."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.pid = os.getpid()
        self.children: dict[int, _Child] = {}
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.selector = selectors.DefaultSelector()

    def serve(self) -> ChildPlan | None:
        """Run until the control socket closes (``None``); in a forked child, return its plan."""
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        self.selector.register(self.control, selectors.EVENT_READ, "control")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "wake")
        try:
            while True:
                for key, _events in self.selector.select():
                    if key.data == "wake":
                        self._drain_wakeups()
                        self._reap()
                        continue
                    received = read_frame(self.control, STDIO_FDS + 1)
                    if received is None:
                        return None
                    plan = self._start(*received)
                    if plan is not None:
                        return plan  # the child, leaving the loop
        finally:
            if os.getpid() == self.pid:
                self._kill_all()

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is None:
                continue
            line = {
                "exit": os.waitstatus_to_exitcode(status),
                "cpu": usage.ru_utime + usage.ru_stime,
            }
            with contextlib.suppress(OSError):  # the harness stopped listening: still reaped
                child.status.sendall(json.dumps(line).encode() + b"\n")
            child.status.close()

    def _start(self, request: dict[str, Any], fds: list[int]) -> ChildPlan | None:
        if len(fds) != STDIO_FDS + 1:
            for fd in fds:
                os.close(fd)
            raise ValueError(f"fork request carried {len(fds)} descriptors, expected 4")
        stdio, status = fds[:STDIO_FDS], socket.socket(fileno=fds[STDIO_FDS])
        alive = threads_alive()
        if alive:
            status.sendall(
                json.dumps({"refused": f"threads alive in the fork server: {alive}"}).encode()
                + b"\n"
            )
            status.close()
            for fd in stdio:
                os.close(fd)
            return None
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        gc.freeze()  # preloaded objects stay out of the children's collections: fewer copies
        pid = os.fork()
        if pid == 0:
            return self._become_child(request, stdio, status)
        gc.unfreeze()
        for fd in stdio:
            os.close(fd)
        self.children[pid] = _Child(status, time.monotonic())
        with contextlib.suppress(OSError):  # the harness gave up on this run: still reaped
            status.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        return None

    def _become_child(
        self, request: dict[str, Any], stdio: list[int], status: socket.socket
    ) -> ChildPlan:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(number, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.selector.close()
        for child in self.children.values():
            child.status.close()
        self.children.clear()
        status.close()
        self.control.close()
        os.close(self.wake_r)
        os.close(self.wake_w)
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
        for fd in set(stdio):
            if fd > 2:
                os.close(fd)
        _fresh_process_state(request)
        # The preloaded objects stay frozen: the child's collections never walk (and so
        # never copy) the pages it shares with the server.
        return ChildPlan(
            module=request.get("module"), path=request.get("path"), args=list(request["args"])
        )

    def _kill_all(self) -> None:
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self.children and time.monotonic() < deadline:
            self._reap()
            if self.children:
                time.sleep(0.01)


def _fresh_process_state(request: dict[str, Any]) -> None:
    """Make the forked child look like a process started with this env, cwd and stdio."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    tempfile.tempdir = None  # gettempdir() caches; TMPDIR is the run's now
    # What the interpreter puts first: the cwd for ``-m``, the script's real directory.
    path = request.get("path")
    sys.path[0] = os.getcwd() if path is None else os.path.dirname(os.path.realpath(path))
    importlib.invalidate_caches()
    # New stdio objects over fds 0-2, built like the interpreter builds them at start-up
    # (the server's were made for its own descriptors, e.g. a seekable /dev/null stdin).
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        stream = _text_stream(fd, getattr(sys, f"__{name}__"), write=fd > 0)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)  # what code restoring the originals reaches


def _text_stream(fd: int, like: Any, *, write: bool) -> io.TextIOWrapper:
    raw = io.FileIO(fd, "wb" if write else "rb", closefd=False)
    buffer: Any
    if write and not isinstance(getattr(like, "buffer", None), io.BufferedWriter):
        buffer = raw  # PYTHONUNBUFFERED: the interpreter writes through to the raw file
    else:
        buffer = io.BufferedWriter(raw) if write else io.BufferedReader(raw)
    return io.TextIOWrapper(
        buffer,
        encoding=getattr(like, "encoding", None) or "utf-8",
        errors=getattr(like, "errors", None) or "strict",
        newline="\n",
        line_buffering=bool(getattr(like, "line_buffering", False)) and os.isatty(fd),
        write_through=bool(getattr(like, "write_through", False)),
    )


def run_agent(plan: ChildPlan) -> None:
    """Run the agent as the interpreter would for ``-m NAME`` or a script path."""
    if plan.module is not None:
        sys.argv = [plan.module, *plan.args]
        runpy.run_module(plan.module, run_name="__main__", alter_sys=True)
        return
    assert plan.path is not None
    sys.argv = [plan.path, *plan.args]
    main = types.ModuleType("__main__")
    main.__file__ = plan.path
    sys.modules["__main__"] = main
    with open(plan.path, "rb") as source:
        code = compile(source.read(), plan.path, "exec")
    exec(code, main.__dict__)


def main(argv: list[str]) -> int:
    """Server entry: ``<control fd> <preload JSON>``. In a forked child it runs the agent."""
    control = socket.socket(fileno=int(argv[0]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the harness ends us by closing the socket
    try:
        preload(json.loads(argv[1]))
    except BaseException as exc:  # any failure is a reason to spawn plainly, said once
        control.sendall(
            encode_frame({"ready": False, "reason": f"preload failed: {type(exc).__name__}: {exc}"})
        )
        return 0
    alive = threads_alive()
    if alive:
        control.sendall(
            encode_frame({"ready": False, "reason": f"threads alive after the preload: {alive}"})
        )
        return 0
    control.sendall(encode_frame({"ready": True, "pid": os.getpid()}))
    plan = Server(control).serve()
    if plan is None:
        return 0
    os._exit(_exit_status(plan))


def _exit_status(plan: ChildPlan) -> int:
    """Run the agent, then exit as the interpreter would, minus the final module teardown.

    Like a spawned ``python``: ``SystemExit`` gives the code (``None`` 0, an int itself,
    anything else printed and 1), an uncaught exception its traceback and 1, an uncaught
    ``KeyboardInterrupt`` death by SIGINT; then non-daemon threads are joined, atexit
    handlers run and every open file the child made is flushed, stdio last (a failing
    stdout flush is 120). The interpreter's teardown of every module is skipped, as in
    multiprocessing's forked children: it would touch — and so copy — every page shared
    with the server (~25 ms a run, a third of a replayed scenario), and the kernel closes
    the descriptors at exit all the same. Only ``__del__`` methods still waiting for that
    teardown do not run.
    """
    try:
        run_agent(plan)
        code = 0
    except SystemExit as exc:
        code = _system_exit_code(exc)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        _finish()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        return 130
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    return _finish() or code


def _system_exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    with contextlib.suppress(Exception):
        print(exc.code, file=sys.stderr)
    return 1


def _flush_own_files(objects: list[Any]) -> None:
    """Flush every open file object among ``objects`` but the standard streams, as the
    interpreter's teardown would (the child's own objects: the preloaded ones are frozen).

    The test is against the C base of every file object, by the object's real type: not
    the ``io.IOBase`` ABC (a first-seen type walks the ABC's subclass tree, ~3 ms a run),
    and not ``isinstance``, which falls back to an object's ``__class__`` — a lazy proxy
    (the openai SDK's resources) imports its whole module behind that: 3-8 s of every
    agent exit that had loaded the SDK, measured."""
    standard = {id(sys.stdout), id(sys.stderr), id(sys.__stdout__), id(sys.__stderr__)}
    for obj in objects:
        if issubclass(type(obj), _io._IOBase) and id(obj) not in standard:
            with contextlib.suppress(Exception):
                if not obj.closed:
                    obj.flush()


def _finish() -> int:
    """What the interpreter does at exit before tearing down: 120 if stdout cannot flush."""
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    _flush_own_files(gc.get_objects())
    status = 0
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            if stream is sys.stdout:
                status = 120
    return status
