"""Where MCP recordings and a run's replay state live, and the names a caller gives its
identity by — the one owner of each (SPEC 19)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from agentreel.llm import MCP_SESSION_ENV, MCP_SESSION_HEADER

# A scenario's MCP recordings: one file per connection, ``mcp/<server>.<n>.jsonl`` beside
# its session logs, ``n`` the order the connection opened in (per server, from 0).
MCP_RECORDINGS_DIR = "mcp"
MCP_RECORDING_PATTERN = re.compile(r"^(?P<server>[A-Za-z0-9_-]+)\.(?P<n>0|[1-9][0-9]*)\.jsonl$")
# A server's name: what the scenario calls it and what its files are named by.
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
# The calling session's identity, when the agent gives one: in the stdio shim's
# environment, or as a header on every HTTP request of the connection (owned by
# agentreel.llm, below the agents that send it).
SESSION_ENV = MCP_SESSION_ENV
SESSION_HEADER = MCP_SESSION_HEADER
# The first line of a recording says its format: 1 wrote the cwd, install paths and the
# scenario's masks as tokens; 2 also every built-in mask of the mask set its ``"masks"``
# names in what the client sent, and this machine's HOME, user and host name in what the
# server said (SPEC 13, 19). Replay reads both.
RECORDING_VERSION = 2
READ_VERSIONS = frozenset({1, 2})
# The run's state folder: one claim file per recorded connection replay bound (how many of
# its client messages were answered), one failure file per failure met by any process.
CLAIM_SUFFIX = ".claim"
FAILURE_PREFIX = "failure-"


# How a server with a URL is reached: streamable HTTP (the default) or the legacy HTTP+SSE
# transport (MCP 2024-11-05); a recording's header names it as its ``transport``.
UrlTransport = Literal["http", "sse"]
URL_TRANSPORTS: tuple[UrlTransport, ...] = ("http", "sse")


def recording_path(recordings: Path, server: str, n: int) -> Path:
    return recordings / MCP_RECORDINGS_DIR / f"{server}.{n}.jsonl"


def shown_path(path: Path) -> str:
    """A recording as the user finds it in the scenario: ``mcp/<server>.<n>.jsonl``."""
    return f"{MCP_RECORDINGS_DIR}/{path.name}"
