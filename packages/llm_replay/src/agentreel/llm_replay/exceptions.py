"""Exceptions raised by ``agentreel.llm_replay``.

Hierarchy::

    AgentreelError (agentreel.brand)  base of every agentreel error
    └── ReplayError                     base of everything this package raises
        ├── FixtureError                a recording that cannot be replayed: names the file
        │   ├── IncompleteCallError     a recorded call has no ``finish``: names session/turn/step
        │   └── OverrideError           ``replay.override.json`` is invalid: names file and key
        ├── UnrecordedSessionError      a live caller the recording has no script for
        ├── ScriptExhaustedError        call k+1 of a k-call script
        ├── UnconsumedScriptError       ``assert_consumed()``: recorded calls never made
        ├── RequestDriftError           the live request differs from the recorded one
        ├── ScheduleDivergenceError     ``schedule = "recorded"``: a call waited past the
        │                               timeout for one the recording put before it
        │                               (reported, never raised into the agent)
        ├── ReplaySettingsError (ValueError)  a bad ``ReplaySettings`` value: names the
        │                               setting and the key inside it
        └── PriceTableError (ValueError)  a price table (SPEC 20) that cannot be read:
                                        names the file

    RequestDriftWarning (UserWarning)  the same drift, when drift checking is set to warn

Every message says what failed, where (fixture file, session, call) and what to do next —
usually the exact re-record command (``agentreel.session.rerecord_command``). Overrides raise the
LLM layer's own ``agentreel.llm.LlmError``, not one of these.

This module imports nothing from the rest of the package.
"""

from __future__ import annotations

from pathlib import Path

from agentreel.brand.exceptions import AgentreelError

__all__ = [
    "AgentreelError",
    "FixtureError",
    "IncompleteCallError",
    "OverrideError",
    "PriceTableError",
    "ReplayError",
    "ReplaySettingsError",
    "RequestDriftError",
    "RequestDriftWarning",
    "ScheduleDivergenceError",
    "ScriptExhaustedError",
    "UnconsumedScriptError",
    "UnrecordedSessionError",
]


class ReplayError(AgentreelError):
    """Base class of every error raised by ``agentreel.llm_replay``."""


class FixtureError(ReplayError):
    """A fixture file is missing, stray, out of sequence or unreadable; ``path`` names it."""

    def __init__(self, path: Path | str, message: str) -> None:
        self.path = Path(path)
        super().__init__(message)


class IncompleteCallError(FixtureError):
    """A recorded model call ends without its ``finish`` chunk."""

    def __init__(self, path: Path | str, message: str, *, turn: int, step: int) -> None:
        self.turn = turn
        self.step = step
        super().__init__(path, message)


class OverrideError(FixtureError):
    """``replay.override.json`` is not valid (unknown key, bad value, no such call)."""


class UnrecordedSessionError(ReplayError):
    """A live session made a model call the recording holds no script for."""

    def __init__(
        self,
        message: str,
        *,
        session_id: str | None,
        parent_session_id: str | None,
        spawn_index: int | None,
    ) -> None:
        self.session_id = session_id
        self.parent_session_id = parent_session_id
        self.spawn_index = spawn_index
        # For a child whose parent handed it on: that parent and its delegating call (the
        # request to compare with is that call, not another session's nearest request).
        self.delegation: str | None = None
        super().__init__(message)


class ScriptExhaustedError(ReplayError):
    """A live session asked for more model calls than its recorded script holds."""

    def __init__(self, message: str, *, session_id: str | None, call: int, recorded_calls: int):
        self.session_id = session_id
        self.call = call
        self.recorded_calls = recorded_calls
        super().__init__(message)


class UnconsumedScriptError(ReplayError):
    """At the end of a run, recorded scripts or calls were never requested."""

    def __init__(self, message: str, *, unconsumed: list[str]) -> None:
        self.unconsumed = unconsumed
        super().__init__(message)


class RequestDriftError(ReplayError):
    """The live request's normalized header differs from the recorded ``request/header``."""

    def __init__(self, message: str, *, differences: list[str]) -> None:
        self.differences = differences
        super().__init__(message)


class RequestDriftWarning(UserWarning):
    """A request drifted from the recording while drift checking is set to ``warn``."""


class ScheduleDivergenceError(ReplayError):
    """Under ``schedule = "recorded"``, a call waited past ``schedule_timeout`` for a call
    the recording put before it (SPEC 13). Reported (the call went on), never raised into
    the agent; ``divergence`` names both calls."""

    def __init__(self, message: str, *, divergence: object) -> None:
        super().__init__(message)
        self.divergence = divergence


class ReplaySettingsError(ReplayError, ValueError):
    """A replay setting with a value that cannot be used (``ReplaySettings``).

    ``setting`` is the field's name, ``key`` where inside it (``partial_lanes[1]``,
    ``captures[0].token``), ``problem`` what is wrong in words a located message puts after
    the file and key; the error's own text names the setting for a caller in code.
    """

    def __init__(self, setting: str, key: str, problem: str, message: str | None = None) -> None:
        self.setting = setting
        self.key = key
        self.problem = problem
        super().__init__(message or f"replay setting {key}: {problem}")


class PriceTableError(ReplayError, ValueError):
    """A price table of a drifted recording's report (SPEC 20) that is missing or
    malformed; the message names the file and what is wrong."""
