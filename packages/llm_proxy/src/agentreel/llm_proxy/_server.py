"""The proxy's HTTP server (aiohttp on 127.0.0.1, TCP_NODELAY, streamed responses).

aiohttp serves and forwards in one well-kept library: its protocol sets TCP_NODELAY on
every connection (server and client side), ``StreamResponse`` writes each SSE event as it
comes, and ``iter_any`` hands over upstream bytes the moment they arrive — so in record
mode the client's first chunk is the upstream's first chunk plus one loopback hop. Chosen
by measurement: ``nox -s bench -- --only proxy`` serves the same replayed SSE stream from
aiohttp and from starlette on uvicorn (httptools) to the ``openai`` SDK; aiohttp took 0.65×
the time per call (starlette/uvicorn 1.54× aiohttp, quick run on a loaded machine).
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import itertools
import json
import logging
import os
import secrets
import tempfile
import traceback
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import aiohttp
import msgspec
from aiohttp import web

from agentreel.llm import BlockStart, Chunk, Finish, LlmError, ResponseMeta, Usage
from agentreel.llm.exceptions import StreamInterruptedError
from agentreel.llm_proxy._codecs import (
    UpstreamStreamError,
    decoder,
    encode_body,
    encode_stream,
    response_id,
)
from agentreel.llm_proxy._errors import CUT_CODE, HTTP_CODE_PREFIX, STREAM_ERROR_CODE, error_body
from agentreel.llm_proxy._identity import IDENTITY_HEADERS, Identity, resolve_identity
from agentreel.llm_proxy._masks import Masks
from agentreel.llm_proxy._models import (
    MODELS_FILE,
    ModelsListing,
    listing_for,
    read_models,
    write_models,
)
from agentreel.llm_proxy._record import (
    CallRecording,
    Recorder,
    ServedLogs,
    remove_tree,
    write_fixture,
)
from agentreel.llm_proxy._requests import ParsedRequest, parse_request
from agentreel.llm_proxy._routes import (
    RUN_PREFIX,
    SUPPORTED_PATHS,
    Api,
    Route,
    api_for_path,
    match_route,
)
from agentreel.llm_proxy._sse import SseSplitter
from agentreel.llm_proxy.exceptions import ProxyConfigError, RequestError
from agentreel.llm_replay import (
    BoundCall,
    DriftMode,
    PartialLanes,
    RecordedStream,
    ReplayError,
    ReplayProvider,
    Script,
    UnconsumedScriptError,
)
from agentreel.session import build_request_header, checked_allowlist

logger = logging.getLogger("agentreel.llm_proxy")

Mode = Literal["record", "replay"]
MODES: tuple[Mode, ...] = ("record", "replay")
DEFAULT_MAX_BODY = 32 * 1024 * 1024
REPLAY_ERROR_STATUS = 400
"""Replay errors are 400s: no SDK retries them, and each SDK raises its bad-request error
carrying the message (which names the problem and the re-record command)."""

SHUTDOWN_GRACE = 0.5
"""Seconds a stream in flight may still take to end once the proxy is stopping (a signal,
end of stdin, ``close()``); then it is cut, and what it streamed so far is kept and sealed
as interrupted. Short: whoever stops the proxy may kill it soon after (aiohttp's own
default would wait a minute)."""

_HOP_BY_HOP = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "accept-encoding",
        *IDENTITY_HEADERS,
    }
)
_RESPONSE_DROP = frozenset(
    {"content-length", "transfer-encoding", "connection", "content-encoding", "date", "server"}
)


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """Everything a proxy run is configured with (see ``start_proxy``)."""

    mode: Mode
    upstream: str | None = None
    sessions_root: Path | None = None
    fixture: Path | None = None
    report: Path | None = None
    host: str = "127.0.0.1"
    port: int = 0
    masks: tuple[str, ...] = ()
    partial_lanes: tuple[str, ...] = ()
    cwd: str = field(default_factory=os.getcwd)
    scenario: str | None = None
    drift: DriftMode = "error"
    max_body_bytes: int = DEFAULT_MAX_BODY
    allow_secrets: tuple[str, ...] = ()
    """sha256 digests of values the secret scan lets through (deliberate fake keys)."""

    def check(self) -> None:
        if self.mode not in MODES:
            raise ProxyConfigError(f"mode must be record or replay, got {self.mode!r}")
        try:
            PartialLanes(self.partial_lanes)
        except ValueError as error:
            raise ProxyConfigError(str(error)) from None
        try:
            checked_allowlist(self.allow_secrets)
        except ValueError as error:
            raise ProxyConfigError(f"allow_secrets: {error}") from None
        if self.mode == "record":
            if not self.upstream:
                raise ProxyConfigError(
                    "record mode needs upstream=URL: the real provider or the stub server to "
                    "forward to (e.g. http://127.0.0.1:PORT from python -m agentreel.llm.stub)"
                )
            if not self.upstream.startswith(("http://", "https://")):
                raise ProxyConfigError(f"upstream {self.upstream!r} is not an http(s) URL")
            if self.sessions_root is None and self.fixture is None:
                raise ProxyConfigError(
                    "record mode needs sessions_root=DIR (session logs written there) or "
                    "fixture=DIR (harvested into a fixture directory on close)"
                )
        elif self.fixture is None:
            raise ProxyConfigError(
                "replay mode needs fixture=DIR: the directory holding session.jsonl"
            )


DUMMY_KEY = "agentreel-proxy-not-a-secret"
"""What a client of the proxy may send as its key where none is needed (replay; the stub
ignores keys): it must not look like (or be scanned as) a credential."""
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
"""The key variables of the SDKs the proxy serves."""

_SERVING: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agentreel_proxy_run", default=None
)
"""The run whose request (or close) the current task is serving: what ``RunLogFilter``
tells the runs' log lines apart by. Each aiohttp request is its own task, so setting it in
one request's handler is seen by everything that handler calls, and by nothing else."""


