"""Which wire API a request path names, the ``/s/<token>/`` base-URL prefix (SPEC 11), and
the ``/r/<run>/`` prefix before it that names one run of a server serving several."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from agentreel.session import WireApi

Api = WireApi
"""The wire APIs, as the session log names them (``request/header`` ``api``)."""
Endpoint = Literal["chat", "messages", "responses", "count_tokens", "models", "gemini"]

RUN_PREFIX = "r"
"""``/r/<run>/``: the path segment naming a run of a server that serves several."""
_TOKEN = r"[A-Za-z0-9._~-]{1,200}"
_PATH = re.compile(
    rf"(?:/{RUN_PREFIX}/(?P<run>{_TOKEN}))?(?:/s/(?P<token>{_TOKEN}))?(?:/v1)?"
    r"/(?P<endpoint>chat/completions|messages/count_tokens|messages|responses|models)/?"
)
# Gemini: /v1beta/models/<model>:<method> (google-genai 3 calls /v1/ by default) and the
# /v1beta/models listing (a /v1/models listing is OpenAI's path: ``gemini_listing`` tells).
_GEMINI_PATH = re.compile(
    rf"(?:/{RUN_PREFIX}/(?P<run>{_TOKEN}))?(?:/s/(?P<token>{_TOKEN}))?"
    r"/(?P<version>v1beta|v1alpha|v1)/models"
    r"(?:/(?P<model>[^/:]{1,200}):(?P<method>streamGenerateContent|generateContent|countTokens))?/?"
)
GEMINI_STREAM = "streamGenerateContent"
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
    "gemini": "POST",
}
SUPPORTED_PATHS = (
    "POST /v1/chat/completions (OpenAI Chat Completions)",
    "POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages; ?beta=true accepted)",
    "POST /v1/responses (OpenAI Responses)",
    "GET /v1/models",
    "POST /v1beta/models/<model>:streamGenerateContent?alt=sse, :generateContent and "
    ":countTokens, GET /v1beta/models (Gemini; /v1/ accepted too)",
    "each also under a /s/<token>/ prefix",
    "all of them under a /r/<run>/ prefix first where a server serves several runs",
)


# Paths of APIs the proxy does not speak, to say what a call on one most likely was.
_UNSPOKEN_GUESSES = (
    (
        re.compile(r"/model/[^/]+/(converse|converse-stream|invoke|invoke-with-response-stream)"),
        "AWS Bedrock",
    ),
    (re.compile(r":(streamRawPredict|rawPredict|predict)$"), "Google Vertex AI"),
    (re.compile(r"/openai/deployments/"), "Azure OpenAI (a deployment path)"),
    (re.compile(r"^/api/(chat|generate|embed|embeddings)$"), "Ollama's native API"),
    (re.compile(r"/embeddings$"), "OpenAI embeddings"),
)
_RUN_ONLY = re.compile(rf"/{RUN_PREFIX}/(?P<run>{_TOKEN})(?P<rest>/.*)?")


def unspoken_run(path: str) -> tuple[str | None, str]:
    """``(run, rest)`` of a path the proxy does not serve: the ``/r/<run>`` it names, if
    any, and the path after it (what the client asked for under its base URL)."""
    match = _RUN_ONLY.fullmatch(path)
    if match is None:
        return None, path
    return match.group("run"), match.group("rest") or "/"


def unspoken_guess(path: str) -> str | None:
    """What API a path the proxy does not speak most likely belongs to, or None."""
    for pattern, name in _UNSPOKEN_GUESSES:
        if pattern.search(path):
            return name
    return None


def unspoken_summary(requests: list[str]) -> str:
    """``N requests on paths agentreel does not speak (`POST /model/…` looks like AWS
    Bedrock) — supported: …``, for ``requests`` as ``METHOD path`` (first of each kept)."""
    shown: list[str] = []
    for request in dict.fromkeys(requests):
        guess = unspoken_guess(request.split(" ", 1)[-1])
        shown.append(f"`{request}`" + (f" looks like {guess}" if guess else ""))
    count = len(requests)
    return (
        f"{count} request{'s' if count != 1 else ''} on paths agentreel does not speak "
        f"({'; '.join(shown[:5])}{'; ...' if len(shown) > 5 else ''}) — supported: "
        + "; ".join(SUPPORTED_PATHS)
        + ". Point that client at an API the proxy speaks (e.g. an OpenAI-compatible model "
        "in the framework), or record it another way"
    )


@dataclass(frozen=True, slots=True)
class Route:
    """A served request: its endpoint, the API whose error format answers it, the identity
    token (``/s/<token>/``), the run (``/r/<run>/``) and the path without both prefixes."""

    endpoint: Endpoint
    token: str | None
    upstream_path: str
    run: str | None = None
    gemini: bool = False
    """A Gemini API path (its model, method and key live in the path and query)."""
    model: str = ""
    """The model a Gemini path names."""
    method: str = ""
    """The Gemini method: ``streamGenerateContent``, ``generateContent``, ``countTokens``."""

    @property
    def api(self) -> Api:
        if self.gemini:
            return "gemini"
        if self.endpoint in ("messages", "count_tokens"):
            return "messages"
        if self.endpoint == "responses":
            return "responses"
        return "chat"


def match_route(method: str, path: str) -> Route | None:
    """The route of ``method path``, or None when the proxy does not serve it."""
    match = _PATH.fullmatch(path)
    if match is None:
        return _gemini_route(method, path)
    endpoint = _ENDPOINTS[match.group("endpoint")]
    if method != _METHOD[endpoint]:
        return None
    token = match.group("token")
    run = match.group("run")
    prefix = (f"/{RUN_PREFIX}/{run}" if run else "") + (f"/s/{token}" if token else "")
    return Route(endpoint=endpoint, token=token, upstream_path=path[len(prefix) :], run=run)


def _gemini_route(method: str, path: str) -> Route | None:
    match = _GEMINI_PATH.fullmatch(path)
    if match is None:
        return None
    gemini_method = match.group("method") or ""
    endpoint: Endpoint = (
        "models"
        if not gemini_method
        else "count_tokens"
        if gemini_method == "countTokens"
        else "gemini"
    )
    if method != _METHOD[endpoint]:
        return None
    token = match.group("token")
    run = match.group("run")
    prefix = (f"/{RUN_PREFIX}/{run}" if run else "") + (f"/s/{token}" if token else "")
    return Route(
        endpoint=endpoint,
        token=token,
        upstream_path=path[len(prefix) :],
        run=run,
        gemini=True,
        model=match.group("model") or "",
        method=gemini_method,
    )


def api_for_path(path: str) -> Api:
    """The API whose error format fits an unserved path best (OpenAI's unless it says
    messages or names a Gemini model method)."""
    if "/messages" in path:
        return "messages"
    if "/models/" in path and ":" in path.rsplit("/", 1)[-1]:
        return "gemini"
    return "chat"


GEMINI_KEY_HEADER = "x-goog-api-key"
"""Where Gemini clients send their key (or in ``?key=``): forwarded, never written."""


def shown_url(url: str) -> str:
    """``url`` as messages and logs may show it: without a Gemini ``key=``."""
    base, _, query = url.partition("?")
    kept = without_key(query)
    return f"{base}?{kept}" if kept else base


def without_key(query: str) -> str:
    """``query`` without its ``key=`` parameter (a Gemini key), for anything written."""
    kept = [pair for pair in query.split("&") if pair and not pair.startswith("key=")]
    return "&".join(kept)
