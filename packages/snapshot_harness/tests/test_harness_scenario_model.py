"""The ``[model]`` table of scenario.toml and the agent command's relative paths.

``[model] via = "proxy"`` is how a scenario runs an agent nobody here wrote: what the
harness hands it (base URL variables, a dummy key, config files in its HOME) must be
exactly what the table says, and every mistake must name the file and the key.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentreel.llm_replay import Capture, ConsumptionReport, ScriptReport
from agentreel.session import KeyMask, Mask
from agentreel.snapshot_harness import (
    HomeFile,
    ModelConfig,
    ReplayConfig,
    ScenarioError,
    load_scenario,
)
from agentreel.snapshot_harness._consumption import replay_mismatch

STEPS = """
[[steps]]
type = "initialize"

[[steps]]
type = "new_session"
"""


def write(tmp_path: Path, text: str, name: str = "demo") -> Path:
    directory = tmp_path / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "scenario.toml").write_text(text + "\n" + STEPS)
    return directory


def test_without_a_model_table_the_agent_uses_the_provider_path(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, ""))
    assert scenario.model == ModelConfig()
    assert not scenario.model.proxied
    explicit = load_scenario(write(tmp_path, '[model]\nvia = "provider"\n', "explicit"))
    assert explicit.model == ModelConfig()


@pytest.mark.parametrize(
    ("api", "base_url_env", "key_env", "base_url"),
    [
        ("openai", ("OPENAI_BASE_URL",), ("OPENAI_API_KEY",), "http://127.0.0.1:9/v1"),
        ("responses", ("OPENAI_BASE_URL",), ("OPENAI_API_KEY",), "http://127.0.0.1:9/v1"),
        ("anthropic", ("ANTHROPIC_BASE_URL",), ("ANTHROPIC_API_KEY",), "http://127.0.0.1:9"),
        ("gemini", ("GOOGLE_GEMINI_BASE_URL",), ("GEMINI_API_KEY",), "http://127.0.0.1:9"),
    ],
)
def test_proxy_defaults_follow_the_wire_api(
    tmp_path: Path, api: str, base_url_env: tuple[str, ...], key_env: tuple[str, ...], base_url: str
) -> None:
    scenario = load_scenario(write(tmp_path, f'[model]\nvia = "proxy"\napi = "{api}"\n'))
    assert scenario.model.proxied
    assert scenario.model.base_url_env == base_url_env
    assert scenario.model.key_env == key_env
    assert scenario.model.base_url_for("http://127.0.0.1:9") == base_url


def test_a_full_proxy_table_loads_and_renders_its_templates(tmp_path: Path) -> None:
    directory = write(
        tmp_path,
        """
[model]
via = "proxy"
api = "openai"
base_url_env = ["OPENAI_BASE_URL", "OPENAI_API_BASE"]
key_env = "MY_KEY"
masks = ["turn-[0-9a-f]+", "(?i)date: \\\\S+"]
partial_lanes = ["title"]

[[model.captures]]
regex = '"agent_id":"([0-9a-f-]{36})"'
token = "agent-id"

[model.env]
OPENCODE_CONFIG_CONTENT = '{"provider":{"p":{"options":{"baseURL":"{base_url}","apiKey":"{key}"}}}}'
WORKDIR = "{cwd}"

[[model.files]]
path = ".config/agent/config.toml"
template = "agent-config.toml"

