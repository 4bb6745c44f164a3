"""Branded id types and their constructors."""

from __future__ import annotations

import uuid
from typing import NewType

from agentreel.brand.exceptions import InvalidIdError

SessionId = NewType("SessionId", str)
ToolCallId = NewType("ToolCallId", str)
RequestId = NewType("RequestId", str)


def new_session_id() -> SessionId:
    """Return a fresh random session id (a canonical lowercase UUID4 string)."""
    return SessionId(str(uuid.uuid4()))


def parse_session_id(value: object) -> SessionId:
    """Validate ``value`` as a session id and return it branded.

    Only the canonical 36-character lowercase hyphenated form is accepted, so that a
    session id is also a stable file name and normalizer token.
    """
    if not isinstance(value, str):
        raise InvalidIdError("session id", value, f"got {type(value).__name__}, not str")
    if len(value) != 36:
        raise InvalidIdError("session id", value, f"length {len(value)}, not 36")
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        raise InvalidIdError("session id", value, "not a UUID") from None
    if str(parsed) != value:
        raise InvalidIdError("session id", value, "not in canonical lowercase form")
    return SessionId(value)
