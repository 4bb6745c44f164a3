"""Record and replay an agent's MCP servers per session (SPEC 19).

A stdio shim (``stdio_command``) stands where the agent starts a server; an HTTP endpoint
(``start_endpoint``) stands at the URL it is given. Record writes every JSON-RPC exchange
of each connection to ``mcp/<server>.<n>.jsonl``; replay runs no server and answers each
connection from its session's recording; ``check_replayed`` fails on drift and on recorded
calls never made.
"""

from agentreel.mcp_replay._http import McpEndpoint, start_endpoint
from agentreel.mcp_replay._layout import (
    MCP_RECORDING_PATTERN,
    MCP_RECORDINGS_DIR,
    SESSION_ENV,
    SESSION_HEADER,
    URL_TRANSPORTS,
    UrlTransport,
)
from agentreel.mcp_replay._recording import upgrade_recording
from agentreel.mcp_replay._replay import check_replayed, recording_failures
from agentreel.mcp_replay._settings import McpSettings, check_server_name, stdio_command
from agentreel.mcp_replay.exceptions import (
    McpConfigError,
    McpDriftError,
    McpRecordingError,
    McpReplayError,
    McpSecretError,
    McpServerMissingError,
)

__all__ = [
    "MCP_RECORDINGS_DIR",
    "MCP_RECORDING_PATTERN",
    "SESSION_ENV",
    "SESSION_HEADER",
    "URL_TRANSPORTS",
    "McpConfigError",
    "McpDriftError",
    "McpEndpoint",
    "McpRecordingError",
    "McpReplayError",
    "McpSecretError",
    "McpServerMissingError",
    "McpSettings",
    "UrlTransport",
    "check_replayed",
    "check_server_name",
    "recording_failures",
    "start_endpoint",
    "stdio_command",
    "upgrade_recording",
]
