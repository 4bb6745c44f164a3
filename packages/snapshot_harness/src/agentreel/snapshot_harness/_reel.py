"""The ``agentreel`` pytest fixture: a proxy per test for agents called from a test (SPEC 14).

A test that calls its agent as a function points the agent's SDK at ``agentreel.base_url``;
the test's model calls are recorded once (``--agentreel-record=once``) into
``<test dir>/recordings/<module>/<test>/`` and replayed keylessly on every later run. The
proxy is the harness's: a run of its own on this process's ``WORKER_PROXY`` (``_proxied``),
so every pytest-xdist worker serves and writes only its own tests' recordings.

Record mode forwards to ``upstream``: the configured URL, else the stub model server on the
recording folder's ``stub-rules.toml``, else the one beside the test module. What it
recorded is written when the test passed, after the secret scan; replay fails the test at
its end with a scenario's readable error when a call was unrecorded, drifted or left
unconsumed. Configuration: ``agentreel_config`` (a fixture a user overrides at any scope,
as pytest-recording's ``vcr_config``), then the ``agentreel`` marker's keyword arguments.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import shlex
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentreel.llm_replay import (
    DriftedSummary,
    PriceTableError,
    ReplayError,
    ReplaySettings,
    ReplaySettingsError,
    find_prices,
)
from agentreel.mcp_replay import (
    MCP_RECORDING_PATTERN,
    MCP_RECORDINGS_DIR,
    URL_TRANSPORTS,
    McpDriftError,
    McpEndpoint,
    McpSettings,
    check_replayed,
    check_server_name,
    start_endpoint,
    stdio_command,
)
from agentreel.session import (
    RECORDING_FILE_PATTERN,
    RERECORD_COMMAND_ENV,
    Mask,
    RecordSettings,
    RecordSettingsError,
    rerecord_command,
)
from agentreel.snapshot_harness import _environment as envvars
from agentreel.snapshot_harness._pending import CI_ENV
from agentreel.snapshot_harness._scenario import DEFAULT_STUB_RULES
from agentreel.snapshot_harness.exceptions import HarnessError

if TYPE_CHECKING:
    from agentreel.llm.stub import StubServer
    from agentreel.llm_proxy import ProxyRun

RecordMode = Literal["none", "once", "all", "drifted"]
RECORD_MODES: tuple[RecordMode, ...] = ("none", "once", "all", "drifted")
RECORD_OPTION = "--agentreel-record"
UPSTREAM_OPTION = "--agentreel-upstream"
NETWORK_OPTION = "--agentreel-network"
NETWORK_MODES = ("sealed", "open")
RECORDINGS_DIR = "recordings"
# What the proxy writes into a recording folder (a user's stub-rules.toml stays untouched).
_RECORDED = RECORDING_FILE_PATTERN
_UNSAFE = re.compile(r"[^A-Za-z0-9._\[\]-]+")
# agentreel_config / marker keys: the fixture's own, every replay setting (one
# ``ReplaySettings`` value, checked by it) and every record setting (one ``RecordSettings``).
# Where a test allows a deliberate fake key: its own settings, not a scenario's.
_ALLOWED_IN = "the test's agentreel_config (or agentreel marker) allow_secrets"
_OWN_KEYS = frozenset({"upstream", "record_mode", "cwd", "private_home"})
TRIAL_RECORDING_ENV = "AGENTREEL_TRIAL_RECORDING"
"""Set by a record's trial replay (``plugin``) for the pytest run it starts: ``<node id>
<folder>``, that test replays the fresh recording in ``<folder>`` (nothing is written)."""
_REPLAY_KEYS = frozenset(ReplaySettings.names())
_RECORD_KEYS = frozenset(RecordSettings.names())
_START_TIMEOUT = 120.0


class ReelError(HarnessError):
    """A misuse of the fixture (unknown config key, refused record mode, no upstream)."""


class RecordingUnusableError(ReelError):
    """The test's recording cannot be replayed (a numbering gap, a corrupt file): a failure
    of the test itself, not of its setup — the fixture is fine, the recording is not."""


def _unusable(reel_plan: ReelPlan, error: ReplayError) -> str:
    """``error`` as the test's failure: its node id first, the recording's path as seen from
    where pytest runs, and the re-record command naming the node id (the recording folder's
    name alone is no pytest target)."""
    message = str(error)
    directory = reel_plan.directory
    with contextlib.suppress(ValueError):
        message = message.replace(str(directory), str(directory.relative_to(Path.cwd())))
    by_folder = rerecord_command(directory.name)
    message = message.replace(by_folder, record_command(reel_plan.name, "all"))
    return f"{reel_plan.name}: {type(error).__name__}: {message}"


@dataclass(frozen=True, slots=True)
class ReelPlan:
    """Where a test's recording lives and what this run does with it."""

    name: str  # the test's node id: what messages and the record command name
    directory: Path
    mode: Literal["record", "replay", "drifted"]
    upstream: str | None
    cwd: str
    record: RecordSettings = field(default_factory=RecordSettings)
    replay: ReplaySettings = field(default_factory=ReplaySettings)


