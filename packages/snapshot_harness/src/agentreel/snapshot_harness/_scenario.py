"""``scenario.toml``: the strictly validated description of one scenario.

A scenario is a directory ``fixtures/<name>/``. Its ``scenario.toml`` lists ordered steps,
FIFO permission answers, the timeout, the agent command, how the agent reaches a model
(``[model]``: in process through ``agentreel.llm``, or any agent through the proxy's base
URL) and how to record. Unknown keys and bad values are errors that name the file and the
key, so a typo never silently changes what a test does.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentreel.llm_replay import (
    DEFAULT_SCHEDULE_TIMEOUT,
    DIVERGENCE_MODES,
    SCHEDULE_MODES,
    Capture,
    DivergenceMode,
    ScheduleMode,
)
from agentreel.session import (
    PROXY_RECORDING_FILES,
    SESSION_FILE_PATTERN,
    KeyMask,
    Mask,
    checked_allowlist,
    merge_kinds_checked,
    unordered_kinds_checked,
)
from agentreel.snapshot_harness.exceptions import ScenarioError, UnreadableFixtureError

SCENARIO_FILE = "scenario.toml"
WORKSPACE_DIR = "workspace"
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 3600.0
DEFAULT_STUB_RULES = "stub-rules.toml"
DEFAULT_STUB_MODEL = "stub-model"
DEFAULT_AGENT_MODULE = "agentreel.acp_agent"
# How the harness talks to the agent: an ACP server over stdio, or a command run once per
# prompt step (SPEC 14) with the prompt in its argv (``{prompt}``) or on stdin.
PROTOCOLS = ("acp", "command")
PROMPT_PLACEHOLDER = "{prompt}"
# What the reference agent imports to serve a replay, without serving (its preload hook).
DEFAULT_AGENT_PRELOAD = f"{DEFAULT_AGENT_MODULE}:preload"
# Defaults for every scenario of a fixtures directory (today: the [fork_server] table).
DIRECTORY_CONFIG_FILE = "agentreel.toml"

Mode = Literal["replay", "record", "refresh"]
MODES: tuple[Mode, ...] = ("replay", "record", "refresh")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

PermissionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always", "cancelled"]
_PERMISSION_ALIASES: dict[str, PermissionKind] = {
    "allow": "allow_once",
    "allow_once": "allow_once",
    "allow_always": "allow_always",
    "reject": "reject_once",
    "reject_once": "reject_once",
    "reject_always": "reject_always",
    "cancelled": "cancelled",
}
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
_TEMPLATE_TOKEN = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True, slots=True)
class Initialize:
    """``initialize``: protocol handshake."""


@dataclass(frozen=True, slots=True)
class NewSession:
    """``session/new`` in the run's temp cwd; later prompts go to the newest session."""


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


