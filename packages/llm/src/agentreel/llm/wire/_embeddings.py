"""Embeddings, both ways: OpenAI's ``POST /v1/embeddings`` (Azure's deployment path too),
Gemini's ``:embedContent`` / ``:batchEmbedContents`` and Ollama's ``POST /api/embed``. Never
streamed: one JSON body each way.

Request: each input (a string, a list of them, or token ids compared by their JSON) is a
text part of one user message, so the binder and drift detection see the input text; the
options that change the answer (``encoding_format``, ``dimensions``; Ollama's
``truncate``; Gemini's method, ``taskType``, ``title``, ``outputDimensionality``) are the
request's system text, as canonical JSON (Gemini: a content's parts' texts joined).

Answer → chunks: one text block, one line per input vector, each the base64 of its
little-endian float32 values (OpenAI's own ``encoding_format: "base64"``, the default of
its Python client): compact in the session log, and the upstream body itself is kept once,
verbatim, in ``wire.ndjson`` and served byte for byte. The token count is the ``Usage``'s
input. Chunks → answer: the same shape again, each vector as base64 or as float32 values
in JSON by the recorded ``encoding_format``.

``embedding_vector`` is the stub server's deterministic answer: ``dimensions`` (default
``STUB_DIMENSIONS``) float32 values in [-1, 1), the n-th from bytes of
SHA-256(``<n // 8>:<input>``) — the same input always gets the same vector.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from collections.abc import Callable, Sequence
from typing import Any

from agentreel.llm._chunks import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    ResponseMeta,
    TextDelta,
    Usage,
)
from agentreel.llm._messages import Message, TextPart
from agentreel.llm.wire._api import (
    GEMINI_BASE,
    MODEL,
    BodyEncoder,
    ErrorBody,
    Framing,
    RequestParser,
    WireApiSpec,
    WirePath,
    body_as_stream,
    openai_paths,
    vertex_base,
)
from agentreel.llm.wire._chat import OPENAI_AUTH_HEADERS, openai_error_body
from agentreel.llm.wire._common import WireDecoder, meta_in, usage_in
from agentreel.llm.wire._gemini import gemini_error_body, gemini_models_body
from agentreel.llm.wire._listing import models_listing_body
from agentreel.llm.wire._ollama import ollama_error_body, ollama_models_body
from agentreel.llm.wire._request import WireApiName, WireRequest, body_model, canonical
from agentreel.llm.wire._sse import SseEvent, json_bytes

STUB_DIMENSIONS = 8
"""The stub server's vector length where a request names no ``dimensions``."""
_OPTIONS = ("encoding_format", "dimensions", "truncate")


