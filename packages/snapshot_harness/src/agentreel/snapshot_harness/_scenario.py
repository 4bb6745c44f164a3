"""The scenario model: what one scenario is, once its ``scenario.toml`` is read.

A scenario is a directory ``fixtures/<name>/``. Its ``scenario.toml`` lists ordered steps,
FIFO permission answers, the timeout, the agent command, how the agent reaches a model
(``[model]``: in process through ``agentreel.llm``, or any agent through the proxy's base
URL) and how to record. ``Scenario`` and its tables' values live here, with the file names,
defaults and choices they are read against; ``_scenario_reader`` reads and validates the
TOML into them.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentreel.llm_replay import Capture, ReplaySettings
from agentreel.mcp_replay import UrlTransport
from agentreel.session import (
    PROXY_RECORDING_FILES,
    SESSION_FILE_PATTERN,
    KeyMask,
    Mask,
    RecordSettings,
)
from agentreel.snapshot_harness.exceptions import ScenarioError

SCENARIO_FILE = "scenario.toml"
WORKSPACE_DIR = "workspace"
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 3600.0
DEFAULT_STUB_RULES = "stub-rules.toml"
DEFAULT_STUB_MODEL = "stub-model"
DEFAULT_AGENT_MODULE = "agentreel.acp_agent"
# How the harness talks to the agent: an ACP server over stdio, or a command run once per
# prompt step (SPEC 14) with the prompt in its argv (``{prompt}``) or on stdin.
PROTOCOLS: tuple[Literal["acp", "command"], ...] = ("acp", "command")
PROMPT_PLACEHOLDER = "{prompt}"
# What the reference agent imports to serve a replay, without serving (its preload hook).
DEFAULT_AGENT_PRELOAD = f"{DEFAULT_AGENT_MODULE}:preload"
# Defaults for every scenario of a fixtures directory (today: the [fork_server] table).
DIRECTORY_CONFIG_FILE = "agentreel.toml"

Mode = Literal["replay", "record", "refresh", "drifted"]
MODES: tuple[Mode, ...] = ("replay", "record", "refresh")
# A run of ``agentreel record --drifted`` (SPEC 20): replay, the drifted sessions live.
RUN_MODES: tuple[Mode, ...] = (*MODES, "drifted")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

PermissionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always", "cancelled"]
ErrorMethod = Literal["initialize", "new_session", "prompt"]

Shutdown = Literal["eof", "sigterm"]
SHUTDOWNS: tuple[Shutdown, ...] = ("eof", "sigterm")
Via = Literal["provider", "proxy"]
VIAS: tuple[Via, ...] = ("provider", "proxy")
WireApi = Literal["openai", "anthropic", "responses", "gemini"]
WIRE_APIS: tuple[WireApi, ...] = ("openai", "anthropic", "responses", "gemini")
# The variables an agent on each wire API reads by default, as its SDK does.
DEFAULT_BASE_URL_ENV: dict[WireApi, tuple[str, ...]] = {
    "openai": ("OPENAI_BASE_URL",),
    "anthropic": ("ANTHROPIC_BASE_URL",),
    "responses": ("OPENAI_BASE_URL",),
    "gemini": ("GOOGLE_GEMINI_BASE_URL",),
}
DEFAULT_KEY_ENV: dict[WireApi, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "responses": ("OPENAI_API_KEY",),
    "gemini": ("GEMINI_API_KEY",),
}
# ``{name}`` placeholders rendered into [model] env values and files (see ModelConfig).
TEMPLATE_PLACEHOLDERS = ("base_url", "proxy_url", "key", "home", "cwd", "scenario")
TEMPLATE_TOKEN = re.compile(r"\{([a-z_]+)\}")
# ``{mcp:<name>}``: in a command scenario's agent command, ``env`` and ``[model]`` env and
# files, what reaches the ``[[mcp_servers]]`` server ``name`` through agentreel (SPEC 19).
MCP_TOKEN = re.compile(r"\{mcp:([^}]*)\}")
# In an HTTP MCP server's `url` and `start`: the free port the harness took for it.
MCP_PORT = "{port}"


@dataclass(frozen=True, slots=True)
class Initialize:
    """``initialize``: protocol handshake."""


@dataclass(frozen=True, slots=True)
class NewSession:
    """``session/new`` in the run's temp cwd; later prompts go to the newest session."""


@dataclass(frozen=True, slots=True)
class LoadSession:
    """``session/load`` of the current session (the newest one ``new_session`` or
    ``fork_session`` opened) in the run's cwd, with the scenario's ``mcpServers``; the
    history the agent sends again goes to the transcript. The agent's ``initialize`` must
    advertise ``loadSession``."""


