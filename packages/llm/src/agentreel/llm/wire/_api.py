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
from agentreel.llm.wire._request import WireApiName, WireRequest

Framing = Literal["sse"]
"""How a stream's frames are cut: server-sent events (``_sse``)."""

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

    def without_ending(self, frames: list[bytes]) -> list[bytes]:
        """A stream's frames minus those that end it."""
        return [frame for frame in frames if not frame.startswith(self.stream_endings)]