def recording_dir(path: Path, node_name: str, cls: str | None) -> Path:
    """``<test dir>/recordings/<module>/<Class.>test[params]/`` (pytest-recording's
    ``cassettes/<module>/<test>.yaml``, a folder: a test may record several sessions)."""
    test = f"{cls}.{node_name}" if cls else node_name
    return path.parent / RECORDINGS_DIR / path.stem / _UNSAFE.sub("-", test)


def has_recording(directory: Path) -> bool:
    return (directory / "session.jsonl").is_file()


def record_command(nodeid: str, mode: RecordMode = "once") -> str:
    return f"pytest {shlex.quote(nodeid)} {RECORD_OPTION}={mode}"


def fixture_rerecord_template(reel_plan: ReelPlan) -> str:
    """The one re-record command every message of a test's run names (``{scenario}``: its
    node id, put in by ``rerecord_command``): the pytest command of the test's record mode
    — ``drifted`` when re-recording what drifted, else ``all`` — never a scenario's
    ``agentreel record``."""
    return record_command("{scenario}", "drifted" if reel_plan.mode == "drifted" else "all")


def refuse_under_ci(mode: str, environ: Mapping[str, str] | None = None) -> None:
    """Recording is refused under ``CI``: a CI run replays what was committed."""
    env = os.environ if environ is None else environ
    if mode != "none" and env.get(CI_ENV):
        raise ReelError(
            f"{RECORD_OPTION}={mode} is refused under CI ({CI_ENV}={env[CI_ENV]}): CI replays "
            f"the committed recordings only. Record locally with {RECORD_OPTION}=once and "
            "commit the recordings/ folders"
        )


def plan(
    *,
    nodeid: str,
    directory: Path,
    module_dir: Path,
    option_mode: RecordMode,
    option_upstream: str | None,
    config: Mapping[str, Any],
    basetemp: Path | None = None,
) -> ReelPlan:
    """Decide record or replay for one test from the option, config and what exists."""
    known = _OWN_KEYS | _REPLAY_KEYS | _RECORD_KEYS
    unknown = set(config) - known
    if unknown:
        raise ReelError(
            f"{nodeid}: unknown agentreel_config / marker key(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(known))}"
        )
    try:
        replay = ReplaySettings.from_mapping(
            {key: config[key] for key in _REPLAY_KEYS & set(config)}
        )
    except ReplaySettingsError as exc:
        raise ReelError(
            f"{nodeid}: agentreel_config / marker key {exc.key}: {exc.problem}"
        ) from None
    try:
        record = RecordSettings.from_mapping(
            {key: config[key] for key in _RECORD_KEYS & set(config)}
        )
    except RecordSettingsError as exc:
        raise ReelError(
            f"{nodeid}: agentreel_config / marker key {exc.setting}: {exc.problem}"
        ) from None
    mode: RecordMode = config.get("record_mode") or option_mode
    trial = os.environ.get(TRIAL_RECORDING_ENV, "")
    if trial.startswith(f"{nodeid} "):
        # A trial replay of a fresh recording (``plugin``): replay it, write nothing.
        directory, mode = Path(trial[len(nodeid) + 1 :]), "none"
    if mode not in RECORD_MODES:
        raise ReelError(f"{nodeid}: record_mode {mode!r} is not one of {', '.join(RECORD_MODES)}")
    refuse_under_ci(mode)
    recorded = has_recording(directory)
    records = mode == "all" or (mode in ("once", "drifted") and not recorded)
    # SPEC 20: replay, the sessions that drift recorded from the upstream, merged.
    drifted = mode == "drifted" and recorded
    if not records and not recorded:
        raise ReelError(
            f"{nodeid}: no recording at {directory} (session.jsonl), and "
            f"{RECORD_OPTION}={mode} only replays. Record it through the stub or your "
            f"upstream: {record_command(nodeid)}"
        )
    upstream = config.get("upstream") or option_upstream
    if (records or drifted) and not upstream:
        rules = [directory / DEFAULT_STUB_RULES, module_dir / DEFAULT_STUB_RULES]
        found = next((r for r in rules if r.is_file()), None)
        if found is None:
            raise ReelError(
                f"{nodeid}: recording needs an upstream: put stub rules at {rules[0]} or "
                f"{rules[1]}, or pass {UPSTREAM_OPTION}=URL (or agentreel_config's upstream)"
            )
        upstream = f"stub:{found}"
    cwd = str(config.get("cwd") or os.getcwd())
    tmp_mask = _tmp_path_mask(basetemp, cwd)
    if tmp_mask is not None:
        replay = dataclasses.replace(replay, masks=(*replay.masks, tmp_mask))
    return ReelPlan(
        name=nodeid,
        directory=directory,
        mode="record" if records else "drifted" if drifted else "replay",
        upstream=upstream,
        cwd=cwd,
        record=record,
        replay=replay,
    )


