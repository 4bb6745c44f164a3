"""agentreel's reference ACP coding agent: spawn, fork and parallel subagents.

Run it as ``agentreel-acp-agent`` (or ``python -m agentreel.acp_agent``). The loop
(``AgentRuntime``/``AgentSession``) knows nothing about ACP and talks to the editor through
a ``ClientChannel``; ``ReferenceAgent`` is the ACP bridge built on the official
``agent-client-protocol`` SDK. Providers come only from the ``agentreel.llm.providers``
registry, so a replay run imports no provider SDK.

The package imports lazily (PEP 562): ``python -m agentreel.acp_agent`` and the console
script reach ``_main`` without importing anything else, so the protocol stdout is secured
before any other module (ACP SDK, providers, a plugin with a stray ``print``) loads.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentreel.acp_agent._channel import (
        CancelScope,
        ClientChannel,
        SubagentChannel,
        TurnOutcome,
    )
    from agentreel.acp_agent._config import AgentConfig, parse_config
    from agentreel.acp_agent._loop import (
        ALL_TOOLS,
        SYSTEM_PROMPT,
        AgentRuntime,
        AgentSession,
        Conversation,
    )
    from agentreel.acp_agent._main import main, preload, serve
    from agentreel.acp_agent._server import AcpChannel, ReferenceAgent
    from agentreel.acp_agent._workspace import Workspace
    from agentreel.acp_agent.exceptions import (
        AcpAgentError,
        ClientDisconnectedError,
        ConfigError,
        PathEscapeError,
        ToolError,
    )

_HOMES = {
    "AgentConfig": "_config",
    "parse_config": "_config",
    "Conversation": "_loop",
    "ALL_TOOLS": "_loop",
    "SYSTEM_PROMPT": "_loop",
    "AgentRuntime": "_loop",
    "AgentSession": "_loop",
    "CancelScope": "_channel",
    "ClientChannel": "_channel",
    "SubagentChannel": "_channel",
    "TurnOutcome": "_channel",
    "main": "_main",
    "preload": "_main",
    "serve": "_main",
    "AcpChannel": "_server",
    "ReferenceAgent": "_server",
    "Workspace": "_workspace",
    "AcpAgentError": "exceptions",
    "ClientDisconnectedError": "exceptions",
    "ConfigError": "exceptions",
    "PathEscapeError": "exceptions",
    "ToolError": "exceptions",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'agentreel.acp_agent' has no attribute {name!r}")
    value = getattr(import_module(f"agentreel.acp_agent.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ALL_TOOLS",
    "SYSTEM_PROMPT",
    "AcpAgentError",
    "AcpChannel",
    "AgentConfig",
    "AgentRuntime",
    "AgentSession",
    "CancelScope",
    "ClientChannel",
    "ClientDisconnectedError",
    "ConfigError",
    "Conversation",
    "PathEscapeError",
    "ReferenceAgent",
    "SubagentChannel",
    "ToolError",
    "TurnOutcome",
    "Workspace",
    "main",
    "parse_config",
    "preload",
    "serve",
]
