"""The process: configuration, a protocol-only stdout, the ACP loop, a clean exit.

stdout is the protocol channel. Before anything else runs, the agent kit's
``take_protocol_stdout`` duplicates the real stdout file descriptor for the protocol and
points fd 1 (and ``sys.stdout``) at stderr, so a stray ``print`` or a library writing to
fd 1 can never corrupt the frames; ``protocol_streams`` serves ACP over it.

Stopping: stdin EOF, SIGTERM and SIGINT all end the process the same way (ACP clients
close stdin and send SIGTERM at the same moment). The turns in flight are interrupted
(``turn/end`` interrupted), their ``session/prompt`` requests answered, then the
connection closes, every session log is flushed and closed, the provider closed (replay
writes its report) and the process exits 0. To answer before the SDK sees the end of
input, the agent reads stdin itself and passes the bytes on (``_InputGate``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from typing import BinaryIO

from agentreel.acp_agent._config import AgentConfig, parse_config
from agentreel.acp_agent.exceptions import ConfigError

# How long shutting down waits for interrupted turns to end and answer their prompts.
INTERRUPT_TIMEOUT_SECONDS = 10.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

logger = logging.getLogger("agentreel.acp_agent")


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point: serve ACP on stdio until stdin closes."""
    # Imported here, not at the top: ``import agentreel.acp_agent.__main__`` stays light
    # (the kit's stdio helpers need only the standard library).
    from agentreel.agent_kit import take_protocol_stdout

    args = list(sys.argv[1:] if argv is None else argv)
    # stdout is secured first; only --help (which never serves ACP) prints to it.
    protocol_out = None if {"-h", "--help"} & set(args) else take_protocol_stdout()
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
    # Everything is flushed: a stop signal during interpreter exit (a client escalating
    # from stdin EOF to SIGTERM) must not turn a clean exit into death by signal.
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    return 0


def preload() -> None:
    """Import what serving a replay imports, without serving or starting anything.

    For a preloading fork server (the harness's ``[fork_server]``), which calls this once
    and forks one agent per scenario from the result. Only the replay provider is loaded:
    a replay imports no provider SDK, forked or not. The kit's stdio helpers that ``main``
    and ``serve`` resolve lazily are resolved here too: a module a forked child still has
    to import is compiled from source when bytecode is not written (the harness runs
    agents with ``PYTHONDONTWRITEBYTECODE``), and importing it rescans the ``agentreel``
    namespace over the child's new ``sys.path`` — about 5 ms of every forked run.
    """
    import acp  # noqa: F401

    from agentreel.acp_agent import _server  # noqa: F401
    from agentreel.agent_kit import (  # noqa: F401
        STDIO_LIMIT_BYTES,
        protocol_streams,
        take_protocol_stdout,
    )
    from agentreel.llm import load_provider_factory

    load_provider_factory("replay")


async def serve(config: AgentConfig, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Run the reference agent over the given byte streams until the input ends or a
    SIGTERM / SIGINT arrives (see the module docstring: both stop the same way)."""
    import acp

    from agentreel.acp_agent._server import ReferenceAgent
    from agentreel.agent_kit import STDIO_LIMIT_BYTES, protocol_streams

    reader, writer = await protocol_streams(stdin, stdout)
    agent = ReferenceAgent(config)
    gate = _InputGate(reader, limit=STDIO_LIMIT_BYTES)
    serving = asyncio.create_task(
        acp.run_agent(  # session/fork is in ACP's unstable part
            agent,  # type: ignore[arg-type]
            writer,
            gate.protocol_input,
            use_unstable_protocol=config.load_and_fork,
        ),
        name="acp serve",
    )
    handled = _on_stop_signals(gate.stop)
    try:
        reason = await gate.wait(serving)
        if reason is not None:
            logger.info("%s: interrupting the turns in flight and shutting down", reason)
            await agent.interrupt(INTERRUPT_TIMEOUT_SECONDS)
            gate.close()  # the SDK sees the end of input after the answers are queued
        await serving
    finally:
        gate.cancel()
        # The handlers stay until everything is flushed: a signal now only logs.
        await agent.aclose()
        with contextlib.suppress(Exception):
            writer.close()
        loop = asyncio.get_running_loop()
        for signum in handled:
            loop.remove_signal_handler(signum)


def _on_stop_signals(stop: Callable[[str], None]) -> list[int]:
    """Route SIGTERM and SIGINT to ``stop``; the signals it could take (none off the main
    thread, e.g. when a test serves in-process)."""
    loop = asyncio.get_running_loop()
    handled: list[int] = []
    for signum in _STOP_SIGNALS:
        try:
            loop.add_signal_handler(signum, stop, signal.Signals(signum).name)
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        handled.append(signum)
    return handled


class _InputGate:
    """Passes stdin to the ACP connection until it ends or a stop signal comes.

    Either way the agent answers the prompts in flight first, then ``close`` gives the
    connection its end of input — so the SDK never cancels a request it could still answer.
    """

    def __init__(self, source: asyncio.StreamReader, *, limit: int) -> None:
        self._source = source
        self.protocol_input = asyncio.StreamReader(limit=limit)
        self._stopped = asyncio.get_running_loop().create_future()
        self._pump = asyncio.create_task(self._copy(), name="acp stdin")

    async def _copy(self) -> None:
        reason = "stdin closed"
        try:
            while chunk := await self._source.read(1 << 16):
                self.protocol_input.feed_data(chunk)
        except OSError as exc:
            reason = f"reading stdin failed ({exc})"
        self.stop(reason)

    def stop(self, reason: str) -> None:
        if self._stopped.done():
            logger.info("%s while shutting down: already stopping", reason)
            return
        self._stopped.set_result(reason)

    async def wait(self, serving: asyncio.Task[None]) -> str | None:
        """The stop reason, or ``None`` when the connection ended by itself first."""
        await asyncio.wait({serving, self._stopped}, return_when=asyncio.FIRST_COMPLETED)
        return self._stopped.result() if self._stopped.done() else None

    def close(self) -> None:
        self._pump.cancel()
        self.protocol_input.feed_eof()

    def cancel(self) -> None:
        self._pump.cancel()