def _tmp_path_mask(basetemp: Path | None, cwd: str) -> str | None:
    """A mask for the test's ``tmp_path`` when pytest's base temp directory lies inside the
    cwd (``--basetemp=.tmp``, pytester): the proxy's built-in temp rule leaves paths inside
    the cwd to ``{{cwd}}``, so ``{{cwd}}/.tmp/test_x0`` would differ on every run (another
    number, another xdist worker folder). Outside the cwd the built-in rule masks it."""
    if basetemp is None:
        return None
    base = basetemp.resolve()
    root = Path(cwd).resolve()
    if not base.is_relative_to(root):
        return None
    # An xdist worker's base temp is <basetemp>/popen-gw<N>: its own folder goes too.
    base = base.parent if re.fullmatch(r"popen-gw\d+", base.name) else base
    spellings = {re.escape(str(base)), re.escape("{{cwd}}/" + str(base.relative_to(root)))}
    name = r"[^/\s\"'`<>]*[^/\s\"'`<>.,;:!?)\]}]"  # the test's own folder, no punctuation
    return rf"(?:{'|'.join(sorted(spellings))})(?:/popen-gw\d+)?/{name}"


def mcp_masks(regexes: Sequence[str]) -> tuple[Mask, ...]:
    """The fixture's ``masks`` (regexes the proxy writes as ``{{mask:N}}``) for the test's
    MCP recordings: the same regexes, numbered alike, each match written ``{{mask-N}}``."""
    return tuple(Mask(regex, f"mask-{number}") for number, regex in enumerate(regexes, 1))


class Reel:
    """What the ``agentreel`` fixture gives a test: the proxy's URLs, a dummy key, the
    variables an SDK reads, and the identity headers that name a session to the proxy."""

    def __init__(
        self,
        reel_plan: ReelPlan,
        run: ProxyRun,
        mcp: ReelMcp | None = None,
        stubs: list[StubServer] | None = None,
    ) -> None:
        self.plan = reel_plan
        self._run = run
        self._mcp = mcp
        self._stubs = stubs or []  # the stub upstream a record serves from (record's checks)

    def mcp(
        self,
        name: str,
        *,
        command: Sequence[str] | None = None,
        url: str | None = None,
        transport: str = "http",
    ) -> list[str] | str:
        """What the agent uses to reach MCP server ``name`` through agentreel (SPEC 19):
        for a stdio server (``command``, its argv) the shim's argv, which records the
        server's exchanges or, in replay, answers them with no server running; for an HTTP
        server (``url``) the URL of agentreel's endpoint in front of it, over streamable
        HTTP or, with ``transport="sse"`` (``url`` the server's SSE URL), the legacy
        HTTP+SSE transport. The calls are recorded beside the model calls, in the recording
        folder's ``mcp/``."""
        if self._mcp is None:
            raise ReelError(f"{self.plan.name}: agentreel.mcp needs the open fixture")
        return self._mcp.reach(name, command=command, url=url, transport=transport)

    @property
    def mode(self) -> Literal["record", "replay", "drifted"]:
        return self.plan.mode

    @property
    def recording(self) -> Path:
        """This test's recording folder."""
        return self.plan.directory

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (ending in ``/v1``)."""
        return self._run.openai_base_url

    @property
    def anthropic_base_url(self) -> str:
        return self._run.base_url

    @property
    def gemini_base_url(self) -> str:
        """The base URL for ``google-genai`` (``HttpOptions(base_url=...)``) and Gemini CLI
        (``GOOGLE_GEMINI_BASE_URL`` in ``env``): the proxy's root, which speaks Gemini."""
        return self._run.base_url

    @property
    def api_key(self) -> str:
        """A dummy key: the stub and replay need none (a real upstream gets yours)."""
        from agentreel.llm_proxy import DUMMY_KEY

        return DUMMY_KEY

    @property
    def env(self) -> dict[str, str]:
        """``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL``, the SDKs'
        keys, and loopback exempt from ``HTTP(S)_PROXY``: for a subprocess's environment."""
        from agentreel.llm_proxy import KEY_VARIABLES

        env = self._run.environment()
        env.update(dict.fromkeys(KEY_VARIABLES, self.api_key))
        env.update(envvars.loopback_bypass())
        return env

    def headers(
        self, session_id: str, parent: str | None = None, spawn_index: int | None = None
    ) -> dict[str, str]:
        """The ``x-agentreel-*`` headers naming the caller's session (and, for a subagent,
        its parent and the order the parent started it in)."""
        from agentreel.llm_proxy import PARENT_HEADER, SESSION_HEADER, SPAWN_INDEX_HEADER

        headers = {SESSION_HEADER: session_id}
        if parent is not None:
            headers[PARENT_HEADER] = parent
        if spawn_index is not None:
            headers[SPAWN_INDEX_HEADER] = str(spawn_index)
        return headers