Step = Initialize | NewSession | Prompt | PromptAndCancel | ExpectError


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
    allow_secrets: tuple[str, ...] = ()
    """sha256 digests of values the secret scan lets into this scenario's recordings and
    goldens (``[record] allow_secrets``): deliberate fake keys of a test of the scan."""


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
    ``masks`` are extra regexes masked before drift comparison; ``partial_lanes`` are
    regexes naming the lanes (side calls that vary with timing) that may be consumed partly
    or not at all: one names a lane when found in its model, system prompt or first
    message (``agentreel.llm_replay.PartialLanes``); such a lane is left out of the goldens.
    ``captures`` (``[[model.captures]]``, ``regex`` and ``token``) are live values a served
    answer carries (``agentreel.llm_replay.Capture``: a child's agent id handed to the
    model in one tool result and named by a later tool call): recorded as
    ``{{<token>:N}}``, served as the live request's N-th value.
    """

    via: Via = "provider"
    api: WireApi = "openai"
    base_url_env: tuple[str, ...] = ()
    key_env: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    files: tuple[HomeFile, ...] = ()
    masks: tuple[str, ...] = ()
    partial_lanes: tuple[str, ...] = ()
    captures: tuple[Capture, ...] = ()

    @property
    def proxied(self) -> bool:
        return self.via == "proxy"

    def base_url_for(self, proxy_url: str) -> str:
        """The proxy base URL as this wire API's SDKs expect it."""
        # Anthropic's and Gemini's clients add their API's path prefix themselves.
        return proxy_url if self.api in ("anthropic", "gemini") else f"{proxy_url}/v1"

    def render(self, text: str, values: Mapping[str, str]) -> str:
        """``text`` with every ``{placeholder}`` replaced (validated at load time)."""
        return _TEMPLATE_TOKEN.sub(lambda found: values.get(found.group(1), found.group(0)), text)


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """``[replay]``: how a replay serves the recorded calls (SPEC 13).

    ``schedule = "free"`` (default) answers each call as soon as it is asked for;
    ``"recorded"`` keeps the recorded happens-before between calls of different sessions
    and lanes (``agentreel.llm_replay``'s schedule), in process and through the proxy alike.
    ``schedule_timeout``: seconds a held call waits before it goes on; such a wait is a
    schedule divergence naming both calls — a failure unless ``schedule_divergence =
    "allow"``.
    """

    schedule: ScheduleMode = "free"
    schedule_timeout: float = DEFAULT_SCHEDULE_TIMEOUT
    schedule_divergence: DivergenceMode = "error"

    def settings(self) -> dict[str, str]:
        """As the replay provider's and the proxy's settings; empty for the defaults."""
        if self == ReplayConfig():
            return {}
        return {
            "schedule": self.schedule,
            "schedule_timeout": repr(self.schedule_timeout),
            "schedule_divergence": self.schedule_divergence,
        }


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
    replay: ReplayConfig = field(default_factory=ReplayConfig)
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
    # Where the agent command's relative paths point: the scenario's own directory, also
    # when a run uses a scratch copy of it (record's trial replay).
    agent_root: Path | None = None

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
        not orphans: its ``[[model.files]]`` templates, the files its ``agent`` command and
        ``env`` values name (``./agent.py``, ``{scenario}/agent.py``), and what those Python
        files import or name from the scenario directory (``import helpers`` of a
        ``helpers.py`` or ``helpers/`` beside them, ``"prompts.txt"`` in a string), followed
        through the modules they import."""
        names = {file.source for file in self.model.files if file.source}
        for part in [*(self.agent or ()), *self.env.values()]:
            for prefix in ("./", "{scenario}/"):
                if part.startswith(prefix):
                    inside = Path(part[len(prefix) :]).parts
                    if inside:
                        names.add(inside[0])
        own = {Path(name).parts[0] for name in names}
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
        directory = str((self.agent_root or self.directory).resolve())
        command: list[str] = []
        for part in self.agent:
            part = part.replace("{python}", sys.executable).replace("{scenario}", directory)
            if part.startswith(("./", "../")):
                part = os.path.normpath(os.path.join(directory, part))
            command.append(part)
        return command

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


class _Reader:
    """Typed access to a TOML table that reports unknown keys and bad values by path."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, problem: str) -> ScenarioError:
        return ScenarioError(f"{self.path}: key '{key}': {problem}")

    def check_keys(self, table: Mapping[str, object], allowed: set[str], prefix: str) -> None:
        unknown = sorted(set(table) - allowed)
        if unknown:
            key = f"{prefix}{unknown[0]}"
            raise self.fail(key, f"unknown key; allowed here: {', '.join(sorted(allowed))}")

    def string(self, table: Mapping[str, object], key: str, prefix: str) -> str | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(f"{prefix}{key}", f"expected a string, got {_kind(value)}")
        return value

    def required_string(self, table: Mapping[str, object], key: str, prefix: str) -> str:
        value = self.string(table, key, prefix)
        if value is None or not value:
            raise self.fail(f"{prefix}{key}", "required: a non-empty string")
        return value


def _kind(value: object) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a float",
        str: "a string",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)