def embedding_vector(text: str, dimensions: int = STUB_DIMENSIONS) -> list[float]:
    """The stub's vector of ``text``: float32 values in [-1, 1) from SHA-256 of the text."""
    values: list[float] = []
    for block in range((dimensions + 7) // 8):
        digest = hashlib.sha256(f"{block}:{text}".encode()).digest()
        for offset in range(0, 32, 4):
            if len(values) == dimensions:
                break
            (number,) = struct.unpack("<I", digest[offset : offset + 4])
            values.append(struct.unpack("<f", struct.pack("<f", number / 2**31 - 1))[0])
    return values


def pack_vector(values: Sequence[float]) -> str:
    """``values`` as base64 of little-endian float32 (OpenAI's ``encoding_format: base64``)."""
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


def unpack_vector(packed: str) -> list[float]:
    raw = base64.b64decode(packed)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def embedding_inputs(body: dict[str, Any]) -> list[str]:
    """The inputs of an OpenAI or Ollama embeddings body, each as text (token ids as JSON)."""
    raw = body.get("input")
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and raw and all(isinstance(item, int) for item in raw):
        return [canonical(raw)]
    if isinstance(raw, list):
        return [item if isinstance(item, str) else canonical(item) for item in raw]
    return [] if raw is None else [canonical(raw)]


def embeddings_request(
    api: WireApiName,
    body: dict[str, Any],
    model: str = "",
    options: dict[str, Any] | None = None,
    inputs: list[str] | None = None,
) -> WireRequest:
    options = {key: body[key] for key in _OPTIONS if key in body} if options is None else options
    inputs = embedding_inputs(body) if inputs is None else inputs
    return WireRequest(
        api=api,
        model=model or body_model(body),
        system=canonical(options) if options else None,
        messages=(Message(role="user", content=tuple(TextPart(text) for text in inputs)),),
        tools=(),
        stream=False,
        include_usage=True,
        namespaced=False,
    )


def parse_embeddings_request(
    body: dict[str, Any], model: str = "", stream: bool = False
) -> WireRequest:
    """An OpenAI ``/v1/embeddings`` body."""
    del model, stream
    return embeddings_request("embeddings", body)


OLLAMA_LEGACY_METHOD = "embeddings"
"""The ``method`` option of an Ollama ``/api/embeddings`` request (one ``prompt``, answered
with one ``embedding``), the API's older endpoint beside ``/api/embed``."""


def parse_ollama_embed_request(
    body: dict[str, Any], model: str = "", stream: bool = False
) -> WireRequest:
    """An Ollama ``/api/embed`` body (``input``: a text or a list), or an ``/api/embeddings``
    body (one ``prompt``)."""
    del model, stream
    if "input" not in body and "prompt" in body:
        prompt = body.get("prompt")
        options = {key: body[key] for key in _OPTIONS if key in body}
        options["method"] = OLLAMA_LEGACY_METHOD
        text = prompt if isinstance(prompt, str) else canonical(prompt)
        return embeddings_request("ollama-embed", body, options=options, inputs=[text])
    return embeddings_request("ollama-embed", body)


GEMINI_EMBED_METHODS = ("embedContent", "batchEmbedContents")
"""Gemini's embeddings methods (``models/<model>:<method>``)."""
_GEMINI_OPTIONS = ("taskType", "title", "outputDimensionality")


def _gemini_text(content: Any) -> str:
    parts = content.get("parts") if isinstance(content, dict) else None
    return "".join(
        str(part.get("text", "")) if "text" in part else canonical(part)
        for part in parts or []
        if isinstance(part, dict)
    )


def parse_gemini_embed_request(
    body: dict[str, Any], model: str = "", stream: bool = False
) -> WireRequest:
    """A Gemini ``:embedContent`` body (one ``content``) or ``:batchEmbedContents`` body
    (``requests``, each a ``content`` with its options)."""
    del stream
    batch = "requests" in body
    items = [item for item in body.get("requests") or [] if isinstance(item, dict)]
    items = items if batch else [body]

    def options_of(item: dict[str, Any]) -> dict[str, Any]:
        config = item.get("embedContentConfig")
        merged = {**item, **config} if isinstance(config, dict) else item
        return {key: merged[key] for key in _GEMINI_OPTIONS if key in merged}

    options: dict[str, Any] = {"method": GEMINI_EMBED_METHODS[batch]}
    for item in items:
        options.update(options_of(item))
    inputs = [_gemini_text(item.get("content")) for item in items]
    return embeddings_request("gemini-embed", body, model.removeprefix("models/"), options, inputs)


def packed_vector(value: Any) -> str:
    if isinstance(value, dict):  # Gemini: {"values": [...]}
        value = value.get("values")
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return pack_vector([float(number) for number in value])
    return ""


def embeddings_chunks(vectors: Sequence[str], tokens: int, meta: ResponseMeta) -> list[Chunk]:
    text = "\n".join(vectors)
    return [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text=text),
        BlockEnd(index=0, block=TextPart(text)),
        Usage(input_tokens=tokens, output_tokens=0),
        Finish(reason="stop", response=meta),
    ]


class EmbeddingsDecoder:
    """An embeddings answer (a body; there is no stream) → chunks."""

    def __init__(self, upstream: str = "") -> None:
        del upstream

    def event(self, event: SseEvent) -> list[Chunk]:
        del event
        return []

    def finish(self) -> list[Chunk]:
        return []

    @property
    def ended(self) -> bool:
        return False

    def body(self, data: dict[str, Any]) -> list[Chunk]:
        if "embeddings" in data or "embedding" in data:  # Ollama, Gemini
            vectors = [packed_vector(item) for item in data.get("embeddings") or []]
            vectors = vectors or [packed_vector(data.get("embedding"))]
            tokens = data.get("prompt_eval_count")
        else:
            items = sorted(data.get("data") or [], key=lambda item: item.get("index", 0))
            vectors = [packed_vector(item.get("embedding")) for item in items]
            tokens = (data.get("usage") or {}).get("prompt_tokens")
        meta = ResponseMeta(model=data.get("model") if isinstance(data.get("model"), str) else None)
        return embeddings_chunks(vectors, tokens if isinstance(tokens, int) else 0, meta)


def vectors_of(chunks: Sequence[Chunk]) -> list[str]:
    for chunk in chunks:
        if isinstance(chunk, BlockEnd) and isinstance(chunk.block, TextPart):
            return [line for line in chunk.block.text.split("\n") if line]
    return []


def embeddings_options(request: WireRequest) -> dict[str, Any]:
    loaded = json.loads(request.system) if request.system else {}
    return loaded if isinstance(loaded, dict) else {}