class ReelMcp:
    """A test's MCP servers: the settings of their record or replay (recorded into the
    staging folder beside the proxy's, replayed from the recording folder), the stdio shim's
    command lines, and the HTTP endpoint, on a loop of its own, for the servers given a URL."""

    def __init__(self, reel_plan: ReelPlan, staging: Path) -> None:
        self.name = reel_plan.name
        self.rerecord = fixture_rerecord_template(reel_plan)
        self.settings = McpSettings(
            # A drifted run replays the MCP servers as recorded (SPEC 20 covers model calls).
            mode="record" if reel_plan.mode == "record" else "replay",
            recordings=staging / "recording" if reel_plan.mode == "record" else reel_plan.directory,
            state=staging / "mcp-state",
            scenario=reel_plan.name,
            cwd=reel_plan.cwd,
            masks=mcp_masks(reel_plan.replay.masks),
            record=reel_plan.record,
        )
        self.used: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._endpoint: McpEndpoint | None = None

    def reach(
        self, name: str, *, command: Sequence[str] | None, url: str | None, transport: str
    ) -> list[str] | str:
        try:
            check_server_name(name)
        except ValueError as exc:
            raise ReelError(f"{self.name}: agentreel.mcp({name!r}): {exc}") from None
        if (command is None) == (url is None):
            raise ReelError(
                f"{self.name}: agentreel.mcp({name!r}): give either command=[...] (a stdio "
                "server's argv) or url=... (a streamable HTTP server)"
            )
        if transport not in URL_TRANSPORTS or (transport != "http" and url is None):
            raise ReelError(
                f"{self.name}: agentreel.mcp({name!r}): transport={transport!r}: give "
                + " or ".join(repr(t) for t in URL_TRANSPORTS)
                + " (streamable HTTP, the default, or the legacy HTTP+SSE transport) "
                "with url=..."
            )
        if name in self.used:
            raise ReelError(f"{self.name}: agentreel.mcp({name!r}) is given twice; once each")
        self.used.add(name)
        if command is not None:
            if isinstance(command, str) or not command:
                raise ReelError(
                    f"{self.name}: agentreel.mcp({name!r}): command must be the server's "
                    "argv as a list, e.g. ['mcp-server-time']"
                )
            return stdio_command(self.settings, name, list(command))
        assert url is not None
        endpoint = self._start()
        endpoint.upstreams[name] = url
        return endpoint.url_for(name, "sse" if transport == "sse" else "http")

    def _start(self) -> McpEndpoint:
        if self._endpoint is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=loop.run_forever, name="agentreel-mcp", daemon=True
            )
            self._thread.start()
            self._loop = loop
            started = asyncio.run_coroutine_threadsafe(start_endpoint(self.settings), loop)
            self._endpoint = started.result(timeout=_START_TIMEOUT)
        return self._endpoint

    def close(self) -> None:
        if self._loop is None:
            return
        if self._endpoint is not None:
            closing = asyncio.run_coroutine_threadsafe(self._endpoint.close(), self._loop)
            closing.result(timeout=_START_TIMEOUT)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._loop.close()
        self._loop = None

    def problem(self) -> str | None:
        """After the test: a failure any connection met (record or replay), or, in replay,
        a recorded call never made; ``None`` when all is well."""
        settings = self.settings
        if settings.mode == "record":
            failures = sorted(settings.state.glob("failure-*.txt"))
            if not failures:
                return None
            return f"{self.name}: " + failures[0].read_text(encoding="utf-8").strip()
        if not self.used and not (settings.recordings / MCP_RECORDINGS_DIR).is_dir():
            return None
        with _rerecord_hint(self.rerecord):
            try:
                check_replayed(settings.recordings, settings.state, settings.scenario)
            except McpDriftError as exc:
                return f"{self.name}: {exc}"
        return None


