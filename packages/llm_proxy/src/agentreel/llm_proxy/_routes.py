"""Which wire API a request path names, the ``/s/<token>/`` base-URL prefix (SPEC 11), and
the ``/r/<run>/`` prefix before it that names one run of a server serving several."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from agentreel.llm.wire import GEMINI_EMBED_METHODS
from agentreel.session import WireApi

Api = WireApi
"""The wire APIs, as the session log names them (``request/header`` ``api``)."""
Endpoint = Literal["chat", "messages", "responses", "count_tokens", "models", "gemini", "wire"]

RUN_PREFIX = "r"
"""``/r/<run>/``: the path segment naming a run of a server that serves several."""
_TOKEN = r"[A-Za-z0-9._~-]{1,200}"
_PATH = re.compile(
    rf"(?:/{RUN_PREFIX}/(?P<run>{_TOKEN}))?(?:/s/(?P<token>{_TOKEN}))?(?:/v1)?"
    r"/(?P<endpoint>chat/completions|messages/count_tokens|messages|responses|models|embeddings)/?"
)
# Gemini: /v1beta/models/<model>:<method> (google-genai 3 calls /v1/ by default) and the
# /v1beta/models listing (a /v1/models listing is OpenAI's path: ``gemini_listing`` tells).
_GEMINI_PATH = re.compile(
    rf"(?:/{RUN_PREFIX}/(?P<run>{_TOKEN}))?(?:/s/(?P<token>{_TOKEN}))?"
    r"/(?P<version>v1beta|v1alpha|v1)/models"
    r"(?:/(?P<model>[^/:]{1,200})"
    r":(?P<method>streamGenerateContent|generateContent|countTokens|embedContent|batchEmbedContents))?/?"
)
GEMINI_STREAM = "streamGenerateContent"
# Azure OpenAI: Chat Completions and Responses bodies under /openai/deployments/<deployment>/,
# /openai/ (the Responses API) or /openai/v1/; ``api-version`` in the query, forwarded.
_AZURE_PATH = re.compile(
    rf"(?:/{RUN_PREFIX}/(?P<run>{_TOKEN}))?(?:/s/(?P<token>{_TOKEN}))?"
    r"/openai(?:/deployments/[^/]{1,200}|/v1)?"
    r"/(?P<endpoint>chat/completions|responses|models|embeddings)/?"
)
# AWS Bedrock Converse: /model/<modelId>/converse-stream (an AWS event stream) and /converse.
_BEDROCK_PATH = re.compile(
    rf"(?:/{RUN_PREFIX}/(?P<run>{_TOKEN}))?(?:/s/(?P<token>{_TOKEN}))?"
    r"/model/(?P<model>[^/]{1,300})"
    r"/(?P<operation>converse-stream|converse|invoke-with-response-stream|invoke)/?"
)
STREAMING_METHODS = (
    GEMINI_STREAM,
    "converse-stream",
    "invoke-with-response-stream",
    "streamRawPredict",
)
"""The path methods that ask for a stream (Gemini's, Bedrock's)."""
# Vertex AI: Gemini and Claude under /v1|v1beta1/projects/<p>/locations/<l>/publishers/.
_VERTEX_PATH = re.compile(
    rf"(?:/{RUN_PREFIX}/(?P<run>{_TOKEN}))?(?:/s/(?P<token>{_TOKEN}))?"
    r"/(?:v1|v1beta1)/projects/[^/]{1,200}/locations/[^/]{1,100}"
    r"/publishers/(?P<publisher>google|anthropic)/models/(?P<model>[^/:]{1,200})"
    r":(?P<method>streamGenerateContent|generateContent|countTokens|streamRawPredict|rawPredict)"
)
# Ollama's native API: /api/chat, /api/generate (NDJSON streams), /api/embed, /api/tags (its
# listing).
_OLLAMA_PATH = re.compile(
    rf"(?:/{RUN_PREFIX}/(?P<run>{_TOKEN}))?(?:/s/(?P<token>{_TOKEN}))?"
    r"/api/(?P<endpoint>chat|generate|embed|tags)/?"
)
_OLLAMA_WIRE: dict[str, Api] = {
    "chat": "ollama-chat",
    "generate": "ollama-generate",
    "embed": "ollama-embed",
    "tags": "ollama-chat",
}
_ENDPOINTS: dict[str, Endpoint] = {
    "chat/completions": "chat",
    "messages": "messages",
    "messages/count_tokens": "count_tokens",
    "responses": "responses",
    "models": "models",
    "embeddings": "wire",
}
_WIRE: dict[str, Api] = {"embeddings": "embeddings"}
"""The wire API of an OpenAI-style endpoint that names it alone."""
_METHOD: dict[Endpoint, str] = {
    "chat": "POST",
    "messages": "POST",
    "count_tokens": "POST",
    "responses": "POST",
    "models": "GET",
    "gemini": "POST",
    "wire": "POST",
}
SUPPORTED_PATHS = (
    "POST /v1/chat/completions (OpenAI Chat Completions)",
    "POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages; ?beta=true accepted)",
    "POST /v1/responses (OpenAI Responses)",
    "POST /v1/embeddings (OpenAI embeddings)",
    "GET /v1/models",
    "POST /v1beta/models/<model>:streamGenerateContent?alt=sse, :generateContent and "
    ":countTokens, :embedContent and :batchEmbedContents, GET /v1beta/models (Gemini; /v1/ "
    "accepted too)",
    "POST /api/chat, /api/generate and /api/embed, GET /api/tags (Ollama)",
    "POST /model/<modelId>/converse-stream and /converse (AWS Bedrock Converse), "
    "/invoke-with-response-stream and /invoke (Bedrock InvokeModel, Anthropic payloads)",
    "POST /v1/projects/<p>/locations/<l>/publishers/google/models/<model>:streamGenerateContent"
    " and publishers/anthropic/models/<model>:streamRawPredict|rawPredict (Vertex AI)",
    "POST /openai/deployments/<deployment>/chat/completions?api-version=…, /openai/responses "
    "and /openai/v1/…, embeddings too (Azure OpenAI; key in api-key)",
    "each also under a /s/<token>/ prefix",
    "all of them under a /r/<run>/ prefix first where a server serves several runs",
)


# Paths of APIs (or of their operations) the proxy does not speak, to say what a call on one
# most likely was. Bedrock's Converse/InvokeModel, Vertex AI's Gemini and Claude, Azure
# OpenAI's Chat Completions/Responses/embeddings, Ollama's chat/generate/embed and OpenAI
# embeddings are spoken (routed above):
# what reaches these is what is left of those services, and APIs not spoken at all.
_UNSPOKEN_GUESSES = (
    (re.compile(r"/model/[^/]+/"), "AWS Bedrock (an operation other than Converse/InvokeModel)"),
    (re.compile(r":(streamRawPredict|rawPredict|predict)$"), "Google Vertex AI"),
    (
        re.compile(r"/openai/"),
        "Azure OpenAI (an endpoint other than chat/responses/embeddings/models)",
    ),
    (
        re.compile(r"^/api/[a-z]+$"),
        "Ollama's native API (an endpoint other than chat/generate/embed)",
    ),
    (re.compile(r"^/v2/(chat|embed|rerank)$"), "Cohere"),
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
    """``N requests on paths agentreel does not speak (`POST /v2/chat` looks like Cohere)
    — supported: …``, for ``requests`` as ``METHOD path`` (first of each kept)."""
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
    """The path's method: Gemini's ``streamGenerateContent``, ``generateContent``,
    ``countTokens``; Bedrock's ``converse-stream``, ``converse``."""
    wire: Api | None = None
    """The wire API, where the path names it alone (Ollama's)."""

    @property
    def api(self) -> Api:
        if self.wire is not None:
            return self.wire
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
        for other in (_gemini_route, _ollama_route, _azure_route, _bedrock_route, _vertex_route):
            route = other(method, path)
            if route is not None:
                return route
        return None
    return _endpoint_route(match, method, path)


