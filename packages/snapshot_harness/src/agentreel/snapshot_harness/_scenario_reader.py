"""Reading ``scenario.toml``: every table validated strictly into the scenario model
(``_scenario``), and finding scenario directories.

Unknown keys and bad values are errors that name the file and the key, so a typo never
silently changes what a test does.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from agentreel.llm_replay import (
    PACE_NEEDS_PROXY,
    ReplaySettings,
    ReplaySettingsError,
    value_kind,
)
from agentreel.mcp_replay import URL_TRANSPORTS, check_server_name
from agentreel.session import (
    KeyMask,
    Mask,
    RecordSettings,
    RecordSettingsError,
    merge_kinds_checked,
    unordered_kinds_checked,
)
from agentreel.snapshot_harness._scenario import (
    DEFAULT_BASE_URL_ENV,
    DEFAULT_KEY_ENV,
    DEFAULT_STUB_MODEL,
    DEFAULT_STUB_RULES,
    DEFAULT_TIMEOUT,
    DIRECTORY_CONFIG_FILE,
    MAX_TIMEOUT,
    MCP_PORT,
    MCP_TOKEN,
    PROTOCOLS,
    SCENARIO_FILE,
    SHUTDOWNS,
    TEMPLATE_PLACEHOLDERS,
    TEMPLATE_TOKEN,
    VIAS,
    WIRE_APIS,
    WORKSPACE_DIR,
    Authenticate,
    ExpectError,
    ForkServerConfig,
    ForkSession,
    HomeFile,
    Initialize,
    LoadSession,
    McpServerConfig,
    ModelConfig,
    NewSession,
    PermissionKind,
    Prompt,
    PromptAndCancel,
    RecordConfig,
    ReplayConfig,
    Scenario,
    Step,
    validate_scenario_name,
)
from agentreel.snapshot_harness.exceptions import ScenarioError, UnreadableFixtureError

_Word = TypeVar("_Word", bound=str)


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

    def tables(
        self, value: object, name: str, allowed: set[str], example: str = ""
    ) -> Iterator[tuple[str, dict[str, object]]]:
        """An array of tables (``[[name]]``): ``(key, table)`` for each, ``key`` its path
        (``name[i]``), each table's keys checked; ``example`` completes the message when
        ``value`` is no array."""
        if not isinstance(value, list):
            raise self.fail(
                name,
                f"expected an array of tables, got {_kind(value)}"
                + (f", e.g. [[{name}]] {example}" if example else ""),
            )
        for index, table in enumerate(value):
            key = f"{name}[{index}]"
            if not isinstance(table, dict):
                raise self.fail(key, f"expected a table, got {_kind(table)}")
            self.check_keys(table, allowed, f"{key}.")
            yield key, table

    def string(self, table: Mapping[str, object], key: str, prefix: str) -> str | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(f"{prefix}{key}", f"expected a string, got {_kind(value)}")
        return value

    def choice(
        self,
        table: Mapping[str, object],
        key: str,
        default: _Word,
        choices: Sequence[_Word],
        *,
        prefix: str = "",
        meanings: str = "",
    ) -> _Word:
        """``table[key]`` (``default`` when absent), which must be one of ``choices``;
        ``meanings`` (what each choice does) closes the message when it is not."""
        value = table.get(key, default)
        for choice in choices:
            if value == choice:
                return choice
        raise self.fail(
            f"{prefix}{key}",
            f"{value!r} is not one of {', '.join(choices)}"
            + (f" ({meanings})" if meanings else ""),
        )

    def required_string(self, table: Mapping[str, object], key: str, prefix: str) -> str:
        value = self.string(table, key, prefix)
        if value is None or not value:
            raise self.fail(f"{prefix}{key}", "required: a non-empty string")
        return value


_kind = value_kind  # a value's type in TOML's words, as replay's settings say it


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
    "mcp_servers",
    "fixture",
    "authenticate",
}
_MCP_SERVER_KEYS = {"name", "command", "args", "env", "url", "start", "transport"}
_FIXTURE_KEYS = {"inputs"}
_AUTHENTICATE_KEYS = {"method", "env"}
_GOLDEN_MASK_KEYS = {"regex", "key", "token"}
_TRANSCRIPT_KEYS = {"unordered", "merge"}
_REPLAY_KEYS = set(ReplaySettings.names("replay"))
_FORK_SERVER_KEYS = {"enabled", "preload"}
_STEP_KEYS: dict[str, set[str]] = {
    "initialize": {"type"},
    "new_session": {"type"},
    "load_session": {"type"},
    "fork_session": {"type"},
    "prompt": {"type", "text"},
    "prompt_and_cancel": {"type", "text"},
    "expect_error": {"type", "method", "text", "session", "code", "message"},
    "authenticate": {"type", *_AUTHENTICATE_KEYS},
}
_RECORD_KEYS = {
    "provider",
    "model",
    "rules",
    "base_url",
    "prices",
    "strict",
    "retries",
    *RecordSettings.names(),
}
_MODEL_KEYS = {
    "via",
    "api",
    "base_url_env",
    "key_env",
    "env",
    "files",
    *ReplaySettings.names("model"),
}
_FILE_KEYS = {"path", "template", "text"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PERMISSION_ALIASES: dict[str, PermissionKind] = {
    "allow": "allow_once",
    "allow_once": "allow_once",
    "allow_always": "allow_always",
    "reject": "reject_once",
    "reject_once": "reject_once",
    "reject_always": "reject_always",
    "cancelled": "cancelled",
}


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
    shutdown = reader.choice(
        data,
        "shutdown",
        "eof",
        SHUTDOWNS,
        meanings="eof: close stdin and wait; sigterm: also send SIGTERM, as ACP clients do",
    )
    env = _env(reader, data.get("env"))
    permissions = _permissions(reader, data.get("permissions"))
    protocol = reader.choice(
        data,
        "protocol",
        "acp",
        PROTOCOLS,
        meanings="acp: an ACP server on stdio; command: a command run once per prompt step, "
        "the prompt in argv or on stdin",
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
    replay = _replay(reader, model, data.get("model"), data.get("replay"))
    mcp_servers = _mcp_servers(reader, data.get("mcp_servers"))
    _check_mcp_tokens(reader, agent, env, model, {server.name for server in mcp_servers})
    inputs = _fixture_inputs(reader, data.get("fixture"))
    authenticate = data.get("authenticate")
    if authenticate is not None and not isinstance(authenticate, dict):
        raise reader.fail("authenticate", f"expected a table, got {_kind(authenticate)}")
    if authenticate is not None:
        reader.check_keys(authenticate, _AUTHENTICATE_KEYS, "authenticate.")
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
        model=replace(model, replay=replay),
        fork_server=fork_server,
        golden_masks=golden_masks,
        unordered=unordered,
        merge=merge,
        mcp_servers=mcp_servers,
        inputs=inputs,
        authenticate=(
            _authenticate(reader, authenticate, "authenticate.") if authenticate else None
        ),
    )
    check_workspace(scenario)
    return scenario


def _fixture_inputs(reader: _Reader, value: object) -> tuple[str, ...]:
    """``[fixture] inputs = ["run.sh", ...]``: paths inside the scenario directory."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise reader.fail("fixture", f"expected a table, got {_kind(value)}")
    reader.check_keys(value, _FIXTURE_KEYS, "fixture.")
    inputs = value.get("inputs", [])
    if not isinstance(inputs, list):
        raise reader.fail("fixture.inputs", f"expected an array of paths, got {_kind(inputs)}")
    for position, item in enumerate(inputs):
        where = f"fixture.inputs[{position}]"
        if not isinstance(item, str) or not item:
            raise reader.fail(where, f"expected a non-empty path, got {_kind(item)}")
        parts = Path(item.removeprefix("./")).parts
        if Path(item).is_absolute() or ".." in parts or not parts:
            raise reader.fail(where, f"{item!r}: name a file inside the scenario directory")
    return tuple(str(Path(item.removeprefix("./"))) for item in inputs)