class RunLogFilter(logging.Filter):
    """Passes the proxy's log records emitted while serving or closing one run — so a host
    running several runs on one server can give each its own log file."""

    def __init__(self, token: str | None) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        return _SERVING.get() == self.token


class ProxyRun:
    """One run of the proxy: its mode, its recorder (record) or replay provider, served logs,
    report, masks and partial lanes — everything a scenario's model calls touch.

    A run is served by a ``ProxyServer``, at the server's root (``Proxy``, the CLI: one run)
    or under its own ``/r/<token>/`` prefix (a server kept for many runs, e.g. one per
    pytest-xdist worker): two runs share the listening socket and nothing else, so each gets
    exactly its own answers, logs and report. ``base_url`` is what clients point at (``/v1``
    is added by OpenAI clients' base URL, ``openai_base_url``); ``url_for(token)`` gives a
    child process its own ``/s/<token>`` base URL inside the run's."""

    def __init__(self, settings: ProxySettings) -> None:
        settings.check()
        self.settings = settings
        self.masks = Masks(settings.masks, cwd=settings.cwd)
        self.mode: Mode = settings.mode
        self.token: str | None = None
        self._server: ProxyServer | None = None
        self._client: aiohttp.ClientSession | None = None
        self._temp_root: Path | None = None
        self._in_flight: set[asyncio.Task[Any]] = set()
        self.recorder: Recorder | None = None
        self.provider: ReplayProvider | None = None
        # Replay with ``sessions_root``: the session logs of what was served, written as
        # record writes them — the re-persisted logs a harness diffs with its goldens.
        self.served: ServedLogs | None = None
        self._recorded_apis = False
        # Partial lanes (side calls that vary with timing) are left out of the served logs:
        # whether and how far they ran is not part of what a harness compares.
        self._partial = PartialLanes(settings.partial_lanes)
        self.errors: list[str] = []
        self._closed = False
        self._wire: asyncio.Future[ModuleType] | None = None
        # GET /v1/models answers: passed through and kept (record), or as recorded (replay).
        self._listings: dict[str, ModelsListing] = {}
        if settings.mode == "record":
            root = settings.sessions_root
            if root is None:
                self._temp_root = Path(tempfile.mkdtemp(prefix="agentreel-proxy-"))
                root = self._temp_root
            self.recorder = Recorder(
                root, settings.cwd, self.masks.text, allow_secrets=settings.allow_secrets
            )
        else:
            assert settings.fixture is not None
            if settings.sessions_root is not None:
                self.served = ServedLogs(settings.sessions_root, settings.cwd, self.masks.text)
            self.provider = ReplayProvider(
                settings.fixture,
                live_cwd=settings.cwd,
                drift=settings.drift,
                report_path=settings.report,
                scenario=settings.scenario,
                content_binding=True,
                partial_lanes=settings.partial_lanes,
                content_mask=self.masks.text,
            )
            self._recorded_apis = any(
                call.request is not None and call.request.api is not None
                for script in self.provider.recording.scripts
                for call in script.calls
            )
            self._listings = read_models(settings.fixture)

    # -- lifecycle -------------------------------------------------------------------------

    async def _open(self, server: ProxyServer, token: str | None) -> None:
        """Made ready to serve on ``server`` (``ProxyServer.open_run`` calls it)."""
        if self.mode == "record":
            # The wire mappers import both provider SDKs (seconds on a loaded machine: most
            # of the time to start). Imported on the loop at the first call, it blocked the
            # loop while upstream bytes piled up, so the first stream reached its client all
            # at once at the end; awaited here, it delayed every start. So: off the loop,
            # while the run starts serving; a call awaits it before forwarding.
            self._wire = asyncio.ensure_future(
                asyncio.to_thread(importlib.import_module, "agentreel.llm.wire")
            )
            # A client of its own: no connection or cookie another run's upstream left.
            self._client = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                auto_decompress=False,
                connector=aiohttp.TCPConnector(limit=0),
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        self._server, self.token = server, token

    async def close(self) -> None:
        """Stop serving, flush every log (record: write the fixture) and the report.

        A stream still in flight gets ``SHUTDOWN_GRACE`` seconds to end, then is cut: what
        it streamed so far is kept and sealed as interrupted."""
        if self._server is not None and self.token is not None:
            await self._server.close_run(self)
        else:
            await self._finish()

    async def _finish(self) -> None:
        if self._closed:
            return
        self._closed = True
        serving = _SERVING.set(self.token)
        try:
            await self._end_in_flight()
            if self._client is not None:
                await self._client.close()
            if self._wire is not None:
                with suppress(Exception):  # an import error already failed the calls that met it
                    await self._wire
            if self.recorder is not None:
                self._close_recording(self.recorder)
            if self.served is not None:
                self.served.close()
                self.errors += self.served.errors
            if self.provider is not None:
                self.provider.close()
                for line in _unconsumed(self.provider):
                    logger.warning("%s", line)
        finally:
            _SERVING.reset(serving)

    def _close_recording(self, recorder: Recorder) -> None:
        """Seal the logs, arrange them and (``fixture``) write the fixture — never losing
        them: if anything here fails, or a record was refused, the logs stay where they
        were written and ``errors`` says first what failed, where, and where they are."""
        fixture = self.settings.fixture
        kept = recorder.sessions_root
        stage = "closing the recorded session logs"
        try:
            recorder.close()
            if fixture is not None and not recorder.errors:
                stage = f"writing the fixture {fixture}"
                write_fixture(kept, fixture, self.settings.cwd, scan=recorder.scan)
                write_models(fixture, self._listings)
        except Exception as exc:  # whatever it is, the recording must survive it
            self.errors.insert(0, _close_failure(stage, exc, fixture, kept))
            self.errors += recorder.errors
            return
        if recorder.errors and fixture is not None:
            # Said with each refusal (once each): no fixture, and where the rest is kept.
            self.errors += [
                f"record: {error}. So the fixture {fixture} was not written; the other "
                f"session logs are kept in {kept}"
                for error in recorder.errors
            ]
            return
        self.errors += recorder.errors
        if self._temp_root is not None:
            remove_tree(self._temp_root)

    async def _end_in_flight(self) -> None:
        current = asyncio.current_task()
        tasks = {task for task in self._in_flight if task is not current}
        if not tasks:
            return
        _done, pending = await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    @property
    def closed(self) -> bool:
        return self._closed

    def log_filter(self) -> RunLogFilter:
        """A filter for a log handler that should see this run's proxy log lines only."""
        return RunLogFilter(self.token)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the proxy is not running; use start_proxy(...) or await start()")
        return self._server.port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (``/r/<token>`` added for a run of a shared server):
        the Anthropic base URL."""
        if self._server is None:
            raise RuntimeError("the proxy is not running; use start_proxy(...) or await start()")
        prefix = f"/{RUN_PREFIX}/{self.token}" if self.token is not None else ""
        return self._server.base_url + prefix

    @property
    def openai_base_url(self) -> str:
        """``<base_url>/v1``: what the ``openai`` SDK wants as ``base_url``."""
        return f"{self.base_url}/v1"

    def url_for(self, token: str) -> str:
        """``<base_url>/s/<token>``: a base URL that identifies its caller as ``token``."""
        return f"{self.base_url}/s/{token}"

    def environment(self) -> dict[str, str]:
        """The variables that point the common SDKs and agents at this proxy; in replay
        also ``DUMMY_KEY`` as each SDK's key (replay is keyless, but some SDKs refuse to
        start without one). Record leaves the keys to the caller: they go upstream."""
        variables = {
            "OPENAI_BASE_URL": self.openai_base_url,
            "ANTHROPIC_BASE_URL": self.base_url,
            "AGENTREEL_PROXY_URL": self.base_url,
        }
        if self.mode == "replay":
            variables.update(dict.fromkeys(KEY_VARIABLES, DUMMY_KEY))
        return variables

    # -- requests --------------------------------------------------------------------------

    async def handle(self, request: web.Request, route: Route) -> web.StreamResponse:
        """Serve one request routed to this run (its own task, tracked until it ends)."""
        task = asyncio.current_task()
        assert task is not None
        self._in_flight.add(task)
        serving = _SERVING.set(self.token)
        try:
            return await self._serve(request, route)
        except RequestError as error:
            return _json_response(error.status, error_body(route.api, error.status, error.message))
        finally:
            _SERVING.reset(serving)
            self._in_flight.discard(task)

    async def _serve(self, request: web.Request, route: Route) -> web.StreamResponse:
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise RequestError(
                413,
                f"agentreel proxy: request body larger than {self.settings.max_body_bytes} "
                "bytes (max_body_bytes / --max-body-bytes raises the limit)",
            ) from None
        if route.endpoint == "models":
            if self.recorder is not None:
                return await self._pass_through(request, route, raw)
            return self._recorded_models(request.query_string)
        try:
            body = json.loads(raw or b"{}")
        except ValueError as exc:
            raise RequestError(
                400, f"agentreel proxy: the request body is not JSON: {exc}"
            ) from None
        if not isinstance(body, dict):
            raise RequestError(400, "agentreel proxy: the request body is not a JSON object")
        if route.endpoint == "count_tokens":
            if self.recorder is not None:
                return await self._pass_through(request, route, raw)
            # Replay answers from the request alone: deterministic, never part of a script.
            return _json_response(200, msgspec.json.encode({"input_tokens": max(1, len(raw) // 4)}))
        parsed = parse_request(route.api, self.masks.value(body))
        identity = resolve_identity(request.headers, body, route.token)
        if self.recorder is not None:
            return await self._record(request, route, raw, parsed, identity)
        return await self._replay(request, route, parsed, identity)

    def _recorded_models(self, query: str) -> web.StreamResponse:
        assert self.provider is not None
        listing = listing_for(self._listings, query, self.provider.recording)
        return web.Response(
            status=listing.status,
            body=listing.body.encode(),
            headers={"content-type": listing.content_type},
        )

    # -- record ----------------------------------------------------------------------------

    def _upstream_url(self, route: Route, query: str) -> str:
        assert self.settings.upstream is not None
        base = self.settings.upstream.rstrip("/")
        path = route.upstream_path
        if base.endswith("/v1") and path.startswith("/v1/"):
            path = path[3:]
        return base + path + (f"?{query}" if query else "")

    def _forwarded_headers(self, request: web.Request) -> dict[str, str]:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers["accept-encoding"] = "identity"
        return headers

    async def _pass_through(
        self, request: web.Request, route: Route, raw: bytes
    ) -> web.StreamResponse:
        """Record mode's answer to a request that is no model call (``GET /v1/models``,
        ``count_tokens``): forwarded, and the upstream's status, headers and body returned
        as they came; a models listing is kept for replay (``_models``)."""
        recorder, client = self.recorder, self._client
        assert recorder is not None
        assert client is not None
        recorder.note_secrets(request.headers)
        url = self._upstream_url(route, request.query_string)
        try:
            async with client.request(
                request.method, url, data=raw or None, headers=self._forwarded_headers(request)
            ) as upstream:
                body = await upstream.read()
                status, headers = upstream.status, upstream.headers
        except aiohttp.ClientError as exc:
            raise RequestError(502, _unreachable(url, exc)) from None
        if route.endpoint == "models":
            self._keep_listing(request.query_string, status, headers, body)
        out_headers = {k: v for k, v in headers.items() if k.lower() not in _RESPONSE_DROP}
        return web.Response(status=status, body=body, headers=out_headers)

    def _keep_listing(
        self, query: str, status: int, headers: Mapping[str, str], body: bytes
    ) -> None:
        recorder = self.recorder
        assert recorder is not None
        text = body.decode("utf-8", "replace")
        if recorder.holds_secret(text):
            message = (
                f"refusing to write a live API key into {MODELS_FILE}: the upstream's GET "
                "/v1/models answer contains a key a client sent in its auth header. Nothing "
                "was written; find out why the listing holds the key before recording again"
            )
            logger.error("%s", message)
            self.errors.append(message)
            return
        content_type = headers.get("content-type", "application/json")
        self._listings[query] = ModelsListing(status=status, content_type=content_type, body=text)
        # Written as it arrives, beside the logs: a crash loses no listing either.
        write_models(recorder.sessions_root, self._listings)

    async def _record(
        self,
        request: web.Request,
        route: Route,
        raw: bytes,
        parsed: ParsedRequest,
        identity: Identity,
    ) -> web.StreamResponse:
        recorder, client = self.recorder, self._client
        assert recorder is not None
        assert client is not None
        recorder.note_secrets(request.headers)
        headers = self._forwarded_headers(request)
        header = build_request_header(
            parsed.options(), turn=0, step=0, cwd=recorder.cwd, api=parsed.api
        )
        call = recorder.begin(identity, header, parsed)
        url = self._upstream_url(route, request.query_string)
        try:
            if self._wire is not None:
                # The decoders' SDK import (``start``); shielded: a cancelled call must not
                # cancel it for the others.
                await asyncio.shield(self._wire)
            upstream = await client.post(url, data=raw, headers=headers)
        except aiohttp.ClientError as exc:
            call.cut(f"could not reach the upstream {url}: {exc}")
            raise RequestError(502, _unreachable(url, exc)) from None
        except asyncio.CancelledError:
            call.interrupt(identity.describe())
            raise
        try:
            return await self._relay(request, route, upstream, call)
        except asyncio.CancelledError:
            # The proxy is stopping (its grace for streams in flight is over).
            call.interrupt(identity.describe())
            raise
        finally:
            upstream.release()
            if not call.finished:
                call.abandon()

    async def _relay(
        self,
        request: web.Request,
        route: Route,
        upstream: aiohttp.ClientResponse,
        call: CallRecording,
    ) -> web.StreamResponse:
        out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _RESPONSE_DROP}
        content_type = upstream.headers.get("content-type", "")
        if upstream.status != 200:
            body = await upstream.read()
            call.http_error(upstream.status, upstream.headers, body)
            return web.Response(status=upstream.status, body=body, headers=out_headers)
        wire = decoder(route.api, self.settings.upstream or "")
        if "text/event-stream" not in content_type:
            body = await upstream.read()
            try:
                call.chunks(wire.body(json.loads(body)))
            except (ValueError, StreamInterruptedError, AttributeError, TypeError) as exc:
                call.cut(f"the upstream's response body could not be read: {exc}")
            return web.Response(status=200, body=body, headers=out_headers)
        response = web.StreamResponse(status=200, headers=out_headers)
        await response.prepare(request)
        splitter = SseSplitter()
        client_gone = False
        decoding = True
        try:
            async for data in upstream.content.iter_any():
                if not client_gone:
                    try:
                        await response.write(data)
                    except (ConnectionResetError, aiohttp.ClientConnectionResetError):
                        client_gone = True
                        logger.info(
                            "the client of session %s left mid-stream; recording the rest",
                            call.lane.session.id,
                        )
                if decoding:
                    decoding = _decode(splitter.feed(data), wire, call)
        except aiohttp.ClientPayloadError as exc:
            call.cut(f"the upstream cut the stream: {exc}")
            _abort(request)
            return response
        if decoding:
            try:
                call.chunks(wire.finish())
            except StreamInterruptedError as exc:
                call.cut(exc.message)
                _abort(request)
                return response
        if not client_gone:
            with suppress(ConnectionResetError):
                await response.write_eof()
        return response

    # -- replay ----------------------------------------------------------------------------

    def _served_call(self, parsed: ParsedRequest, script: Script) -> CallRecording | None:
        """Begin one served call in the replay's own session logs (``served``), if kept:
        in the log of the recorded script it was bound to."""
        served = self.served
        if served is None:
            return None
        # Written in the recording's own format: a recording from before the wire API was
        # logged gets served logs without it, so its goldens stay byte-identical.
        api = parsed.api if self._recorded_apis else None
        header = build_request_header(parsed.options(), turn=0, step=0, cwd=served.cwd, api=api)
        if self._partial.naming(header) is not None:
            return None
        return served.begin_bound(script, header)

    async def _replay(
        self, request: web.Request, route: Route, parsed: ParsedRequest, identity: Identity
    ) -> web.StreamResponse:
        provider = self.provider
        assert provider is not None
        options = parsed.options(identity.session, identity.parent, identity.spawn_index)
        try:
            bound = provider.stream_bound(options, api=parsed.api)
        except ReplayError as error:
            message = f"agentreel proxy replay ({identity.describe()}): {error}"
            logger.error("%s", message)
            return _json_response(
                REPLAY_ERROR_STATUS,
                error_body(route.api, REPLAY_ERROR_STATUS, message, type(error).__name__),
            )
        stream = bound.chunks
        served = self._served_call(parsed, bound.script)
        try:
            if isinstance(stream, RecordedStream):
                chunks = list(stream.chunks)
                if served is not None:
                    served.chunks(chunks)
                wire_id = response_id(route.api, msgspec.json.encode(chunks).decode())
                return await self._send_replayed(request, parsed, identity, chunks, None, wire_id)
            meta = _recorded_meta(bound)
            return await self._replay_as_it_comes(request, parsed, identity, stream, served, meta)
        except asyncio.CancelledError:
            # The proxy is stopping while this call streams (a hang override, pacing).
            provider.interrupted(bound.script, bound.position)
            if served is not None:
                served.interrupt(identity.describe())
            else:
                logger.warning(
                    "%s: a replayed call was still streaming when the proxy stopped",
                    identity.describe(),
                )
            raise
        finally:
            if served is not None:
                served.abandon()  # a replayed stream that broke off ends as recorded: cut

    async def _replay_as_it_comes(
        self,
        request: web.Request,
        parsed: ParsedRequest,
        identity: Identity,
        stream: AsyncIterator[Chunk],
        served: CallRecording | None,
        meta: ResponseMeta | None,
    ) -> web.StreamResponse:
        """A call whose chunks take time (a hang or throw override, pacing): each reaches
        the client (and the served log) as the provider yields it, as in-process replay
        hands it to the agent. The closing frames follow once the call has ended; a
        non-streaming request gets its body then. (An Anthropic ``message_start`` sent
        before the call's usage arrived carries no input token counts.) ``meta``: the
        recorded call's ``ResponseMeta``, so the frames sent before its finish carry the
        same ids and model as those after it."""
        chunks: list[Chunk] = []
        failure: LlmError | None = None
        response: web.StreamResponse | None = None
        sent = 0
        wire_id = ""
        try:
            async for chunk in stream:
                chunks.append(chunk)
                if served is not None:
                    served.chunk(chunk)
                if isinstance(chunk, Usage | Finish):
                    continue  # they shape the closing frames (and a recorded HTTP error)
                if isinstance(chunk, BlockStart) and chunk.block_type == "tool-call":
                    continue  # its frame names the tool, which its first delta carries
                if not parsed.stream:
                    continue
                if response is None:
                    wire_id = response_id(parsed.api, msgspec.json.encode(chunk).decode())
                    response = await _prepare_sse(request)
                deltas = [c for c in chunks if not isinstance(c, Usage | Finish)]
                frames = _without_ending(parsed.api, encode_stream(parsed, deltas, wire_id, meta))
                for frame in frames[sent:]:
                    await response.write(frame)
                sent = len(frames)
        except LlmError as error:
            failure = error
        except ConnectionResetError:
            logger.info("the client of %s left mid-stream", identity.describe())
            assert response is not None  # only writes raise it
            return response
        if response is None:
            wire_id = response_id(parsed.api, msgspec.json.encode(chunks).decode())
        return await self._send_replayed(
            request,
            parsed,
            identity,
            chunks,
            failure,
            wire_id,
            response=response,
            sent=sent,
            meta=meta,
        )

    async def _send_replayed(
        self,
        request: web.Request,
        parsed: ParsedRequest,
        identity: Identity,
        chunks: list[Chunk],
        failure: LlmError | None,
        wire_id: str,
        *,
        response: web.StreamResponse | None = None,
        sent: int = 0,
        meta: ResponseMeta | None = None,
    ) -> web.StreamResponse:
        """Answer with a replayed call in the request's wire API; ``response`` and ``sent``:
        the stream already started and how many of its frames went out; ``meta``: the
        recorded ``ResponseMeta`` when ``chunks`` may lack the finish carrying it."""
        finish = chunks[-1] if chunks and isinstance(chunks[-1], Finish) else None
        if response is None:
            if finish is not None and finish.code and finish.code.startswith(HTTP_CODE_PREFIX):
                return _recorded_http_error(finish)
            if not parsed.stream:
                if failure is not None:
                    status = failure.status or 500
                    return _json_response(status, error_body(parsed.api, status, str(failure)))
                return _json_response(200, encode_body(parsed, chunks, wire_id, meta))
            response = await _prepare_sse(request)
        special = finish is not None and finish.code in (CUT_CODE, STREAM_ERROR_CODE)
        frames = encode_stream(parsed, chunks[:-1] if special else chunks, wire_id, meta)
        if special or failure is not None:
            frames = _without_ending(parsed.api, frames)
        try:
            for frame in frames[sent:]:
                await response.write(frame)
            if finish is not None and finish.code == STREAM_ERROR_CODE:
                name = b"event: error\n" if parsed.api != "chat" else b""
                await response.write(name + b"data: " + (finish.message or "").encode() + b"\n\n")
            elif (finish is not None and finish.code == CUT_CODE) or failure is not None:
                _abort(request)
                return response
            await response.write_eof()
        except ConnectionResetError:
            logger.info("the client of %s left mid-stream", identity.describe())
        return response


class ProxyServer:
    """The proxy's HTTP server (127.0.0.1), routing each request to the run it names.

    ``open_run`` registers a run under a fresh ``/r/<token>/`` prefix (its ``base_url``);
    ``close_run`` stops it and flushes exactly its logs and report. A request naming a run
    that is not open — unknown, or finished — is a JSON error that names it, in the API's
    own error format: it is never served by another run. A server made for one run
    (``default``, what ``Proxy`` and the CLI use) serves it at the root, without a prefix.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_body_bytes: int = DEFAULT_MAX_BODY,
        default: ProxyRun | None = None,
    ) -> None:
        self.host = host
        self._wanted_port = port
        self.max_body_bytes = max_body_bytes
        self._default = default
        self._runs: dict[str, ProxyRun] = {}
        self._finished: set[str] = set()
        self._numbers = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    async def start(self) -> ProxyServer:
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=SHUTDOWN_GRACE
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self._wanted_port, reuse_address=True)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        self._port = int(server.sockets[0].getsockname()[1])
        if self._default is not None:
            await self._default._open(self, None)
        mode = f" ({self._default.mode})" if self._default is not None else ""
        logger.info("agentreel proxy%s listening on %s", mode, self.base_url)
        return self

    async def open_run(self, run: ProxyRun | ProxySettings) -> ProxyRun:
        """Serve ``run`` (or a run made from ``settings``) under a prefix of its own.

        The run's ``host``, ``port`` and ``max_body_bytes`` are the server's. Building a
        ``ProxyRun`` first (it loads the fixture) keeps that work off the server's loop."""
        if self._runner is None:
            raise RuntimeError("the proxy server is not running; await start() first")
        if isinstance(run, ProxySettings):
            run = ProxyRun(run)
        token = f"run{next(self._numbers)}-{secrets.token_hex(4)}"
        await run._open(self, token)
        self._runs[token] = run
        serving = _SERVING.set(token)
        logger.info("agentreel proxy run (%s) at %s", run.mode, run.base_url)
        _SERVING.reset(serving)
        return run

    async def close_run(self, run: ProxyRun) -> None:
        """Stop serving ``run`` (later requests naming it are refused) and flush its logs
        and report; the server and its other runs go on."""
        if run.token is not None and self._runs.get(run.token) is run:
            del self._runs[run.token]
            self._finished.add(run.token)
        await run._finish()

    async def close(self) -> None:
        """Stop listening (streams in flight get ``SHUTDOWN_GRACE``), then close every run."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        runs = list(self._runs.values())
        self._finished.update(self._runs)
        self._runs.clear()
        if self._default is not None:
            runs.insert(0, self._default)
        for run in runs:
            await run._finish()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the proxy is not running; use start_proxy(...) or await start()")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: the server's root."""
        return f"http://{self.host}:{self.port}"

    @property
    def runs(self) -> int:
        """How many runs are open now."""
        return len(self._runs)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        route = match_route(request.method, request.path)
        if route is None:
            return _not_found(request)
        run = self._runs.get(route.run) if route.run is not None else self._default
        if run is None:
            return self._no_run(route)
        return await run.handle(request, route)

    def _no_run(self, route: Route) -> web.StreamResponse:
        if route.run is None:
            message = (
                f"agentreel proxy: this server serves each run under its own /{RUN_PREFIX}/<run>/ "
                "prefix, and the request names none; point the client at its run's base URL "
                "(ProxyRun.base_url)"
            )
        elif route.run in self._finished:
            message = (
                f"agentreel proxy: run {route.run!r} has finished (its logs and report are "
                "written); a request after a run's end is not served by any other run — "
                "something of that run outlived it (a process left running?)"
            )
        else:
            message = (
                f"agentreel proxy: no run {route.run!r} on this server (open runs: "
                f"{', '.join(sorted(self._runs)) or 'none'}); point the client at the base "
                "URL its run was given"
            )
        logger.warning("%s", message)
        return _json_response(404, error_body(route.api, 404, message))


