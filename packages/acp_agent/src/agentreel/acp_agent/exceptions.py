"""Exceptions raised by ``agentreel.acp_agent``.

Hierarchy::

    AgentreelError (agentreel.brand)  base of every agentreel error
    └── AcpAgentError                 base of everything this package raises
        ├── ConfigError               a flag or AGENTREEL_* variable is missing or malformed
        ├── ClientDisconnectedError   the editor's connection closed while a turn was running
        │                             (the turn ends ``interrupted``)
        └── ToolError                 a tool call cannot be carried out (the model sees it
            │                         as an ``is_error`` tool result, the agent never crashes)
            └── PathEscapeError       a tool path leaves the session cwd (``..``, absolute
                                      path elsewhere, or a symlink pointing outside)

This module imports nothing from the rest of the package.
"""

from __future__ import annotations

from agentreel.brand.exceptions import AgentreelError

__all__ = [
    "AcpAgentError",
    "AgentreelError",
    "ClientDisconnectedError",
    "ConfigError",
    "PathEscapeError",
    "ToolError",
]


class AcpAgentError(AgentreelError):
    """Base class of every error raised by ``agentreel.acp_agent``."""


class ConfigError(AcpAgentError):
    """The agent's configuration (flags or ``AGENTREEL_*`` environment) is unusable."""


class ClientDisconnectedError(AcpAgentError):
    """The client connection is gone (stdin closed); the running turn is interrupted."""


class ToolError(AcpAgentError):
    """A tool call failed; the message is what the model receives as the tool result."""


class PathEscapeError(ToolError):
    """A tool path resolves outside the session cwd."""