def _replay(
    reader: _Reader, model: ModelConfig, model_table: object, value: object
) -> ReplayConfig:
    """The one ``ReplaySettings`` value of ``[replay]`` and ``[model]``'s settings keys
    (``masks``, ``partial_lanes``, ``captures``: with ``via = "proxy"``, checked by
    ``_model``), checked by the value itself; its problem named at the key as typed."""
    given: dict[str, object] = {}
    if model.proxied and isinstance(model_table, dict):
        given.update({k: v for k, v in model_table.items() if k in ReplaySettings.names("model")})
    if value is not None:
        if not isinstance(value, dict):
            raise reader.fail("replay", f"expected a table, got {_kind(value)}")
        reader.check_keys(value, _REPLAY_KEYS, "replay.")
        given.update(value)
    try:
        config = ReplayConfig.from_mapping(given)
    except ReplaySettingsError as error:
        table = ReplaySettings.specs()[error.setting].table
        raise reader.fail(f"{table}.{error.key}", error.problem) from None
    if config.pace == "recorded" and not model.proxied:
        raise reader.fail("replay.pace", f"'recorded' needs the proxy: {PACE_NEEDS_PROXY}")
    return config


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


def _check_mcp_tokens(
    reader: _Reader,
    agent: tuple[str, ...] | None,
    env: Mapping[str, str],
    model: ModelConfig,
    declared: set[str],
) -> None:
    """Every ``{mcp:<name>}`` names a declared ``[[mcp_servers]]`` server."""
    places = [(f"agent[{i}]", part) for i, part in enumerate(agent or ())]
    places += [(f"env.{key}", text) for key, text in env.items()]
    places += [(f"model.env.{key}", text) for key, text in model.env.items()]
    places += [
        (f"model.files[{i}] ({file.source or file.path})", file.text)
        for i, file in enumerate(model.files)
    ]
    for where, text in places:
        for name in MCP_TOKEN.findall(text):
            if name not in declared:
                known = ", ".join(sorted(declared)) or "none: add [[mcp_servers]]"
                raise reader.fail(
                    where,
                    f"{{mcp:{name}}} names no MCP server of this scenario (declared: {known})",
                )


