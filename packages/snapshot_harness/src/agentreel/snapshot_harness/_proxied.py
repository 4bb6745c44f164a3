"""The model backend of a ``[model] via = "proxy"`` scenario: the proxy, as the agent's world.

Record: ``agentreel.llm_proxy`` in front of the stub server (the scenario's rules) or a real
upstream (``[record] base_url``, the key from your environment), writing one session log per
caller and lane. Replay and refresh: the proxy on the scenario's recordings, keyless. Either
way the agent gets a fresh ``HOME`` with the scenario's config files rendered into it, the
proxy's base URL and a key in the variables the scenario names, and every other proxy
variable aimed at a closed port — so the only model it can reach is the proxy. The run's
session logs are the proxy's, not whatever the agent writes itself.

The proxy serves on its own event loop in a thread: the harness drives the agent from
synchronous code with ``asyncio.run``, and the proxy must outlive that loop to flush its logs
and report after the agent has exited.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentreel.snapshot_harness import _environment as envvars
from agentreel.snapshot_harness._scenario import Mode, RecordConfig, Scenario
from agentreel.snapshot_harness.exceptions import RecordSetupError

PROXY_LOGS_DIR = "proxy-sessions"
# The proxy's own log lines during a run (the run directory's, kept with ``work_dir``).
PROXY_LOG_FILE = "proxy.log"


@dataclass(frozen=True, slots=True)
class ProxiedRun:
    """What a proxied run hands the runner: the agent's environment and the logs' root."""

    env: dict[str, str]
    sessions_root: Path
    base_url: str


class _ProxyThread:
    """``start_proxy`` on a private event loop in a daemon thread, started and stopped
    synchronously; an error inside the proxy is re-raised in the caller's thread."""

    def __init__(self, settings: dict[str, Any], *, start_timeout: float) -> None:
        self._settings = settings
        self._start_timeout = start_timeout
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.base_url = ""
        self._thread = threading.Thread(target=self._main, name="agentreel-proxy", daemon=True)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # handed to the harness thread, which raises it
            self._error = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        from agentreel.llm_proxy import start_proxy

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with start_proxy(**self._settings) as proxy:
            self.base_url = proxy.base_url
            self._ready.set()
            await self._stop.wait()

    def start(self) -> None:
        self._thread.start()
        # Bounded by the scenario's timeout, like the rest of the run: record mode imports
        # both provider SDKs before it listens, which takes long on a busy machine.
        if not self._ready.wait(self._start_timeout):
            raise RecordSetupError(
                f"agentreel proxy did not start listening within {self._start_timeout:g}s "
                "(the scenario's timeout); raise timeout in scenario.toml if the machine is busy"
            )
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Stop serving; returns once every log and the report are written."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stop.set)
        self._thread.join()
        if self._error is not None:
            raise self._error


@contextlib.contextmanager
def _proxy_log_to(path: Path) -> Iterator[None]:
    """The proxy's log lines go to ``path`` for the block, not to the terminal.

    Everything the proxy logs in a harness run — replay errors, calls left unconsumed — is
    in its report too, and the scenario's failure shows that once, first. Without a handler
    of its own, Python's last-resort handler would print each line a second time, bare, on
    the harness's stderr (``agentreel replay`` output). Handlers above it (pytest's log
    capture, a CLI's logging setup) still get every record.
    """
    from agentreel import llm_proxy

    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
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
) -> Iterator[ProxiedRun]:
    """Run the proxy for the block and build the agent's environment around it."""
    model = scenario.model
    logs_root = run_dir / PROXY_LOGS_DIR
    logs_root.mkdir()
    settings: dict[str, Any] = {
        "mode": "record" if mode == "record" else "replay",
        "sessions_root": logs_root,
        "masks": model.masks,
        "partial_lanes": model.partial_lanes,
        "cwd": str(cwd),
        "scenario": scenario.name,
    }
    key = envvars.PROXY_DUMMY_KEY
    with contextlib.ExitStack() as stack:
        if mode == "record":
            upstream, key = stack.enter_context(_upstream(scenario, record, key))
            settings["upstream"] = upstream
        else:
            settings["fixture"] = scenario.directory.resolve()
            settings["report"] = report
        stack.enter_context(_proxy_log_to(run_dir / PROXY_LOG_FILE))
        proxy = _ProxyThread(settings, start_timeout=scenario.timeout)
        proxy.start()
        stack.callback(proxy.stop)
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
        yield ProxiedRun(env=env, sessions_root=logs_root, base_url=proxy.base_url)


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
    rules = record.rules
    if rules is None or not rules.is_file():
        raise RecordSetupError(
            f"{scenario.name}: recording through the proxy with the stub needs its rules file "
            f"{rules}; create it (rules format: packages/llm/README.md)"
        )
    from agentreel.llm.exceptions import StubRulesError
    from agentreel.llm.stub import StubServer

    try:
        server = StubServer(rules)
    except StubRulesError as exc:
        raise RecordSetupError(f"cannot start the stub model server: {exc}") from None
    with server:
        yield server.base_url, dummy_key
