"""What the loop tells the editor (``ClientChannel``), and how a turn ends.

The loop knows nothing about ACP: the ACP bridge (``_server.AcpChannel``) implements the
channel; a subagent's ``SubagentChannel`` forwards only permission requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from agentreel.llm import LlmError, ToolCallPart

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "cancelled", "error"]
ToolStatus = Literal["completed", "failed"]
ToolKindName = Literal["read", "edit", "search", "think", "other"]


class ClientChannel(Protocol):
    """What the loop tells the editor. The ACP bridge maps these to session updates."""

    async def agent_text(self, text: str) -> None:
        """A piece of assistant text, as it streams."""

    async def agent_thought(self, text: str) -> None:
        """A piece of model reasoning, as it streams."""

    async def tool_call_started(
        self, call: ToolCallPart, title: str, kind: ToolKindName, path: str | None
    ) -> None:
        """The model issued a tool call (announced when its block ends)."""

    async def tool_call_running(self, call_id: str) -> None:
        """The tool call is being carried out."""

    async def tool_call_finished(self, call_id: str, status: ToolStatus, output: str) -> None:
        """The tool call ended with ``output`` (what the model receives)."""

    async def request_permission(self, call: ToolCallPart, title: str, path: str) -> bool:
        """Ask the user to allow a write; ``False`` means rejected or cancelled."""


class SubagentChannel:
    """A child's channel: no streamed updates (children run concurrently and would
    interleave nondeterministically), but permission requests go to the editor."""

    def __init__(self, parent: ClientChannel) -> None:
        self._parent = parent

    async def agent_text(self, text: str) -> None:
        return None

    async def agent_thought(self, text: str) -> None:
        return None

    async def tool_call_started(
        self, call: ToolCallPart, title: str, kind: ToolKindName, path: str | None
    ) -> None:
        return None

    async def tool_call_running(self, call_id: str) -> None:
        return None

    async def tool_call_finished(self, call_id: str, status: ToolStatus, output: str) -> None:
        return None

    async def request_permission(self, call: ToolCallPart, title: str, path: str) -> bool:
        return await self._parent.request_permission(call, title, path)


@dataclass
class CancelScope:
    """Set ``requested`` before cancelling a turn's task: the turn then ends ``aborted``
    (a user cancel) rather than ``interrupted`` (the process shutting down)."""

    requested: bool = False


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn ended and the text the model gave last (a subagent's answer)."""

    stop_reason: StopReason
    text: str = ""
    error: str | None = None
    llm_error: LlmError | None = None