def _mcp_servers(reader: _Reader, value: object) -> tuple[McpServerConfig, ...]:
    """``[[mcp_servers]]``: ``name`` and either ``command`` (+ ``args``, ``env``) or ``url``
    (+ ``transport``: ``"http"``, streamable HTTP, the default, or ``"sse"``, the legacy
    HTTP+SSE transport)."""
    if value is None:
        return ()
    servers: list[McpServerConfig] = []
    example = 'name = "time" command = "mcp-server-time"'
    for key, item in reader.tables(value, "mcp_servers", _MCP_SERVER_KEYS, example):
        name = reader.required_string(item, "name", f"{key}.")
        try:
            check_server_name(name)
        except ValueError as exc:
            raise reader.fail(f"{key}.name", str(exc)) from None
        if name in {server.name for server in servers}:
            raise reader.fail(f"{key}.name", f"{name!r} is declared twice; names are unique")
        command = reader.string(item, "command", f"{key}.")
        url = reader.string(item, "url", f"{key}.")
        if (command is None) == (url is None):
            raise reader.fail(
                key, "give either `command` (a stdio server) or `url` (streamable HTTP)"
            )
        args = item.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise reader.fail(f"{key}.args", "expected an array of strings")
        if url is not None and ("args" in item or "env" in item):
            raise reader.fail(key, "`args` and `env` belong to a stdio server (`command`)")
        env = item.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise reader.fail(f"{key}.env", "expected a table of strings")
        transport = reader.string(item, "transport", f"{key}.")
        if transport is not None and url is None:
            raise reader.fail(
                f"{key}.transport", "`transport` belongs to a server reached by `url`"
            )
        if transport is not None and transport not in URL_TRANSPORTS:
            raise reader.fail(
                f"{key}.transport",
                f"{transport!r} is no MCP transport agentreel serves: give "
                + " or ".join(repr(t) for t in URL_TRANSPORTS)
                + " (streamable HTTP, the default, or the legacy HTTP+SSE transport)",
            )
        start = item.get("start", [])
        if not isinstance(start, list) or not all(isinstance(a, str) and a for a in start):
            raise reader.fail(f"{key}.start", "expected an array of non-empty strings")
        if start and url is None:
            raise reader.fail(
                f"{key}.start",
                "`start` belongs to an HTTP server (`url`); a stdio server's "
                "`command` is started by agentreel's shim",
            )
        if url is not None and (MCP_PORT in url) != any(MCP_PORT in a for a in start):
            raise reader.fail(
                f"{key}.url",
                f"{MCP_PORT} is the port the harness takes for the server it starts: write it "
                "in both `url` and `start`, or in neither",
            )
        servers.append(
            McpServerConfig(
                name=name,
                command=(command, *args) if command is not None else (),
                env=dict(env),
                url=url,
                start=tuple(start),
                transport="sse" if transport == "sse" else "http",
            )
        )
    return tuple(servers)