class Proxy(ProxyRun):
    """A running proxy of one run with a server of its own, at the server's root (what
    ``start_proxy`` and the CLI run). ``base_url`` is what clients point at (``/v1`` is
    added by OpenAI clients' base URL, ``openai_base_url``); ``url_for(token)`` gives a
    child process its own ``/s/<token>`` base URL."""

    def __init__(self, settings: ProxySettings) -> None:
        super().__init__(settings)
        self._own_server = ProxyServer(
            host=settings.host,
            port=settings.port,
            max_body_bytes=settings.max_body_bytes,
            default=self,
        )

    async def start(self) -> Proxy:
        await self._own_server.start()
        return self

    async def close(self) -> None:
        """Stop serving, flush every log (record: write the fixture) and the report."""
        await self._own_server.close()


def _close_failure(stage: str, exc: BaseException, fixture: Path | None, kept: Path) -> str:
    """What to say when closing a recording failed: what, where, where the logs are, what next."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    outcome = (
        f"the fixture {fixture} was not written"
        if fixture is not None
        else "the logs' headers may not be arranged (which lane is each caller's session)"
    )
    return (
        f"record: {stage} failed ({type(exc).__name__}: {exc}{where}), so "
        f"{outcome}. Nothing recorded is lost: every session log is kept in {kept}. Keep that "
        "directory and report this error with it (a bug in the proxy); record again once fixed"
    )


def _decode(events: Sequence[Any], wire: Any, call: CallRecording) -> bool:
    """Record the chunks of ``events``; False once the stream holds an error event."""
    for event in events:
        try:
            call.chunks(wire.event(event))
        except UpstreamStreamError as error:
            call.stream_error(error.raw)
            return False
        except (ValueError, AttributeError, TypeError, KeyError) as exc:
            call.cut(f"an upstream event could not be read ({exc}): {event.data[:200]!r}")
            return False
    return True


def _unreachable(url: str, exc: Exception) -> str:
    return f"agentreel proxy: could not reach the upstream {url}: {exc}. Check --upstream"


def _recorded_meta(bound: BoundCall) -> ResponseMeta | None:
    """The bound call's recorded ``ResponseMeta`` (on its finish), if it has one."""
    calls = bound.script.calls
    if not 0 <= bound.position < len(calls) or not calls[bound.position].chunks:
        return None
    last = calls[bound.position].chunks[-1]
    return last.response if isinstance(last, Finish) else None


