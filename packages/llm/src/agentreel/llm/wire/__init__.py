"""The wire APIs agentreel speaks, one module each, behind one interface and registry.

Every API's module ends with its ``WireApiSpec`` (``_api``): request parsing into the
common request view (``WireRequest``), decoding (wire → chunks), encoding (chunks → wire,
streamed and whole), what ends a stream, error bodies, the models listing, the headers
its key travels in. ``WIRE_APIS`` / ``wire_api`` (``_registry``) list them; the proxy and
the stub server dispatch through them.

Each API's module owns its rules — the frames of a stream and how it ends, the
non-streaming body, the error bodies and in-stream error frames, the finish/stop reason
names — for both directions: chunks → wire (the proxy's replay, the stub server's answers)
and wire → chunks (the proxy's record mode, which feeds the decoded JSON to the SDK
adapters' own mappers, ``agentreel.llm.wire.mappers``, so a proxied stream is recorded as
the in-process adapters would record it). The mappers are SDK-free (``_chat_mapper``,
``_messages_mapper``, ``_gemini``): the adapters feed them SDK objects, the proxy JSON.

- Chat Completions (``_chat``): ``chat_chunk_frames``, ``chat_chunk_body``,
  ``openai_error_body``, ``openai_stream_error_frame``, ``ChatDecoder``.
- Anthropic Messages (``_messages``): ``messages_chunk_frames``, ``messages_chunk_body``,
  ``anthropic_error_body``, ``anthropic_stream_error_frame``, ``MessagesDecoder``.
- OpenAI Responses (``_responses``): ``responses_chunk_frames``, ``responses_chunk_body``,
  ``NAMESPACE_SEPARATOR``, ``responses_namespaced``, ``ResponsesDecoder``.
- Gemini (``_gemini``): ``gemini_chunk_frames``, ``gemini_chunk_body``,
  ``gemini_error_body``, ``gemini_stream_error_frame``, ``gemini_models_body``,
  ``gemini_count_tokens_body``, ``GeminiDecoder``; its wire → chunk rules are its own
  ``GeminiStreamMapper`` (SDK-free, also the ``gemini`` adapter's), and the request side
  ``to_gemini_contents`` / ``to_gemini_tools``.
- Ollama native (``_ollama``): ``/api/chat`` and ``/api/generate`` as NDJSON
  (``_ndjson``), ``ollama_chunk_frames``, ``ollama_chunk_body``, ``ollama_error_body``,
  ``ollama_models_body`` (``/api/tags``), ``OllamaDecoder``.
- AWS Bedrock Converse (``_bedrock``): ``converse-stream`` as AWS event-stream messages
  (``_eventstream``: prelude, headers, payload, both CRC32s), ``converse_chunk_frames``,
  ``converse_chunk_body``, ``bedrock_error_body``, ``bedrock_models_body`` and
  ``bedrock_profiles_body`` (``GET /foundation-models``, ``/inference-profiles``),
  ``ConverseDecoder``.
- Embeddings (``_embeddings``): OpenAI ``/v1/embeddings``, Gemini ``:embedContent`` /
  ``:batchEmbedContents`` and Ollama ``/api/embed``; on the clouds' paths
  (``_cloud_embeddings``): Vertex AI ``:predict`` and Bedrock InvokeModel of a Titan or
  Cohere embedding model; never
  streamed; the vectors as base64 float32 lines of one text block, ``EmbeddingsDecoder``,
  ``embedding_vector`` / ``stub_embeddings_body`` (the stub's deterministic answer).
- Shared: SSE splitting and framing (``_sse``), the recorded ``ResponseMeta`` and the
  decoders' protocol (``_common``), the models listing and token count bodies
  (``_listing``).

Where a call's ``Finish`` carries the recorded ``ResponseMeta`` (response id, model,
created, fingerprint, raw stop reason and sequence, Responses item ids) and a reasoning
block its signature, the encoders answer with them as recorded; without them, they mint
ids from the caller's ``response_id`` and answer with the request's model.

Importing this package imports no provider SDK (only the standard library and msgspec),
and neither does decoding: the proxy records and replays with no SDK installed. The wire →
chunk mappers live here (``_chat_mapper``, ``_messages_mapper``, ``_gemini``) and the SDK
adapters import them, never the other way round.
"""

