"""agentreel's reference ACP coding agent: spawn, fork and parallel subagents.

Run it as ``agentreel-acp-agent`` (or ``python -m agentreel.acp_agent``). The loop
(``AgentRuntime``/``AgentSession``) knows nothing about ACP and talks to the editor through
a ``ClientChannel``; ``ReferenceAgent`` is the ACP bridge built on the official
``agent-client-protocol`` SDK. Providers come only from the ``agentreel.llm.providers``
registry, so a replay run imports no provider SDK.
"""

from agentreel.acp_agent._config import AgentConfig, parse_config
from agentreel.acp_agent._conversation import Conversation
from agentreel.acp_agent._loop import (
    ALL_TOOLS,
    SYSTEM_PROMPT,
    AgentRuntime,
    AgentSession,
    CancelScope,
    ClientChannel,
    SubagentChannel,
    TurnOutcome,
)
from agentreel.acp_agent._main import main, serve
from agentreel.acp_agent._server import AcpChannel, ReferenceAgent
from agentreel.acp_agent._workspace import Workspace
from agentreel.acp_agent.exceptions import (
    AcpAgentError,
    ConfigError,
    PathEscapeError,
    ToolError,
)

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
    "serve",
]
