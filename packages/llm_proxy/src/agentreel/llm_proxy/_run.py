"""One run of the proxy (``ProxyRun``): its lifecycle — opened on a server, closed with
every log, fixture and report written — and its requests, each read, parsed and handed to
the record side (``_record_side``) or the replay side (``_replay_side``)."""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import json
import logging
import tempfile
import traceback
from contextlib import suppress
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import aiohttp
import msgspec
from aiohttp import web

from agentreel.llm.wire import wire_api
from agentreel.llm_proxy._errors import error_body
from agentreel.llm_proxy._fixture_output import remove_tree, write_fixture
from agentreel.llm_proxy._http import json_response
from agentreel.llm_proxy._identity import resolve_identity
from agentreel.llm_proxy._masks import Masks
from agentreel.llm_proxy._models import (
    ModelsListing,
    listing_key,
    read_models,
    write_models,
)
from agentreel.llm_proxy._record_side import RecordSide
from agentreel.llm_proxy._recorder import Recorder
from agentreel.llm_proxy._replay_side import ReplaySide
from agentreel.llm_proxy._requests import parse_request
from agentreel.llm_proxy._routes import (
    RUN_PREFIX,
    Route,
    unspoken_summary,
)
from agentreel.llm_proxy._served_logs import ServedLogs
from agentreel.llm_proxy._settings import (
    DUMMY_KEY,
    KEY_VARIABLES,
    SHUTDOWN_GRACE,
    Mode,
    ProxySettings,
)
from agentreel.llm_proxy._verbatim import (
    VerbatimCall,
    read_verbatim,
    verbatim_file,
    write_verbatim,
)
from agentreel.llm_proxy.exceptions import RequestError
from agentreel.llm_replay import (
    DriftTolerantReplayProvider,
    LiveCallers,
    PartialLanes,
    ReplayProvider,
    UnconsumedScriptError,
)
from agentreel.session import MODELS_FILE, VERBATIM_FILE, SecretFoundError

logger = logging.getLogger("agentreel.llm_proxy")


_SERVING: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agentreel_proxy_run", default=None
)
"""The run whose request (or close) the current task is serving: what ``RunLogFilter``
tells the runs' log lines apart by. Each aiohttp request is its own task, so setting it in
one request's handler is seen by everything that handler calls, and by nothing else."""


class RunHost(Protocol):
    """What a run needs of the server it is served by (``_server.ProxyServer``): where it
    listens, and closing the run there. A protocol, so the server's module imports the
    run's and not the other way round."""

    @property
    def port(self) -> int: ...

    @property
    def base_url(self) -> str: ...

    async def close_run(self, run: ProxyRun) -> None: ...


class RunLogFilter(logging.Filter):
    """Passes the proxy's log records emitted while serving or closing one run — so a host
    running several runs on one server can give each its own log file."""

    def __init__(self, token: str | None) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        return _SERVING.get() == self.token