def _prefixes(match: re.Match[str], path: str) -> tuple[str | None, str | None, str]:
    """``(token, run, upstream path)`` of a matched path: the ``/r/<run>`` and ``/s/<token>``
    prefixes it carries, and what is left for the upstream once both are taken off."""
    token = match.group("token")
    run = match.group("run")
    prefix = (f"/{RUN_PREFIX}/{run}" if run else "") + (f"/s/{token}" if token else "")
    return token, run, path[len(prefix) :]


def _endpoint_route(match: re.Match[str], method: str, path: str) -> Route | None:
    """The route of a path whose ``endpoint`` group names one of ``_ENDPOINTS`` (OpenAI,
    Anthropic and Azure's shapes)."""
    name = match.group("endpoint")
    endpoint = _ENDPOINTS[name]
    if method != _METHOD[endpoint]:
        return None
    token, run, upstream_path = _prefixes(match, path)
    return Route(
        endpoint=endpoint,
        token=token,
        upstream_path=upstream_path,
        run=run,
        wire=_WIRE.get(name),
    )


def _gemini_route(method: str, path: str) -> Route | None:
    match = _GEMINI_PATH.fullmatch(path)
    if match is None:
        return None
    gemini_method = match.group("method") or ""
    embeds = gemini_method in GEMINI_EMBED_METHODS
    endpoint: Endpoint = (
        "models"
        if not gemini_method
        else "count_tokens"
        if gemini_method == "countTokens"
        else "wire"
        if embeds
        else "gemini"
    )
    if method != _METHOD[endpoint]:
        return None
    token, run, upstream_path = _prefixes(match, path)
    return Route(
        endpoint=endpoint,
        token=token,
        upstream_path=upstream_path,
        run=run,
        gemini=True,
        model=match.group("model") or "",
        method=gemini_method,
        wire="gemini-embed" if embeds else None,
    )


