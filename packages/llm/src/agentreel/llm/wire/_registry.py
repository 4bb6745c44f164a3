"""The registry of wire APIs: one ``WireApiSpec`` per API, registered here by its module.

Adding a wire API is one module (its rules, ending in its ``WireApiSpec``) plus its line
below; the proxy and the stub server find it through ``wire_api``.
"""

from __future__ import annotations

from agentreel.llm.wire._api import WireApiSpec
from agentreel.llm.wire._bedrock import BEDROCK_CONVERSE_API
from agentreel.llm.wire._bedrock_invoke import BEDROCK_INVOKE_API
from agentreel.llm.wire._chat import CHAT_API
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
        BEDROCK_INVOKE_API,
        EMBEDDINGS_API,
        GEMINI_EMBED_API,
        OLLAMA_EMBED_API,
    )
}
"""Every wire API agentreel speaks, by its session-log name."""


def wire_api(name: WireApiName) -> WireApiSpec:
    """The spec of the wire API named ``name`` (a ``WireApiName``: the type checker and the
    session log's own validation keep unknown names out)."""
    return WIRE_APIS[name]