_TOP_KEYS = {
    "name",
    "protocol",
    "description",
    "timeout",
    "agent",
    "shutdown",
    "env",
    "permissions",
    "steps",
    "record",
    "model",
    "fork_server",
    "golden_masks",
    "transcript",
    "replay",
}
_GOLDEN_MASK_KEYS = {"regex", "key", "token"}
_TRANSCRIPT_KEYS = {"unordered", "merge"}
_REPLAY_KEYS = {"schedule", "schedule_timeout", "schedule_divergence"}
_FORK_SERVER_KEYS = {"enabled", "preload"}
_STEP_KEYS: dict[str, set[str]] = {
    "initialize": {"type"},
    "new_session": {"type"},
    "prompt": {"type", "text"},
    "prompt_and_cancel": {"type", "text"},
    "expect_error": {"type", "method", "text", "session", "code", "message"},
}
_RECORD_KEYS = {"provider", "model", "rules", "base_url", "allow_secrets"}
_MODEL_KEYS = {
    "via",
    "api",
    "base_url_env",
    "key_env",
    "env",
    "files",
    "masks",
    "partial_lanes",
    "captures",
}
_FILE_KEYS = {"path", "template", "text"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def load_scenario(directory: Path | str) -> Scenario:
    """Load and validate ``<directory>/scenario.toml``.

    Raises ``ScenarioError`` naming the file and key for unknown keys, wrong types, bad
    values, a name that is not a bare directory name, or a workspace symlink that points
    outside the workspace.
    """
    directory = Path(directory)
    path = directory / SCENARIO_FILE
    if not path.is_file() and not path.is_symlink() and not path.is_dir():
        raise ScenarioError(
            f"{path}: no scenario.toml here; a scenario directory needs one (see the "
            "agentreel-snapshot-harness README for the format)"
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UnreadableFixtureError(directory.name, path, exc) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    reader = _Reader(path)
    reader.check_keys(data, _TOP_KEYS, "")

    dir_name = directory.resolve().name
    validate_scenario_name(dir_name, where=f"{path}: directory name")
    name = reader.string(data, "name", "") or dir_name
    if name != dir_name:
        validate_scenario_name(name, where=f"{path}: key 'name':")
        raise reader.fail(
            "name", f"{name!r} differs from the directory name {dir_name!r}; make them equal"
        )

    description = reader.string(data, "description", "") or ""
    timeout = _timeout(reader, data.get("timeout"))
    agent = _agent(reader, data.get("agent"))
    shutdown = data.get("shutdown", "eof")
    if shutdown not in SHUTDOWNS:
        raise reader.fail(
            "shutdown",
            f"{shutdown!r} is not one of {', '.join(SHUTDOWNS)} (eof: close stdin and wait; "
            "sigterm: also send SIGTERM, as ACP clients do)",
        )
    env = _env(reader, data.get("env"))
    permissions = _permissions(reader, data.get("permissions"))
    protocol = data.get("protocol", "acp")
    if protocol not in PROTOCOLS:
        raise reader.fail(
            "protocol",
            f"{protocol!r} is not one of {', '.join(PROTOCOLS)} (acp: an ACP server on stdio; "
            "command: a command run once per prompt step, the prompt in argv or on stdin)",
        )
    if protocol == "command" and agent is None:
        raise reader.fail(
            "agent",
            'required with protocol = "command": the command line, with {prompt} where the '
            'prompt goes (else it is written to stdin), e.g. ["claude", "-p", "{prompt}"]',
        )
    steps = _steps(reader, data.get("steps"), command=protocol == "command")
    record = _record(reader, data.get("record"), directory)
    model = _model(reader, data.get("model"), directory)
    if model.proxied and record.provider != "stub" and not record.base_url:
        raise reader.fail(
            "record.base_url",
            f'required with [model] via = "proxy" and provider {record.provider!r}: the '
            "upstream the proxy records from (e.g. https://api.anthropic.com)",
        )
    fork_server = _fork_server(reader, data.get("fork_server"), _directory_fork_server(directory))
    golden_masks = _golden_masks(reader, data.get("golden_masks"))
    unordered, merge = _transcript(reader, data.get("transcript"))
    replay = _replay(reader, data.get("replay"))
    scenario = Scenario(
        name=name,
        directory=directory,
        steps=steps,
        description=description,
        timeout=timeout,
        agent=agent,
        protocol=protocol,
        shutdown=shutdown,
        env=env,
        permissions=permissions,
        record=record,
        model=model,
        fork_server=fork_server,
        golden_masks=golden_masks,
        unordered=unordered,
        merge=merge,
        replay=replay,
    )
    check_workspace(scenario)
    return scenario


def _replay(reader: _Reader, value: object) -> ReplayConfig:
    if value is None:
        return ReplayConfig()
    if not isinstance(value, dict):
        raise reader.fail("replay", f"expected a table, got {_kind(value)}")
    reader.check_keys(value, _REPLAY_KEYS, "replay.")
    schedule = value.get("schedule", "free")
    if schedule not in SCHEDULE_MODES:
        raise reader.fail(
            "replay.schedule",
            f"{schedule!r} is not one of {', '.join(repr(m) for m in SCHEDULE_MODES)} (free: "
            "each call answered when asked; recorded: calls of different sessions and lanes "
            "kept in their recorded order)",
        )
    timeout = value.get("schedule_timeout", DEFAULT_SCHEDULE_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise reader.fail(
            "replay.schedule_timeout", f"expected seconds as a number, got {_kind(timeout)}"
        )
    if not 0 < timeout <= MAX_TIMEOUT:
        raise reader.fail(
            "replay.schedule_timeout",
            f"{timeout} is out of range: use 0 < schedule_timeout <= {MAX_TIMEOUT}",
        )
    divergence = value.get("schedule_divergence", "error")
    if divergence not in DIVERGENCE_MODES:
        raise reader.fail(
            "replay.schedule_divergence",
            f"{divergence!r} is not one of {', '.join(repr(m) for m in DIVERGENCE_MODES)} "
            "(error: a wait past schedule_timeout fails the replay; allow: it is reported "
            "only)",
        )
    if schedule == "free" and len(value) > ("schedule" in value):
        key = min(set(value) - {"schedule"})
        raise reader.fail(
            f"replay.{key}",
            'only means something with schedule = "recorded"; set that, or remove this key',
        )
    return ReplayConfig(
        schedule=schedule, schedule_timeout=float(timeout), schedule_divergence=divergence
    )


def _timeout(reader: _Reader, value: object) -> float:
    if value is None:
        return DEFAULT_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise reader.fail("timeout", f"expected seconds as a number, got {_kind(value)}")
    if not 0 < value <= MAX_TIMEOUT:
        raise reader.fail("timeout", f"{value} is out of range: use 0 < timeout <= {MAX_TIMEOUT}")
    return float(value)


def _agent(reader: _Reader, value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(part, str) and part for part in value)
    ):
        raise reader.fail(
            "agent",
            'expected a non-empty array of non-empty strings, e.g. ["{python}", "-m", "my_agent"]',
        )
    return tuple(value)


def _env(reader: _Reader, value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise reader.fail("env", f"expected a table of strings, got {_kind(value)}")
    env: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(item, str):
            raise reader.fail(f"env.{key}", f"expected a string, got {_kind(item)}")
        env[key] = item
    return env


def _golden_masks(reader: _Reader, value: object) -> tuple[Mask | KeyMask, ...]:
    """``[[golden_masks]]`` tables: ``token`` and either ``regex`` (may hold
    ``{cwd_from_root}``) or ``key`` (a JSON key whose value, any type, is masked)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise reader.fail(
            "golden_masks",
            f"expected an array of tables, got {_kind(value)}, e.g. [[golden_masks]] "
            'regex = "ses_[0-9A-Za-z]{26}" token = "opencode-session"',
        )
    masks: list[Mask | KeyMask] = []
    for index, table in enumerate(value):
        key = f"golden_masks[{index}]"
        if not isinstance(table, dict):
            raise reader.fail(key, f"expected a table, got {_kind(table)}")
        reader.check_keys(table, _GOLDEN_MASK_KEYS, f"{key}.")
        if ("regex" in table) == ("key" in table):
            raise reader.fail(
                key,
                "give exactly one of 'regex' (text to mask) or 'key' (a JSON key whose value "
                'is masked), e.g. key = "totalDurationMs" token = "duration"',
            )
        token = reader.required_string(table, "token", f"{key}.")
        try:
            if "key" in table:
                json_key = reader.required_string(table, "key", f"{key}.")
                masks.append(KeyMask.checked(json_key, token))
            else:
                regex = reader.required_string(table, "regex", f"{key}.")
                masks.append(Mask.checked(regex, token))
        except ValueError as exc:
            raise reader.fail(key, str(exc)) from None
    return tuple(masks)


def _transcript(reader: _Reader, value: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``[transcript]``: ``unordered``, the sessionUpdate kinds compared as a multiset per
    prompt turn, and ``merge``, the kinds whose consecutive updates of one thing are one
    (validated by the normalizer's ``unordered_kinds_checked`` / ``merge_kinds_checked``)."""
    if value is None:
        return (), ()
    if not isinstance(value, dict):
        raise reader.fail("transcript", f"expected a table, got {_kind(value)}")
    reader.check_keys(value, _TRANSCRIPT_KEYS, "transcript.")
    try:
        unordered = unordered_kinds_checked(value.get("unordered", []))
    except ValueError as exc:
        raise reader.fail("transcript.unordered", str(exc)) from None
    try:
        merge = merge_kinds_checked(value.get("merge", []))
    except ValueError as exc:
        raise reader.fail("transcript.merge", str(exc)) from None
    return unordered, merge


def _permissions(reader: _Reader, value: object) -> tuple[PermissionKind, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise reader.fail("permissions", f"expected an array of answers, got {_kind(value)}")
    answers: list[PermissionKind] = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or item not in _PERMISSION_ALIASES:
            raise reader.fail(
                f"permissions[{index}]",
                f"{item!r} is not an answer; use one of {', '.join(_PERMISSION_ALIASES)}",
            )
        answers.append(_PERMISSION_ALIASES[item])
    return tuple(answers)


def _steps(reader: _Reader, value: object, *, command: bool = False) -> tuple[Step, ...]:
    if not isinstance(value, list) or not value:
        raise reader.fail(
            "steps",
            'required: a non-empty array of tables, e.g. [[steps]] type = "initialize"',
        )
    steps: list[Step] = []
    have_session = command  # each prompt of a command scenario is a run of its own
    for index, table in enumerate(value):
        prefix = f"steps[{index}]."
        if not isinstance(table, dict):
            raise reader.fail(f"steps[{index}]", f"expected a table, got {_kind(table)}")
        kind = table.get("type")
        if not isinstance(kind, str) or kind not in _STEP_KEYS:
            raise reader.fail(
                f"{prefix}type",
                f"{kind!r} is not a step type; use one of {', '.join(_STEP_KEYS)}",
            )
        if command and kind != "prompt":
            raise reader.fail(
                f"{prefix}type",
                f'{kind!r} has no meaning with protocol = "command": its steps are prompts, '
                "each one run of the command",
            )
        reader.check_keys(table, _STEP_KEYS[kind], prefix)
        step: Step
        if kind == "initialize":
            step = Initialize()
        elif kind == "new_session":
            step = NewSession()
            have_session = True
        elif kind in ("prompt", "prompt_and_cancel"):
            text = reader.required_string(table, "text", prefix)
            if not have_session:
                raise reader.fail(
                    f"{prefix}type",
                    f"{kind} before any new_session step; add a new_session step first "
                    "(or use expect_error to test that the agent refuses it)",
                )
            step = Prompt(text) if kind == "prompt" else PromptAndCancel(text)
        else:
            step = _expect_error(reader, table, prefix, have_session)
        steps.append(step)
    return tuple(steps)


def _expect_error(
    reader: _Reader, table: Mapping[str, object], prefix: str, have_session: bool
) -> ExpectError:
    method = table.get("method")
    if method not in ("initialize", "new_session", "prompt"):
        raise reader.fail(
            f"{prefix}method", f"{method!r} is not one of initialize, new_session, prompt"
        )
    session = table.get("session", "current")
    if session not in ("current", "unknown"):
        raise reader.fail(f"{prefix}session", f"{session!r} is not 'current' or 'unknown'")
    if method == "prompt" and session == "current" and not have_session:
        raise reader.fail(
            f"{prefix}session",
            'no session exists yet at this step; add a new_session step or use session = "unknown"',
        )
    code = table.get("code")
    if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
        raise reader.fail(f"{prefix}code", f"expected an integer, got {_kind(code)}")
    return ExpectError(
        method=method,
        text=reader.string(table, "text", prefix) or "",
        session=session,
        code=code,
        message=reader.string(table, "message", prefix),
    )


def _record(reader: _Reader, value: object, directory: Path) -> RecordConfig:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise reader.fail("record", f"expected a table, got {_kind(value)}")
    reader.check_keys(value, _RECORD_KEYS, "record.")
    provider = reader.string(value, "provider", "record.") or "stub"
    model = reader.string(value, "model", "record.")
    rules_name = reader.string(value, "rules", "record.")
    base_url = reader.string(value, "base_url", "record.")
    rules: Path | None = None
    if provider == "stub":
        rules_name = rules_name or DEFAULT_STUB_RULES
        validate_scenario_name(rules_name, where=f"{reader.path}: key 'record.rules':")
        rules = directory / rules_name
        model = model or DEFAULT_STUB_MODEL
    elif rules_name is not None:
        raise reader.fail("record.rules", f"only the stub provider uses rules, not {provider!r}")
    if not model:
        raise reader.fail("record.model", f"required for provider {provider!r}")
    try:
        allow_secrets = checked_allowlist(value.get("allow_secrets", []))
    except ValueError as error:
        raise reader.fail("record.allow_secrets", str(error)) from None
    return RecordConfig(
        provider=provider,
        model=model,
        rules=rules,
        base_url=base_url,
        allow_secrets=allow_secrets,
    )


def _model(reader: _Reader, value: object, directory: Path) -> ModelConfig:
    if value is None:
        return ModelConfig()
    if not isinstance(value, dict):
        raise reader.fail("model", f"expected a table, got {_kind(value)}")
    reader.check_keys(value, _MODEL_KEYS, "model.")
    via = value.get("via", "provider")
    if via not in VIAS:
        raise reader.fail("model.via", f"{via!r} is not one of {', '.join(VIAS)}")
    if via == "provider":
        extra = sorted(set(value) - {"via"})
        if extra:
            raise reader.fail(
                f"model.{extra[0]}",
                'only with via = "proxy"; an in-process agent is configured by AGENTREEL_* '
                "variables (use [env] for anything else)",
            )
        return ModelConfig()
    api = value.get("api", "openai")
    if api not in WIRE_APIS:
        raise reader.fail("model.api", f"{api!r} is not one of {', '.join(WIRE_APIS)}")
    base_url_env = _names(reader, value, "base_url_env") or DEFAULT_BASE_URL_ENV[api]
    key_env = _names(reader, value, "key_env") or DEFAULT_KEY_ENV[api]
    env_value = value.get("env", {})
    if not isinstance(env_value, dict):
        raise reader.fail("model.env", f"expected a table of strings, got {_kind(env_value)}")
    env: dict[str, str] = {}
    for key, item in env_value.items():
        where = f"model.env.{key}"
        if not _ENV_NAME.match(key):
            raise reader.fail(where, "not an environment variable name")
        if not isinstance(item, str):
            raise reader.fail(where, f"expected a string, got {_kind(item)}")
        env[key] = _template(reader, item, where)
    taken = {*base_url_env, *key_env}
    for key in env:
        if key in taken:
            raise reader.fail(
                f"model.env.{key}", "already set by base_url_env or key_env; set it once"
            )
    files = _files(reader, value.get("files", []), directory)
    masks = _regexes(reader, value, "masks")
    partial_lanes = _regexes(reader, value, "partial_lanes")
    captures = _captures(reader, value.get("captures", []))
    return ModelConfig(
        via="proxy",
        api=api,
        base_url_env=base_url_env,
        key_env=key_env,
        env=env,
        files=files,
        masks=masks,
        partial_lanes=partial_lanes,
        captures=captures,
    )


def _captures(reader: _Reader, value: object) -> tuple[Capture, ...]:
    """``[[model.captures]]`` tables: ``regex`` (one group, or none: the whole match) and
    ``token`` (validated by ``Capture.checked``)."""
    if not isinstance(value, list):
        raise reader.fail(
            "model.captures",
            f"expected an array of tables, got {_kind(value)}, e.g. [[model.captures]] "
            'regex = \'"agent_id":"([0-9a-f-]{36})"\' token = "agent-id"',
        )
    captures: list[Capture] = []
    for index, item in enumerate(value):
        key = f"model.captures[{index}]"
        if not isinstance(item, dict):
            raise reader.fail(key, f"expected a table, got {_kind(item)}")
        reader.check_keys(item, {"regex", "token"}, f"{key}.")
        regex, token = item.get("regex"), item.get("token")
        if not isinstance(regex, str) or not regex:
            raise reader.fail(f"{key}.regex", "required: a non-empty string")
        if not isinstance(token, str) or not token:
            raise reader.fail(f"{key}.token", "required: a non-empty string")
        try:
            captures.append(Capture.checked(regex, token))
        except ValueError as exc:
            raise reader.fail(key, str(exc)) from None
    return tuple(captures)


def _strings(reader: _Reader, table: Mapping[str, object], key: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise reader.fail(f"model.{key}", "expected an array of non-empty strings")
    return tuple(value)


def _regexes(reader: _Reader, table: Mapping[str, object], key: str) -> tuple[str, ...]:
    patterns = _strings(reader, table, key)
    for index, pattern in enumerate(patterns):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise reader.fail(f"model.{key}[{index}]", f"not a valid regex: {exc}") from None
    return patterns


def _names(reader: _Reader, table: Mapping[str, object], key: str) -> tuple[str, ...]:
    """An environment variable name or an array of them."""
    value = table.get(key, [])
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(
        isinstance(name, str) and _ENV_NAME.match(name) for name in names
    ):
        raise reader.fail(
            f"model.{key}",
            'expected an environment variable name or an array of them, e.g. ["OPENAI_BASE_URL"]',
        )
    return tuple(names)


def _template(reader: _Reader, text: str, where: str) -> str:
    for name in _TEMPLATE_TOKEN.findall(text):
        if name not in TEMPLATE_PLACEHOLDERS:
            raise reader.fail(
                where,
                f"unknown placeholder {{{name}}}; known: "
                + ", ".join(f"{{{known}}}" for known in TEMPLATE_PLACEHOLDERS),
            )
    return text


def _files(reader: _Reader, value: object, directory: Path) -> tuple[HomeFile, ...]:
    if not isinstance(value, list):
        raise reader.fail("model.files", f"expected an array of tables, got {_kind(value)}")
    files: list[HomeFile] = []
    seen: set[str] = set()
    for index, table in enumerate(value):
        prefix = f"model.files[{index}]."
        if not isinstance(table, dict):
            raise reader.fail(f"model.files[{index}]", f"expected a table, got {_kind(table)}")
        reader.check_keys(table, _FILE_KEYS, prefix)
        path = reader.required_string(table, "path", prefix)
        parts = Path(path).parts
        if Path(path).is_absolute() or ".." in parts or not parts:
            raise reader.fail(
                f"{prefix}path", f"{path!r} must be a relative path inside HOME (no '..')"
            )
        normal = str(Path(path))
        if normal in seen:
            raise reader.fail(f"{prefix}path", f"{path!r} is given twice")
        seen.add(normal)
        template = reader.string(table, "template", prefix)
        text = reader.string(table, "text", prefix)
        if (template is None) == (text is None):
            raise reader.fail(prefix.rstrip("."), "give exactly one of template or text")
        if template is not None:
            source = directory / template
            if Path(template).is_absolute() or ".." in Path(template).parts:
                raise reader.fail(
                    f"{prefix}template", f"{template!r} must be a file in the scenario directory"
                )
            try:
                text = source.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise reader.fail(f"{prefix}template", f"cannot read {source}: {exc}") from None
            where = f"{prefix}template ({template})"
        else:
            assert text is not None
            where = f"{prefix}text"
        files.append(
            HomeFile(path=normal, text=_template(reader, text, where), source=template or "")
        )
    return tuple(files)


def _fork_server(reader: _Reader, value: object, defaults: ForkServerConfig) -> ForkServerConfig:
    if value is None:
        return defaults
    if not isinstance(value, dict):
        raise reader.fail("fork_server", f"expected a table, got {_kind(value)}")
    reader.check_keys(value, _FORK_SERVER_KEYS, "fork_server.")
    enabled = value.get("enabled", defaults.enabled)
    if not isinstance(enabled, bool):
        raise reader.fail("fork_server.enabled", f"expected true or false, got {_kind(enabled)}")
    preload = value.get("preload")
    if preload is None:
        return ForkServerConfig(enabled=enabled, preload=defaults.preload)
    if not isinstance(preload, list) or not all(
        isinstance(name, str) and _MODULE.match(name) for name in preload
    ):
        raise reader.fail(
            "fork_server.preload",
            'expected an array of module names, e.g. ["acp", "my_agent.tools:warm_up"]',
        )
    return ForkServerConfig(enabled=enabled, preload=tuple(preload))


_MODULE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?$")


def _directory_fork_server(directory: Path) -> ForkServerConfig:
    """The ``[fork_server]`` defaults of the fixtures directory holding ``directory``."""
    path = directory.parent / DIRECTORY_CONFIG_FILE
    if not path.is_file():
        return ForkServerConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    reader = _Reader(path)
    reader.check_keys(data, {"fork_server"}, "")
    return _fork_server(reader, data.get("fork_server"), ForkServerConfig())


def check_workspace(scenario: Scenario) -> None:
    """Refuse a workspace holding a symlink that leaves it (or is absolute)."""
    root = scenario.directory / WORKSPACE_DIR
    if root.is_symlink():
        raise ScenarioError(
            f"{root}: the workspace directory itself is a symlink; make it a real directory"
        )
    if not root.is_dir():
        return
    real_root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root):
        for entry in [*dirnames, *filenames]:
            path = Path(dirpath) / entry
            if not path.is_symlink():
                continue
            target = os.readlink(path)
            resolved = (path.parent / target).resolve()
            if os.path.isabs(target) or not resolved.is_relative_to(real_root):
                raise ScenarioError(
                    f"{path}: workspace symlink points outside the workspace ({target!r}); "
                    "a scenario must be self-contained — copy the file in or use a relative "
                    "link inside workspace/"
                )


def discover_scenarios(root: Path | str) -> list[Path]:
    """Every directory directly under ``root`` holding a ``scenario.toml``, sorted by name."""
    return sorted(p.parent for p in Path(root).glob(f"*/{SCENARIO_FILE}"))


def resolve_scenario(root: Path | str, name_or_path: str) -> Path:
    """A scenario directory from a bare name under ``root``, or an existing directory path."""
    candidate = Path(name_or_path)
    if (candidate / SCENARIO_FILE).is_file() and (
        os.sep in name_or_path or "/" in name_or_path or candidate.is_absolute()
    ):
        return candidate
    validate_scenario_name(name_or_path)
    directory = Path(root) / name_or_path
    if not (directory / SCENARIO_FILE).is_file():
        known = ", ".join(p.name for p in discover_scenarios(root)) or "none"
        raise ScenarioError(
            f"no scenario named {name_or_path!r} under {root} (no {directory / SCENARIO_FILE}); "
            f"known scenarios: {known}"
        )
    return directory