class EgressGuard:
    """Where the sealed fixture points every proxy variable for a test: a loopback listener
    that answers each request sent through it ``403`` and keeps what it was (a client that
    honours ``HTTP(S)_PROXY``/``ALL_PROXY`` sends ``CONNECT host:port`` or an absolute URL),
    so the test's output can name the outside host an agent tried (telemetry, an update
    check), or a client that sent its call for the proxy there instead of to it."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self.seen: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name="agentreel-egress", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._socket.accept()
            except OSError:
                return
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(2.0)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < 16384:
                piece = conn.recv(4096)
                if not piece:
                    break
                head += piece
        except OSError:
            pass
        line = head.split(b"\r\n", 1)[0].decode("latin-1").strip()
        if line:
            with self._lock:
                self.seen.append(" ".join(line.split()[:2]))
        body = (
            b"agentreel: this test's network is sealed (the agentreel fixture points the "
            b"proxy variables here); the request is refused. --agentreel-network=open lets "
            b"it through.\n"
        )
        with suppress(OSError):
            conn.sendall(
                b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )

    def close(self) -> list[str]:
        """Stop listening; what was sent through it."""
        with suppress(OSError):  # wakes the accept() in the thread (Linux), then closes
            self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()
        self._thread.join(timeout=5)
        with self._lock:
            return list(self.seen)


def _target_host(request_line: str) -> str:
    """``host:port`` of ``CONNECT host:port`` or ``host`` of ``GET http://host/...``."""
    target = request_line.split(" ", 1)[-1]
    if "://" in target:
        target = target.split("://", 1)[1]
    return target.split("/", 1)[0]


def _is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    name = name.strip("[]")
    return name in ("localhost", "::1") or name.startswith("127.")


def egress_lines(seen: list[str], proxy_url: str) -> tuple[list[str], list[str]]:
    """(``unreached``, ``blocked``): the requests meant for the agentreel proxy that a client
    sent to the proxy variables instead, and the outside hosts refused, each as a line."""
    unreached: list[str] = []
    blocked: list[str] = []
    for request_line in seen:
        host = _target_host(request_line)
        variable = (
            "HTTPS_PROXY / ALL_PROXY"
            if request_line.startswith("CONNECT")
            else ("HTTP_PROXY / ALL_PROXY")
        )
        if _is_loopback(host):
            unreached.append(
                f"a client could not reach the agentreel proxy ({proxy_url}): it sent "
                f"`{request_line}` to {variable} instead, which this test points at a blocker; "
                "the client ignores NO_PROXY (set by the fixture to exempt loopback): give it "
                "no proxy (e.g. httpx trust_env=False, requests session.trust_env = False) or "
                "pass it agentreel.env"
            )
        else:
            blocked.append(
                f"blocked an outside connection to {host} (`{request_line}`, sent there by "
                f"{variable}): the agentreel fixture seals the test's network; turn that call "
                f"off in the agent (telemetry, update checks) or run with {NETWORK_OPTION}=open"
            )
    return unreached, blocked


@contextmanager
def sealed(
    reel_plan: ReelPlan, *, network: str, private_root: Path | None
) -> Iterator[EgressGuard | None]:
    """The test's environment while its reel serves: loopback exempt in ``NO_PROXY``; every
    proxy variable at an ``EgressGuard`` (unless ``network`` is ``open``); a private
    ``HOME`` and temp dir under ``private_root`` (``None``: the test keeps its own)."""
    import pytest

    with pytest.MonkeyPatch.context() as patch:
        exempt = envvars.loopback_bypass()
        for name, value in exempt.items():
            kept = os.environ.get(name, "") if network == "open" else ""
            patch.setenv(name, ",".join(v for v in (kept, value) if v))
        guard: EgressGuard | None = None
        if network != "open":
            guard = EgressGuard()
            for name in envvars.PROXY_VARIABLES:
                patch.setenv(name, guard.url)
        if private_root is not None:
            home, tmp = private_root / "home", private_root / "tmp"
            home.mkdir(parents=True, exist_ok=True)
            tmp.mkdir(parents=True, exist_ok=True)
            patch.setenv("HOME", str(home))
            for name in ("TMPDIR", "TEMP", "TMP"):
                patch.setenv(name, str(tmp))
            patch.setattr(tempfile, "tempdir", str(tmp))
        try:
            yield guard
        finally:
            if guard is not None:
                guard.close()


