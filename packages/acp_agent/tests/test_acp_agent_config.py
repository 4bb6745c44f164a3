"""Configuration parsing, the lazy entry point and the workspace confinement of the file
tools."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentreel.acp_agent import (
    SYSTEM_PROMPT,
    AgentConfig,
    ConfigError,
    PathEscapeError,
    ToolError,
    Workspace,
)
from agentreel.acp_agent._config import DEFAULT_MAX_STEPS, DEFAULT_SYSTEM_PROMPT, parse_config


def test_defaults_without_flags_or_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = parse_config([], {})
    assert config == AgentConfig(
        provider="stub",
        model="stub-model",
        sessions_root=tmp_path / ".agentreel" / "sessions",
        provider_settings={},
        max_steps=DEFAULT_MAX_STEPS,
        replay_live_cwd=None,
        log_level="WARNING",
        system_prompt=DEFAULT_SYSTEM_PROMPT,
    )
    # The loop's default and the configuration's are one prompt: the committed recordings
    # hold it in every request header.
    assert SYSTEM_PROMPT is DEFAULT_SYSTEM_PROMPT
    assert DEFAULT_SYSTEM_PROMPT.startswith("You are agentreel's reference coding agent.")


def test_environment_configures_replay() -> None:
    config = parse_config(
        [],
        {
            "AGENTREEL_PROVIDER": "replay",
            "AGENTREEL_MODEL": "gpt-test",
            "AGENTREEL_SESSIONS_ROOT": "/tmp/roots",
            "AGENTREEL_REPLAY_DIR": "/fx/plain-turn",
            "AGENTREEL_REPLAY_REPORT": "/tmp/report.json",
            "AGENTREEL_REPLAY_LIVE_CWD": "/work/live",
            "AGENTREEL_PROVIDER_SETTINGS": '{"drift": "warn", "pacing_ms": 2}',
            "AGENTREEL_MAX_STEPS": "4",
            "AGENTREEL_LOG_LEVEL": "debug",
        },
    )
    assert config.provider == "replay"
    assert config.model == "gpt-test"
    assert config.sessions_root == Path("/tmp/roots")
    assert config.provider_settings == {
        "drift": "warn",
        "pacing_ms": 2,
        "fixture_dir": "/fx/plain-turn",
        "report_path": "/tmp/report.json",
    }
    assert config.replay_live_cwd == Path("/work/live")
    assert config.max_steps == 4
    assert config.log_level == "DEBUG"


def test_flags_override_the_environment() -> None:
    config = parse_config(
        [
            "--provider",
            "openai",
            "--provider-setting",
            "base_url=http://127.0.0.1:9/v1",
            "--provider-setting",
            "max_retries=0",
            "--provider-setting",
            "drift=error",
            "--max-steps",
            "2",
        ],
        {"AGENTREEL_PROVIDER": "anthropic", "AGENTREEL_PROVIDER_SETTINGS": '{"drift": "off"}'},
    )
    assert config.provider == "openai"
    assert config.model == "gpt-4o-mini"
    assert config.provider_settings == {
        "drift": "error",
        "base_url": "http://127.0.0.1:9/v1",
        "max_retries": 0,
    }
    assert config.max_steps == 2


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        ([], {"AGENTREEL_PROVIDER_SETTINGS": "{nope"}, "not valid JSON"),
        ([], {"AGENTREEL_PROVIDER_SETTINGS": "[1]"}, "must be a JSON object"),
        (["--provider-setting", "no-equals-sign"], {}, "is not KEY=VALUE"),
        ([], {"AGENTREEL_MAX_STEPS": "many"}, "is not an integer"),
        (["--max-steps", "0"], {}, "at least 1"),
        (["--log-level", "loud"], {}, "log level .* 'LOUD' is unknown; use one of DEBUG"),
        ([], {"AGENTREEL_LOG_LEVEL": "verbose"}, "AGENTREEL_LOG_LEVEL\\) 'VERBOSE' is unknown"),
        (["--system-prompt", "  "], {}, "--system-prompt gives an empty system prompt"),
        ([], {"AGENTREEL_SYSTEM_PROMPT": "\n"}, "AGENTREEL_SYSTEM_PROMPT gives an empty"),
        (
            [],
            {"AGENTREEL_SYSTEM_PROMPT": "a", "AGENTREEL_SYSTEM_PROMPT_FILE": "b"},
            "both set",
        ),
        (
            ["--system-prompt-file", "/nonexistent/prompt.txt"],
            {},
            "--system-prompt-file '/nonexistent/prompt.txt' cannot be read",
        ),
    ],
)
def test_bad_configuration_is_a_clear_error(
    argv: list[str], environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(argv, environ)


def test_load_and_fork_is_off_by_default_and_switched_by_flag_or_environment() -> None:
    """Off by default: the initialize answer (advertising it) is in every recorded
    transcript."""
    assert parse_config([], {}).load_and_fork is False
    assert parse_config([], {"AGENTREEL_LOAD_AND_FORK": "1"}).load_and_fork is True
    assert parse_config([], {"AGENTREEL_LOAD_AND_FORK": "0"}).load_and_fork is False
    assert parse_config(["--load-and-fork"], {}).load_and_fork is True
    with pytest.raises(ConfigError, match=r"AGENTREEL_LOAD_AND_FORK='yes': use 1 \(on\)"):
        parse_config([], {"AGENTREEL_LOAD_AND_FORK": "yes"})


def test_system_prompt_flags_win_over_the_environment(tmp_path: Path) -> None:
    prompt_file = tmp_path / "prompt.txt"
    prompt_file.write_text("From the file.\nSecond line.\n", encoding="utf-8")
    env_file = tmp_path / "env-prompt.txt"
    env_file.write_text("From the env file.\r\n", encoding="utf-8")

    assert parse_config([], {"AGENTREEL_SYSTEM_PROMPT": "From env."}).system_prompt == ("From env.")
    assert parse_config([], {"AGENTREEL_SYSTEM_PROMPT_FILE": str(env_file)}).system_prompt == (
        "From the env file."
    )
    assert parse_config(
        ["--system-prompt", "From the flag."], {"AGENTREEL_SYSTEM_PROMPT": "From env."}
    ).system_prompt == ("From the flag.")
    # A flag of either kind beats both environment variables (which alone would conflict).
    both = {"AGENTREEL_SYSTEM_PROMPT": "a", "AGENTREEL_SYSTEM_PROMPT_FILE": str(env_file)}
    assert parse_config(["--system-prompt-file", str(prompt_file)], both).system_prompt == (
        "From the file.\nSecond line."
    )
    # An empty variable counts as unset, like every other AGENTREEL_* variable.
    assert parse_config([], {"AGENTREEL_SYSTEM_PROMPT": ""}).system_prompt == (
        DEFAULT_SYSTEM_PROMPT
    )


def test_system_prompt_text_and_file_flags_are_exclusive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse_config(["--system-prompt", "a", "--system-prompt-file", str(tmp_path)], {})
    assert "not allowed with argument" in capsys.readouterr().err


def test_workspace_confines_paths(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "inner").mkdir(parents=True)
    (root / "inner" / "a.txt").write_text("A")
    (tmp_path / "outside.txt").write_text("secret")
    (root / "escape").symlink_to(tmp_path)
    (root / "inside-link").symlink_to(root / "inner")
    workspace = Workspace(root)

    assert workspace.read_file("inner/a.txt") == "A"
    assert workspace.read_file("inside-link/a.txt") == "A"
    assert workspace.read_file(str(root / "inner" / "a.txt")) == "A"
    assert workspace.list_files() == "escape\ninner/\ninside-link"
    for path in ("../outside.txt", "escape/outside.txt", str(tmp_path / "outside.txt"), "/"):
        with pytest.raises(PathEscapeError, match="outside the workspace"):
            workspace.read_file(path)
    with pytest.raises(PathEscapeError):
        workspace.check_writable("escape/new.txt")
    assert not (tmp_path / "new.txt").exists()
    with pytest.raises(ToolError, match="not a file"):
        workspace.read_file("inner")
    with pytest.raises(ToolError, match="empty path"):
        workspace.read_file("")
    target = workspace.check_writable("deep/er/b.txt")
    assert workspace.write_file(target, "héllo") == "wrote 6 bytes to deep/er/b.txt"
    assert (root / "deep" / "er" / "b.txt").read_text() == "héllo"


def test_the_entry_point_imports_nothing_before_stdout_is_secured() -> None:
    """``python -m agentreel.acp_agent`` reaches ``main`` with only the configuration
    loaded (and ``agentreel.brand``, where its errors' base ``AgentreelError`` lives: no
    dependencies, nothing printed): the ACP SDK, the loop, llm/session and any provider SDK
    come after ``main`` has taken stdout, so nothing they print at import can reach the
    protocol stream."""
    probe = (
        "import json, sys\n"
        "import agentreel.acp_agent.__main__\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = [
        name
        for name in json.loads(done.stdout)
        if name.split(".")[0] in ("acp", "openai", "anthropic", "httpx", "msgspec")
        or name.startswith(("agentreel.llm", "agentreel.session"))
    ]
    assert loaded == []
    package = sorted(name for name in json.loads(done.stdout) if name.startswith("agentreel."))
    assert package == [
        "agentreel.acp_agent",
        "agentreel.acp_agent.__main__",
        "agentreel.acp_agent._config",
        "agentreel.acp_agent._main",
        "agentreel.acp_agent.exceptions",
        "agentreel.brand",
        "agentreel.brand._ids",
        "agentreel.brand.exceptions",
    ]


def test_a_process_subagent_takes_its_mcp_lineage_from_its_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentreel.acp_agent._config import (
        CHILD_SESSION_ENV,
        LINEAGE_ENV,
        PARENT_SESSION_ENV,
        SPAWN_INDEX_ENV,
    )

    monkeypatch.chdir(tmp_path)
    env = {CHILD_SESSION_ENV: "child", PARENT_SESSION_ENV: "parent", SPAWN_INDEX_ENV: "1"}
    # A grandchild's lineage is its parent's plus its spawn index: only the parent knows it.
    child = parse_config([], {**env, LINEAGE_ENV: "main/0/1"}).child
    assert child is not None
    assert child.lineage == "main/0/1"
    unnamed = parse_config([], env).child
    assert unnamed is not None
    assert unnamed.lineage == "main/1"
