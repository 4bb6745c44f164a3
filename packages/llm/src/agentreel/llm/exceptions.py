"""Exceptions raised by ``agentreel.llm``.

Hierarchy::

    AgentreelError (agentreel.brand)  base of every agentreel error
    └── AgentreelLlmError                  base of everything this package raises
        ├── LlmError(code, status, msg)    a model call failed (what providers raise)
        │   ├── AuthenticationError        401/403: the key is missing or wrong
        │   ├── BadRequestError            400/404/422: the request itself is wrong
        │   ├── RateLimitError             429 after the retry budget was spent
        │   ├── ServerError                5xx after the retry budget was spent
        │   ├── ProviderTimeoutError       no answer within the configured time
        │   └── StreamInterruptedError     the stream ended before its finish event
        ├── ChunkDecodeError               a chunk line is not valid chunk JSON
        ├── StreamContractError            a chunk stream breaks the stream contract
        ├── ProviderNotFoundError          no provider registered under that name
        ├── AgentEnvironmentError          the AGENTREEL_* environment cannot be read
        ├── StubRulesError                 a stub model server rules file is invalid
        └── UpstreamStreamError            an upstream sent an error event inside a stream
                                           (defined and exported by ``agentreel.llm.wire``,
                                           whose decoders raise it)

This module imports nothing from the rest of the package so any layer may import it.
"""

from __future__ import annotations

from agentreel.brand.exceptions import AgentreelError

__all__ = [
    "AgentEnvironmentError",
    "AgentreelError",
    "AgentreelLlmError",
    "AuthenticationError",
    "BadRequestError",
    "ChunkDecodeError",
    "LlmError",
    "ProviderNotFoundError",
    "ProviderTimeoutError",
    "RateLimitError",
    "ServerError",
    "StreamContractError",
    "StreamInterruptedError",
    "StubRulesError",
]


class AgentreelLlmError(AgentreelError):
    """Base class of every error raised by ``agentreel.llm``."""


class LlmError(AgentreelLlmError):
    """A model call failed.

    ``code`` is a short stable machine-readable string (``rate_limited``, ``server_error``,
    ``auth``, ``bad_request``, ``timeout``, ``stream_cut``, or a provider's own code);
    ``status`` is the HTTP status when there was one.
    """

    def __init__(self, code: str, status: int | None, message: str) -> None:
        self.code = code
        self.status = status
        self.message = message
        where = f"HTTP {status}" if status is not None else "no HTTP status"
        super().__init__(f"[{code}, {where}] {message}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.code, self.status, self.message))


class AuthenticationError(LlmError):
    """The provider rejected the credentials (401/403)."""


class BadRequestError(LlmError):
    """The provider rejected the request as malformed (400/404/422)."""


class RateLimitError(LlmError):
    """The provider kept answering 429 until the retry budget ran out."""


class ServerError(LlmError):
    """The provider kept answering 5xx until the retry budget ran out."""


class ProviderTimeoutError(LlmError):
    """The provider did not answer within the configured time."""


class StreamInterruptedError(LlmError):
    """The response stream ended before the provider sent its final event."""


class ChunkDecodeError(AgentreelLlmError):
    """A chunk could not be decoded; the message names the field and the input."""


class StreamContractError(AgentreelLlmError):
    """A chunk stream broke the stream contract at ``index``."""

    def __init__(self, index: int, chunk: object, reason: str) -> None:
        self.index = index
        self.chunk = chunk
        self.reason = reason
        super().__init__(
            f"stream contract broken at chunk {index} ({chunk!r}): {reason}. The provider or "
            "replay fixture that produced this stream is at fault: fix its chunk order (a block "
            "starts before its deltas and ends after them, usage before finish, nothing after "
            "finish)."
        )


class ProviderNotFoundError(AgentreelLlmError):
    """No provider is registered under the requested name."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        listing = ", ".join(sorted(known)) or "none"
        super().__init__(
            f"no LLM provider named {name!r}; registered providers: {listing}. "
            "Install the package that provides it, or register one under the entry-point "
            "group 'agentreel.llm.providers'."
        )


class StubRulesError(AgentreelLlmError, ValueError):
    """A stub model server rules file is invalid; the message names the file and the key."""


class AgentEnvironmentError(AgentreelLlmError, ValueError):
    """The ``AGENTREEL_*`` environment cannot be read (bad settings JSON, no provider)."""