@dataclass(slots=True)
class OpenReel:
    """A reel being served; ``finish`` closes it once and says what went wrong, if anything."""

    reel: Reel
    stack: ExitStack
    staging: Path
    problem: str | None = None
    finished: bool = False
    guard: EgressGuard | None = None
    blocked: list[str] = field(default_factory=list)
    drifted_replay: ProxyRun | None = None
    """``--agentreel-record=drifted``: the replay run behind the reel's record run."""
    drifted_report: str | None = None
    """``--agentreel-record=drifted``: what was kept, re-recorded, new and dropped."""
    prove: Callable[[Path], str | None] | None = None
    """Record: the trial replays of the fresh recording (its folder) before it is written
    (``plugin``), what failed or ``None``."""

    def finish(self, *, passed: bool) -> str | None:
        if self.finished:
            return self.problem
        self.finished = True
        seen = self.guard.close() if self.guard is not None else []
        unreached, self.blocked = egress_lines(seen, self.reel.base_url)
        try:
            self.stack.close()
            # Every refusal after the run (the secret scan's above all) names this test's
            # record command, as the proxy's messages during it did.
            with _rerecord_hint(fixture_rerecord_template(self.reel.plan)):
                if self.drifted_replay is not None:
                    self.problem = self._merge_drifted(passed=passed)
                else:
                    self.problem = _judge(self.reel, self.staging, passed=passed, prove=self.prove)
        except Exception as exc:  # a close that failed is the test's failure, named
            self.problem = f"{self.reel.plan.name}: closing the agentreel proxy failed: {exc}"
        if unreached:
            # The cause first: what follows (calls never made, a failed client) comes of it.
            named = [f"{self.reel.plan.name}: {line}" for line in unreached]
            self.problem = "\n".join([*named, *([self.problem] if self.problem else [])])
        if self.problem is None or self.reel.mode == "replay":
            shutil.rmtree(self.staging, ignore_errors=True)
        return self.problem

    def _merge_drifted(self, *, passed: bool) -> str | None:
        """A drifted test that passed: what drifted merged into its recording (SPEC 20)."""
        from agentreel.llm_proxy import DriftedProxy, merge_drifted_run

        if not passed:
            return None  # the test's own failure is the story; nothing is written
        assert self.drifted_replay is not None
        reel_plan = self.reel.plan
        from agentreel.snapshot_harness._secrets import scan_for_secrets
        from agentreel.snapshot_harness.exceptions import SecretLeakError

        def scan(files: dict[str, bytes]) -> None:
            allow = reel_plan.record.allow_secrets
            scan_for_secrets(
                files,
                envvars.secret_values(os.environ),
                reel_plan.name,
                allow=allow,
                allowed_in=_ALLOWED_IN,
            )

        drifted = DriftedProxy(self.reel._run, self.drifted_replay, reel_plan.directory)
        try:
            merge_drifted_run(drifted, self.staging, reel_plan.cwd, check=scan)
        except SecretLeakError as exc:
            return str(exc)
        if drifted.errors:
            return (
                f"{reel_plan.name}: recording what drifted failed, so nothing was written:\n  "
                + "\n  ".join(drifted.errors)
            )
        assert drifted.merged is not None
        # The price table beside the test module (the recordings' folder's grandparent).
        try:
            prices = find_prices(None, [reel_plan.directory.parents[2]])
        except PriceTableError as exc:
            return f"{reel_plan.name}: {exc}"
        summary = DriftedSummary(
            reel_plan.name, drifted.merged.fates, drifted.upstream_calls, prices
        )
        changed = [*drifted.written, *(f"removed {name}" for name in drifted.removed)]
        self.drifted_report = (
            summary.text()
            + f"\n  wrote {', '.join(changed) if changed else 'nothing (nothing drifted)'}"
        )
        return None


