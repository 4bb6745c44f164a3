"""Errors of the proxy. Imports nothing internal.

Hierarchy::

    AgentreelError (agentreel.brand)  base of every agentreel error
    └── ProxyError                      base of everything the proxy raises
        ├── ProxyConfigError            bad settings (mode, upstream, fixture, masks, port)
        ├── RequestError                an HTTP request the proxy cannot serve (answered as an
        │                               HTTP error in the request's own API format; carries status)
        └── SecretInRecordingError      record mode refused to write a live key into a log

Replay errors (unrecorded session, exhausted script, drift) are ``agentreel.llm_replay``'s
own exceptions; the proxy answers them as HTTP errors and reports them, it never wraps them.
"""

from __future__ import annotations

from agentreel.brand.exceptions import AgentreelError

__all__ = [
    "AgentreelError",
    "ProxyConfigError",
    "ProxyError",
    "RequestError",
    "SecretInRecordingError",
]


class ProxyError(AgentreelError):
    """Base class of the proxy's errors."""


class ProxyConfigError(ProxyError, ValueError):
    """The proxy was started with settings it cannot use; the message says which and why."""


class RequestError(ProxyError):
    """A request the proxy answers with an error status (bad JSON, unknown path, too big)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class SecretInRecordingError(ProxyError):
    """What record mode was about to write contains a key a client sent; nothing was written."""