@dataclass(frozen=True, slots=True)
class ForkSession:
    """``session/fork`` of the current session (ACP's unstable part) with the scenario's
    ``mcpServers``; later prompts go to the fork. The agent's ``initialize`` must advertise
    ``sessionCapabilities.fork``."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """``session/prompt`` with ``text``, awaited to its stop reason."""

    text: str


@dataclass(frozen=True, slots=True)
class PromptAndCancel:
    """``session/prompt``; ``session/cancel`` once the first ``agent_message_chunk`` arrives."""

    text: str


@dataclass(frozen=True, slots=True)
class ExpectError:
    """A request that must fail with a JSON-RPC error.

    ``session = "unknown"`` sends a prompt to a session id the agent never created.
    ``code`` and ``message`` (a substring), when given, must match the error.
    """

    method: ErrorMethod
    text: str = ""
    session: Literal["current", "unknown"] = "current"
    code: int | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Authenticate:
    """``authenticate``: the ACP ``authenticate`` request with auth method ``method`` (an
    id the agent's ``initialize`` lists). ``env`` names the variables that method reads:
    passed from the harness's environment while recording (a placeholder in replay, which
    is keyless), and their values refused from every recording and golden like any key.
    As the ``[authenticate]`` table, the same request made automatically after each
    ``initialize`` whose answer lists auth methods."""

    method: str
    env: tuple[str, ...] = ()


Step = (
    Initialize
    | NewSession
    | LoadSession
    | ForkSession
    | Prompt
    | PromptAndCancel
    | ExpectError
    | Authenticate
)


@dataclass(frozen=True, slots=True)
class RecordConfig:
    """How ``record`` mode reaches a model.

    ``provider = "stub"`` starts the stub model server with ``rules`` and records through
    the real ``openai`` adapter pointed at it; any other provider is passed to the agent
    as is and gets its key from the environment.
    """

    provider: str = "stub"
    model: str = DEFAULT_STUB_MODEL
    rules: Path | None = None
    base_url: str | None = None
    settings: RecordSettings = field(default_factory=RecordSettings)
    """The record settings every way of recording shares (``agentreel.session.
    RecordSettings``, one key each in ``[record]``): ``allow_secrets``, the sha256 digests
    of values the secret scan lets into this scenario's recordings and goldens (deliberate
    fake keys of a test of the scan); ``trials`` (``--trials N``), the trial replays after
    recording (``None``: ``_record_proof.trials_wanted``'s default)."""
    prices: Path | None = None
    """The price table ``record --drifted`` reports money not spent by (``[record]
    prices``, relative to the scenario; ``_prices``); ``None``: the default file, if any."""
    strict: bool = False
    """``[record] strict``: a crash the agent printed on stderr while exiting 0 refuses the
    recording instead of warning (``_record_proof``)."""
    retries: int | None = None
    """``[record] retries``: recordings again when the recorded order cannot be held;
    ``None`` is the default (``_record_proof.DEFAULT_RETRIES``)."""
    twice: bool = False
    """``--twice``: record a second time through the same upstream and compare the two
    runs' normalized session logs (lane by lane) and goldens (never from a TOML key)."""
    accept_masks: bool = False
    """``--accept-masks``: masks the trial replays found are written into scenario.toml
    and the scenario recorded again (never from a TOML key: accepting is the user's act)."""


@dataclass(frozen=True, slots=True)
class HomeFile:
    """A config file rendered into the agent's fresh ``HOME`` before it starts.

    ``path`` is relative to ``HOME``; the content is ``template`` (a file in the scenario
    directory) or inline ``text``, with ``{placeholder}`` tokens rendered (ModelConfig).
    """

    path: str
    text: str
    source: str


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """How the agent reaches a model: the ``[model]`` table.

    ``via = "provider"`` (default): the agent uses agentreel's provider layer in process
    and is configured by the ``AGENTREEL_*`` variables (today's path). ``via = "proxy"``:
    the harness runs ``agentreel.llm_proxy`` and points the agent at it — any agent in any
    framework or language. Then ``api`` is the wire API it speaks; each variable in
    ``base_url_env`` receives the proxy's base URL for that API (``.../v1`` for OpenAI's
    APIs, the root for Anthropic and Gemini); each in ``key_env`` receives a dummy non-secret key (a
    real key from your environment only when recording against a real upstream); ``env``
    and ``files`` are templates rendered with ``{base_url}`` (as in base_url_env),
    ``{proxy_url}`` (the root), ``{key}``, ``{home}``, ``{cwd}`` and ``{scenario}``.
    ``replay`` is how the calls are recorded and replayed: the one
    ``agentreel.llm_replay.ReplaySettings`` value, read from the keys typed here (``masks``:
    extra regexes masked before drift comparison; ``partial_lanes``: regexes naming the
    lanes — side calls that vary with timing — that may be consumed partly or not at all,
    one naming a lane when found in its model, system prompt or first message, such a lane
    left out of the goldens; ``captures``, ``[[model.captures]]`` with ``regex`` and
    ``token``: live values a served answer carries — a child's agent id handed to the model
    in one tool result and named by a later tool call —, recorded as ``{{<token>:N}}``,
    served as the live request's N-th value) and in ``[replay]`` (the recorded schedule,
    SPEC 13); ``Scenario.replay`` is the same value.
    """

    via: Via = "provider"
    api: WireApi = "openai"
    base_url_env: tuple[str, ...] = ()
    key_env: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    files: tuple[HomeFile, ...] = ()
    replay: ReplaySettings = field(default_factory=ReplaySettings)

    @property
    def masks(self) -> tuple[str, ...]:
        return self.replay.masks

    @property
    def partial_lanes(self) -> tuple[str, ...]:
        return self.replay.partial_lanes

    @property
    def captures(self) -> tuple[Capture, ...]:
        return self.replay.captures

    @property
    def proxied(self) -> bool:
        return self.via == "proxy"

    def base_url_for(self, proxy_url: str) -> str:
        """The proxy base URL as this wire API's SDKs expect it."""
        # Anthropic's and Gemini's clients add their API's path prefix themselves.
        return proxy_url if self.api in ("anthropic", "gemini") else f"{proxy_url}/v1"

    def render(self, text: str, values: Mapping[str, str]) -> str:
        """``text`` with every ``{placeholder}`` replaced (validated at load time)."""
        return TEMPLATE_TOKEN.sub(lambda found: values.get(found.group(1), found.group(0)), text)


ReplayConfig = ReplaySettings
"""How a scenario's model calls are recorded and replayed: replay's own settings value
(``agentreel.llm_replay.ReplaySettings``), typed in ``[replay]`` and ``[model]``, handed as
it is to the replay provider (``settings()``, the agent's environment) and to the proxy
(``ProxySettings.replay``)."""


@dataclass(frozen=True, slots=True)
class ForkServerConfig:
    """``[fork_server]``: start the agent by forking a server that preloaded its imports.

    Opt-in (``enabled``), in ``scenario.toml`` or for every scenario of a fixtures
    directory in its ``agentreel.toml`` (the scenario's keys win). ``preload`` lists the
    modules the server imports once (``module:function`` also calls a hook); without it,
    the reference agent's own hook (for ``{python} -m agentreel.acp_agent`` with any
    flags too), or the package of a ``-m package.module`` agent.
    """

    enabled: bool = False
    preload: tuple[str, ...] | None = None


def _bare_input(directory: Path, name: str) -> bool:
    """A command or env argument without ``./`` names an input when it is there and is no
    part of the fixture's own layout (``agent.py``, ``run.sh``; never ``session.jsonl``)."""
    return (
        name not in (SCENARIO_FILE, WORKSPACE_DIR, "golden", *PROXY_RECORDING_FILES)
        and not SESSION_FILE_PATTERN.fullmatch(name)
        and (directory / name).exists()
    )


def _used_by(directory: Path, names: set[str]) -> set[str]:
    """The entries of ``directory`` that its Python files among ``names`` import (a module
    ``x.py`` or package ``x/`` beside them) or name in a string, transitively."""
    try:
        entries = {path.name for path in directory.iterdir()}
    except OSError:
        return set()  # the inventory names an unreadable directory
    # The fixture's own layout is never an input, whatever a string in the agent says.
    entries = {
        name
        for name in entries
        if name not in (SCENARIO_FILE, WORKSPACE_DIR, "golden", *PROXY_RECORDING_FILES)
        and not SESSION_FILE_PATTERN.fullmatch(name)
    }
    found: set[str] = set()
    todo = [name for name in names if name.endswith(".py")]
    while todo:
        source = directory / todo.pop()
        try:
            tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue  # not ours to judge: the agent run shows what is wrong with it
        for node in ast.walk(tree):
            candidates: list[str] = []
            if isinstance(node, ast.Import):
                candidates = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                candidates = [node.module.split(".")[0]]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value.removeprefix("./")
                parts = Path(text).parts if len(text) < 256 and "\n" not in text else ()
                if parts:  # "." (an f-string's "Today is {day}.") has none
                    found.update({parts[0]} & entries - {".", ".."})
            for module in candidates:
                for name in (f"{module}.py", module):
                    if name in entries and name not in found and name not in names:
                        found.add(name)
                        if name.endswith(".py"):
                            todo.append(name)
    return found


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """``[[mcp_servers]]``: an MCP server the agent is given in ACP ``session/new`` —
    ``command`` (with its ``args`` appended) and ``env`` for stdio, or ``url`` for
    streamable HTTP (``transport = "sse"``: the legacy HTTP+SSE transport). Record and
    replay stand in its place (SPEC 19)."""

    name: str
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    # An HTTP server's command, started by the harness while recording only (nothing of the
    # server runs on replay); ``{port}`` in it and in ``url`` is a free port taken per run.
    start: tuple[str, ...] = ()
    transport: UrlTransport = "http"

    def url_at(self, port: int | None) -> str:
        """``url`` with ``{port}`` filled in (``port`` None, as on replay: nothing listens,
        so any port stands)."""
        assert self.url is not None
        return self.url.replace(MCP_PORT, str(port if port is not None else 9))


@dataclass(frozen=True, slots=True)
class Scenario:
    """One loaded, validated scenario."""

    name: str
    directory: Path
    steps: tuple[Step, ...]
    description: str = ""
    timeout: float = DEFAULT_TIMEOUT
    agent: tuple[str, ...] | None = None
    # "acp" (default) or "command": an agent that is not an ACP server, run once per prompt.
    protocol: Literal["acp", "command"] = "acp"
    # How the run ends: "eof" closes stdin and awaits exit 0; "sigterm" also sends SIGTERM
    # at once, as ACP clients do, for agents that keep serving after EOF.
    shutdown: Shutdown = "eof"
    env: Mapping[str, str] = field(default_factory=dict)
    permissions: tuple[PermissionKind, ...] = ()
    record: RecordConfig = field(default_factory=RecordConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    fork_server: ForkServerConfig = field(default_factory=ForkServerConfig)
    # ``[[golden_masks]]``: the scenario's own normalizer rules for what a third-party agent
    # prints or logs that no built-in rule knows (its own ids, paths shown relative to /),
    # by regex (``Mask``) or by JSON key (``KeyMask``: a volatile number, any value).
    golden_masks: tuple[Mask | KeyMask, ...] = ()
    # ``[transcript] unordered``: sessionUpdate kinds compared as a multiset per prompt turn
    # (notifications that race each other: a title lane's session_info_update).
    unordered: tuple[str, ...] = ()
    # ``[transcript] merge``: sessionUpdate kinds whose consecutive updates of one thing are
    # written as one (a command's output and completion, sent as one update or two).
    merge: tuple[str, ...] = ()
    # ``[authenticate]``: the auth method called after each ``initialize`` listing methods.
    authenticate: Authenticate | None = None
    # ``[fixture] inputs``: files of the scenario directory the agent uses that nothing else
    # names (a ``run.sh`` a wrapper calls): inputs, never orphans.
    inputs: tuple[str, ...] = ()
    # Where the agent command's relative paths point: the scenario's own directory, also
    # when a run uses a scratch copy of it (record's trial replay).
    agent_root: Path | None = None
    # ``[[mcp_servers]]``: what the harness passes as ``mcpServers`` (SPEC 19).
    mcp_servers: tuple[McpServerConfig, ...] = ()

    @property
    def replay(self) -> ReplaySettings:
        """How the scenario's model calls are recorded and replayed (``[replay]`` and
        ``[model]``'s keys): ``model.replay``."""
        return self.model.replay

    def auth_env(self) -> tuple[str, ...]:
        """The variables the scenario's auth method(s) read (``Authenticate.env``)."""
        named = [*(self.authenticate.env if self.authenticate else ())]
        named += [n for step in self.steps if isinstance(step, Authenticate) for n in step.env]
        return tuple(dict.fromkeys(named))

    @property
    def toml_path(self) -> Path:
        return self.directory / SCENARIO_FILE

    @property
    def workspace(self) -> Path | None:
        """The ``workspace/`` directory copied into the run's cwd, if the scenario has one."""
        path = self.directory / WORKSPACE_DIR
        return path if path.is_dir() else None

    @property
    def creates_sessions(self) -> bool:
        """Whether a run makes a session log (so ``session.jsonl`` is a needed fixture)."""
        if self.protocol == "command":
            return any(isinstance(step, Prompt) for step in self.steps)
        return any(isinstance(step, NewSession) for step in self.steps)

    def own_files(self) -> set[str]:
        """Top-level names in the scenario directory that the scenario itself uses — inputs,
        not orphans: its ``[[model.files]]`` templates, the files its ``agent`` command,
        ``env`` values and MCP servers' ``command``/``start`` name (``./agent.py``,
        ``{scenario}/agent.py``), and what those Python files import or name from the
        scenario directory (``import helpers`` of a ``helpers.py`` or ``helpers/`` beside
        them, ``"prompts.txt"`` in a string), followed through the modules they import."""
        names = {file.source for file in self.model.files if file.source} | set(self.inputs)
        servers = [part for server in self.mcp_servers for part in (*server.command, *server.start)]
        for part in [*(self.agent or ()), *self.env.values(), *self.model.env.values(), *servers]:
            for value in (part, part.partition("=")[2]):  # also --config=./x.toml
                for prefix in ("./", "{scenario}/", ""):
                    if value.startswith(prefix):
                        inside = Path(value[len(prefix) :]).parts
                        # A path leaving the folder (../../examples/agent.py) names none of
                        # its files. Bare (no ./): only a name that is there (agent.py).
                        if inside[:1] in ((), ("..",), (".",)):
                            break
                        if prefix or _bare_input(self.directory, inside[0]):
                            names.add(inside[0])
                        break
        own = {Path(name).parts[0] for name in names if Path(name).parts}
        return own | _used_by(self.directory, own)

    def agent_command(self) -> list[str]:
        """The agent command line, placeholders expanded and relative paths made absolute.

        ``{python}`` is the running interpreter and ``{scenario}`` the scenario directory.
        An argument starting with ``./`` or ``../`` is a path relative to the scenario
        directory and becomes absolute, so the command means the same from the run's temp
        cwd and from a trial replay's scratch copy. Any executable may be the agent: a bare
        name is looked up on ``PATH``. The default is the reference agent:
        ``{python} -m agentreel.acp_agent``.
        """
        if self.agent is None:
            return [sys.executable, "-m", DEFAULT_AGENT_MODULE]
        return _expand_command(self.agent, self.agent_root or self.directory)

    def mcp_command(self, server: McpServerConfig, port: int | None = None) -> list[str]:
        """A stdio server's ``command`` (or an HTTP server's ``start``, ``{port}`` filled in)
        with ``{python}``, ``{scenario}`` and ``./`` paths as in ``agent_command``."""
        parts = server.command if server.url is None else server.start
        command = _expand_command(parts, self.directory)
        if port is None:
            return command
        return [part.replace(MCP_PORT, str(port)) for part in command]

    def fork_preload(self) -> tuple[str, ...] | None:
        """What the fork server preloads for this scenario; ``None``: start by spawning."""
        if not self.fork_server.enabled:
            return None
        if self.fork_server.preload is not None:
            return self.fork_server.preload
        command = self.agent_command()
        if self.agent is None or command[1:3] == ["-m", DEFAULT_AGENT_MODULE]:
            # The reference agent, also when spelled out with flags: its own hook (its
            # package would be the ``agentreel`` namespace, which preloads nothing).
            return (DEFAULT_AGENT_PRELOAD,)
        if len(command) > 2 and command[1] == "-m" and "." in command[2]:
            # The package only: a module preloaded under its own name and then run as
            # __main__ would exist twice (runpy warns about exactly that).
            return (command[2].rpartition(".")[0],)
        return ()


def validate_scenario_name(name: str, *, where: str = "scenario name") -> str:
    """Return ``name`` if it is a single safe directory name, else raise ``ScenarioError``."""
    if "/" in name or "\\" in name or os.sep in name or (os.altsep and os.altsep in name):
        raise ScenarioError(
            f"{where} {name!r} contains a path separator: a scenario is one directory "
            "directly under fixtures/ — use its bare name, e.g. 'plain-turn'"
        )
    if not _NAME.match(name):
        raise ScenarioError(
            f"{where} {name!r} is not a valid scenario name: use letters, digits, '.', '_' "
            "and '-', starting with a letter or digit"
        )
    return name


def _expand_command(parts: Sequence[str], root: Path) -> list[str]:
    """``parts`` with ``{python}`` the running interpreter, ``{scenario}`` ``root`` and an
    argument starting with ``./`` or ``../`` made absolute against ``root``."""
    directory = str(root.resolve())
    command: list[str] = []
    for part in parts:
        part = part.replace("{python}", sys.executable).replace("{scenario}", directory)
        if part.startswith(("./", "../")):
            part = os.path.normpath(os.path.join(directory, part))
        command.append(part)
    return command
