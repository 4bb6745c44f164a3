"""Exceptions raised by ``agentreel.brand``, and the base of every agentreel error.

Hierarchy::

    AgentreelError          base of every error any agentreel package raises: catch it to
    │                       catch agentreel's errors and nothing else
    └── InvalidIdError      a string is not a valid id of the requested kind (also a
                            ValueError)

Each package's own base derives from ``AgentreelError`` and keeps the built-in bases its
errors had (an ``InvalidIdError`` is still a ``ValueError``); each package's ``exceptions``
module re-exports it and draws that package's hierarchy. brand is the lowest layer, so
every package can import it; this module imports nothing.
"""

from __future__ import annotations

__all__ = ["AgentreelError", "InvalidIdError"]


class AgentreelError(Exception):
    """Base class of every error an agentreel package raises."""


class InvalidIdError(AgentreelError, ValueError):
    """A string could not be parsed as the requested id kind."""

    def __init__(self, kind: str, value: object, reason: str) -> None:
        self.kind = kind
        self.value = value
        self.reason = reason
        super().__init__(
            f"invalid {kind}: {value!r} ({reason}); expected a canonical lowercase UUID such as "
            f"'123e4567-e89b-42d3-a456-426614174000' — pass an id made by new_session_id()"
        )
