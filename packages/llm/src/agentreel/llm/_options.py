"""GenerateOptions: everything a provider needs for one model call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from agentreel.brand import SessionId
from agentreel.llm._messages import Message, Role, ToolSpec


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


def wire_turns(
    options: GenerateOptions,
    role_of: Callable[[Role], str],
    parts_of: Callable[[Message], list[dict[str, Any]]],
    key: str,
) -> tuple[str, list[dict[str, Any]]]:
    """``(system, turns)`` for a wire API that takes the system prompt apart from turns of
    alternating roles (Anthropic Messages, Gemini): ``options.system`` and each
    system-role message's text joined by blank lines; every other message's wire parts
    (``parts_of``) as a turn ``{"role": role_of(its role), key: parts}``, consecutive turns
    of one role merged, a message without parts left out."""
    system_parts = [options.system] if options.system else []
    turns: list[dict[str, Any]] = []
    for message in options.messages:
        if message.role == "system":
            system_parts.append(message.text)
            continue
        role = role_of(message.role)
        parts = parts_of(message)
        if not parts:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1][key].extend(parts)
        else:
            turns.append({"role": role, key: parts})
    return "\n\n".join(system_parts), turns
