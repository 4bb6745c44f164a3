"""The stub model server: a loopback HTTP server answering both streaming APIs from rules.

It runs ``http.server`` in a daemon thread, so it works the same from a synchronous
test, an asyncio test (the event loop is never blocked by it) and a separate process
(``python -m agentreel.llm.stub``). Responses use HTTP/1.1 chunked transfer encoding, as
the real APIs do, so a cut stream is a truncated chunked body the client notices.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, Self, overload
from urllib.parse import unquote

import msgspec

from agentreel.llm._chunks import Chunk, Finish
from agentreel.llm.stub._answers import (
    anthropic_frames,
    anthropic_message_body,
    openai_completion_body,
    openai_frames,
    rule_chunks,
)
from agentreel.llm.stub._rules import (
    Api,
    RequestView,
    Rule,
    RuleSet,
    load_rules,
    parse_rules,
    read_request,
)
from agentreel.llm.stub._rules_doc import RULES_FORMAT_HINT
from agentreel.llm.wire import (
    MINTED_CALL_ID_PREFIX,
    OLLAMA_MINTED_CALL_ID_PREFIX,
    PathMatch,
    WireApiSpec,
    WireRequest,
    anthropic_stream_error_frame,
    bedrock_stream_error_frame,
    count_tokens_body,
    gemini_chunk_body,
    gemini_chunk_frames,
    gemini_count_tokens_body,
    gemini_models_body,
    gemini_stream_error_frame,
    match_under,
    models_listing_body,
    ollama_stream_error_frame,
    openai_error_body,
    openai_stream_error_frame,
    responses_chunk_body,
    responses_chunk_frames,
    responses_namespaced,
)

logger = logging.getLogger("agentreel.llm.stub")

Outcome = Literal["pending", "completed", "cut", "disconnected", "error", "no-rule"]
NO_RULE_MARK = "agentreel stub server: no rule in "
"""How the stub's answer to a request no rule matches begins (inside the error body)."""


def no_rule_answer(body: bytes) -> str | None:
    """The stub's no-rule message in an error response ``body`` (any wire's error shape),
    or ``None``: how a recorder in front of the stub knows an error was no model's."""
    text = body.decode("utf-8", "replace")
    start = text.find(NO_RULE_MARK)
    if start < 0:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return text[start:]
    stack: list[Any] = [found]
    while stack:  # the message string, wherever the wire puts it
        value = stack.pop()
        if isinstance(value, str) and value.startswith(NO_RULE_MARK):
            return value
        if isinstance(value, dict):
            stack += value.values()
        elif isinstance(value, list):
            stack += value
    return text[start:]


_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "x-goog-api-key"})


class StubRequest(msgspec.Struct, kw_only=True):
    """One request the server received, kept for tests to inspect.

    ``outcome`` is ``completed`` (whole stream sent), ``cut`` (``cut_after`` fault),
    ``disconnected`` (the client went away mid-stream), ``error`` (an error status was
    answered), ``no-rule`` (no rule matched) or ``pending`` while it is still streaming.
    Secret headers are redacted.
    """

    index: int
    api: Api
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    rule: str | None
    status: int
    outcome: Outcome = "pending"
    frames_sent: int = 0
    message: str | None = None
    """What the server answered instead of a model's answer (the no-rule text)."""
    delegations: tuple[str, ...] = ()
    """The subagent tools the answer called by its rule's ``call_subagent``."""


class _Disconnected(Exception):
    pass