def open_reel(reel_plan: ReelPlan) -> OpenReel:
    """Start serving ``reel_plan``'s run (and its stub upstream) on the worker's proxy."""
    from agentreel.llm_proxy import ProxyConfigError, ProxySettings
    from agentreel.snapshot_harness._proxied import WORKER_PROXY

    staging = Path(tempfile.mkdtemp(prefix="agentreel-reel-"))
    stack = ExitStack()
    try:
        settings: dict[str, Any] = {
            "mode": reel_plan.mode,
            "cwd": reel_plan.cwd,
            "scenario": reel_plan.name,
            "replay": reel_plan.replay,
            "record": reel_plan.record,
        }
        # The proxy's messages name the re-record command: for a test, the pytest one.
        stack.enter_context(_rerecord_hint(fixture_rerecord_template(reel_plan)))
        if reel_plan.mode == "drifted":
            return _open_drifted(reel_plan, staging, stack, settings)
        stubs: list[StubServer] = []
        if reel_plan.mode == "record":
            settings["upstream"] = stack.enter_context(_upstream(reel_plan, stubs))
            settings["fixture"] = staging / "recording"
        else:
            settings["fixture"] = reel_plan.directory
            settings["report"] = staging / "replay-report.json"
        try:
            proxy_settings = ProxySettings(**settings)
        except TypeError as exc:
            raise ReelError(f"{reel_plan.name}: {exc}") from None
        try:
            run = WORKER_PROXY.open_run(proxy_settings, timeout=_START_TIMEOUT)
        except ReplayError as exc:
            raise RecordingUnusableError(_unusable(reel_plan, exc)) from None
        except (ProxyConfigError, ValueError, OSError) as exc:
            raise ReelError(
                f"{reel_plan.name}: cannot serve {reel_plan.directory}: {exc}"
            ) from None
        stack.callback(WORKER_PROXY.close_run, run)
        if reel_plan.mode == "replay":
            stack.enter_context(_quiet(run))
        mcp = ReelMcp(reel_plan, staging)
        stack.callback(mcp.close)
        return OpenReel(Reel(reel_plan, run, mcp, stubs), stack, staging)
    except BaseException:
        stack.close()
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _open_drifted(
    reel_plan: ReelPlan, staging: Path, stack: ExitStack, settings: dict[str, Any]
) -> OpenReel:
    """``--agentreel-record=drifted``: the replay run (drifted callers forwarded to the
    upstream) and the record run in front of it, which the test's agent is pointed at."""
    from agentreel.llm_proxy import drifted_record_settings, drifted_replay_settings
    from agentreel.snapshot_harness._proxied import WORKER_PROXY

    stubs: list[StubServer] = []
    upstream = stack.enter_context(_upstream(reel_plan, stubs))
    common = {"cwd": settings["cwd"], "scenario": settings["scenario"], "replay": reel_plan.replay}
    try:
        replay = WORKER_PROXY.open_run(
            drifted_replay_settings(reel_plan.directory, upstream, staging, **common),
            timeout=_START_TIMEOUT,
        )
    except ReplayError as exc:
        raise RecordingUnusableError(_unusable(reel_plan, exc)) from None
    stack.callback(WORKER_PROXY.close_run, replay)
    record = WORKER_PROXY.open_run(
        drifted_record_settings(replay.base_url, staging, record=reel_plan.record, **common),
        timeout=_START_TIMEOUT,
    )
    stack.callback(WORKER_PROXY.close_run, record)  # closed first: it forwards to replay
    mcp = ReelMcp(reel_plan, staging)
    stack.callback(mcp.close)
    return OpenReel(Reel(reel_plan, record, mcp, stubs), stack, staging, drifted_replay=replay)


@contextmanager
def _quiet(run: ProxyRun) -> Iterator[None]:
    """The replay run's proxy log lines are not shown again in the test's captured log: each
    replay error is in the report the test fails with, once."""
    import logging

    from agentreel import llm_proxy

    mine = run.log_filter()

    def others(record: logging.LogRecord) -> bool:
        return not mine.filter(record)

    proxy_logger = logging.getLogger(llm_proxy.__name__)
    proxy_logger.addFilter(others)
    try:
        yield
    finally:
        proxy_logger.removeFilter(others)


@contextmanager
def _rerecord_hint(template: str) -> Iterator[None]:
    # shlex.quote made "'{scenario}'" of the placeholder: the proxy puts the node id there.
    template = template.replace("'{scenario}'", "{scenario}")
    previous = os.environ.get(RERECORD_COMMAND_ENV)
    os.environ[RERECORD_COMMAND_ENV] = template
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(RERECORD_COMMAND_ENV, None)
        else:
            os.environ[RERECORD_COMMAND_ENV] = previous


