"""``python -m agentreel.llm.stub --rules FILE``: run the stub model server by hand.

Prints the base URL on the first line of stdout (for the ``stub`` provider:
``AGENTREEL_STUB_URL=<url>``), logs requests to stderr, and runs until interrupted
(Ctrl-C / SIGTERM) or, with ``--exit-on-stdin-eof``, until its parent closes stdin.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from types import FrameType

from agentreel.llm.exceptions import StubRulesError
from agentreel.llm.stub._rules_doc import rules_format
from agentreel.llm.stub._server import StubServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentreel.llm.stub",
        description="Run the agentreel stub model server on 127.0.0.1.",
    )
    parser.add_argument("--rules", help="TOML rules file (required to serve)")
    parser.add_argument(
        "--rules-format", action="store_true", help="print the rules file format and exit"
    )
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument(
        "--exit-on-stdin-eof",
        action="store_true",
        help="stop when stdin is closed (so the server dies with the process that started it)",
    )
    parser.add_argument("--quiet", action="store_true", help="log only warnings")
    args = parser.parse_args(argv)
    if args.rules_format:
        print(rules_format(), end="")
        return 0
    if args.rules is None:
        parser.error("--rules FILE is required (the format: --rules-format)")
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="stub: %(message)s",
        stream=sys.stderr,
    )
    try:
        server = StubServer(args.rules, port=args.port)
    except StubRulesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.exit_on_stdin_eof:

        def watch_stdin() -> None:
            while os.read(sys.stdin.fileno(), 65536):
                pass
            done.set()

        threading.Thread(target=watch_stdin, daemon=True).start()
    with server:
        print(server.base_url, flush=True)
        print(
            f"stub: OpenAI base_url {server.openai_base_url}, Anthropic base_url "
            f"{server.anthropic_base_url}; for the agent: AGENTREEL_STUB_URL={server.base_url}",
            file=sys.stderr,
            flush=True,
        )
        while not done.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