def embeddings_body(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> bytes:
    """An OpenAI embeddings answer: base64 vectors where the request asked so, else floats."""
    del wire_id
    found = meta_in(chunks, meta)
    usage = usage_in(chunks)
    tokens = usage.input_tokens if usage else 0
    as_base64 = embeddings_options(request).get("encoding_format") == "base64"
    return json_bytes(
        {
            "object": "list",
            "data": [
                {
                    "object": "embedding",
                    "index": index,
                    "embedding": vector if as_base64 else unpack_vector(vector),
                }
                for index, vector in enumerate(vectors_of(chunks))
            ],
            "model": found.model or request.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


def ollama_embed_body(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> bytes:
    """An Ollama ``/api/embed`` answer (an ``/api/embeddings`` one: its one ``embedding``)."""
    del wire_id
    if embeddings_options(request).get("method") == OLLAMA_LEGACY_METHOD:
        vectors = vectors_of(chunks)
        return json_bytes({"embedding": unpack_vector(vectors[0]) if vectors else []})
    found = meta_in(chunks, meta)
    usage = usage_in(chunks)
    return json_bytes(
        {
            "model": found.model or request.model,
            "embeddings": [unpack_vector(vector) for vector in vectors_of(chunks)],
            "prompt_eval_count": usage.input_tokens if usage else 0,
        }
    )


def gemini_embed_body(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> bytes:
    """A Gemini ``:embedContent`` (one ``embedding``) or ``:batchEmbedContents`` answer."""
    del wire_id, meta
    vectors = [{"values": unpack_vector(vector)} for vector in vectors_of(chunks)]
    if embeddings_options(request).get("method") == "embedContent":
        return json_bytes({"embedding": vectors[0] if vectors else {"values": []}})
    return json_bytes({"embeddings": vectors})


def stub_embeddings_body(spec: WireApiSpec, body: dict[str, Any], model: str = "") -> bytes:
    """The stub server's answer to an embeddings request of the API ``spec`` (any of the
    embeddings APIs): ``embedding_vector`` of each input, in the shape the request asks
    (``model``: what a path names)."""
    request = spec.parse(body, model, False)
    options = embeddings_options(request)
    parameters = options.get("parameters")
    named = [options.get(key) for key in ("dimensions", "outputDimensionality", "output_dimension")]
    if isinstance(parameters, dict):
        named.append(parameters.get("outputDimensionality"))
    dimensions = next((value for value in named if value is not None), None)
    size = dimensions if isinstance(dimensions, int) and dimensions > 0 else STUB_DIMENSIONS
    texts = [part.text for part in request.messages[0].content if isinstance(part, TextPart)]
    vectors = [pack_vector(embedding_vector(text, size)) for text in texts]
    tokens = sum(len(text.split()) for text in texts)
    return spec.encode_body(request, embeddings_chunks(vectors, tokens, ResponseMeta()), "", None)


def embeddings_api(
    *,
    name: WireApiName,
    title: str,
    framing: Framing,
    parse: RequestParser,
    encode_body: BodyEncoder,
    error_body: ErrorBody,
    models_body: Callable[[Sequence[str]], bytes],
    auth_headers: tuple[str, ...],
    paths: tuple[WirePath, ...],
    decoder: Callable[[str], WireDecoder] = EmbeddingsDecoder,
) -> WireApiSpec:
    """The spec of an embeddings API (here and ``_cloud_embeddings``): never streamed (a
    stream asked for is answered with the body, ``body_as_stream``), no rule answers it (the
    stub's ``stub_embeddings_body`` does), no minted id prefix."""
    return WireApiSpec(
        name=name,
        title=title,
        framing=framing,
        parse=parse,
        stub_body=stub_embeddings_body,
        decoder=decoder,
        encode_stream=body_as_stream(encode_body),
        encode_body=encode_body,
        error_body=error_body,
        models_body=models_body,
        auth_headers=auth_headers,
        paths=paths,
    )


EMBEDDINGS_API = embeddings_api(
    name="embeddings",
    title="OpenAI embeddings",
    framing="sse",
    parse=parse_embeddings_request,
    encode_body=embeddings_body,
    error_body=openai_error_body,
    models_body=models_listing_body,
    auth_headers=OPENAI_AUTH_HEADERS,
    paths=openai_paths("embeddings", "/v1/embeddings"),
)
"""OpenAI ``POST /v1/embeddings`` (and Azure's ``/openai/deployments/<d>/embeddings``)."""


GEMINI_EMBED_API = embeddings_api(
    name="gemini-embed",
    title="Gemini embeddings",
    framing="sse",
    parse=parse_gemini_embed_request,
    encode_body=gemini_embed_body,
    error_body=gemini_error_body,
    models_body=gemini_models_body,
    auth_headers=("x-goog-api-key", "authorization"),
    paths=(
        WirePath(
            rf"{GEMINI_BASE}/{MODEL}:(?P<method>embedContent|batchEmbedContents)",
            "POST /v1beta/models/<model>:embedContent|batchEmbedContents",
        ),
        # A Gemini embedding model on Vertex AI (google-genai ``vertexai=True``): the same
        # bodies under the publisher's path.
        WirePath(
            vertex_base("google") + "/" + MODEL + ":(?P<method>embedContent|batchEmbedContents)",
            "POST …/publishers/google/models/<model>:embedContent|batchEmbedContents (Vertex AI)",
        ),
    ),
)
"""Gemini ``POST /v1beta/models/<model>:embedContent`` and ``:batchEmbedContents``."""

OLLAMA_EMBED_API = embeddings_api(
    name="ollama-embed",
    title="Ollama embed",
    framing="ndjson",
    parse=parse_ollama_embed_request,
    encode_body=ollama_embed_body,
    error_body=ollama_error_body,
    models_body=ollama_models_body,
    auth_headers=("authorization",),
    paths=(
        WirePath("/api/embed", "POST /api/embed"),
        WirePath("/api/embeddings", "POST /api/embeddings (the older endpoint)"),
    ),
)
"""Ollama's ``POST /api/embed`` (and the older ``/api/embeddings``)."""
