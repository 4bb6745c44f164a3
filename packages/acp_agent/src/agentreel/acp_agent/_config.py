"""The agent's configuration: command-line flags over ``AGENTREEL_*`` environment variables.

Flags win over the environment; the environment wins over defaults. The provider half of
the environment (provider, model, settings, replay variables, sessions root) is read by
the agent kit's one reader, ``agentreel.llm.AgentEnvironment``, and the flags are laid
over it; provider settings are passed through to the provider factory untouched, so a new
provider needs no change here. The rest (max steps, system prompt, log level) is this
agent's own.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentreel.acp_agent.exceptions import ConfigError

DEFAULT_PROVIDER = "stub"
DEFAULT_MAX_STEPS = 25
DEFAULT_MAX_DEPTH = 2
SUBAGENT_RUNNERS = ("in-process", "process")
# What a parent hands a process subagent (its own agent process) in the environment: the
# child's session id, the parent's, the spawn index and the nesting depth. Internal to the
# parent/child contract; a user never sets them.
CHILD_SESSION_ENV = "AGENTREEL_CHILD_SESSION_ID"
PARENT_SESSION_ENV = "AGENTREEL_PARENT_SESSION_ID"
SPAWN_INDEX_ENV = "AGENTREEL_SPAWN_INDEX"
DEPTH_ENV = "AGENTREEL_DEPTH"
# The child's MCP lineage (``main/0``): how its own MCP connections name it (SPEC 19).
LINEAGE_ENV = "AGENTREEL_LINEAGE"
# Used when neither --model nor AGENTREEL_MODEL is given. The model name is part of every
# recorded request header, so a replay must run with the model its recording used.
DEFAULT_MODELS: dict[str, str] = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
}
FALLBACK_MODEL = "stub-model"
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The system prompt of every model call (children included). It is part of every recorded
# request header: changing it makes every committed recording drift, which is the point
# of --system-prompt in a test, and why this default must only change with a re-record.
DEFAULT_SYSTEM_PROMPT = (
    "You are agentreel's reference coding agent. You work inside one workspace directory: "
    "use list_files and read_file to look around, write_file to change files (the user "
    "approves every write), and subagent to delegate self-contained tasks. Several subagent "
    "calls in one response run concurrently. Answer concisely when the task is done."
)


@dataclass(frozen=True)
class AgentConfig:
    """Everything the agent process needs to know before the first ACP message."""

    provider: str = DEFAULT_PROVIDER
    model: str = FALLBACK_MODEL
    sessions_root: Path = field(default_factory=lambda: Path.cwd() / ".agentreel" / "sessions")
    provider_settings: dict[str, Any] = field(default_factory=dict)
    max_steps: int = DEFAULT_MAX_STEPS
    # Replay only: the directory whose {{cwd}} tokens stand for the live cwd. When unset the
    # cwd of the first ACP session is used (the provider is created lazily for that reason).
    replay_live_cwd: Path | None = None
    log_level: str = "WARNING"
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_depth: int = DEFAULT_MAX_DEPTH
    # "process": a subagent call with mode "spawn" or "process" runs as a separate agent
    # process driven over ACP ("fork" stays in process: it continues this conversation).
    subagent_runner: str = "in-process"
    # Set when this process is a process subagent (from its parent's environment).
    child: ChildIdentity | None = None
    # Offer ACP session/load and session/fork (advertised in initialize). Off by default:
    # the initialize answer is in every recorded transcript, so the default's must not
    # change.
    load_and_fork: bool = False


@dataclass(frozen=True)
class ChildIdentity:
    """Who this agent process is when its parent started it as a process subagent."""

    session_id: str
    parent_session_id: str
    spawn_index: int
    depth: int
    # How its MCP connections name it: its parent's lineage and its spawn index.
    lineage: str


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentreel-acp-agent",
        description=(
            "agentreel's reference ACP coding agent (stdio). stdout carries ACP frames only; "
            "logs go to stderr. Every flag has an AGENTREEL_* environment equivalent."
        ),
    )
    parser.add_argument(
        "--provider",
        help="LLM provider registered under 'agentreel.llm.providers' "
        "(openai, anthropic, stub, replay). Env: AGENTREEL_PROVIDER. Default: stub.",
    )
    parser.add_argument("--model", help="model name. Env: AGENTREEL_MODEL.")
    parser.add_argument(
        "--sessions-root",
        help="directory the session logs are written under. Env: AGENTREEL_SESSIONS_ROOT. "
        "Default: ./.agentreel/sessions.",
    )
    parser.add_argument(
        "--provider-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a keyword for the provider factory (repeatable). VALUE is parsed as JSON when "
        "it is valid JSON, else taken as a string. Env: AGENTREEL_PROVIDER_SETTINGS "
        "(a JSON object; flags override its keys).",
    )
    parser.add_argument(
        "--replay-dir",
        help="replay fixture directory (provider setting fixture_dir). Env: AGENTREEL_REPLAY_DIR.",
    )
    parser.add_argument(
        "--replay-report",
        help="where the replay provider writes its consumption report (provider setting "
        "report_path). Env: AGENTREEL_REPLAY_REPORT.",
    )
    parser.add_argument(
        "--replay-live-cwd",
        help="the live cwd that replaces {{cwd}} in recorded chunks (provider setting "
        "live_cwd). Env: AGENTREEL_REPLAY_LIVE_CWD. Default: the cwd of the first session.",
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        help=f"model calls per turn before the turn ends with max-turns. "
        f"Env: AGENTREEL_MAX_STEPS. Default: {DEFAULT_MAX_STEPS}.",
    )
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument(
        "--system-prompt",
        metavar="TEXT",
        help="the system prompt of every model call. Env: AGENTREEL_SYSTEM_PROMPT. "
        "Default: the built-in reference prompt.",
    )
    prompt.add_argument(
        "--system-prompt-file",
        metavar="PATH",
        help="read the system prompt from a UTF-8 file (trailing line breaks removed). "
        "Env: AGENTREEL_SYSTEM_PROMPT_FILE.",
    )
    parser.add_argument(
        "--max-depth",
        type=int,
        help=f"how deep subagents may nest (the main session is depth 0). "
        f"Env: AGENTREEL_MAX_DEPTH. Default: {DEFAULT_MAX_DEPTH}.",
    )
    parser.add_argument(
        "--subagent-runner",
        choices=SUBAGENT_RUNNERS,
        help="where a spawned subagent runs: in this process, or as a separate agent process "
        "driven over ACP (then mode 'process' is offered to the model and is what 'spawn' "
        "does). Env: AGENTREEL_SUBAGENT_RUNNER. Default: in-process.",
    )
    parser.add_argument(
        "--load-and-fork",
        action="store_true",
        default=None,
        help="offer ACP session/load (a session of this process, with the client's MCP "
        "servers, its history sent again) and session/fork (a fork child of a session, "
        "carrying its conversation), advertised in initialize. Env: "
        "AGENTREEL_LOAD_AND_FORK=1. Default: off.",
    )
    parser.add_argument(
        "--log-level", help="stderr log level. Env: AGENTREEL_LOG_LEVEL. Default: WARNING."
    )
    return parser


def _parse_setting_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _read_prompt_file(path_text: str, source: str) -> str:
    try:
        text = Path(path_text).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{source} {path_text!r} cannot be read ({exc}); point it at a readable UTF-8 "
            "text file holding the system prompt"
        ) from None
    return text.rstrip("\r\n")


def _system_prompt(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    """Flags over environment over the default; text and file at the same level conflict."""
    prompt: str
    if args.system_prompt is not None:
        prompt, source = args.system_prompt, "--system-prompt"
    elif args.system_prompt_file is not None:
        prompt = _read_prompt_file(args.system_prompt_file, "--system-prompt-file")
        source = f"--system-prompt-file {args.system_prompt_file!r}"
    else:
        env_text = env.get("AGENTREEL_SYSTEM_PROMPT")
        env_file = env.get("AGENTREEL_SYSTEM_PROMPT_FILE")
        if env_text and env_file:
            raise ConfigError(
                "AGENTREEL_SYSTEM_PROMPT and AGENTREEL_SYSTEM_PROMPT_FILE are both set; "
                "unset one of them (or pass --system-prompt / --system-prompt-file)"
            )
        if env_text:
            prompt, source = env_text, "AGENTREEL_SYSTEM_PROMPT"
        elif env_file:
            prompt = _read_prompt_file(env_file, "AGENTREEL_SYSTEM_PROMPT_FILE")
            source = f"AGENTREEL_SYSTEM_PROMPT_FILE {env_file!r}"
        else:
            return DEFAULT_SYSTEM_PROMPT
    if not prompt.strip():
        raise ConfigError(
            f"{source} gives an empty system prompt; give some text, or drop it to use "
            "the built-in prompt"
        )
    return prompt


def parse_config(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> AgentConfig:
    """Build the configuration from ``argv`` (default: ``sys.argv[1:]``) and ``environ``."""
    env = os.environ if environ is None else environ
    args = _parser().parse_args(argv)

    # Imported here: the entry point parses the configuration only after stdout is taken,
    # and ``agentreel.llm`` (msgspec) must not load before that.
    from agentreel.llm import AgentEnvironment, AgentEnvironmentError

    try:
        contract = AgentEnvironment.from_environ(env)
    except AgentEnvironmentError as exc:
        raise ConfigError(str(exc)) from None
    flag_settings: dict[str, Any] = {}
    if args.replay_dir:
        flag_settings["fixture_dir"] = args.replay_dir
    if args.replay_report:
        flag_settings["report_path"] = args.replay_report
    for item in args.provider_setting:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(
                f"--provider-setting {item!r} is not KEY=VALUE; write e.g. "
                "--provider-setting base_url=http://127.0.0.1:8000/v1"
            )
        flag_settings[key] = _parse_setting_value(value)
    contract = contract.overlay(
        provider=args.provider or None,
        model=args.model or None,
        settings=flag_settings,
        live_cwd=args.replay_live_cwd or None,
        sessions_root=args.sessions_root or None,
    )
    provider = contract.provider or DEFAULT_PROVIDER
    model = contract.model or DEFAULT_MODELS.get(provider, FALLBACK_MODEL)
    sessions_root = (
        Path(contract.sessions_root)
        if contract.sessions_root
        else Path.cwd() / ".agentreel" / "sessions"
    )

    max_steps_text = (
        args.max_steps if args.max_steps is not None else env.get("AGENTREEL_MAX_STEPS")
    )
    max_steps = DEFAULT_MAX_STEPS
    if max_steps_text is not None:
        try:
            max_steps = int(max_steps_text)
        except ValueError:
            raise ConfigError(
                f"AGENTREEL_MAX_STEPS={max_steps_text!r} is not an integer; set a positive "
                "number of model calls per turn"
            ) from None
    if max_steps < 1:
        raise ConfigError(
            f"max steps (--max-steps / AGENTREEL_MAX_STEPS) must be at least 1, got "
            f"{max_steps}; give the number of model calls a turn may make"
        )
    log_level = (args.log_level or env.get("AGENTREEL_LOG_LEVEL") or "WARNING").upper()
    if log_level not in _LOG_LEVELS:
        raise ConfigError(
            f"log level (--log-level / AGENTREEL_LOG_LEVEL) {log_level!r} is unknown; "
            f"use one of {', '.join(_LOG_LEVELS)}"
        )

    max_depth = _positive(
        args.max_depth if args.max_depth is not None else env.get("AGENTREEL_MAX_DEPTH"),
        "max depth (--max-depth / AGENTREEL_MAX_DEPTH)",
        DEFAULT_MAX_DEPTH,
        minimum=0,
    )
    runner = args.subagent_runner or env.get("AGENTREEL_SUBAGENT_RUNNER") or "in-process"
    if runner not in SUBAGENT_RUNNERS:
        raise ConfigError(
            f"AGENTREEL_SUBAGENT_RUNNER={runner!r} is unknown; use one of "
            f"{', '.join(SUBAGENT_RUNNERS)}"
        )
    return AgentConfig(
        provider=provider,
        model=model,
        sessions_root=sessions_root,
        provider_settings=contract.settings,
        max_steps=max_steps,
        replay_live_cwd=Path(contract.live_cwd) if contract.live_cwd else None,
        log_level=log_level,
        system_prompt=_system_prompt(args, env),
        max_depth=max_depth,
        subagent_runner=runner,
        child=_child_identity(env),
        load_and_fork=_flag(args.load_and_fork, env, "AGENTREEL_LOAD_AND_FORK"),
    )


def _flag(given: bool | None, env: Mapping[str, str], name: str) -> bool:
    """A switch: its flag, else ``name`` in the environment (``1``/``true`` on,
    ``0``/``false``/empty off)."""
    if given is not None:
        return given
    value = env.get(name, "").strip().lower()
    if value in ("", "0", "false"):
        return False
    if value in ("1", "true"):
        return True
    raise ConfigError(f"{name}={value!r}: use 1 (on) or 0 (off)")


def _positive(value: object, what: str, default: int, *, minimum: int) -> int:
    if value is None:
        return default
    try:
        number = int(str(value))
    except ValueError:
        raise ConfigError(f"{what} {value!r} is not an integer") from None
    if number < minimum:
        raise ConfigError(f"{what} must be at least {minimum}, got {number}")
    return number


def _child_identity(env: Mapping[str, str]) -> ChildIdentity | None:
    """The identity a parent handed down, or ``None`` for a top-level agent process."""
    session_id = env.get(CHILD_SESSION_ENV)
    if not session_id:
        return None
    parent = env.get(PARENT_SESSION_ENV)
    if not parent:
        raise ConfigError(
            f"{CHILD_SESSION_ENV} is set but {PARENT_SESSION_ENV} is not: a process subagent "
            "needs both (they are set by the parent agent process, not by hand)"
        )
    spawn_index = _positive(env.get(SPAWN_INDEX_ENV), SPAWN_INDEX_ENV, 0, minimum=0)
    depth = _positive(env.get(DEPTH_ENV), DEPTH_ENV, 1, minimum=1)
    return ChildIdentity(
        session_id=session_id,
        parent_session_id=parent,
        spawn_index=spawn_index,
        depth=depth,
        lineage=env.get(LINEAGE_ENV) or f"main/{spawn_index}",
    )