def _without_ending(api: Api, frames: list[bytes]) -> list[bytes]:
    """A stream's frames minus those that end it (a replayed cut or error ends otherwise)."""
    endings = {
        "chat": (b"data: [DONE]",),
        "messages": (b"event: message_delta", b"event: message_stop"),
        "responses": (
            b"event: response.completed",
            b"event: response.incomplete",
            b"event: response.failed",
        ),
    }[api]
    return [frame for frame in frames if not frame.startswith(endings)]


async def _prepare_sse(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        status=200,
        headers={"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"},
    )
    await response.prepare(request)
    return response


def _recorded_http_error(finish: Finish) -> web.StreamResponse:
    payload = json.loads(finish.message or "{}")
    headers = dict(payload.get("headers") or {})
    headers.setdefault("content-type", "application/json")
    return web.Response(
        status=int(payload.get("status") or 500),
        body=str(payload.get("body") or "").encode(),
        headers=headers,
    )


def _abort(request: web.Request) -> None:
    """Drop the client's connection without ending the body: a cut stream, as recorded."""
    transport = request.transport
    if transport is not None:
        transport.abort()


def _not_found(request: web.Request) -> web.StreamResponse:
    upgrade = request.headers.get("upgrade", "")
    what = f"{request.method} {request.path}"
    if upgrade:
        what += f" (Upgrade: {upgrade}; the proxy speaks HTTP only, POST instead)"
    message = f"agentreel proxy: no endpoint {what}. Supported: " + "; ".join(SUPPORTED_PATHS)
    return _json_response(404, error_body(api_for_path(request.path), 404, message))