[[model.files]]
path = "settings.json"
text = '{"home": "{home}", "proxy": "{proxy_url}", "scenario": "{scenario}"}'
""",
    )
    (directory / "agent-config.toml").write_text('base_url = "{base_url}"\n[table]\nx = 1\n')
    model = load_scenario(directory).model
    assert model.base_url_env == ("OPENAI_BASE_URL", "OPENAI_API_BASE")
    assert model.key_env == ("MY_KEY",)
    assert model.masks == ("turn-[0-9a-f]+", "(?i)date: \\S+")
    assert model.partial_lanes == ("title",)
    assert model.captures == (Capture.checked('"agent_id":"([0-9a-f-]{36})"', "agent-id"),)
    assert model.files == (
        HomeFile(
            path=".config/agent/config.toml",
            text='base_url = "{base_url}"\n[table]\nx = 1\n',
            source="agent-config.toml",
        ),
        HomeFile(
            path="settings.json",
            text='{"home": "{home}", "proxy": "{proxy_url}", "scenario": "{scenario}"}',
            source="",
        ),
    )
    values = {
        "base_url": "http://127.0.0.1:5/v1",
        "proxy_url": "http://127.0.0.1:5",
        "key": "dummy",
        "home": "/h",
        "cwd": "/c",
        "scenario": "/s",
    }
    # JSON braces are not placeholders; only {name} tokens are rendered.
    assert model.render(model.env["OPENCODE_CONFIG_CONTENT"], values) == (
        '{"provider":{"p":{"options":{"baseURL":"http://127.0.0.1:5/v1","apiKey":"dummy"}}}}'
    )
    assert model.render(model.files[1].text, values) == (
        '{"home": "/h", "proxy": "http://127.0.0.1:5", "scenario": "/s"}'
    )


@pytest.mark.parametrize(
    ("table", "key", "fragment"),
    [
        ('[model]\nvia = "http"', "model.via", "not one of provider, proxy"),
        (
            '[model]\nvia = "proxy"\napi = "bedrock"',
            "model.api",
            "openai, anthropic, responses, gemini",
        ),
        ('[model]\nvia = "proxy"\nwire = "openai"', "model.wire", "unknown key"),
        ('[model]\napi = "openai"', "model.api", 'only with via = "proxy"'),
        ('[model]\nvia = "proxy"\nbase_url_env = ["1BAD"]', "model.base_url_env", "variable"),
        ('[model]\nvia = "proxy"\nkey_env = 3', "model.key_env", "variable name"),
        ('[model]\nvia = "proxy"\nmasks = ["("]', "model.masks[0]", "not a valid regex"),
        ('[model]\nvia = "proxy"\nmasks = "x"', "model.masks", "array of non-empty strings"),
        ('[model]\nvia = "proxy"\npartial_lanes = [""]', "model.partial_lanes", "non-empty"),
        (
            '[model]\nvia = "proxy"\npartial_lanes = ["ok", "[title"]',
            "model.partial_lanes[1]",
            "not a valid regex",
        ),
        ('[model]\nvia = "proxy"\ncaptures = "x"', "model.captures", "array of tables"),
        (
            '[model]\nvia = "proxy"\n[[model.captures]]\nregex = "(a)(b)"\ntoken = "t"',
            "model.captures[0]",
            "2 groups",
        ),
        (
            '[model]\nvia = "proxy"\n[[model.captures]]\nregex = "a"\ntoken = "cwd"',
            "model.captures[0]",
            "built-in",
        ),
        (
            '[model]\nvia = "proxy"\n[[model.captures]]\nregex = "a"',
            "model.captures[0].token",
            "required",
        ),
        (
            '[model]\nvia = "proxy"\n[[model.captures]]\nregex = "a"\ntoken = "t"\nkey = "k"',
            "model.captures[0].key",
            "unknown key",
        ),
        ('[model]\nvia = "proxy"\nenv = { A = 1 }', "model.env.A", "expected a string"),
        (
            '[model]\nvia = "proxy"\nenv = { A = "{url}" }',
            "model.env.A",
            "unknown placeholder {url}",
        ),
        (
            '[model]\nvia = "proxy"\nenv = { OPENAI_API_KEY = "x" }',
            "model.env.OPENAI_API_KEY",
            "set it once",
        ),
        (
            '[model]\nvia = "proxy"\n[[model.files]]\npath = "../x"\ntext = "a"',
            "model.files[0].path",
            "inside HOME",
        ),
        (
            '[model]\nvia = "proxy"\n[[model.files]]\npath = "/etc/x"\ntext = "a"',
            "model.files[0].path",
            "inside HOME",
        ),
        (
            '[model]\nvia = "proxy"\n[[model.files]]\npath = "x"',
            "model.files[0]",
            "exactly one of template or text",
        ),
        (
            '[model]\nvia = "proxy"\n[[model.files]]\npath = "x"\ntemplate = "missing.json"',
            "model.files[0].template",
            "cannot read",
        ),
        (
            '[model]\nvia = "proxy"\n[[model.files]]\npath = "x"\ntext = "{nope}"',
            "model.files[0].text",
            "unknown placeholder {nope}",
        ),
        (
            '[model]\nvia = "proxy"\n[[model.files]]\npath = "x"\ntext = "a"\nmode = 1',
            "model.files[0].mode",
            "unknown key",
        ),
        (
            '[model]\nvia = "proxy"\n[[model.files]]\npath = "x"\ntext = "a"\n'
            '[[model.files]]\npath = "./x"\ntext = "b"',
            "model.files[1].path",
            "given twice",
        ),
        (
            '[model]\nvia = "proxy"\n[record]\nprovider = "anthropic"\nmodel = "claude"',
            "record.base_url",
            "the upstream the proxy records from",
        ),
    ],
)
def test_model_table_mistakes_name_the_file_and_key(
    tmp_path: Path, table: str, key: str, fragment: str
) -> None:
    directory = write(tmp_path, table)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(directory)
    message = str(caught.value)
    assert str(directory / "scenario.toml") in message
    assert f"key '{key}'" in message, message
    assert fragment in message, message


def test_a_real_upstream_for_the_proxy_is_the_record_base_url(tmp_path: Path) -> None:
    scenario = load_scenario(
        write(
            tmp_path,
            '[model]\nvia = "proxy"\napi = "anthropic"\n'
            '[record]\nprovider = "anthropic"\nmodel = "claude"\n'
            'base_url = "https://api.anthropic.com"\n',
        )
    )
    assert scenario.record.base_url == "https://api.anthropic.com"
    assert scenario.record.rules is None


def test_relative_agent_paths_resolve_against_the_scenario_directory(tmp_path: Path) -> None:
    directory = write(
        tmp_path,
        'agent = ["./bin/agent.sh", "--config", "../shared/conf.toml", "node", "{scenario}/x",'
        ' "plain", "-v"]\n',
    )
    command = load_scenario(directory).agent_command()
    root = directory.resolve()
    assert command == [
        str(root / "bin" / "agent.sh"),
        "--config",
        str(root.parent / "shared" / "conf.toml"),
        "node",
        f"{root}/x",
        "plain",
        "-v",
    ]


def test_python_placeholder_still_expands(tmp_path: Path) -> None:
    directory = write(tmp_path, 'agent = ["{python}", "./agent.py"]\n')
    assert load_scenario(directory).agent_command() == [
        sys.executable,
        str(directory.resolve() / "agent.py"),
    ]


def test_golden_masks_load_into_the_normalizer_rules(tmp_path: Path) -> None:
    scenario = load_scenario(
        write(
            tmp_path,
            '[[golden_masks]]\nregex = "ses_[0-9A-Za-z]{26}"\ntoken = "opencode-session"\n'
            '[[golden_masks]]\nregex = "{cwd_from_root}"\ntoken = "cwd-from-root"\n',
        )
    )
    assert scenario.golden_masks == (
        Mask("ses_[0-9A-Za-z]{26}", "opencode-session"),
        Mask("{cwd_from_root}", "cwd-from-root"),
    )
    assert load_scenario(write(tmp_path, "", "plain")).golden_masks == ()


def test_key_masks_and_unordered_kinds_load(tmp_path: Path) -> None:
    scenario = load_scenario(
        write(
            tmp_path,
            '[[golden_masks]]\nkey = "totalDurationMs"\ntoken = "duration"\n'
            '[transcript]\nunordered = ["session_info_update", "available_commands_update"]\n'
            'merge = ["tool_call_update"]\n',
        )
    )
    assert scenario.golden_masks == (KeyMask("totalDurationMs", "duration"),)
    assert scenario.unordered == ("session_info_update", "available_commands_update")
    assert scenario.merge == ("tool_call_update",)
    assert load_scenario(write(tmp_path, "", "plain")).unordered == ()
    assert load_scenario(write(tmp_path, "", "plainer")).merge == ()


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ('golden_masks = "ses_"', "golden_masks", "expected an array of tables"),
        ("golden_masks = [1]", r"golden_masks\[0\]", "expected a table"),
        (
            '[[golden_masks]]\nregex = "x"\ntoken = "t"\nreplace = "y"',
            r"golden_masks\[0\]\.replace",
            "unknown key; allowed here: key, regex, token",
        ),
        ('[[golden_masks]]\ntoken = "t"', r"golden_masks\[0\]", "exactly one of 'regex'"),
        (
            '[[golden_masks]]\nregex = "x"\nkey = "y"\ntoken = "t"',
            r"golden_masks\[0\]",
            "exactly one of 'regex'",
        ),
        ('[[golden_masks]]\nkey = ""\ntoken = "t"', r"golden_masks\[0\]\.key", "required"),
        ('[[golden_masks]]\nkey = "ms"\ntoken = "cwd"', r"golden_masks\[0\]", "built-in"),
        ('transcript = "plan"', "transcript", "expected a table"),
        ('[transcript]\nordered = ["plan"]', r"transcript\.ordered", "unknown key"),
        ('[transcript]\nunordered = ["title"]', r"transcript\.unordered", "sessionUpdate kind"),
        ('[transcript]\nunordered = "plan"', r"transcript\.unordered", "expected an array"),
        ('[transcript]\nmerge = ["plan"]', r"transcript\.merge", "can be merged"),
        ('[transcript]\nmerge = "tool_call_update"', r"transcript\.merge", "expected an array"),
        ('[[golden_masks]]\nregex = "x"', r"golden_masks\[0\]\.token", "required"),
        ('[[golden_masks]]\nregex = "(x"\ntoken = "t"', r"golden_masks\[0\]", "not a valid"),
        ('[[golden_masks]]\nregex = "x?"\ntoken = "t"', r"golden_masks\[0\]", "empty string"),
        ('[[golden_masks]]\nregex = "x"\ntoken = "My Id"', r"golden_masks\[0\]", "token name"),
        ('[[golden_masks]]\nregex = "x"\ntoken = "session"', r"golden_masks\[0\]", "built-in"),
    ],
)
def test_a_bad_golden_mask_names_the_file_and_key(
    tmp_path: Path, text: str, key: str, problem: str
) -> None:
    with pytest.raises(ScenarioError, match=rf"scenario\.toml: key '{key}': .*{problem}"):
        load_scenario(write(tmp_path, text))


def test_a_consumption_failure_lists_the_partial_lanes_apart(tmp_path: Path) -> None:
    def script(number: int, consumed: int, *, partial: bool) -> ScriptReport:
        return ScriptReport(
            session=number,
            file=f"session.{number}.jsonl",
            recorded_session_id=f"s{number}",
            parent_session=None,
            spawn_index=None,
            calls=2,
            consumed=consumed,
            bound_to=None if consumed == 0 else "live",
            partial=partial,
        )

    scenario = load_scenario(write(tmp_path, '[model]\nvia = "proxy"\npartial_lanes = ["title"]'))
    report = ConsumptionReport(
        fixture_dir="f",
        scenario="demo",
        scripts=[script(1, 1, partial=False), script(2, 0, partial=True)],
    )
    failure = replay_mismatch(scenario, report, stderr_tail="")
    assert failure is not None
    text = str(failure)
    listed, partial = text.split("Partial lanes ([model] partial_lanes; not counted):")
    assert "- session.1.jsonl ({{session:1}}): its live session made 1 of 2 call(s)" in listed
    assert "session.2.jsonl" not in listed
    assert "- session.2.jsonl ({{session:2}}): partial lane, made 0 of 2 call(s)" in partial
    # With only the partial lane left over, nothing fails.
    clean = ConsumptionReport(
        fixture_dir="f",
        scenario="demo",
        scripts=[script(1, 2, partial=False), script(2, 1, partial=True)],
    )
    assert replay_mismatch(scenario, clean, stderr_tail="") is None


def test_replay_schedule_keys_are_read_and_checked(tmp_path: Path) -> None:
    assert load_scenario(write(tmp_path, "")).replay == ReplayConfig()
    scenario = load_scenario(
        write(
            tmp_path,
            '[replay]\nschedule = "recorded"\nschedule_timeout = 2\n'
            'schedule_divergence = "allow"\n',
            "scheduled",
        )
    )
    assert scenario.replay == ReplayConfig(
        schedule="recorded", schedule_timeout=2.0, schedule_divergence="allow"
    )
    assert scenario.replay.settings() == {
        "schedule": "recorded",
        "schedule_timeout": "2.0",
        "schedule_divergence": "allow",
    }


@pytest.mark.parametrize(
    ("table", "key", "problem"),
    [
        ('schedule = "record"', "replay.schedule", "'record' is not one of 'free', 'recorded'"),
        ("schedule = true", "replay.schedule", "True is not one of 'free', 'recorded'"),
        ('schedule = "recorded"\nschedule_timeout = "5"', "replay.schedule_timeout", "a string"),
        ('schedule = "recorded"\nschedule_timeout = 0', "replay.schedule_timeout", "out of range"),
        (
            'schedule = "recorded"\nschedule_divergence = "warn"',
            "replay.schedule_divergence",
            "'warn' is not one of 'error', 'allow'",
        ),
        ('schedule = "recorded"\norder = "x"', "replay.order", "unknown key"),
        ("schedule_timeout = 3", "replay.schedule_timeout", "only means something with sch"),
    ],
)
def test_bad_replay_keys_name_the_file_and_key(
    tmp_path: Path, table: str, key: str, problem: str
) -> None:
    directory = write(tmp_path, f"[replay]\n{table}\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(directory)
    message = str(caught.value)
    assert message.startswith(f"{directory / 'scenario.toml'}: key '{key}': ")
    assert problem in message
