"""The process: configuration, a protocol-only stdout, the ACP loop, a clean exit.

stdout is the protocol channel. Before anything else runs, the real stdout file
descriptor is duplicated for the protocol and fd 1 (and ``sys.stdout``) is pointed at
stderr, so a stray ``print`` or a library writing to fd 1 can never corrupt the frames.
On stdin EOF every session is flushed and closed and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import sys
import threading
from collections.abc import Sequence
from typing import Any, BinaryIO

from agentreel.acp_agent._config import AgentConfig, parse_config
from agentreel.acp_agent.exceptions import ConfigError

STDIO_LIMIT_BYTES = 50 * 1024 * 1024


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point: serve ACP on stdio until stdin closes."""
    args = list(sys.argv[1:] if argv is None else argv)
    # stdout is secured first; only --help (which never serves ACP) prints to it.
    protocol_out = None if {"-h", "--help"} & set(args) else _take_stdout()
    try:
        config = parse_config(args)
    except ConfigError as exc:
        print(f"agentreel-acp-agent: {exc}", file=sys.stderr)
        return 2
    assert protocol_out is not None  # --help exited inside parse_config
    logging.basicConfig(
        stream=sys.stderr,
        level=config.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    asyncio.run(serve(config, sys.stdin.buffer, protocol_out))
    return 0


def _take_stdout() -> BinaryIO:
    """Keep the real stdout for protocol frames; send fd 1 and ``sys.stdout`` to stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb", buffering=0)


async def serve(config: AgentConfig, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Run the reference agent over the given byte streams until the input ends."""
    import acp

    from agentreel.acp_agent._server import ReferenceAgent

    reader, writer = await _streams(stdin, stdout)
    agent = ReferenceAgent(config)
    try:
        await acp.run_agent(agent, writer, reader)  # type: ignore[arg-type]
    finally:
        await agent.aclose()
        with contextlib.suppress(Exception):
            writer.close()


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


async def _streams(
    stdin: BinaryIO, stdout: BinaryIO
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STDIO_LIMIT_BYTES)
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