@contextmanager
def _upstream(reel_plan: ReelPlan, stubs: list[StubServer]) -> Iterator[str]:
    upstream = reel_plan.upstream
    assert upstream is not None
    if not upstream.startswith("stub:"):
        yield upstream
        return
    from agentreel.llm.exceptions import StubRulesError
    from agentreel.llm.stub import StubServer

    rules = Path(upstream.removeprefix("stub:"))
    try:
        server = StubServer(rules)
    except StubRulesError as exc:
        raise ReelError(f"{reel_plan.name}: cannot start the stub model server: {exc}") from None
    stubs.append(server)
    with server:
        yield server.base_url


def _judge(
    reel: Reel,
    staging: Path,
    *,
    passed: bool,
    prove: Callable[[Path], str | None] | None = None,
) -> str | None:
    """After the proxy closed: write what was recorded (record), or read the replay report."""
    run = reel._run
    reel_plan = reel.plan
    mcp_problem = reel._mcp.problem() if reel._mcp is not None else None
    if reel_plan.mode == "replay":
        problem = _replay_problem(reel_plan, staging / "replay-report.json", run.errors)
        if mcp_problem is not None:
            # An MCP drift comes first: the model calls that follow differ because of it.
            problem = "\n".join(p for p in (mcp_problem, problem) if p)
        if problem is not None and run.unspoken:
            # The likely cause first: a call the agent made on an API the proxy lacks.
            from agentreel.llm_proxy import unspoken_summary

            said = f"{reel_plan.name}: replay: {unspoken_summary(run.unspoken)}"
            return f"{said}\n{problem}"
        return problem
    if mcp_problem is not None and passed:
        return f"{mcp_problem}\nNothing was written; record again: " + record_command(
            reel_plan.name, "all"
        )
    recorded = staging / "recording"
    if run.errors:
        return (
            f"{reel_plan.name}: the recording proxy did not keep the whole recording, so "
            "nothing was written:\n  " + "\n  ".join(run.errors) + "\nFix what it names, then "
            f"record again: {record_command(reel_plan.name, 'all')}"
        )
    if not passed:
        return None  # the test's own failure is the story; nothing recorded is written
    files = (
        {
            p.name: p.read_bytes()
            for p in sorted(recorded.iterdir())
            if p.is_file() and _RECORDED.fullmatch(p.name)
        }
        if recorded.is_dir()
        else {}
    )
    mcp_files: dict[str, bytes] = {}
    if (recorded / MCP_RECORDINGS_DIR).is_dir():
        mcp_files = {
            f"{MCP_RECORDINGS_DIR}/{p.name}": p.read_bytes()
            for p in sorted((recorded / MCP_RECORDINGS_DIR).iterdir())
            if MCP_RECORDING_PATTERN.fullmatch(p.name)
        }
    if "session.jsonl" not in files:
        return (
            f"{reel_plan.name}: recorded no model call, so nothing was written: point the "
            "agent's SDK at agentreel.base_url (or agentreel.anthropic_base_url / .env)"
        )
    from agentreel.snapshot_harness._record_proof import recording_refusal

    schedule = reel_plan.replay.schedule
    refused = recording_refusal(reel_plan.name, recorded, reel._stubs, schedule)
    if refused is not None:
        return f"{refused}\nThen record again: {record_command(reel_plan.name, 'all')}"
    failed = prove(recorded) if prove is not None else None
    if failed is not None:
        return failed
    from agentreel.snapshot_harness._layout import write_files
    from agentreel.snapshot_harness._secrets import scan_for_secrets
    from agentreel.snapshot_harness.exceptions import SecretLeakError

    try:
        scan_for_secrets(
            {**files, **mcp_files},
            envvars.secret_values(os.environ),
            reel_plan.name,
            allow=reel_plan.record.allow_secrets,
            allowed_in=_ALLOWED_IN,
        )
    except SecretLeakError as exc:
        return str(exc)
    write_files(reel_plan.directory, files, keep_pattern=_RECORDED)
    from agentreel.snapshot_harness._mcp import split_mcp_files, write_mcp_files

    write_mcp_files(reel_plan.directory, split_mcp_files(mcp_files)[1])
    return None


def _replay_problem(reel_plan: ReelPlan, report_path: Path, errors: list[str]) -> str | None:
    from agentreel.llm_replay import read_report
    from agentreel.snapshot_harness._consumption import report_problem

    advice = record_command(reel_plan.name, "all")
    if not report_path.exists():
        if errors:
            return f"{reel_plan.name}: " + "\n".join(errors)
        return None
    lines = report_problem(reel_plan.name, read_report(report_path), advice)
    if lines is None and not errors:
        return None
    lines = lines or [f"{reel_plan.name}: the replaying proxy failed"]
    return "\n".join([*lines, *errors])