from agentreel.llm.wire._api import PathKind, WireApiSpec, WirePath
from agentreel.llm.wire._bedrock import (
    ConverseDecoder,
    bedrock_error_body,
    bedrock_models_body,
    bedrock_profiles_body,
    bedrock_stream_error_frame,
    converse_chunk_body,
    converse_chunk_frames,
)
from agentreel.llm.wire._chat import (
    CHAT_FINISH_REASONS,
    ChatDecoder,
    chat_chunk_body,
    chat_chunk_frames,
    openai_error_body,
    openai_stream_error_frame,
)
from agentreel.llm.wire._chat import STREAM_ENDINGS as CHAT_STREAM_ENDINGS
from agentreel.llm.wire._cloud_embeddings import BedrockEmbedDecoder, VertexPredictDecoder
from agentreel.llm.wire._common import CREATED, UpstreamStreamError, WireDecoder
from agentreel.llm.wire._embeddings import (
    GEMINI_EMBED_METHODS,
    STUB_DIMENSIONS,
    EmbeddingsDecoder,
    embedding_vector,
    pack_vector,
    stub_embeddings_body,
    unpack_vector,
)
from agentreel.llm.wire._eventstream import (
    EventStreamError,
    EventStreamSplitter,
    decode_event_message,
    encode_event_message,
    split_messages,
)
from agentreel.llm.wire._gemini import (
    GEMINI_STATUS,
    MINTED_CALL_ID_PREFIX,
    GeminiDecoder,
    GeminiStreamMapper,
    gemini_chunk_body,
    gemini_chunk_frames,
    gemini_count_tokens_body,
    gemini_error_body,
    gemini_models_body,
    gemini_stream_error_frame,
    to_gemini_contents,
    to_gemini_tools,
)
from agentreel.llm.wire._gemini import STREAM_ENDINGS as GEMINI_STREAM_ENDINGS
from agentreel.llm.wire._listing import count_tokens_body, models_listing_body
from agentreel.llm.wire._messages import (
    MESSAGES_STOP_REASONS,
    MessagesDecoder,
    anthropic_error_body,
    anthropic_stream_error_frame,
    messages_chunk_body,
    messages_chunk_frames,
)
from agentreel.llm.wire._messages import STREAM_ENDINGS as MESSAGES_STREAM_ENDINGS
from agentreel.llm.wire._ndjson import NdjsonSplitter, split_lines
from agentreel.llm.wire._ollama import MINTED_CALL_ID_PREFIX as OLLAMA_MINTED_CALL_ID_PREFIX
from agentreel.llm.wire._ollama import (
    OllamaDecoder,
    ollama_chunk_body,
    ollama_chunk_frames,
    ollama_error_body,
    ollama_models_body,
    ollama_stream_error_frame,
)
from agentreel.llm.wire._registry import (
    WIRE_API_PATHS,
    WIRE_APIS,
    PathMatch,
    match_path,
    match_under,
    supported_paths,
    wire_api,
)
from agentreel.llm.wire._request import NAMESPACE_SEPARATOR, RuleText, WireApiName, WireRequest
from agentreel.llm.wire._responses import STREAM_ENDINGS as RESPONSES_STREAM_ENDINGS
from agentreel.llm.wire._responses import (
    ResponsesDecoder,
    responses_chunk_body,
    responses_chunk_frames,
    responses_namespaced,
)
from agentreel.llm.wire._sse import SseEvent, SseSplitter, event_frame, json_bytes, split_frames

__all__ = [
    "CHAT_FINISH_REASONS",
    "CHAT_STREAM_ENDINGS",
    "CREATED",
    "GEMINI_EMBED_METHODS",
    "GEMINI_STATUS",
    "GEMINI_STREAM_ENDINGS",
    "MESSAGES_STOP_REASONS",
    "MESSAGES_STREAM_ENDINGS",
    "MINTED_CALL_ID_PREFIX",
    "NAMESPACE_SEPARATOR",
    "OLLAMA_MINTED_CALL_ID_PREFIX",
    "RESPONSES_STREAM_ENDINGS",
    "STUB_DIMENSIONS",
    "WIRE_APIS",
    "WIRE_API_PATHS",
    "BedrockEmbedDecoder",
    "ChatDecoder",
    "ConverseDecoder",
    "EmbeddingsDecoder",
    "EventStreamError",
    "EventStreamSplitter",
    "GeminiDecoder",
    "GeminiStreamMapper",
    "MessagesDecoder",
    "NdjsonSplitter",
    "OllamaDecoder",
    "PathKind",
    "PathMatch",
    "ResponsesDecoder",
    "RuleText",
    "SseEvent",
    "SseSplitter",
    "UpstreamStreamError",
    "VertexPredictDecoder",
    "WireApiName",
    "WireApiSpec",
    "WireDecoder",
    "WirePath",
    "WireRequest",
    "anthropic_error_body",
    "anthropic_stream_error_frame",
    "bedrock_error_body",
    "bedrock_models_body",
    "bedrock_profiles_body",
    "bedrock_stream_error_frame",
    "chat_chunk_body",
    "chat_chunk_frames",
    "converse_chunk_body",
    "converse_chunk_frames",
    "count_tokens_body",
    "decode_event_message",
    "embedding_vector",
    "encode_event_message",
    "event_frame",
    "gemini_chunk_body",
    "gemini_chunk_frames",
    "gemini_count_tokens_body",
    "gemini_error_body",
    "gemini_models_body",
    "gemini_stream_error_frame",
    "json_bytes",
    "match_path",
    "match_under",
    "messages_chunk_body",
    "messages_chunk_frames",
    "models_listing_body",
    "ollama_chunk_body",
    "ollama_chunk_frames",
    "ollama_error_body",
    "ollama_models_body",
    "ollama_stream_error_frame",
    "openai_error_body",
    "openai_stream_error_frame",
    "pack_vector",
    "responses_chunk_body",
    "responses_chunk_frames",
    "responses_namespaced",
    "split_frames",
    "split_lines",
    "split_messages",
    "stub_embeddings_body",
    "supported_paths",
    "to_gemini_contents",
    "to_gemini_tools",
    "unpack_vector",
    "wire_api",
]
