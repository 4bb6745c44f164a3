"""GenerateOptions: everything a provider needs for one model call."""

from __future__ import annotations

import msgspec

from agentreel.brand import SessionId
from agentreel.llm._messages import Message, ToolSpec


class GenerateOptions(msgspec.Struct, frozen=True, kw_only=True):
    """One model call.

    ``session_id``, ``parent_session_id`` and ``spawn_index`` identify the calling session.
    Provider adapters ignore them; the replay provider routes by them (a child session
    names its parent and its ordinal among the parent's children).
    """

    model: str
    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    temperature: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    session_id: SessionId | None = None
    parent_session_id: SessionId | None = None
    spawn_index: int | None = None
