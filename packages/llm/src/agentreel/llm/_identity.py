"""The caller identity as HTTP headers (SPEC 11).

An SDK adapter created with ``send_identity=True`` sends them on every call, built from
the call's ``GenerateOptions``; the proxy reads them first when it resolves who is
calling. Defined here, below both, so the names have one owner.
"""

from __future__ import annotations

from agentreel.llm._options import GenerateOptions
from agentreel.llm._provider import setting_flag

SESSION_HEADER = "x-agentreel-session-id"
PARENT_HEADER = "x-agentreel-parent-session-id"
SPAWN_INDEX_HEADER = "x-agentreel-spawn-index"
IDENTITY_HEADERS = (SESSION_HEADER, PARENT_HEADER, SPAWN_INDEX_HEADER)
# The calling session on an MCP connection (SPEC 19): a name stable across runs (its
# lineage: main, main/0), in a stdio server's environment or on every HTTP request. The
# agent sets it, agentreel's MCP record and replay bind each connection by it.
MCP_SESSION_ENV = "AGENTREEL_MCP_SESSION"
MCP_SESSION_HEADER = "x-agentreel-mcp-session"


def identity_headers(options: GenerateOptions) -> dict[str, str]:
    """The ``x-agentreel-*`` headers naming the caller of ``options`` (none if anonymous)."""
    return caller_headers(options.session_id, options.parent_session_id, options.spawn_index)


def caller_headers(
    session: str | None, parent: str | None, spawn_index: int | None
) -> dict[str, str]:
    """The ``x-agentreel-*`` headers of a caller's session, parent session and spawn index
    (each left out when ``None``)."""
    headers: dict[str, str] = {}
    if session is not None:
        headers[SESSION_HEADER] = session
    if parent is not None:
        headers[PARENT_HEADER] = parent
    if spawn_index is not None:
        headers[SPAWN_INDEX_HEADER] = str(spawn_index)
    return headers


def send_identity_setting(value: bool | str) -> bool:
    """The adapters' ``send_identity`` setting, given as a bool or as text (environment)."""
    if isinstance(value, bool):
        return value
    return setting_flag("send_identity", value, empty=False)