def _json_response(status: int, body: bytes) -> web.Response:
    return web.Response(status=status, body=body, content_type="application/json")


def _unconsumed(provider: ReplayProvider) -> list[str]:
    try:
        provider.assert_consumed()
    except UnconsumedScriptError as error:
        return [str(error)]
    return []


@asynccontextmanager
async def start_proxy(
    mode: Mode,
    *,
    upstream: str | None = None,
    sessions_root: str | os.PathLike[str] | None = None,
    fixture: str | os.PathLike[str] | None = None,
    report: str | os.PathLike[str] | None = None,
    port: int = 0,
    host: str = "127.0.0.1",
    masks: Sequence[str] = (),
    partial_lanes: Sequence[str] = (),
    cwd: str | os.PathLike[str] | None = None,
    scenario: str | None = None,
    drift: DriftMode = "error",
    max_body_bytes: int = DEFAULT_MAX_BODY,
    allow_secrets: tuple[str, ...] = (),
) -> AsyncIterator[Proxy]:
    """Run a proxy for the ``async with`` block; on exit every log, fixture and report is written.

    ``mode="record"``: forward to ``upstream`` and record into ``sessions_root`` (logs) or
    ``fixture`` (harvested into a fixture directory on exit). ``mode="replay"``: answer from
    ``fixture``, keyless and offline, writing the consumption report to ``report``; with
    ``sessions_root`` it also writes the session logs of what it served there, as record
    mode would (what a harness compares with its goldens).
    """
    proxy = Proxy(
        ProxySettings(
            mode=mode,
            upstream=upstream,
            sessions_root=Path(sessions_root) if sessions_root is not None else None,
            fixture=Path(fixture) if fixture is not None else None,
            report=Path(report) if report is not None else None,
            host=host,
            port=port,
            masks=tuple(masks),
            partial_lanes=tuple(partial_lanes),
            cwd=os.fspath(cwd) if cwd is not None else os.getcwd(),
            scenario=scenario,
            drift=drift,
            max_body_bytes=max_body_bytes,
            allow_secrets=allow_secrets,
        )
    )
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