def _azure_route(method: str, path: str) -> Route | None:
    match = _AZURE_PATH.fullmatch(path)
    if match is None:
        return None
    return _endpoint_route(match, method, path)


def _vertex_route(method: str, path: str) -> Route | None:
    match = _VERTEX_PATH.fullmatch(path)
    if match is None or method != "POST":
        return None
    token, run, upstream_path = _prefixes(match, path)
    vertex_method = match.group("method")
    anthropic = match.group("publisher") == "anthropic"
    endpoint: Endpoint = (
        "messages" if anthropic else "count_tokens" if vertex_method == "countTokens" else "gemini"
    )
    return Route(
        endpoint=endpoint,
        token=token,
        upstream_path=upstream_path,
        run=run,
        gemini=not anthropic,
        model=match.group("model"),
        method=vertex_method,
    )


def _bedrock_route(method: str, path: str) -> Route | None:
    match = _BEDROCK_PATH.fullmatch(path)
    if match is None or method != "POST":
        return None
    token = match.group("token")
    run = match.group("run")
    model = match.group("model")
    operation = match.group("operation")
    # Forwarded as botocore sent it (a model id's ``:`` percent-encoded): SigV4 signed it so.
    upstream = f"/model/{quote(model, safe='-_.~')}/{operation}"
    return Route(
        endpoint="wire",
        token=token,
        upstream_path=upstream,
        run=run,
        model=model,
        method=operation,
        wire="bedrock-invoke" if operation.startswith("invoke") else "bedrock-converse",
    )


def _ollama_route(method: str, path: str) -> Route | None:
    match = _OLLAMA_PATH.fullmatch(path)
    if match is None:
        return None
    name = match.group("endpoint")
    endpoint: Endpoint = "models" if name == "tags" else "wire"
    if method != _METHOD[endpoint]:
        return None
    token, run, upstream_path = _prefixes(match, path)
    return Route(
        endpoint=endpoint,
        token=token,
        upstream_path=upstream_path,
        run=run,
        wire=_OLLAMA_WIRE[name],
    )


def api_for_path(path: str) -> Api:
    """The API whose error format fits an unserved path best (OpenAI's unless it says
    messages or names a Gemini model method)."""
    if "/messages" in path:
        return "messages"
    if path.startswith("/model/") or ("/model/" in path and "/converse" in path):
        return "bedrock-converse"
    if "/api/" in path:
        return "ollama-chat"
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