class ProxyRun(RecordSide, ReplaySide):
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
        self.masks = Masks(settings.replay.masks, cwd=settings.cwd)
        self.older_masks: Masks | None = None
        """Replay of a recording made with an older built-in mask set: that set."""
        self.mode: Mode = settings.mode
        self.token: str | None = None
        self._server: RunHost | None = None
        self._client: aiohttp.ClientSession | None = None
        self._temp_root: Path | None = None
        self._in_flight: set[asyncio.Task[Any]] = set()
        self.recorder: Recorder | None = None
        self.provider: ReplayProvider | None = None
        # Replay with ``live_upstream`` (SPEC 20): the callers that went live.
        self.live: LiveCallers | None = None
        # Replay with ``sessions_root``: the session logs of what was served, written as
        # record writes them — the re-persisted logs a harness diffs with its goldens.
        self.served: ServedLogs | None = None
        self._recorded_apis = False
        # Partial lanes (side calls that vary with timing) are left out of the served logs:
        # whether and how far they ran is not part of what a harness compares.
        self._partial = PartialLanes(settings.replay.partial_lanes)
        self.errors: list[str] = []
        self.unspoken: list[str] = []
        """``METHOD path`` of each request meant for this run on a path the proxy does not
        speak (answered 404): a Cohere client pointed here, say."""
        self.warnings: list[str] = []
        """Record: what the recorder had to guess (``Recorder.warnings``), each naming the
        run's scenario or fixture — filled at close, beside ``errors``. Not a failure: the
        recording is kept; whoever ran it prints them at its end."""
        self._closed = False
        self._wire: asyncio.Future[ModuleType] | None = None
        # GET /v1/models answers: passed through and kept (record), or as recorded (replay).
        self._listings: dict[str, ModelsListing] = {}
        # Replay: each recorded call's answer as the upstream sent it (``_verbatim``).
        self._verbatim: dict[tuple[str, int], VerbatimCall] = {}
        if settings.mode == "record":
            root = settings.sessions_root
            if root is None:
                self._temp_root = Path(tempfile.mkdtemp(prefix="agentreel-proxy-"))
                root = self._temp_root
            self.recorder = Recorder(
                root,
                settings.cwd,
                self.masks.text,
                allow_secrets=settings.record.allow_secrets,
                captures=settings.replay.captures,
            )
        else:
            assert settings.fixture is not None
            if settings.sessions_root is not None:
                self.served = ServedLogs(settings.sessions_root, settings.cwd, self.masks.text)
            replay = (
                ReplayProvider if settings.live_upstream is None else DriftTolerantReplayProvider
            )
            self.provider = replay(
                settings.fixture,
                live_cwd=settings.cwd,
                report_path=settings.report,
                scenario=settings.scenario,
                content_binding=True,
                content_mask=self.masks.text,
                settings=settings.replay,
            )
            # A recording made with an older built-in mask set compares its digests with
            # the live request masked with that set (SPEC 15): each request is masked both ways.
            if self.provider.older_masks is not None:
                self.older_masks = Masks(
                    settings.replay.masks, cwd=settings.cwd, version=self.provider.older_masks
                )
            self._recorded_apis = any(
                call.request is not None and call.request.api is not None
                for script in self.provider.recording.scripts
                for call in script.calls
            )
            self._listings = read_models(settings.fixture)
            self._verbatim = read_verbatim(settings.fixture)
            if settings.live_upstream is not None:
                self.live = LiveCallers(self.provider, settings.drifted_report)

    # -- lifecycle -------------------------------------------------------------------------

    async def _open(self, server: RunHost, token: str | None) -> None:
        """Made ready to serve on ``server`` (``ProxyServer.open_run`` calls it)."""
        if self.live is not None:
            self._client = _upstream_client()
        if self.mode == "record":
            # The wire mappers' import (SDK-free now; when it imported both provider SDKs it
            # took seconds on a loaded machine). Imported on the loop at the first call, it
            # blocked the loop while upstream bytes piled up, so the first stream reached
            # its client all at once at the end; awaited here, it delayed every start. So:
            # off the loop, while the run starts serving; a call awaits it before forwarding.
            self._wire = asyncio.ensure_future(
                asyncio.to_thread(importlib.import_module, "agentreel.llm.wire.mappers")
            )
            self._client = _upstream_client()
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
            if self.live is not None:
                self.live.write_report()
            if self.provider is not None:
                self.provider.close()
                for line in _unconsumed(self.provider):
                    logger.warning("%s", line)
            if self.unspoken and (self.recorder is None or self.recorder.recorded_any):
                # Beside calls that were served (nothing else: said as the run's error).
                said = f"{self.mode} ({self._recording_named()}): " + unspoken_summary(
                    self.unspoken
                )
                self.warnings.append(said)
                logger.warning("%s", said)
            elif self.unspoken:
                # A record run whose logs a caller harvests (a harness scenario), reached
                # only on paths it does not speak: that is why nothing was recorded.
                self.errors.append(
                    "record: no call on a path agentreel speaks, so nothing was recorded: "
                    + unspoken_summary(self.unspoken)
                )
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
            where = self._recording_named()
            self.warnings += [f"record ({where}): {warning}" for warning in recorder.warnings]
            self._scan_listings(recorder)
            if fixture is not None and not recorder.recorded_any and not recorder.errors:
                # A record run nobody called: an empty fixture folder (and the earlier
                # recordings it would replace, gone) is no recording. Say so, write nothing.
                self.errors.append(
                    f"record: {unspoken_summary(self.unspoken)}, and no other call, so "
                    f"nothing was written (the fixture {fixture} left as it was)"
                    if self.unspoken
                    else NO_CALLS_RECORDED.format(where=f"the fixture {fixture}")
                )
                self.unspoken = []
                if self._temp_root is not None:
                    remove_tree(self._temp_root)
                return
            if fixture is not None and not recorder.errors:
                stage = f"writing the fixture {fixture}"
                answers = verbatim_file(recorder.kept_verbatim(), self.settings.cwd)
                # Scanned before anything is written, as the logs are (write_fixture).
                recorder.scan.check({str(fixture / VERBATIM_FILE): answers})
                write_fixture(kept, fixture, self.settings.cwd, scan=recorder.scan)
                write_models(fixture, self._listings)
                write_verbatim(fixture, answers)
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

    def _recording_named(self) -> str:
        """The recording as its user knows it: the harness's scenario, else the fixture,
        else the sessions root the logs are under."""
        if self.settings.scenario is not None:
            return f"scenario {self.settings.scenario}"
        if self.settings.fixture is not None:
            return f"fixture {self.settings.fixture}"
        assert self.recorder is not None
        return f"session logs under {self.recorder.sessions_root}"

    def _scan_listings(self, recorder: Recorder) -> None:
        """The recorded ``GET /v1/models`` answers through the run's secret scan: a hit is
        a refusal like a lane's (no fixture), and the listings kept beside the logs go."""
        bodies = {
            f"{MODELS_FILE} (GET /v1/models{'?' + query if query else ''})": listing.body.encode()
            for query, listing in self._listings.items()
        }
        try:
            recorder.scan.check(bodies)
        except SecretFoundError as found:
            listing = "; ".join(hit.describe() for hit in found.hits)
            recorder.errors.append(
                f"refused to record a credential in the upstream's models listing: {listing} "
                f"(the value is not shown), so no {MODELS_FILE} is kept. Find out why the "
                "upstream's listing holds a key, and record again"
            )
            self._listings.clear()
            write_models(recorder.sessions_root, self._listings)

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
            "GOOGLE_GEMINI_BASE_URL": self.base_url,  # google-genai, Gemini CLI
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
            return json_response(error.status, error_body(route.api, error.status, error.message))
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
        if route.kind == "models":
            if self.recorder is not None:
                return await self._pass_through(request, route, raw)
            return self._recorded_models(listing_key(route, request.headers, request.query))
        try:
            body = json.loads(raw or b"{}")
        except ValueError as exc:
            raise RequestError(
                400, f"agentreel proxy: the request body is not JSON: {exc}"
            ) from None
        if not isinstance(body, dict):
            raise RequestError(400, "agentreel proxy: the request body is not a JSON object")
        if route.kind == "count_tokens":
            if self.recorder is not None:
                return await self._pass_through(request, route, raw)
            # Replay answers from the request alone: deterministic, never part of a script.
            counted = max(1, len(raw) // 4)
            key = wire_api(route.api).count_tokens_key
            return json_response(200, msgspec.json.encode({key: counted}))
        parsed = parse_request(
            route.api,
            self.masks.value(body),
            model=route.model,
            stream=route.stream,
        )
        identity = resolve_identity(request.headers, body, route.token)
        if self.recorder is not None:
            return await self._record(request, route, raw, parsed, identity)
        older = (
            parse_request(
                route.api,
                self.older_masks.value(body),
                model=route.model,
                stream=route.stream,
            )
            if self.older_masks is not None
            else None
        )
        return await self._replay(request, route, parsed, identity, older)


def _upstream_client() -> aiohttp.ClientSession:
    """A client of the run's own: no connection or cookie another run's upstream left."""
    return aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        auto_decompress=False,
        connector=aiohttp.TCPConnector(limit=0),
        cookie_jar=aiohttp.DummyCookieJar(),
    )


NO_CALLS_RECORDED = (
    "record: no model call reached the proxy, so nothing was written ({where} left as it "
    "was); point the agent's base URL at the proxy and run it before stopping the proxy"
)


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


def _unconsumed(provider: ReplayProvider) -> list[str]:
    try:
        provider.assert_consumed()
    except UnconsumedScriptError as error:
        return [str(error)]
    return []
