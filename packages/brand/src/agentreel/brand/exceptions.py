"""Exceptions raised by ``agentreel.brand``.

Hierarchy::

    ValueError
    └── InvalidIdError      a string is not a valid id of the requested kind
"""

from __future__ import annotations

__all__ = ["InvalidIdError"]


class InvalidIdError(ValueError):
    """A string could not be parsed as the requested id kind."""

    def __init__(self, kind: str, value: object, reason: str) -> None:
        self.kind = kind
        self.value = value
        self.reason = reason
        super().__init__(
            f"invalid {kind}: {value!r} ({reason}); expected a canonical lowercase UUID such as "
            f"'123e4567-e89b-42d3-a456-426614174000' — pass an id made by new_session_id()"
        )
