"""Errors of MCP record and replay. Imports nothing internal.

Hierarchy::

    AgentreelError (agentreel.brand)  base of every agentreel error
    └── McpReplayError                  base of everything agentreel.mcp_replay raises
        ├── McpConfigError              bad settings (mode, server, mask, folders)
        ├── McpServerMissingError       record mode: the real server's command is not there
        ├── McpRecordingError           a recording file replay cannot use
        ├── McpDriftError               replay: a call differs from, or is missing in, the
        │                               recording, or a recorded call was never made
        └── McpSecretError              record mode refused to write a credential
"""

from __future__ import annotations

from agentreel.brand.exceptions import AgentreelError

__all__ = [
    "AgentreelError",
    "McpConfigError",
    "McpDriftError",
    "McpRecordingError",
    "McpReplayError",
    "McpSecretError",
    "McpServerMissingError",
]


class McpReplayError(AgentreelError):
    """Base class of agentreel.mcp_replay's errors."""


class McpConfigError(McpReplayError, ValueError):
    """Settings the shim or the endpoint cannot use; the message says which and why."""


class McpServerMissingError(McpReplayError):
    """Record mode could not start the real server: its command is not installed."""


class McpRecordingError(McpReplayError):
    """A recording file that is not an MCP recording (names the file and line)."""


class McpDriftError(McpReplayError):
    """Replay met a call the recording does not answer, or a recorded call was never made.

    The message names the session, server, tool, a readable argument diff and the
    re-record command (at most 20 lines)."""


class McpSecretError(McpReplayError):
    """What record mode was about to write holds a credential; nothing was written."""
