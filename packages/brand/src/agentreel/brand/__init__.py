"""Branded identifiers shared by every agentreel package."""

from agentreel.brand._ids import (
    RequestId,
    SessionId,
    ToolCallId,
    new_session_id,
    parse_session_id,
)
from agentreel.brand.exceptions import AgentreelError, InvalidIdError

__all__ = [
    "AgentreelError",
    "InvalidIdError",
    "RequestId",
    "SessionId",
    "ToolCallId",
    "new_session_id",
    "parse_session_id",
]
