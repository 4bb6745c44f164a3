"""What one wire API implements to be spoken by agentreel: ``WireApiSpec``.

An API's module (``_chat``, ``_messages``, ``_responses``, ``_gemini``) holds its rules
and ends with its spec; ``_registry`` lists the specs. The proxy (record, replay) and the
stub server dispatch on a request's API through the registry, never on its name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentreel.llm._chunks import Chunk, ResponseMeta
from agentreel.llm.wire._common import WireDecoder
from agentreel.llm.wire._eventstream import EventStreamSplitter, split_messages
from agentreel.llm.wire._ndjson import NdjsonSplitter, split_lines
from agentreel.llm.wire._request import WireApiName, WireRequest
from agentreel.llm.wire._sse import FrameSplitter, SseSplitter, split_frames

Framing = Literal["sse", "ndjson", "eventstream"]
"""How a stream's frames are cut: server-sent events (``_sse``) or one JSON object per line
(``_ndjson``) or AWS event-stream messages (``_eventstream``)."""
STREAM_CONTENT_TYPES: dict[Framing, str] = {
    "sse": "text/event-stream",
    "ndjson": "application/x-ndjson",
    "eventstream": "application/vnd.amazon.eventstream",
}
"""The content type of a stream of each framing (a response of another type is a body)."""

PathKind = Literal["call", "models", "count_tokens"]
"""What a served path is: a model call of its API, a models listing (``GET``), a token
count (answered from the request alone on replay)."""


@dataclass(frozen=True, slots=True)
class WirePath:
    """One HTTP path shape an API is served on, as the client sends it under its base URL
    (the proxy's ``/r/<run>/`` and ``/s/<token>/`` prefixes taken off first)."""

    pattern: str
    """A regular expression the whole path matches (a trailing ``/`` is allowed). Its named
    groups: ``model`` (the model the path names: Gemini's, Bedrock's, Vertex's) and
    ``method`` (the operation it names: ``streamGenerateContent``, ``converse-stream``)."""
    shown: str
    """As the supported-paths list and messages show it: ``POST /v1/chat/completions``."""
    http_method: str = "POST"
    kind: PathKind = "call"
    streaming_methods: tuple[str, ...] = ()
    """The ``method`` values that ask for a stream; none: the body's ``stream`` tells."""
    quoted_model: bool = False
    """The model is forwarded upstream percent-encoded, as the client signed it (SigV4)."""
    listing: str = ""
    """A models listing (``kind="models"``) other than its API's own: its name, kept apart
    in ``models.json`` (Bedrock's ``inference-profiles``); empty: the API's listing."""
    listing_body: Callable[[Sequence[str]], bytes] | None = None
    """That listing's answer naming the models given; None: the API's ``models_body``."""


OPENAI_BASE = r"(?:/v1)?"
"""OpenAI's and Anthropic's paths: under ``/v1`` (or a base URL that holds it)."""
AZURE_BASE = r"/openai(?:/deployments/[^/]{1,200}|/v1)?"
"""Azure OpenAI's: ``/openai/deployments/<deployment>/``, ``/openai/`` or ``/openai/v1/``
(``api-version`` in the query, forwarded)."""
GEMINI_BASE = r"/(?:v1beta|v1alpha|v1)/models"
"""The Gemini API's models (google-genai 3 calls ``/v1/`` by default)."""
MODEL = r"(?P<model>[^/:]{1,200})"
"""A model named in a path, before its ``:method``."""
BEDROCK_MODEL = r"/model/(?P<model>[^/]{1,300})"
"""AWS Bedrock's model (its id may hold ``:``), before its ``/operation``."""


def vertex_base(publisher: str) -> str:
    """Vertex AI's models of ``publisher`` (``google``, ``anthropic``) under a project and
    location."""
    return (
        r"/(?:v1|v1beta1)/projects/[^/]{1,200}/locations/[^/]{1,100}"
        rf"/publishers/{publisher}/models"
    )


def openai_paths(
    endpoint: str, shown: str, *, http_method: str = "POST", kind: PathKind = "call"
) -> tuple[WirePath, WirePath]:
    """An OpenAI-shaped endpoint (``chat/completions``) on OpenAI's path and Azure's."""
    return (
        WirePath(rf"{OPENAI_BASE}/{endpoint}", f"{http_method} {shown}", http_method, kind=kind),
        WirePath(
            rf"{AZURE_BASE}/{endpoint}",
            f"{http_method} /openai/deployments/<deployment>/{endpoint}?api-version=… "
            f"(or /openai/v1/{endpoint}; Azure OpenAI)",
            http_method,
            kind=kind,
        ),
    )


RequestParser = Callable[[dict[str, Any], str, bool], WireRequest]
"""``(body, model, stream) → WireRequest``: ``model`` and ``stream`` are what the request's
path names (Gemini's), empty/False where the body names them."""
StreamEncoder = Callable[[WireRequest, Sequence[Chunk], str, ResponseMeta | None], list[bytes]]
"""``(request, chunks, wire_id, meta) → frames`` answering a streaming request."""
BodyEncoder = Callable[[WireRequest, Sequence[Chunk], str, ResponseMeta | None], bytes]
"""``(request, chunks, wire_id, meta) → body`` answering a non-streaming request."""
ErrorBody = Callable[[int, str, str | None], bytes]
"""``(status, message, code) → body``: the JSON error the API's SDK parses."""


def body_as_stream(encode_body: BodyEncoder) -> StreamEncoder:
    """The stream encoder of an API that never streams (embeddings): the body, one frame."""

    def encode(
        request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
    ) -> list[bytes]:
        return [encode_body(request, chunks, wire_id, meta)]

    return encode


@dataclass(frozen=True, slots=True)
class WireApiSpec:
    """One wire API: every rule the proxy and the stub server need of it."""

    name: WireApiName
    """As the session log names it (``request/header`` ``api``)."""
    title: str
    """As messages name it: ``OpenAI Chat Completions``."""
    framing: Framing
    parse: RequestParser
    """A request body → the common request view the binder and drift detection see."""
    decoder: Callable[[str], WireDecoder]
    """A fresh decoder (wire → chunks) for one call from the upstream named."""
    encode_stream: StreamEncoder
    encode_body: BodyEncoder
    error_body: ErrorBody
    models_body: Callable[[Sequence[str]], bytes]
    """A models listing naming the models given, in this API's shape."""
    auth_headers: tuple[str, ...]
    """The headers a client sends its key in: forwarded upstream, never written."""
    stream_endings: tuple[bytes, ...] = ()
    """The frames that end a stream (a replayed cut or error ends otherwise); none where
    ``ends_stream`` tells, or the API never streams."""
    response_id_prefix: str = ""
    """Of a minted response id: ``chatcmpl-``, ``msg_``, ``resp_`` (Gemini, Bedrock
    Converse, Ollama, embeddings: none)."""
    error_frame: Callable[[str], bytes] = lambda raw: (
        b"event: error\ndata: " + raw.encode() + b"\n\n"
    )
    """A recorded in-stream error (its raw data) as the frame that sends it again."""
    ends_stream: Callable[[bytes], bool] | None = None
    """Whether a frame ends the stream, where no prefix tells (``stream_endings``)."""
    paths: tuple[WirePath, ...] = ()
    """The HTTP paths it is served on, its model calls' first (the route table is built
    from them, in registry order: the first path that matches serves)."""
    count_tokens_key: str = "input_tokens"
    """The field of a token count answer (``countTokens``: ``totalTokens``)."""
    stub_body: Callable[[WireApiSpec, dict[str, Any], str], bytes] | None = None
    """The stub server's answer to a request of an API that takes no rule (embeddings):
    ``(spec, body, the path's model) → body``; None: the stub's rules answer it."""
    rule_api: str = ""
    """As the stub's rules name it (``match.api``: ``openai``, ``anthropic``; APIs of one
    body shape share a name: Bedrock's two, Ollama's two); empty: no rule answers it."""

    @property
    def shown_path(self) -> str:
        """Its model calls' path and title, as messages name the API: ``POST
        /v1/chat/completions (OpenAI Chat Completions)``."""
        calls = [path.shown for path in self.paths if path.kind == "call"]
        return f"{calls[0] if calls else '(no path)'} ({self.title})"

    def is_ending(self, frame: bytes) -> bool:
        """``frame`` is one of those that end a stream."""
        if self.ends_stream is not None:
            return self.ends_stream(frame)
        return frame.startswith(self.stream_endings)

    def without_ending(self, frames: list[bytes]) -> list[bytes]:
        """A stream's frames minus those that end it."""
        return [frame for frame in frames if not self.is_ending(frame)]

    @property
    def stream_content_type(self) -> str:
        """The content type a stream of this API is sent with."""
        return STREAM_CONTENT_TYPES[self.framing]

    def streams(self, content_type: str) -> bool:
        """A response of ``content_type`` is a stream of this API (else a whole body)."""
        return STREAM_CONTENT_TYPES[self.framing] in content_type

    def splitter(self) -> FrameSplitter:
        """A fresh splitter of this API's stream into events."""
        if self.framing == "eventstream":
            return EventStreamSplitter()
        return SseSplitter() if self.framing == "sse" else NdjsonSplitter()

    def split_frames(self, data: bytes) -> list[bytes]:
        """``data`` cut into its frames, terminators kept (joined: ``data`` again)."""
        if self.framing == "eventstream":
            return split_messages(data)
        return split_frames(data) if self.framing == "sse" else split_lines(data)
