"""Protocol-only stdout for an ACP agent process, and the asyncio streams over it.

An ACP agent's stdout *is* the protocol channel: one stray byte from a ``print``, a
library's banner or a C extension corrupts the stream the editor (or the harness) reads.
``take_protocol_stdout`` moves the real stdout out of everybody's reach before anything
else runs; ``protocol_streams`` makes the reader/writer pair the ACP SDK wants from the
protocol file and stdin — for pipes through the event loop, for regular files (a
transcript on disk, ``/dev/null``) through blocking writes and a reader thread.

This module imports nothing beyond the standard library, so an agent can call it first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
import threading
from typing import Any, BinaryIO

STDIO_LIMIT_BYTES = 50 * 1024 * 1024


def take_protocol_stdout() -> BinaryIO:
    """Keep the real stdout for protocol frames; point fd 1 and ``sys.stdout`` at stderr.

    Call it first thing in ``main``, before importing the ACP SDK, a provider SDK or any
    plugin, then pass the returned file to ``protocol_streams`` and those streams to
    ``acp.run_agent`` explicitly.

    Why not just ``sys.stdout = sys.stderr``? It is wrong twice. File descriptor 1 stays
    the protocol pipe, so everything that writes to the descriptor rather than the Python
    object — C extensions, subprocesses inheriting it, ``sys.__stdout__``, ``os.write(1,
    ...)`` — still lands in the protocol stream. And the ACP SDK's default stdio streams
    (``acp.stdio_streams``, what ``run_agent`` uses when given no streams) are built from
    ``sys.stdout``: after the rebinding the agent's own frames go to stderr and the client
    waits forever. So the descriptor is duplicated for the protocol, fd 1 becomes a copy of
    stderr, and the protocol is handed back as an explicit stream.
    """
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb", buffering=0)


class _WriteProtocol(asyncio.streams.FlowControlMixin, asyncio.Protocol):
    """Flow control for a write-only pipe (what ``asyncio.StreamWriter`` needs)."""


class _BlockingWriteTransport(asyncio.WriteTransport):
    """Synchronous writes, for a stdout that is a regular file (pipes use the event loop)."""

    def __init__(self, file: BinaryIO) -> None:
        super().__init__()
        self._file = file
        self._closing = False

    def write(self, data: Any) -> None:
        if not self._closing:
            self._file.write(bytes(data))
            self._file.flush()

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True
        with contextlib.suppress(OSError):
            self._file.flush()

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


def _is_pollable(file: BinaryIO) -> bool:
    mode = os.fstat(file.fileno()).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


async def protocol_streams(
    stdin: BinaryIO, stdout: BinaryIO, *, limit: int = STDIO_LIMIT_BYTES
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """``(reader, writer)`` over ``stdin`` and the protocol ``stdout`` (call inside the loop).

    ``acp.run_agent(agent, writer, reader)`` serves over them. ``limit`` bounds one
    incoming line (a JSON-RPC frame).
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    read_protocol = asyncio.StreamReaderProtocol(reader)
    try:
        if not _is_pollable(stdin):
            raise OSError("stdin is not a pipe")
        await loop.connect_read_pipe(lambda: read_protocol, stdin)
    except (OSError, ValueError):
        _feed_from_thread(loop, stdin, reader)

    write_protocol = _WriteProtocol()
    transport: asyncio.WriteTransport
    try:
        if not _is_pollable(stdout):
            raise OSError("stdout is not a pipe")
        transport, _ = await loop.connect_write_pipe(lambda: write_protocol, stdout)
    except (OSError, ValueError):
        transport = _BlockingWriteTransport(stdout)
    writer = asyncio.StreamWriter(transport, write_protocol, None, loop)
    return reader, writer


def _feed_from_thread(
    loop: asyncio.AbstractEventLoop, stdin: BinaryIO, reader: asyncio.StreamReader
) -> None:
    """Read a non-pollable stdin (a regular file, /dev/null) line by line in a thread."""

    def pump() -> None:
        try:
            while line := stdin.readline():
                loop.call_soon_threadsafe(reader.feed_data, line)
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="agentreel-stdin", daemon=True).start()