class StubServer:
    """A loopback model server speaking OpenAI Chat Completions and Anthropic Messages SSE.

    Use it as a context manager (sync or async) or call ``start()``/``stop()``::

        with StubServer.from_toml('[[rule]]\\ntext = "hi"') as server:
            provider = load_provider("stub", base_url=server.base_url)
    """

    def __init__(self, rules: RuleSet | str | Path, *, port: int = 0) -> None:
        self.rules = rules if isinstance(rules, RuleSet) else load_rules(rules)
        self._requested_port = port
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._requests: list[StubRequest] = []
        self._disconnects = 0
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_toml(cls, text: str, *, source: str = "<inline rules>", port: int = 0) -> StubServer:
        """A server answering from rules given as TOML text."""
        return cls(parse_rules(text, source), port=port)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind 127.0.0.1 (a free port unless one was given) and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        httpd = _Httpd(("127.0.0.1", self._requested_port), _Handler)
        httpd.stub = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"agentreel-stub-{self.port}",
            daemon=True,
        )
        self._thread.start()
        logger.info(
            "stub model server listening on %s (rules: %s)", self.base_url, self.rules.source
        )
        return self

    def stop(self) -> None:
        """Stop serving; streams still running are cut at their next frame."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join()
        self._httpd = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the stub server is not running; call start() first")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: the Anthropic base URL, and the ``stub`` provider's."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``<base_url>/v1``: what the ``openai`` SDK wants as ``base_url``."""
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    # -- what happened -------------------------------------------------------------------------

    @property
    def requests(self) -> list[StubRequest]:
        """Every request received so far, in arrival order (a snapshot copy of the list)."""
        with self._lock:
            return list(self._requests)

    @property
    def disconnects(self) -> int:
        """How many streams the client closed before the server finished sending them."""
        with self._lock:
            return self._disconnects

    def wait_for_disconnect(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Block until ``count`` client disconnects were seen; False if ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._disconnects < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return True

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> bool:
        """Block until ``count`` requests have finished; False if ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while sum(r.outcome != "pending" for r in self._requests) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return True

    # -- used by the handler -------------------------------------------------------------------

    def _admit(
        self, found: PathMatch, path: str, headers: dict[str, str], body: Any
    ) -> tuple[StubRequest, WireRequest, RequestView, tuple[int, Rule] | None]:
        with self._lock:
            index = len(self._requests)
            parsed, view = read_request(found, body, index, headers)
            taken = self.rules.take_answer(view)
            record = StubRequest(
                index=index,
                api=view.api,
                path=path,
                headers=headers,
                body=body,
                rule=None if taken is None else self.rules.describe(taken[0]),
                status=200 if taken is None else taken[1].status,
                delegations=() if taken is None else self.rules.delegations(*taken),
            )
            self._requests.append(record)
        return record, parsed, view, taken

    def _finish(self, record: StubRequest, outcome: Outcome) -> None:
        with self._changed:
            record.outcome = outcome
            if outcome == "disconnected":
                self._disconnects += 1
            self._changed.notify_all()


class _Httpd(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False
    request_queue_size = 256  # many concurrent subagent sessions connect at once
    stub: StubServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client resetting an idle keep-alive connection is a normal hang-up, not an error.

        The default prints a traceback to stderr, which read like a stub failure in test
        and CLI output; anything else still gets it.
        """
        if isinstance(sys.exception(), (ConnectionResetError, BrokenPipeError)):
            logger.debug("client %s hung up on an idle connection", client_address)
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: each SSE frame is a small write; with Nagle's algorithm it waits for the
    # client's delayed ACK (~40 ms on Linux), which made every streamed call ~40 ms slower.
    disable_nagle_algorithm = True
    server: _Httpd

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        found = match_under("GET", path)  # a models listing of the wire registry's
        if found is None or found.path.kind != "models":
            self._send_json(
                404,
                openai_error_body(
                    404,
                    f"agentreel stub server: no endpoint GET {self.path!r}; GET /v1/models, "
                    "/api/tags, /foundation-models and /inference-profiles only",
                ),
            )
            return
        # The models its rules name (``match.model``), as a provider lists what it serves.
        rules = self.server.stub.rules.rules
        models = sorted({rule.match.model for rule in rules if rule.match.model})
        listing = found.path.listing_body or found.spec.models_body
        # google-genai lists Gemini models at /v1/models too: its own headers say which.
        goog = any(name.lower() in ("x-goog-api-key", "x-goog-api-client") for name in self.headers)
        if listing is models_listing_body and goog:
            listing = gemini_models_body
        self._send_json(200, listing(models))

    def do_POST(self) -> None:
        stub = self.server.stub
        path = self.path.split("?", 1)[0].rstrip("/")
        found = match_under("POST", path)  # the wire registry's, under any base path
        if found is not None and found.spec.stub_body is not None:
            self._embed(found.spec, unquote(found.model))  # answered from the input alone
            return
        if found is not None and found.path.kind == "count_tokens":
            self._count_tokens(found.spec)
            return
        if found is None or found.path.kind != "call" or not found.spec.rule_api:
            message = (
                f"agentreel stub server: no endpoint {self.path!r}; it serves "
                "POST /v1/chat/completions (OpenAI), POST /v1/messages (Anthropic), "
                "POST /v1/responses (OpenAI Responses) and POST /v1beta/models/<model>:"
                "streamGenerateContent|generateContent|countTokens (Gemini), "
                "POST /api/chat and /api/generate (Ollama), "
                "POST /v1/embeddings, /api/embed and /v1beta/models/<model>:embedContent|"
                "batchEmbedContents (embeddings)"
            )
            self._drain_body()
            self._send_json(404, openai_error_body(404, message))
            return
        spec = found.spec
        body = self._object_body(
            "request body", lambda message: self._send_error(spec, 400, message)
        )
        if body is None:
            return
        headers = {
            k.lower(): ("<redacted>" if k.lower() in _SECRET_HEADERS else v)
            for k, v in self.headers.items()
        }
        record, parsed, view, taken = stub._admit(found, path, headers, body)
        api = view.api
        if taken is None:
            message = (
                f"{NO_RULE_MARK}{stub.rules.source} matches "
                f"{view.summary()}; {stub.rules.closest(view)}. Add a [[rule]] whose "
                f"[rule.match] fits this request ({RULES_FORMAT_HINT})."
            )
            logger.warning("%s", message)
            record.status = 400
            record.message = message
            self._send_error(spec, 400, message)
            stub._finish(record, "no-rule")
            return
        position, rule = taken
        label = stub.rules.describe(position)
        logger.info("request #%d (%s) answered by %s", record.index, api, label)
        if rule.status != 200:
            message = rule.error_message or (
                f"agentreel stub server: {label} injected HTTP {rule.status}"
            )
            extra: dict[str, str] = {}
            if rule.retry_after is not None:
                extra["retry-after"] = str(math.ceil(rule.retry_after))
                extra["retry-after-ms"] = str(round(rule.retry_after * 1000))
            self._send_error(spec, rule.status, message, extra)
            stub._finish(record, "error")
            return
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        id_prefix = "toolu_" if api == "anthropic" else "call_"
        call_ids = [
            call.id or id_prefix + hashlib.sha256(f"{digest}:{i}".encode()).hexdigest()[:24]
            for i, call in enumerate(rule.tool_calls)
        ]
        # Response ids come from what answered, not from the raw body: a body holds the run's
        # cwd paths and ids, and the proxy records response ids, so a re-recording must mint
        # the same ones.
        digest = _answer_digest(label, body, call_ids)
        if api == "gemini":
            # The Gemini API sends function calls without ids: so does the stub, unless the
            # rule names one (the ids minted here are the ones a Gemini mapper mints).
            call_ids = [
                call.id or f"{MINTED_CALL_ID_PREFIX}stub{digest[:20]}-{i}"
                for i, call in enumerate(rule.tool_calls)
            ]
        if api == "ollama":
            # Ollama sends tool calls without ids: so does the stub, unless the rule names
            # one (the ids minted here are the ones the Ollama decoder mints).
            call_ids = [
                call.id or f"{OLLAMA_MINTED_CALL_ID_PREFIX}{i}"
                for i, call in enumerate(rule.tool_calls)
            ]
        prefix = _RESPONSE_ID_PREFIXES.get(api, spec.response_id_prefix + "stub")
        response_id = prefix + digest[: 20 if api == "gemini" else 24]
        answering = _Answering(spec, parsed, rule, response_id, call_ids)
        if not view.stream:
            stub._finish(record, self._answer_whole(record, answering, label))
            return
        frames = _encode_answer(record, answering, stream=True)
        if rule.error_after is not None:
            message = rule.error_message or (
                f"agentreel stub server: {label} injected an in-stream error after "
                f"{rule.error_after} frames"
            )
            frames = [*frames[: rule.error_after], _stream_error_frame(spec, message)]
        stub._finish(record, self._stream(record, frames, rule, spec))

    def _answer_whole(self, record: StubRequest, answering: _Answering, label: str) -> Outcome:
        """A non-streaming request: the rule's answer as one JSON body.

        ``error_after`` becomes an HTTP 500 (there is no stream to break into) and
        ``cut_after`` a body cut after its first half, so faults still reach the client.
        """
        rule, spec = answering.rule, answering.spec
        if rule.error_after is not None:
            message = rule.error_message or (
                f"agentreel stub server: {label} injected an error (error_after) into a "
                "non-streaming answer"
            )
            self._send_error(spec, 500, message)
            record.status = 500
            return "error"
        try:
            payload = _encode_answer(record, answering, stream=False)
        except ValueError as exc:
            message = (
                f"agentreel stub server: {label} cannot answer a non-streaming request: its "
                f"tool call arguments are not JSON ({exc}); give arguments as a table"
            )
            self._send_error(spec, 500, message)
            record.status = 500
            return "error"
        try:
            self._pause(rule.delay_ms / 1000)
        except _Disconnected:
            self.close_connection = True
            return "disconnected"
        request_id = {_request_id_header(record.api): "req_stub"}
        if rule.cut_after is not None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload[: len(payload) // 2])
            self._cut()
            return "cut"
        self._send_json(200, payload, request_id)
        return "completed"

    def _count_tokens(self, spec: WireApiSpec) -> None:
        """Anthropic's or Gemini's token count of a request: answered, never a model call
        (not in ``requests``, no rule taken)."""
        body = self._object_body(
            "count_tokens request body", lambda message: self._send_error(spec, 400, message)
        )
        if body is None:
            return
        gemini = spec.count_tokens_key == "totalTokens"
        counted = gemini_count_tokens_body if gemini else count_tokens_body
        self._send_json(200, counted(body))

    def _embed(self, spec: WireApiSpec, model: str = "") -> None:
        """An embeddings request: answered from the input alone (``stub_embeddings_body``:
        a vector from a hash of each input), never a model call (no rule taken)."""
        body = self._object_body(
            "embeddings request body",
            lambda message: self._send_json(400, spec.error_body(400, message, None)),
        )
        if body is None:
            return
        assert spec.stub_body is not None
        self._send_json(200, spec.stub_body(spec, body, model))

    # -- helpers -------------------------------------------------------------------------------

    def _object_body(self, what: str, send_error: Callable[[str], None]) -> dict[str, Any] | None:
        """The request body as a JSON object (none: ``{}``), or ``None`` once ``send_error``
        has answered the message that ``what`` is not JSON."""
        try:
            body = json.loads(self._drain_body() or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the body is not a JSON object")
        except ValueError as exc:
            send_error(f"agentreel stub server: {what} is not JSON: {exc}")
            return None
        return body

    def _drain_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_json(self, status: int, payload: bytes, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def _send_error(
        self,
        spec: WireApiSpec,
        status: int,
        message: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        """The API's error body (its ``error_body``) with its request id header (Bedrock's
        also names the error's type, as botocore reads it)."""
        payload = spec.error_body(status, message, None)
        headers = {_request_id_header(spec.rule_api): "req_stub"}
        if spec.rule_api == "bedrock":
            kind = json.loads(payload)["__type"]
            headers = {"x-amzn-errortype": kind, "x-amzn-requestid": "req_stub"}
        self._send_json(status, payload, {**headers, **(extra or {})})

    def _stream(
        self, record: StubRequest, frames: list[bytes], rule: Rule, spec: WireApiSpec
    ) -> Outcome:
        delay_ms, cut_after = rule.delay_ms, rule.cut_after
        self.send_response(200)
        self.send_header("content-type", f"{spec.stream_content_type}; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header(_request_id_header(record.api), "req_stub")
        self.end_headers()
        try:
            for position, frame in enumerate(frames):
                if cut_after is not None and position >= cut_after:
                    self._cut()
                    return "cut"
                self._pause(delay_ms / 1000)
                if self.server.stub._stopping.is_set():
                    self._cut()
                    return "cut"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                record.frames_sent = position + 1
            self.wfile.write(b"0\r\n\r\n")
        except (_Disconnected, BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            logger.info("request #%d: the client disconnected mid-stream", record.index)
            return "disconnected"
        return "completed"

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` (or just poll), noticing at once if the client hung up."""
        deadline = time.monotonic() + seconds
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self.connection], [], [], remaining)
            if readable:
                try:
                    peeked = self.connection.recv(1, socket.MSG_PEEK)
                except (ConnectionResetError, OSError):
                    raise _Disconnected from None
                if not peeked:
                    raise _Disconnected
                time.sleep(remaining)  # a pipelined request: just wait out the delay
                return
            if remaining <= 0:
                return

    def _cut(self) -> None:
        """Drop the connection without ending the chunked body: a truncated stream."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


_RESPONSE_ID_PREFIXES: dict[Api, str] = {
    "openai": "chatcmpl-stub",
    "anthropic": "msg_stub",
    "ollama": "msg_stub",
    "bedrock": "msg_stub",
    "gemini": "stub",
    "responses": "resp_stub",
}
"""The stub's response ids by API: the prefix, then the answer's digest (Gemini's 20 hex
digits, the others' 24)."""


@dataclass(frozen=True, slots=True)
class _Answering:
    """What answers one request: its API, the request as its parser read it, the rule
    that fits it (filled), the response id and the tool call ids minted for it."""

    spec: WireApiSpec
    request: WireRequest
    rule: Rule
    response_id: str
    call_ids: list[str]


_REQUEST_ID_HEADERS: dict[Api, str] = {"anthropic": "request-id"}
"""The header a stub answer names its request id in, by API (else ``x-request-id``)."""


def _request_id_header(api: Api) -> str:
    return _REQUEST_ID_HEADERS.get(api, "x-request-id")


_STREAM_ERROR_FRAMES: dict[Api, Callable[[str], bytes]] = {
    "openai": openai_stream_error_frame,
    "responses": openai_stream_error_frame,
    "anthropic": anthropic_stream_error_frame,
    "gemini": gemini_stream_error_frame,
    "ollama": ollama_stream_error_frame,
    "bedrock": bedrock_stream_error_frame,
}


def _stream_error_frame(spec: WireApiSpec, message: str) -> bytes:
    """An in-stream error saying ``message`` (``error_after``), in the API's words: its
    own frame, else its error body in its ``error_frame``."""
    known = _STREAM_ERROR_FRAMES.get(spec.rule_api)
    if known is not None:
        return known(message)
    return spec.error_frame(spec.error_body(500, message, None).decode())


@overload
def _encode_answer(
    record: StubRequest, answering: _Answering, *, stream: Literal[True]
) -> list[bytes]: ...
@overload
def _encode_answer(
    record: StubRequest, answering: _Answering, *, stream: Literal[False]
) -> bytes: ...
def _encode_answer(
    record: StubRequest, answering: _Answering, *, stream: bool
) -> list[bytes] | bytes:
    """A rule's answer to the request, with its response id: the stream's frames, or the
    whole body. Chat Completions, Messages, Responses and Gemini have the stub's own
    encoders (chunk sizes as the rule says, a refusal in Gemini's words); any other API's
    answer is encoded from the rule's chunks by its wire module (the registry's). Raises
    ``ValueError`` when a whole body needs tool arguments that are not JSON."""
    api, body = record.api, record.body
    rule, wire_id, call_ids = answering.rule, answering.response_id, answering.call_ids
    if api == "openai":
        return (openai_frames if stream else openai_completion_body)(rule, body, wire_id, call_ids)
    if api == "anthropic":
        return (anthropic_frames if stream else anthropic_message_body)(
            rule, body, wire_id, call_ids
        )
    if api == "gemini":
        chunks = _gemini_chunks(rule, call_ids)
        encode_gemini = gemini_chunk_frames if stream else gemini_chunk_body
        return encode_gemini(chunks, model=answering.request.model, response_id=wire_id)
    if api == "responses":
        encode_responses = responses_chunk_frames if stream else responses_chunk_body
        return encode_responses(
            rule_chunks(rule, call_ids),
            model=str(body.get("model", "")),
            response_id=wire_id,
            namespaced=responses_namespaced(body),
        )
    spec, chunks = answering.spec, rule_chunks(rule, call_ids)
    if stream:
        return spec.encode_stream(answering.request, chunks, wire_id, None)
    return spec.encode_body(answering.request, chunks, wire_id, None)


def _answer_digest(label: str, body: Mapping[str, Any], call_ids: list[str]) -> str:
    """What the stub's response ids are minted from: the rule that answered, how far into
    its conversation the request is, and the tool calls the answer makes."""
    turns = body.get("messages", body.get("input", body.get("contents")))
    depth = len(turns) if isinstance(turns, list) else 1
    return hashlib.sha256(json.dumps([label, depth, call_ids]).encode()).hexdigest()


def _gemini_chunks(rule: Rule, call_ids: list[str]) -> list[Chunk]:
    """A rule's answer for the Gemini API: its chunks, a refusal in Gemini's words
    (``finishReason: SAFETY``)."""
    chunks = rule_chunks(rule, call_ids)
    if rule.finish_name == "refusal":
        chunks[-1] = Finish(reason="error", code="SAFETY")
    return chunks
