"""Who is calling: a request's caller identity, resolved in SPEC 11's order.

1. explicit ``x-agentreel-session-id`` / ``x-agentreel-parent-session-id`` /
   ``x-agentreel-spawn-index`` (what agentreel's adapters send when asked to);
2. the headers real agents already send (REAL-AGENTS.md): Claude Code
   ``X-Claude-Code-Session-Id`` (+ ``x-claude-code-agent-id`` on a subagent's requests),
   Codex ``thread-id`` / ``session-id`` (+ ``x-codex-parent-thread-id``), opencode
   ``x-session-id`` / ``x-parent-session-id``, mistral-vibe ``x-affinity``, and the
   ``session_id`` inside Anthropic ``metadata.user_id``;
3. the ``/s/<token>/`` base-URL prefix;
4. none: the request is anonymous, and conversation chaining and content bind it.

The explicit parent and spawn-index headers are read whichever source named the session.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentreel.llm import (
    IDENTITY_HEADERS,
    PARENT_HEADER,
    SESSION_HEADER,
    SPAWN_INDEX_HEADER,
    caller_headers,
)
from agentreel.llm_proxy.exceptions import RequestError

__all__ = [
    "IDENTITY_HEADERS",
    "PARENT_HEADER",
    "SESSION_HEADER",
    "SPAWN_INDEX_HEADER",
    "Identity",
    "resolve_identity",
]


@dataclass(frozen=True, slots=True)
class Identity:
    """A caller's identity; ``source`` says where it came from (for messages and logs)."""

    session: str | None
    parent: str | None = None
    spawn_index: int | None = None
    source: str = "none"

    def describe(self) -> str:
        if self.session is None:
            return "an anonymous caller (no identity header, no /s/<token>/ prefix)"
        text = f"session {self.session!r} (from {self.source})"
        if self.parent is not None:
            text += f", parent {self.parent!r}"
        if self.spawn_index is not None:
            text += f", spawn index {self.spawn_index}"
        return text


LANE_HEADER = "x-agentreel-drifted-lane"
"""What ``--record-drifted``'s record run sends its replay run for a caller without
identity: the session it records that conversation as (found by content, chaining and
lineage), so the replay run sends only that conversation live when it drifts (SPEC 20).
Never sent to an upstream."""


def identity_headers(identity: Identity, lane: str | None = None) -> dict[str, str]:
    """``identity`` as the explicit headers (what a proxy in front of another proxy sends
    on: ``--record-drifted``'s record run before its replay run); for a caller without
    identity, ``lane`` (the session recording its conversation) as ``LANE_HEADER``."""
    headers = caller_headers(identity.session, identity.parent, identity.spawn_index)
    if identity.session is None and lane is not None:
        headers[LANE_HEADER] = lane
    return headers


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    return value.strip() or None if isinstance(value, str) else None


def _metadata_session(body: Mapping[str, Any]) -> str | None:
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(user_id, str):
        return None
    try:
        decoded = json.loads(user_id)
    except ValueError:
        return None
    session = decoded.get("session_id") if isinstance(decoded, dict) else None
    return session if isinstance(session, str) and session else None


def resolve_identity(
    headers: Mapping[str, str], body: Mapping[str, Any], token: str | None
) -> Identity:
    """The caller's identity; a malformed ``x-agentreel-spawn-index`` is a 400.

    The explicit parent and spawn-index headers hold whatever named the session (explicit
    header, native header, ``/s/<token>/`` prefix): a parent that hands its child process
    its own URL still tells it its lineage by header. Where a native header names a parent
    too, the explicit one wins (SPEC 11's order). An anonymous caller has no lineage to
    keep: chaining and content place it."""
    parent, spawn_index = _explicit_lineage(headers)
    found = _session(headers, body, token)
    if found.session is None:
        return found
    return Identity(
        found.session, parent if parent is not None else found.parent, spawn_index, found.source
    )


def _explicit_lineage(headers: Mapping[str, str]) -> tuple[str | None, int | None]:
    """The parent and spawn index of the ``x-agentreel-parent-session-id`` /
    ``x-agentreel-spawn-index`` headers."""
    raw_index = _header(headers, SPAWN_INDEX_HEADER)
    spawn_index: int | None = None
    if raw_index is not None:
        if not raw_index.isdigit():
            raise RequestError(
                400,
                f"agentreel proxy: header {SPAWN_INDEX_HEADER}: {raw_index!r} is not a "
                "non-negative integer (the child's ordinal among its parent's children)",
            )
        spawn_index = int(raw_index)
    return _header(headers, PARENT_HEADER), spawn_index


def _session(headers: Mapping[str, str], body: Mapping[str, Any], token: str | None) -> Identity:
    """Who the caller is, and the parent a native header names, by SPEC 11's order."""
    session = _header(headers, SESSION_HEADER)
    if session is not None:
        return Identity(session, None, None, SESSION_HEADER)
    claude = _header(headers, "x-claude-code-session-id")
    if claude is not None:
        agent = _header(headers, "x-claude-code-agent-id")
        if agent is not None:
            return Identity(agent, claude, None, "x-claude-code-agent-id")
        return Identity(claude, None, None, "x-claude-code-session-id")
    thread = _header(headers, "thread-id") or _header(headers, "session-id")
    if thread is not None:
        return Identity(
            thread, _header(headers, "x-codex-parent-thread-id"), None, "codex thread-id"
        )
    opencode = _header(headers, "x-session-id")
    if opencode is not None:
        return Identity(opencode, _header(headers, "x-parent-session-id"), None, "x-session-id")
    affinity = _header(headers, "x-affinity")
    if affinity is not None:
        return Identity(affinity, None, None, "x-affinity")
    metadata = _metadata_session(body)
    if metadata is not None:
        return Identity(metadata, None, None, "metadata.user_id")
    if token is not None:
        return Identity(token, None, None, "/s/<token>/ prefix")
    return Identity(None)
