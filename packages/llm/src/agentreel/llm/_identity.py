"""The caller identity as HTTP headers (SPEC 11).

An SDK adapter created with ``send_identity=True`` sends them on every call, built from
the call's ``GenerateOptions``; the proxy reads them first when it resolves who is
calling. Defined here, below both, so the names have one owner.
"""

from __future__ import annotations

from agentreel.llm._options import GenerateOptions

SESSION_HEADER = "x-agentreel-session-id"
PARENT_HEADER = "x-agentreel-parent-session-id"
SPAWN_INDEX_HEADER = "x-agentreel-spawn-index"
IDENTITY_HEADERS = (SESSION_HEADER, PARENT_HEADER, SPAWN_INDEX_HEADER)
# The calling session on an MCP connection (SPEC 19): a name stable across runs (its
# lineage: main, main/0), in a stdio server's environment or on every HTTP request. The
# agent sets it, agentreel's MCP record and replay bind each connection by it.
MCP_SESSION_ENV = "AGENTREEL_MCP_SESSION"
MCP_SESSION_HEADER = "x-agentreel-mcp-session"

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def identity_headers(options: GenerateOptions) -> dict[str, str]:
    """The ``x-agentreel-*`` headers naming the caller of ``options`` (none if anonymous)."""
    headers: dict[str, str] = {}
    if options.session_id is not None:
        headers[SESSION_HEADER] = options.session_id
    if options.parent_session_id is not None:
        headers[PARENT_HEADER] = options.parent_session_id
    if options.spawn_index is not None:
        headers[SPAWN_INDEX_HEADER] = str(options.spawn_index)
    return headers


def send_identity_setting(value: bool | str) -> bool:
    """The adapters' ``send_identity`` setting, given as a bool or as text (environment)."""
    if isinstance(value, bool):
        return value
    word = value.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(
        f"send_identity must be one of {', '.join(_TRUE + _FALSE[:-1])}; got {value!r}. Fix "
        "the provider settings (e.g. AGENTREEL_PROVIDER_SETTINGS)"
    )
