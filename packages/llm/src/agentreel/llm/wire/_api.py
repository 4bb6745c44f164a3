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

RequestParser = Callable[[dict[str, Any], str, bool], WireRequest]
"""``(body, model, stream) → WireRequest``: ``model`` and ``stream`` are what the request's
path names (Gemini's), empty/False where the body names them."""
StreamEncoder = Callable[[WireRequest, Sequence[Chunk], str, ResponseMeta | None], list[bytes]]
"""``(request, chunks, wire_id, meta) → frames`` answering a streaming request."""
BodyEncoder = Callable[[WireRequest, Sequence[Chunk], str, ResponseMeta | None], bytes]
"""``(request, chunks, wire_id, meta) → body`` answering a non-streaming request."""
ErrorBody = Callable[[int, str, str | None], bytes]
"""``(status, message, code) → body``: the JSON error the API's SDK parses."""


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
    stream_endings: tuple[bytes, ...]
    """The frames that end a stream (a replayed cut or error ends otherwise)."""
    error_body: ErrorBody
    models_body: Callable[[Sequence[str]], bytes]
    """A models listing naming the models given, in this API's shape."""
    response_id_prefix: str
    """Of a minted response id: ``chatcmpl-``, ``msg_``, ``resp_`` (Gemini: none)."""
    auth_headers: tuple[str, ...]
    """The headers a client sends its key in: forwarded upstream, never written."""
    error_frame: Callable[[str], bytes] = lambda raw: (
        b"event: error\ndata: " + raw.encode() + b"\n\n"
    )
    """A recorded in-stream error (its raw data) as the frame that sends it again."""
    ends_stream: Callable[[bytes], bool] | None = None
    """Whether a frame ends the stream, where no prefix tells (``stream_endings``)."""

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
