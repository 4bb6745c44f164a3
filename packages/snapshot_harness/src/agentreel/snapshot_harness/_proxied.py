"""The model backend of a ``[model] via = "proxy"`` scenario: the proxy, as the agent's world.

Record: ``agentreel.llm_proxy`` in front of the stub server (the scenario's rules) or a real
upstream (``[record] base_url``, the key from your environment), writing one session log per
caller and lane. Replay and refresh: the proxy on the scenario's recordings, keyless. Either
way the agent gets a fresh ``HOME`` with the scenario's config files rendered into it, the
proxy's base URL and a key in the variables the scenario names, and every other proxy
variable aimed at a closed port — so the only model it can reach is the proxy. The run's
session logs are the proxy's, not whatever the agent writes itself.

One proxy server per harness process — per pytest-xdist worker, per ``agentreel`` CLI run —
started on first use and closed at exit (``WORKER_PROXY``), instead of one per scenario.
Each scenario opens a run of its own on it: its own base URL (``/r/<run>/``), recorder or
replay provider, served logs, report, masks and partial lanes; closing the run flushes
exactly its logs and report, and a request naming a finished run is refused, so scenarios
stay as independent as with a proxy each. The server serves on its own event loop in a
daemon thread: the harness drives the agent from synchronous code with ``asyncio.run``, and
the proxy must outlive that loop to flush a run's logs and report after its agent exited.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agentreel.session import RECORDING_FILE_PATTERN, rerecord_command
from agentreel.snapshot_harness import _environment as envvars
from agentreel.snapshot_harness._scenario import Mode, RecordConfig, Scenario
from agentreel.snapshot_harness._stub_upstream import stub_upstream
from agentreel.snapshot_harness.exceptions import RecordError, RecordSetupError

if TYPE_CHECKING:  # imported when a proxied scenario runs: the harness pays nothing otherwise
    from agentreel.llm_proxy import DriftedProxy, ProxyRun, ProxyServer, ProxySettings

T = TypeVar("T")

PROXY_LOGS_DIR = "proxy-sessions"
# The proxy's own log lines during a run (the run directory's, kept with ``work_dir``).
PROXY_LOG_FILE = "proxy.log"


@dataclass(frozen=True, slots=True)
class ProxiedRun:
    """What a proxied run hands the runner: the agent's environment and the logs' root;
    once the block has ended, ``warnings``: what the recording proxy had to guess (its
    run's ``warnings``, each naming the scenario and what to do) — not a failure."""

    env: dict[str, str]
    sessions_root: Path
    base_url: str
    warnings: list[str] = field(default_factory=list)
    drifted: list[DriftedProxy] = field(default_factory=list)
    """``record --drifted`` (SPEC 20), once the block has ended: the merge of what drifted
    into a copy of the recording (its ``fixture``, in the run's folder); one at most."""


class WorkerProxy:
    """This process's proxy server, on a private event loop in a daemon thread: started on
    first use, closed at exit (``atexit``), started again if its thread died or the process
    forked. Runs are opened and closed synchronously; an error inside the proxy is raised
    in the caller's thread. ``starts`` counts the servers started (what tests check)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: ProxyServer | None = None
        self._pid: int | None = None
        self.starts = 0

    def _running(self, timeout: float) -> tuple[asyncio.AbstractEventLoop, ProxyServer]:
        with self._lock:
            if self._pid != os.getpid():
                # A forked child holds the parent's objects but not its thread.
                self._loop = self._thread = self._server = None
            thread = self._thread
            if self._server is None or thread is None or not thread.is_alive():
                self._start(timeout)
            assert self._loop is not None
            assert self._server is not None
            return self._loop, self._server

    def _start(self, timeout: float) -> None:
        from agentreel.llm_proxy import ProxyServer

        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=loop.run_forever, name="agentreel-worker-proxy", daemon=True
        )
        thread.start()
        server = ProxyServer()
        _wait(asyncio.run_coroutine_threadsafe(server.start(), loop), timeout)
        self._loop, self._thread, self._server = loop, thread, server
        self._pid = os.getpid()
        self.starts += 1

    def open_run(self, settings: ProxySettings, *, timeout: float) -> ProxyRun:
        """A run of its own for one scenario (its fixture loaded here, off the server's
        loop); bounded by ``timeout``. Record mode's provider SDK import runs in a thread
        of the run's own, so opening does not wait for it; the first recorded call does."""
        from agentreel.llm_proxy import ProxyRun

        run = ProxyRun(settings)
        loop, server = self._running(timeout)
        return _wait(asyncio.run_coroutine_threadsafe(server.open_run(run), loop), timeout)

    def close_run(self, run: ProxyRun) -> None:
        """Stop serving ``run``; returns once its logs and report are written."""
        loop, server = self._loop, self._server
        if loop is None or server is None or self._pid != os.getpid():
            return
        asyncio.run_coroutine_threadsafe(server.close_run(run), loop).result()

    def close(self) -> None:
        """Stop the server (every run still open is flushed) and its thread."""
        with self._lock:
            loop, thread, server = self._loop, self._thread, self._server
            self._loop = self._thread = self._server = None
            if loop is None or thread is None or server is None or self._pid != os.getpid():
                return
        if thread.is_alive():
            asyncio.run_coroutine_threadsafe(server.close(), loop).result()
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
        loop.close()


def _wait(future: concurrent.futures.Future[T], timeout: float) -> T:
    # Bounded by the scenario's timeout, like the rest of the run: starting a run takes
    # long on a busy machine.
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise RecordSetupError(
            f"agentreel proxy did not start listening within {timeout:g}s "
            "(the scenario's timeout); raise timeout in scenario.toml if the machine is busy"
        ) from None


WORKER_PROXY = WorkerProxy()
atexit.register(WORKER_PROXY.close)


@contextlib.contextmanager
def _run_on_worker_proxy(
    settings: ProxySettings, *, timeout: float, log: Path
) -> Iterator[ProxyRun]:
    """A run of ``WORKER_PROXY`` for the block, its proxy log lines to ``log``."""
    run = WORKER_PROXY.open_run(settings, timeout=timeout)
    try:
        with _proxy_log_to(log, run):
            try:
                yield run
            finally:
                WORKER_PROXY.close_run(run)
    finally:
        if not run.closed:
            WORKER_PROXY.close_run(run)


@contextlib.contextmanager
def _proxy_log_to(path: Path, run: ProxyRun) -> Iterator[None]:
    """``run``'s proxy log lines go to ``path`` for the block, not to the terminal (the
    lines of other runs of the same server, if any run at once, go to theirs).

    Everything the proxy logs in a harness run — replay errors, calls left unconsumed — is
    in its report too, and the scenario's failure shows that once, first. Without a handler
    of its own, Python's last-resort handler would print each line a second time, bare, on
    the harness's stderr (``agentreel replay`` output). Handlers above it (pytest's log
    capture, a CLI's logging setup) still get every record.
    """
    from agentreel import llm_proxy

    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.addFilter(run.log_filter())
    proxy_logger = logging.getLogger(llm_proxy.__name__)
    proxy_logger.addHandler(handler)
    try:
        yield
    finally:
        proxy_logger.removeHandler(handler)
        handler.close()


@contextlib.contextmanager
def proxy_backend(
    scenario: Scenario,
    mode: Mode,
    *,
    record: RecordConfig,
    run_dir: Path,
    cwd: Path,
    home: Path,
    report: Path,
    drift_dir: Path | None = None,
) -> Iterator[ProxiedRun]:
    """Run the proxy for the block and build the agent's environment around it."""
    if mode == "drifted":
        with _drifted_backend(scenario, record, run_dir, cwd, home) as proxied:
            yield proxied
        return
    logs_root = run_dir / PROXY_LOGS_DIR
    logs_root.mkdir()
    settings: dict[str, Any] = {
        "mode": "record" if mode == "record" else "replay",
        "sessions_root": logs_root,
        "replay": scenario.replay,
        "cwd": str(cwd),
        "scenario": scenario.name,
    }
    from agentreel.llm_proxy import DUMMY_KEY

    key = DUMMY_KEY
    with contextlib.ExitStack() as stack:
        if mode == "record":
            upstream, key = stack.enter_context(_upstream(scenario, record, key))
            settings["upstream"] = upstream
            settings["record"] = scenario.record.settings
        else:
            settings["fixture"] = scenario.directory.resolve()
            settings["report"] = report
            settings["replay"] = replace(scenario.replay, drift_dir=drift_dir)
        from agentreel.llm_proxy import ProxySettings

        proxy = stack.enter_context(
            _run_on_worker_proxy(
                ProxySettings(**settings),
                timeout=scenario.timeout,
                log=run_dir / PROXY_LOG_FILE,
            )
        )
        env = _agent_environment(scenario, proxy, key, home, cwd)
        proxied = ProxiedRun(env=env, sessions_root=logs_root, base_url=proxy.base_url)
        yield proxied
    proxied.warnings.extend(proxy.warnings)  # the run is closed: its warnings are final
    if mode == "record" and proxy.errors:
        # The proxy refused to write part of the recording (a live key in it) or could not
        # keep it: harvesting what is left would commit a recording that lacks a session.
        raise RecordError(
            f"{scenario.name}: the recording proxy did not keep the whole recording, so "
            "nothing was written:\n  " + "\n  ".join(proxy.errors) + "\nFix what it names, "
            f"then record again: {rerecord_command(scenario.name)}"
        )


def _agent_environment(
    scenario: Scenario, proxy: ProxyRun, key: str, home: Path, cwd: Path
) -> dict[str, str]:
    """The agent's environment around ``proxy``: its base URL and key where ``[model]``
    says, the model files in ``home``."""
    model = scenario.model
    base_url = model.base_url_for(proxy.base_url)
    values = {
        "base_url": base_url,
        "proxy_url": proxy.base_url,
        "key": key,
        "home": str(home),
        "cwd": str(cwd),
        "scenario": str(scenario.directory.resolve()),
    }
    # Anything but loopback goes to a closed port: the proxy is the only model there is.
    env = envvars.offline_proxies()
    env.update(envvars.loopback_bypass())
    env.update(dict.fromkeys(model.base_url_env, base_url))
    env.update(dict.fromkeys(model.key_env, key))
    env.update({name: model.render(text, values) for name, text in model.env.items()})
    for file in model.files:
        target = home / file.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(model.render(file.text, values), encoding="utf-8")
    return env


DRIFTED_COPY_DIR = "drifted-recording"
"""Where a proxied ``record --drifted`` run merges what drifted: a copy of the
recording in the run's folder, written to the scenario only after its trial replay."""


@contextlib.contextmanager
def _drifted_backend(
    scenario: Scenario, record: RecordConfig, run_dir: Path, cwd: Path, home: Path
) -> Iterator[ProxiedRun]:
    """``record --drifted`` through the proxy (SPEC 20): the replay run on a copy of the
    recording, its drifted callers forwarded to the upstream, the record run in front of
    it for the agent; on exit what drifted is merged into the copy."""
    from agentreel.llm_proxy import (
        DUMMY_KEY,
        DriftedProxy,
        drifted_record_settings,
        drifted_replay_settings,
        merge_drifted_run,
    )

    copy = run_dir / DRIFTED_COPY_DIR
    copy.mkdir()
    for path in scenario.directory.iterdir():
        if path.is_file() and RECORDING_FILE_PATTERN.fullmatch(path.name):
            shutil.copy2(path, copy / path.name)
    staging = run_dir / "drifted-staging"
    staging.mkdir()
    common: dict[str, Any] = {"cwd": str(cwd), "scenario": scenario.name, "replay": scenario.replay}
    with contextlib.ExitStack() as stack:
        upstream, key = stack.enter_context(_upstream(scenario, record, DUMMY_KEY))
        replay = stack.enter_context(
            _run_on_worker_proxy(
                drifted_replay_settings(copy, upstream, staging, **common),
                timeout=scenario.timeout,
                log=run_dir / PROXY_LOG_FILE,
            )
        )
        recording = drifted_record_settings(
            replay.base_url, staging, record=scenario.record.settings, **common
        )
        proxy = stack.enter_context(
            _run_on_worker_proxy(
                recording,
                timeout=scenario.timeout,
                log=run_dir / "drifted-record.log",
            )
        )
        env = _agent_environment(scenario, proxy, key, home, cwd)
        proxied = ProxiedRun(env=env, sessions_root=staging, base_url=proxy.base_url)
        yield proxied
    drifted = DriftedProxy(proxy, replay, copy)
    merge_drifted_run(drifted, staging, str(cwd))
    proxied.drifted.append(drifted)
    proxied.warnings.extend(proxy.warnings)


@contextlib.contextmanager
def _upstream(
    scenario: Scenario, record: RecordConfig, dummy_key: str
) -> Iterator[tuple[str, str]]:
    """``(upstream URL, key for the agent)``: the stub server for the block, or a real one."""
    if record.provider != "stub":
        if not record.base_url:
            raise RecordSetupError(
                f"{scenario.name}: recording through the proxy against provider "
                f"{record.provider!r} needs [record] base_url, the upstream to record from"
            )
        name = scenario.model.key_env[0]
        key = os.environ.get(name)
        if not key:
            raise RecordSetupError(
                f"{scenario.name}: recording against {record.base_url} needs the key in "
                f"${name} (the scenario's [model] key_env); export it and record again"
            )
        yield record.base_url, key
        return
    needs = f"{scenario.name}: recording through the proxy with the stub"
    with stub_upstream(record.rules, needs) as server:
        yield server.base_url, dummy_key
