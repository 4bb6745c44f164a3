"""Which wire API a request path names, the ``/s/<token>/`` base-URL prefix (SPEC 11), and
the ``/r/<run>/`` prefix before it that names one run of a server serving several."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from agentreel.session import WireApi

Api = WireApi
"""The wire APIs, as the session log names them (``request/header`` ``api``)."""
Endpoint = Literal["chat", "messages", "responses", "count_tokens", "models"]

RUN_PREFIX = "r"
"""``/r/<run>/``: the path segment naming a run of a server that serves several."""
_TOKEN = r"[A-Za-z0-9._~-]{1,200}"
_PATH = re.compile(
    rf"(?:/{RUN_PREFIX}/(?P<run>{_TOKEN}))?(?:/s/(?P<token>{_TOKEN}))?(?:/v1)?"
    r"/(?P<endpoint>chat/completions|messages/count_tokens|messages|responses|models)/?"
)
_ENDPOINTS: dict[str, Endpoint] = {
    "chat/completions": "chat",
    "messages": "messages",
    "messages/count_tokens": "count_tokens",
    "responses": "responses",
    "models": "models",
}
_METHOD: dict[Endpoint, str] = {
    "chat": "POST",
    "messages": "POST",
    "count_tokens": "POST",
    "responses": "POST",
    "models": "GET",
}
SUPPORTED_PATHS = (
    "POST /v1/chat/completions (OpenAI Chat Completions)",
    "POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages; ?beta=true accepted)",
    "POST /v1/responses (OpenAI Responses)",
    "GET /v1/models",
    "each also under a /s/<token>/ prefix",
    "all of them under a /r/<run>/ prefix first where a server serves several runs",
)


@dataclass(frozen=True, slots=True)
class Route:
    """A served request: its endpoint, the API whose error format answers it, the identity
    token (``/s/<token>/``), the run (``/r/<run>/``) and the path without both prefixes."""

    endpoint: Endpoint
    token: str | None
    upstream_path: str
    run: str | None = None

    @property
    def api(self) -> Api:
        if self.endpoint in ("messages", "count_tokens"):
            return "messages"
        if self.endpoint == "responses":
            return "responses"
        return "chat"


def match_route(method: str, path: str) -> Route | None:
    """The route of ``method path``, or None when the proxy does not serve it."""
    match = _PATH.fullmatch(path)
    if match is None:
        return None
    endpoint = _ENDPOINTS[match.group("endpoint")]
    if method != _METHOD[endpoint]:
        return None
    token = match.group("token")
    run = match.group("run")
    prefix = (f"/{RUN_PREFIX}/{run}" if run else "") + (f"/s/{token}" if token else "")
    return Route(endpoint=endpoint, token=token, upstream_path=path[len(prefix) :], run=run)


def api_for_path(path: str) -> Api:
    """The API whose error format fits an unserved path best (OpenAI's unless it says messages)."""
    if "/messages" in path:
        return "messages"
    return "chat"
