"""The registry of wire APIs: one ``WireApiSpec`` per API, registered here by its module,
and the route table built from their paths.

Adding a wire API is one module (its rules, ending in its ``WireApiSpec`` with its
``paths``) plus its spec in ``WIRE_APIS`` below and its name in ``WireApiName`` (kept in
``_request``, below every API module, so no module imports the registry back); the proxy's
route table, the stub server, the session log's names and the messages that name an API's
path all come from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from agentreel.llm.wire._api import WireApiSpec, WirePath
from agentreel.llm.wire._bedrock import BEDROCK_CONVERSE_API
from agentreel.llm.wire._bedrock_invoke import BEDROCK_INVOKE_API
from agentreel.llm.wire._chat import CHAT_API
from agentreel.llm.wire._cloud_embeddings import BEDROCK_EMBED_API, VERTEX_EMBED_API
from agentreel.llm.wire._embeddings import EMBEDDINGS_API, GEMINI_EMBED_API, OLLAMA_EMBED_API
from agentreel.llm.wire._gemini import GEMINI_API
from agentreel.llm.wire._messages import MESSAGES_API
from agentreel.llm.wire._ollama import OLLAMA_CHAT_API, OLLAMA_GENERATE_API
from agentreel.llm.wire._request import WireApiName
from agentreel.llm.wire._responses import RESPONSES_API

WIRE_APIS: dict[WireApiName, WireApiSpec] = {
    spec.name: spec
    for spec in (
        CHAT_API,
        MESSAGES_API,
        RESPONSES_API,
        GEMINI_API,
        OLLAMA_CHAT_API,
        OLLAMA_GENERATE_API,
        BEDROCK_CONVERSE_API,
        BEDROCK_EMBED_API,
        BEDROCK_INVOKE_API,
        EMBEDDINGS_API,
        GEMINI_EMBED_API,
        OLLAMA_EMBED_API,
        VERTEX_EMBED_API,
    )
}
"""Every wire API agentreel speaks, by its session-log name, in the order its paths are
tried (OpenAI's ``GET /v1/models`` before Gemini's ``/v1/models``, an embedding model's
InvokeModel before the chat models')."""


def wire_api(name: WireApiName) -> WireApiSpec:
    """The spec of the wire API named ``name`` (a ``WireApiName``: the type checker and the
    session log's own validation keep unknown names out)."""
    return WIRE_APIS[name]


@dataclass(frozen=True, slots=True)
class PathMatch:
    """A request path one API serves: which API and path shape, the model and method the
    path names (empty where it names none), and the path as forwarded upstream."""

    spec: WireApiSpec
    path: WirePath
    model: str
    method: str
    upstream_path: str

    @property
    def stream(self) -> bool:
        """The path asks for a stream (Gemini's, Bedrock's, Vertex's; else the body tells)."""
        return self.method in self.path.streaming_methods


_TABLE: tuple[tuple[WireApiSpec, WirePath, re.Pattern[str]], ...] = tuple(
    (spec, path, re.compile(path.pattern + "/?"))
    for spec in WIRE_APIS.values()
    for path in spec.paths
)


def match_path(http_method: str, path: str) -> PathMatch | None:
    """The API serving ``http_method path`` (a path as the client sent it under its base
    URL), the first of the registry's paths that matches it whole, or None."""
    for spec, shape, pattern in _TABLE:
        found = pattern.fullmatch(path)
        if found is None or http_method != shape.http_method:
            continue
        groups = found.groupdict()
        model = groups.get("model") or ""
        upstream = path
        if shape.quoted_model and model:
            start, end = found.span("model")
            upstream = path[:start] + quote(model, safe="-_.~") + path[end:].rstrip("/")
        return PathMatch(spec, shape, model, groups.get("method") or "", upstream)
    return None


def match_under(http_method: str, path: str) -> PathMatch | None:
    """``match_path`` of ``path`` under whatever base path the client has before it (the
    stub server's: ``/v1/chat/completions``, ``/openai/deployments/d/chat/completions`` and
    ``/anything/api/chat`` alike): the longest tail from a ``/`` that a path matches."""
    for start in (found.start() for found in re.finditer("/", path)):
        found_path = match_path(http_method, path[start:])
        if found_path is not None:
            return found_path
    return None


def supported_paths() -> tuple[str, ...]:
    """Every served path, one line per API: ``POST /api/chat; GET /api/tags (Ollama chat)``."""
    return tuple(
        "; ".join(path.shown for path in spec.paths) + f" ({spec.title})"
        for spec in WIRE_APIS.values()
        if spec.paths
    )


WIRE_API_PATHS: dict[WireApiName, str] = {name: spec.shown_path for name, spec in WIRE_APIS.items()}
"""Each API's model-call path and title, as messages name it (``WireApiSpec.shown_path``)."""
