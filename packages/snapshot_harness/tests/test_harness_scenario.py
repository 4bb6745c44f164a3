"""scenario.toml validation: unknown keys and bad values name the file and the key."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from agentreel.snapshot_harness import (
    ExpectError,
    Initialize,
    NewSession,
    Prompt,
    PromptAndCancel,
    ScenarioError,
    load_scenario,
    resolve_scenario,
    validate_scenario_name,
)

VALID = """
description = "a turn"
timeout = 12.5
permissions = ["allow", "reject_once", "cancelled"]

[[steps]]
type = "initialize"

[[steps]]
type = "new_session"

[[steps]]
type = "prompt"
text = "hi"

[[steps]]
type = "prompt_and_cancel"
text = "long story"

[[steps]]
type = "expect_error"
method = "prompt"
session = "unknown"
code = -32603
message = "not found"

[record]
provider = "stub"
model = "stub-model"
"""


def write(tmp_path: Path, text: str, name: str = "demo") -> Path:
    directory = tmp_path / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "scenario.toml").write_text(text)
    return directory


def test_a_valid_scenario_loads_every_field(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, VALID))
    assert scenario.name == "demo"
    assert scenario.timeout == 12.5
    assert scenario.permissions == ("allow_once", "reject_once", "cancelled")
    assert scenario.steps == (
        Initialize(),
        NewSession(),
        Prompt("hi"),
        PromptAndCancel("long story"),
        ExpectError(method="prompt", session="unknown", code=-32603, message="not found"),
    )
    assert scenario.record.provider == "stub"
    assert scenario.record.rules == scenario.directory / "stub-rules.toml"
    assert scenario.agent_command() == [sys.executable, "-m", "agentreel.acp_agent"]
    assert scenario.creates_sessions


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("surprise = 1\n" + VALID, "key 'surprise': unknown key"),
        (VALID.replace('text = "hi"', 'text = "hi"\ncolour = "red"'), "key 'steps[2].colour'"),
        (VALID.replace("timeout = 12.5", "timeout = -1"), "key 'timeout'"),
        (VALID.replace("timeout = 12.5", 'timeout = "soon"'), "key 'timeout'"),
        (VALID.replace('"allow",', '"maybe",'), "key 'permissions[0]'"),
        (VALID.replace('type = "initialize"', 'type = "initialise"'), "key 'steps[0].type'"),
        (VALID.replace('text = "hi"', "text = 3"), "key 'steps[2].text'"),
        (VALID.replace('method = "prompt"', 'method = "load"'), "key 'steps[4].method'"),
        (VALID.replace("code = -32603", 'code = "x"'), "key 'steps[4].code'"),
        (VALID.replace('model = "stub-model"', 'model = "m"\nflavour = 1'), "key 'record.flavour'"),
        ('agent = "python agent.py"\n' + VALID, "key 'agent'"),
        (VALID + "\n[env]\nX = 1\n", "key 'env.X'"),
        (VALID.replace('description = "a turn"', 'name = "other"'), "key 'name'"),
    ],
)
def test_bad_keys_and_values_name_the_file_and_key(tmp_path: Path, text: str, key: str) -> None:
    directory = write(tmp_path, text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(directory)
    message = str(caught.value)
    assert str(directory / "scenario.toml") in message
    assert key in message


def test_prompt_before_new_session_is_refused(tmp_path: Path) -> None:
    text = '[[steps]]\ntype = "initialize"\n\n[[steps]]\ntype = "prompt"\ntext = "hi"\n'
    with pytest.raises(ScenarioError, match=r"steps\[1\]\.type.*before any new_session"):
        load_scenario(write(tmp_path, text))


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    directory = write(tmp_path, "steps = [[[\n")
    with pytest.raises(ScenarioError, match="not valid TOML") as caught:
        load_scenario(directory)
    assert str(directory) in str(caught.value)


def test_missing_steps_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="key 'steps': required"):
        load_scenario(write(tmp_path, 'description = "nothing to do"\n'))


@pytest.mark.parametrize("name", ["a/b", "../escape", "a\\b", "/abs"])
def test_a_scenario_name_with_a_path_separator_is_refused(name: str) -> None:
    with pytest.raises(ScenarioError, match="path separator"):
        validate_scenario_name(name)


def test_resolve_refuses_path_separator_names(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="path separator"):
        resolve_scenario(tmp_path, "../plain-turn")


def test_resolve_lists_known_scenarios_for_an_unknown_name(tmp_path: Path) -> None:
    write(tmp_path, VALID, name="known-one")
    with pytest.raises(ScenarioError, match="known scenarios: known-one"):
        resolve_scenario(tmp_path, "nope")


def test_the_name_key_must_not_hold_a_path(tmp_path: Path) -> None:
    directory = write(tmp_path, 'name = "x/y"\n' + VALID)
    with pytest.raises(ScenarioError, match="path separator"):
        load_scenario(directory)


def test_a_workspace_symlink_pointing_outside_is_refused(tmp_path: Path) -> None:
    directory = write(tmp_path, VALID)
    workspace = directory / "workspace"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink("../../secret.txt", workspace / "leak.txt")
    with pytest.raises(ScenarioError, match="symlink points outside the workspace") as caught:
        load_scenario(directory)
    assert "leak.txt" in str(caught.value)


def test_an_absolute_workspace_symlink_is_refused(tmp_path: Path) -> None:
    directory = write(tmp_path, VALID)
    workspace = directory / "workspace"
    workspace.mkdir()
    (workspace / "real.txt").write_text("inside")
    os.symlink(workspace / "real.txt", workspace / "abs.txt")
    with pytest.raises(ScenarioError, match=r"abs\.txt"):
        load_scenario(directory)


def test_a_relative_symlink_inside_the_workspace_is_fine(tmp_path: Path) -> None:
    directory = write(tmp_path, VALID)
    workspace = directory / "workspace"
    (workspace / "sub").mkdir(parents=True)
    (workspace / "real.txt").write_text("inside")
    os.symlink("../real.txt", workspace / "sub" / "link.txt")
    assert load_scenario(directory).workspace == workspace


def test_agent_placeholders_expand(tmp_path: Path) -> None:
    directory = write(tmp_path, 'agent = ["{python}", "{scenario}/agent.py"]\n' + VALID)
    scenario = load_scenario(directory)
    assert scenario.agent_command() == [sys.executable, f"{directory}/agent.py"]


def test_a_real_provider_needs_no_rules_but_refuses_them(tmp_path: Path) -> None:
    text = VALID.replace('provider = "stub"', 'provider = "openai"').replace(
        'model = "stub-model"', 'model = "gpt-x"\nrules = "r.toml"'
    )
    with pytest.raises(ScenarioError, match=r"key 'record\.rules'"):
        load_scenario(write(tmp_path, text))


STEPS_ONLY = '[[steps]]\ntype = "initialize"\n'


def _scenario_in(tmp_path: Path, toml: str, directory_config: str | None = None) -> Path:
    directory = tmp_path / "fixtures" / "forky"
    directory.mkdir(parents=True)
    (directory / "scenario.toml").write_text(toml)
    if directory_config is not None:
        (tmp_path / "fixtures" / "agentreel.toml").write_text(directory_config)
    return directory


def test_the_fork_server_is_off_unless_asked_for(tmp_path: Path) -> None:
    scenario = load_scenario(_scenario_in(tmp_path, STEPS_ONLY))
    assert scenario.fork_server.enabled is False
    assert scenario.fork_preload() is None


def test_the_fixtures_directory_enables_it_and_the_scenario_overrides_key_by_key(
    tmp_path: Path,
) -> None:
    directory_config = '[fork_server]\nenabled = true\npreload = ["acp"]\n'
    inherited = load_scenario(_scenario_in(tmp_path, STEPS_ONLY, directory_config))
    assert inherited.fork_preload() == ("acp",)
    (inherited.toml_path).write_text(STEPS_ONLY + "[fork_server]\nenabled = false\n")
    assert load_scenario(inherited.directory).fork_preload() is None
    (inherited.toml_path).write_text(STEPS_ONLY + '[fork_server]\npreload = ["my.lib:warm"]\n')
    assert load_scenario(inherited.directory).fork_preload() == ("my.lib:warm",)


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        (None, ("agentreel.acp_agent:preload",)),  # the reference agent's own hook
        # ... also spelled out with flags (its package is the agentreel namespace: nothing)
        (
            '["{python}", "-m", "agentreel.acp_agent", "--max-steps", "3"]',
            ("agentreel.acp_agent:preload",),
        ),
        ('["{python}", "-m", "my_pkg.agent"]', ("my_pkg",)),  # its package, not itself
        ('["{python}", "-m", "my_agent"]', ()),
        ('["{python}", "agent.py"]', ()),
    ],
)
def test_the_default_preload_follows_the_agent(
    tmp_path: Path, agent: str | None, expected: tuple[str, ...]
) -> None:
    head = f"agent = {agent}\n" if agent else ""
    toml = head + STEPS_ONLY + "[fork_server]\nenabled = true\n"
    assert load_scenario(_scenario_in(tmp_path, toml)).fork_preload() == expected


@pytest.mark.parametrize(
    ("table", "where", "problem"),
    [
        ("[fork_server]\nenable = true\n", "fork_server.enable", "unknown key"),
        ('[fork_server]\nenabled = "yes"\n', "fork_server.enabled", "true or false"),
        ('[fork_server]\npreload = ["not a module"]\n', "fork_server.preload", "module names"),
        ("fork_server = true\n", "fork_server", "expected a table"),
    ],
)
def test_a_bad_fork_server_table_names_file_and_key(
    tmp_path: Path, table: str, where: str, problem: str
) -> None:
    # A bare key must come before the first table; a table may follow the steps.
    toml = STEPS_ONLY + table if table.startswith("[") else table + STEPS_ONLY
    directory = _scenario_in(tmp_path, toml)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(directory)
    message = str(caught.value)
    assert f"scenario.toml: key '{where}'" in message
    assert problem in message


def test_a_bad_directory_config_is_named(tmp_path: Path) -> None:
    directory = _scenario_in(tmp_path, STEPS_ONLY, "[fork_servers]\nenabled = true\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(directory)
    assert "agentreel.toml: key 'fork_servers': unknown key" in str(caught.value)
