"""Which wire API a request path names, the ``/s/<token>/`` base-URL prefix (SPEC 11), and
the ``/r/<run>/`` prefix before it that names one run of a server serving several.

The route table is the wire registry's (``agentreel.llm.wire.match_path``: each API's
module lists its paths); this module only takes the two prefixes off first."""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentreel.llm.wire import PathKind, match_path, supported_paths
from agentreel.session import WireApi

Api = WireApi
"""The wire APIs, as the session log names them (``request/header`` ``api``)."""

RUN_PREFIX = "r"
"""``/r/<run>/``: the path segment naming a run of a server that serves several."""
_TOKEN = r"[A-Za-z0-9._~-]{1,200}"
_PREFIXES = re.compile(
    rf"(?:/{RUN_PREFIX}/(?P<run>{_TOKEN}))?(?:/s/(?P<token>{_TOKEN}))?(?P<rest>/.*)"
)
SUPPORTED_PATHS = (
    *supported_paths(),
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
    """A served request: its API and what the path is (a model call, a models listing, a
    token count), the identity token (``/s/<token>/``), the run (``/r/<run>/``), the path
    as forwarded upstream (without both prefixes), and what the path itself names."""

    api: Api
    kind: PathKind
    token: str | None
    upstream_path: str
    run: str | None = None
    model: str = ""
    """The model the path names (Gemini's, Bedrock's, Vertex's), else empty."""
    method: str = ""
    """The operation the path names (``streamGenerateContent``, ``converse-stream``)."""
    stream: bool = False
    """The path asks for a stream (else the body's ``stream`` tells)."""
    listing: str = ""
    """A models listing other than its API's own (``WirePath.listing``), else empty."""


def match_route(method: str, path: str) -> Route | None:
    """The route of ``method path``, or None when the proxy does not serve it."""
    prefixed = _PREFIXES.fullmatch(path)
    if prefixed is None:
        return None
    found = match_path(method, prefixed.group("rest"))
    if found is None:
        return None
    return Route(
        api=found.spec.name,
        kind=found.path.kind,
        token=prefixed.group("token"),
        upstream_path=found.upstream_path,
        run=prefixed.group("run"),
        model=found.model,
        method=found.method,
        stream=found.stream,
        listing=found.path.listing,
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
