"""The agentreel agent kit: what your own agent needs to be recorded and replayed.

Each piece lives in the lowest layer that can hold it; this package gathers them under one
import and adds what no lower layer can hold (the stdio helpers, which must load before
anything else):

- ``provider_from_env`` / ``AgentEnvironment`` / ``AgentEnv`` — the one reader (and
  writer) of the ``AGENTREEL_*`` contract (``agentreel.llm``);
- ``take_protocol_stdout`` / ``protocol_streams`` — protocol-only stdout for an ACP agent
  (here);
- ``record_stream`` / ``CallRecorder`` — a model call recorded into a ``Session`` as
  ``request/header`` plus every chunk (``agentreel.session``);
- ``Conversation`` — the model conversation rebuilt from session events, e.g. a fork
  child's from its seed (``agentreel.session``);
- ``SessionStore`` / ``Session`` — the session logs themselves (``agentreel.session``).

The log contract (which events replay needs, which goldens need, which are optional) is
in the session package's README. Names resolve on first use (PEP 562), so
``from agentreel.agent_kit import take_protocol_stdout`` loads the standard library only.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentreel.agent_kit._stdio import (
        STDIO_LIMIT_BYTES,
        protocol_streams,
        take_protocol_stdout,
    )
    from agentreel.llm import AgentEnv, AgentEnvironment, provider_from_env
    from agentreel.session import (
        CallRecorder,
        Conversation,
        Session,
        SessionStore,
        record_stream,
    )

_HOMES = {
    "STDIO_LIMIT_BYTES": "agentreel.agent_kit._stdio",
    "protocol_streams": "agentreel.agent_kit._stdio",
    "take_protocol_stdout": "agentreel.agent_kit._stdio",
    "AgentEnv": "agentreel.llm",
    "AgentEnvironment": "agentreel.llm",
    "provider_from_env": "agentreel.llm",
    "CallRecorder": "agentreel.session",
    "Conversation": "agentreel.session",
    "Session": "agentreel.session",
    "SessionStore": "agentreel.session",
    "record_stream": "agentreel.session",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'agentreel.agent_kit' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "STDIO_LIMIT_BYTES",
    "AgentEnv",
    "AgentEnvironment",
    "CallRecorder",
    "Conversation",
    "Session",
    "SessionStore",
    "protocol_streams",
    "provider_from_env",
    "record_stream",
    "take_protocol_stdout",
]
