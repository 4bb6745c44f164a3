"""Embeddings on the clouds' own paths, both ways: Vertex AI's ``:predict`` for its
text-embedding models (``instances`` of ``content``; the answer's ``predictions`` each an
``embeddings.values``) and AWS Bedrock's InvokeModel with an embedding model's payload —
Amazon Titan (``inputText`` → ``embedding``) and Cohere (``texts`` → ``embeddings``, a list
or by type). Never streamed.

As for the other embeddings (``_embeddings``): each input is a text part of one user
message, the options that change the answer are the system text (canonical JSON), the
vectors one base64 float32 line each of one text block; the upstream body is kept verbatim
and served byte for byte, so what the answer holds besides the vectors and the token count
(Cohere's ``id``, Vertex's ``statistics``) is re-encoded only under an override.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentreel.llm._chunks import Chunk, ResponseMeta
from agentreel.llm.wire._api import MODEL, WirePath, vertex_base
from agentreel.llm.wire._bedrock import (
    BEDROCK_AUTH_HEADERS,
    bedrock_error_body,
    bedrock_models_body,
)
from agentreel.llm.wire._common import usage_in
from agentreel.llm.wire._embeddings import (
    EmbeddingsDecoder,
    embeddings_api,
    embeddings_chunks,
    embeddings_options,
    embeddings_request,
    packed_vector,
    unpack_vector,
    vectors_of,
)
from agentreel.llm.wire._gemini import gemini_error_body, gemini_models_body
from agentreel.llm.wire._request import WireRequest, canonical
from agentreel.llm.wire._sse import json_bytes

_VERTEX_INSTANCE_OPTIONS = ("task_type", "title", "mimeType")


def parse_vertex_predict_request(
    body: dict[str, Any], model: str = "", stream: bool = False
) -> WireRequest:
    """A Vertex AI ``:predict`` body of a text-embedding model: ``instances`` (each a
    ``content`` with its ``task_type``/``title``) and ``parameters``."""
    del stream
    instances = [item for item in body.get("instances") or [] if isinstance(item, dict)]
    options: dict[str, Any] = {}
    for instance in instances:
        options.update({k: instance[k] for k in _VERTEX_INSTANCE_OPTIONS if k in instance})
    parameters = body.get("parameters")
    if isinstance(parameters, dict) and parameters:
        options["parameters"] = parameters
    inputs = [
        item["content"] if isinstance(item.get("content"), str) else canonical(item)
        for item in instances
    ]
    return embeddings_request("vertex-embed", body, model, options, inputs)


class VertexPredictDecoder(EmbeddingsDecoder):
    """A ``:predict`` answer → chunks (each prediction's ``embeddings.values``)."""

    def body(self, data: dict[str, Any]) -> list[Chunk]:
        predictions = [p for p in data.get("predictions") or [] if isinstance(p, dict)]
        embeddings = [p.get("embeddings") or {} for p in predictions]
        vectors = [packed_vector(item) for item in embeddings]
        tokens = sum(
            int((item.get("statistics") or {}).get("token_count") or 0)
            for item in embeddings
            if isinstance(item, dict)
        )
        return embeddings_chunks(vectors, tokens, ResponseMeta())


def vertex_predict_body(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> bytes:
    """A Vertex AI ``:predict`` answer of a text-embedding model (the token count on the
    first prediction: the recording keeps the call's total)."""
    del wire_id, meta
    usage = usage_in(chunks)
    tokens = usage.input_tokens if usage else 0
    predictions = [
        {
            "embeddings": {
                "values": unpack_vector(vector),
                "statistics": {"token_count": tokens if index == 0 else 0, "truncated": False},
            }
        }
        for index, vector in enumerate(vectors_of(chunks))
    ]
    del request
    return json_bytes({"predictions": predictions, "metadata": {"billableCharacterCount": 0}})


VERTEX_EMBED_API = embeddings_api(
    name="vertex-embed",
    title="Vertex AI embeddings",
    framing="sse",
    parse=parse_vertex_predict_request,
    decoder=VertexPredictDecoder,
    encode_body=vertex_predict_body,
    error_body=gemini_error_body,
    models_body=gemini_models_body,
    auth_headers=("authorization",),
    paths=(
        WirePath(
            vertex_base("google") + "/" + MODEL + ":(?P<method>predict)",
            "POST /v1/projects/<p>/locations/<l>/publishers/google/models/<model>:predict "
            "(text-embedding models)",
        ),
    ),
)
"""Vertex AI ``:predict`` of a text-embedding model."""

_TITAN_OPTIONS = ("dimensions", "normalize", "embeddingTypes")
_COHERE_OPTIONS = ("input_type", "truncate", "embedding_types", "output_dimension")


def parse_bedrock_embed_request(
    body: dict[str, Any], model: str = "", stream: bool = False
) -> WireRequest:
    """An InvokeModel body of an embedding model: Titan's (``inputText``) or Cohere's
    (``texts``); the payload family is an option, so a changed family is a drift."""
    del stream
    if "texts" in body:
        texts = body.get("texts")
        inputs = [t if isinstance(t, str) else canonical(t) for t in texts or []]
        options = {"family": "cohere", **{k: body[k] for k in _COHERE_OPTIONS if k in body}}
    else:
        text = body.get("inputText")
        inputs = [text if isinstance(text, str) else canonical(text)]
        options = {"family": "titan", **{k: body[k] for k in _TITAN_OPTIONS if k in body}}
    return embeddings_request("bedrock-embed", body, model, options, inputs)


class BedrockEmbedDecoder(EmbeddingsDecoder):
    """An InvokeModel answer of an embedding model → chunks (Titan's ``embedding``,
    Cohere's ``embeddings`` list or ``{"float": [...]}`` by type)."""

    def body(self, data: dict[str, Any]) -> list[Chunk]:
        if "embeddings" in data:
            found = data.get("embeddings")
            if isinstance(found, dict):  # embeddings_by_type: the floats kept
                found = found.get("float") or next(iter(found.values()), [])
            vectors = [packed_vector(item) for item in found or []]
            texts = data.get("texts") or []
            tokens = sum(len(str(text).split()) for text in texts)
        else:
            vectors = [packed_vector(data.get("embedding"))]
            count = data.get("inputTextTokenCount")
            tokens = count if isinstance(count, int) else 0
        return embeddings_chunks(vectors, tokens, ResponseMeta())


def bedrock_embed_body(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> bytes:
    """The InvokeModel answer in the request's family: Titan's or Cohere's."""
    del meta
    vectors = [unpack_vector(vector) for vector in vectors_of(chunks)]
    options = embeddings_options(request)
    if options.get("family") == "cohere":
        texts = [part.text for part in request.messages[0].content if hasattr(part, "text")]
        by_type = bool(options.get("embedding_types"))
        return json_bytes(
            {
                "id": wire_id or "agentreel",
                "texts": texts,
                "embeddings": {"float": vectors} if by_type else vectors,
                "response_type": "embeddings_by_type" if by_type else "embeddings_floats",
            }
        )
    usage = usage_in(chunks)
    vector = vectors[0] if vectors else []
    return json_bytes(
        {
            "embedding": vector,
            "embeddingsByType": {"float": vector},
            "inputTextTokenCount": usage.input_tokens if usage else 0,
        }
    )


BEDROCK_EMBED_API = embeddings_api(
    name="bedrock-embed",
    title="AWS Bedrock InvokeModel embeddings (Titan, Cohere)",
    framing="eventstream",
    parse=parse_bedrock_embed_request,
    decoder=BedrockEmbedDecoder,
    encode_body=bedrock_embed_body,
    error_body=bedrock_error_body,
    models_body=bedrock_models_body,
    auth_headers=BEDROCK_AUTH_HEADERS,
    paths=(
        # An embedding model's id names it (amazon.titan-embed-text-v2:0,
        # cohere.embed-english-v3): tried before the chat InvokeModel's path.
        WirePath(
            r"/model/(?P<model>[^/]{0,150}embed[^/]{0,150})/(?P<method>invoke)",
            "POST /model/<embedding modelId>/invoke",
            quoted_model=True,
        ),
    ),
)
"""AWS Bedrock InvokeModel of an embedding model (Titan's or Cohere's payload)."""