def _golden_masks(reader: _Reader, value: object) -> tuple[Mask | KeyMask, ...]:
    """``[[golden_masks]]`` tables: ``token`` and either ``regex`` (may hold
    ``{cwd_from_root}``) or ``key`` (a JSON key whose value, any type, is masked)."""
    if value is None:
        return ()
    masks: list[Mask | KeyMask] = []
    example = 'regex = "ses_[0-9A-Za-z]{26}" token = "opencode-session"'
    for key, table in reader.tables(value, "golden_masks", _GOLDEN_MASK_KEYS, example):
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
        elif kind in ("load_session", "fork_session"):
            if not have_session:
                raise reader.fail(
                    f"{prefix}type",
                    f"{kind} before any new_session step: it acts on the current session; "
                    "add a new_session step first",
                )
            step = LoadSession() if kind == "load_session" else ForkSession()
        elif kind in ("prompt", "prompt_and_cancel"):
            text = reader.required_string(table, "text", prefix)
            if not have_session:
                raise reader.fail(
                    f"{prefix}type",
                    f"{kind} before any new_session step; add a new_session step first "
                    "(or use expect_error to test that the agent refuses it)",
                )
            step = Prompt(text) if kind == "prompt" else PromptAndCancel(text)
        elif kind == "authenticate":
            step = _authenticate(reader, table, prefix)
        else:
            step = _expect_error(reader, table, prefix, have_session)
        steps.append(step)
    return tuple(steps)


def _authenticate(reader: _Reader, table: Mapping[str, object], prefix: str) -> Authenticate:
    """An ``authenticate`` step or the ``[authenticate]`` table: ``method``, ``env``."""
    method = reader.required_string(table, "method", prefix)
    env = table.get("env", [])
    if not isinstance(env, list) or not all(
        isinstance(name, str) and _ENV_NAME.match(name) for name in env
    ):
        raise reader.fail(
            f"{prefix}env", 'expected an array of environment variable names, e.g. ["MY_KEY"]'
        )
    return Authenticate(method=method, env=tuple(env))


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
        settings = RecordSettings.from_mapping(
            {name: value[name] for name in RecordSettings.names() if name in value}
        )
    except RecordSettingsError as error:
        raise reader.fail(f"record.{error.setting}", error.problem) from None
    prices = reader.string(value, "prices", "record.")
    strict = value.get("strict", False)
    if not isinstance(strict, bool):
        raise reader.fail("record.strict", f"expected true or false, got {_kind(strict)}")
    counts: dict[str, int | None] = {}
    for key in ("retries",):
        count = value.get(key)
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or count < 0
        ):
            raise reader.fail(f"record.{key}", f"expected a count (0, 1, …), got {count!r}")
        counts[key] = count
    return RecordConfig(
        provider=provider,
        model=model,
        rules=rules,
        base_url=base_url,
        settings=settings,
        prices=directory / prices if prices else None,
        strict=strict,
        retries=counts["retries"],
    )


def _model(reader: _Reader, value: object, directory: Path) -> ModelConfig:
    if value is None:
        return ModelConfig()
    if not isinstance(value, dict):
        raise reader.fail("model", f"expected a table, got {_kind(value)}")
    reader.check_keys(value, _MODEL_KEYS, "model.")
    via = reader.choice(value, "via", "provider", VIAS, prefix="model.")
    if via == "provider":
        extra = sorted(set(value) - {"via"})
        if extra:
            raise reader.fail(
                f"model.{extra[0]}",
                'only with via = "proxy"; an in-process agent is configured by AGENTREEL_* '
                "variables (use [env] for anything else)",
            )
        return ModelConfig()
    api = reader.choice(value, "api", "openai", WIRE_APIS, prefix="model.")
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
    return ModelConfig(
        via="proxy", api=api, base_url_env=base_url_env, key_env=key_env, env=env, files=files
    )


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
    for name in TEMPLATE_TOKEN.findall(text):
        if name not in TEMPLATE_PLACEHOLDERS:
            raise reader.fail(
                where,
                f"unknown placeholder {{{name}}}; known: "
                + ", ".join(f"{{{known}}}" for known in TEMPLATE_PLACEHOLDERS),
            )
    return text


def _files(reader: _Reader, value: object, directory: Path) -> tuple[HomeFile, ...]:
    files: list[HomeFile] = []
    seen: set[str] = set()
    for key, table in reader.tables(value, "model.files", _FILE_KEYS):
        prefix = f"{key}."
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
