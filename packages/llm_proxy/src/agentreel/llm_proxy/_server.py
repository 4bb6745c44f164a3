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
import dataclasses
import itertools
import logging
import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Unpack

from aiohttp import web

from agentreel.llm_proxy._errors import error_body
from agentreel.llm_proxy._http import json_response, not_found
from agentreel.llm_proxy._routes import (
    RUN_PREFIX,
    Route,
    match_route,
    unspoken_run,
)
from agentreel.llm_proxy._run import _SERVING, ProxyRun
from agentreel.llm_proxy._settings import (
    DEFAULT_MAX_BODY,
    SHUTDOWN_GRACE,
    Mode,
    ProxySettings,
    ProxySettingsKeywords,
)
from agentreel.llm_proxy.exceptions import ProxyConfigError
from agentreel.llm_replay import ReplaySettings
from agentreel.session import RecordSettings

logger = logging.getLogger("agentreel.llm_proxy")


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
            # Kept by the run it was meant for: its end names it (a call did reach us).
            run_name, rest = unspoken_run(request.path)
            meant = self._runs.get(run_name) if run_name is not None else self._default
            if meant is not None:
                meant.unspoken.append(f"{request.method} {rest}")
            return not_found(request)
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
        return json_response(404, error_body(route.api, 404, message))


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
    cwd: str | os.PathLike[str] | None = None,
    scenario: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    record: RecordSettings | None = None,
    replay: ReplaySettings | None = None,
    **settings: Unpack[ProxySettingsKeywords],
) -> AsyncIterator[Proxy]:
    """Run a proxy for the ``async with`` block; on exit every log, fixture and report is written.

    ``mode="record"``: forward to ``upstream`` and record into ``sessions_root`` (logs) or
    ``fixture`` (harvested into a fixture directory on exit). ``mode="replay"``: answer from
    ``fixture``, keyless and offline, writing the consumption report to ``report``; with
    ``sessions_root`` it also writes the session logs of what it served there, as record
    mode would (what a harness compares with its goldens). How calls are recorded and
    replayed is ``record`` (``RecordSettings``: ``allow_secrets``, the sha256 digests the
    secret scan lets through) and ``replay`` (``agentreel.llm_replay.ReplaySettings``),
    each with the keywords of its fields' names laid over: ``masks`` and ``captures``
    (live values carried into served answers: written as ``{{<token>:N}}`` in what record
    mode records, made the live request's values again in what replay serves), ``drift``
    and ``drift_dir`` (a drifted call's full requests, default ``drift/`` beside the
    report), ``partial_lanes``,
    ``schedule="recorded"`` (calls of different sessions and lanes keep their recorded
    order), ``schedule_timeout``, ``schedule_divergence``. A bad one is a
    ``ProxyConfigError`` naming it (a ``RecordSettingsError`` for a record setting).
    """
    given: dict[str, Any] = dict(settings)
    recording = {name: given.pop(name) for name in RecordSettings.names() if name in given}
    try:
        replay_settings = (replay or ReplaySettings()).with_values(given)
    except ValueError as error:
        raise ProxyConfigError(str(error)) from None
    record_settings = dataclasses.replace(record or RecordSettings(), **recording)
    proxy = Proxy(
        ProxySettings(
            mode=mode,
            upstream=upstream,
            sessions_root=Path(sessions_root) if sessions_root is not None else None,
            fixture=Path(fixture) if fixture is not None else None,
            report=Path(report) if report is not None else None,
            host=host,
            port=port,
            cwd=os.fspath(cwd) if cwd is not None else os.getcwd(),
            scenario=scenario,
            max_body_bytes=max_body_bytes,
            record=record_settings,
            replay=replay_settings,
        )
    )
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
