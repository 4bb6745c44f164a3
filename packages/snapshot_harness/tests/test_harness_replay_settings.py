"""One replay settings value, and one record settings value, reach every way of running
(issue 37).

``agentreel.llm_replay.ReplaySettings`` declares each setting once, as a field with its
``Setting``; the scenario reader, the pytest fixture's ``agentreel_config``, the proxy's
command line, ``start_proxy`` / ``ReplayProvider``'s keywords and the agent's text
settings all take it from there. ``agentreel.session.RecordSettings`` does the same for
the record side's settings (``[record]``, ``agentreel_config``, ``agentreel proxy
record``'s flags, ``start_proxy``'s keywords, the MCP shim's command line). These tests
walk the values' fields — a setting added tomorrow is walked too — and check each surface
accepts it, reads it into the value and words a bad one with the value's own message. In
process, no agent run.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import typing
from pathlib import Path
from typing import Any

import pytest

from agentreel.llm_proxy import _cli as proxy_cli
from agentreel.llm_proxy import drifted_record_settings, start_proxy
from agentreel.llm_replay import (
    Capture,
    FixtureError,
    ReplaySettings,
    ReplaySettingsError,
    ReplaySettingsKeywords,
    create_replay_provider,
)
from agentreel.llm_replay._settings import (
    Setting,
    _Captures,
    _Choice,
    _Directory,
    _Regexes,
    _Seconds,
)
from agentreel.mcp_replay import McpSettings
from agentreel.mcp_replay import _cli as mcp_cli
from agentreel.session import RecordSettings, RecordSettingsError, RecordSettingsKeywords
from agentreel.snapshot_harness import ScenarioError, load_scenario
from agentreel.snapshot_harness._reel import ReelError, ReelPlan, plan

STEPS = '\n[[steps]]\ntype = "initialize"\n'
SPECS = ReplaySettings.specs()


def sample(name: str, spec: Setting, tmp_path: Path) -> tuple[Any, Any]:
    """A value other than the default for setting ``name``: ``(as typed, as the value holds
    it)``. A new kind of setting needs a line here; a new setting of a known kind none."""
    kind = spec.kind
    if isinstance(kind, _Choice):
        default = getattr(ReplaySettings(), name)
        choice = next(choice for choice in kind.choices() if choice != default)
        return choice, choice
    if isinstance(kind, _Seconds):
        return 2.5, 2.5
    if isinstance(kind, _Directory):
        return str(tmp_path / "kept"), tmp_path / "kept"
    if isinstance(kind, _Regexes):
        return ["turn-[0-9]+"], ("turn-[0-9]+",)
    if isinstance(kind, _Captures):
        return [{"regex": "id=([0-9]+)", "token": "agent-id"}], (
            Capture.checked("id=([0-9]+)", "agent-id"),
        )
    raise AssertionError(f"no sample for {name}'s kind {type(kind).__name__}: add one here")


def needed(name: str) -> dict[str, Any]:
    """What setting ``name`` only means something with (``Setting.only_with``)."""
    needs = SPECS[name].only_with
    return {needs[0]: needs[1]} if needs else {}


def toml_value(value: Any) -> str:
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return repr(value)


def scenario_text(given: dict[str, Any]) -> str:
    tables: dict[str, list[str]] = {"model": ['via = "proxy"'], "replay": []}
    for name, value in given.items():
        table = SPECS[name].table
        assert table is not None
        tables[table].append(f"{name} = {toml_value(value)}")
    return "".join(f"[{table}]\n" + "\n".join(lines) + "\n" for table, lines in tables.items())


def write_scenario(tmp_path: Path, text: str) -> Path:
    directory = tmp_path / "demo"
    directory.mkdir(exist_ok=True)
    (directory / "scenario.toml").write_text(text + STEPS)
    return directory


def reel_plan(tmp_path: Path, config: dict[str, Any]) -> ReplaySettings:
    return reel(tmp_path, config).replay


def reel(tmp_path: Path, config: dict[str, Any]) -> ReelPlan:
    recording = tmp_path / "recording"
    recording.mkdir(exist_ok=True)
    (recording / "session.jsonl").write_text("")
    return plan(
        nodeid="test_x.py::test_it",
        directory=recording,
        module_dir=tmp_path,
        option_mode="none",
        option_upstream=None,
        config=config,
    )


def proxy_args(mode: str, given: dict[str, Any]) -> list[str]:
    words = (
        [mode, "--fixture", "f"]
        if mode == "replay"
        else [mode, "--upstream", "u", "--fixture", "f"]
    )
    for name, value in given.items():
        if SPECS[name].kind.repeated():
            for item in value:
                text = item if isinstance(item, str) else f"{item['token']}={item['regex']}"
                words += [ReplaySettings.flag(name), text]
        else:
            words += [ReplaySettings.flag(name), str(value)]
    return words


def proxy_settings(words: list[str]) -> ReplaySettings:
    return proxy_cli._replay_settings(proxy_cli._parser().parse_args(words))


@pytest.mark.parametrize("name", list(SPECS))
def test_each_setting_reaches_every_way_of_running(name: str, tmp_path: Path) -> None:
    spec = SPECS[name]
    typed, held = sample(name, spec, tmp_path)
    given = {**needed(name), name: typed}
    expected = ReplaySettings().with_values({**needed(name), name: held})
    assert getattr(expected, name) == held != getattr(ReplaySettings(), name)

    # scenario.toml: in the table the setting names, or refused as no scenario key.
    if spec.table is not None:
        scenario = load_scenario(write_scenario(tmp_path, scenario_text(given)))
        assert scenario.replay == expected
    else:
        directory = write_scenario(tmp_path, f"[replay]\n{name} = {toml_value(typed)}\n")
        with pytest.raises(ScenarioError, match=f"key 'replay.{name}': unknown key"):
            load_scenario(directory)

    # The pytest fixture's agentreel_config (and marker keys).
    assert reel_plan(tmp_path, given) == expected

    # agentreel proxy: a flag on each mode the setting applies to, none on the others.
    for mode in ("record", "replay"):
        if mode in spec.modes:
            assert proxy_settings(proxy_args(mode, given)) == expected
        else:
            with pytest.raises(SystemExit):
                proxy_cli._parser().parse_args(proxy_args(mode, {name: typed}))

    # The agent's text settings (AGENTREEL_*) and back, as the replay provider reads them.
    assert ReplaySettings.from_text(expected.settings()) == expected
    with pytest.raises(FixtureError):  # every setting known: it gets as far as the fixture
        create_replay_provider(fixture_dir=str(tmp_path / "none"), **expected.settings())


def test_the_keywords_are_the_fields() -> None:
    """``ReplayProvider(**kw)`` / ``start_proxy(**kw)`` take ``ReplaySettingsKeywords``: one
    key per field, so a type checker knows every setting by name."""
    keys = set(typing.get_type_hints(ReplaySettingsKeywords))
    assert keys == {spec.name for spec in dataclasses.fields(ReplaySettings)}


@pytest.mark.parametrize(
    ("name", "typed"),
    [
        ("schedule", "record"),
        ("schedule_timeout", 0),
        ("partial_lanes", ["(title"]),
        ("captures", [{"regex": "(a)(b)", "token": "t"}]),
    ],
)
def test_a_bad_setting_is_worded_once_everywhere(name: str, typed: Any, tmp_path: Path) -> None:
    """The scenario, agentreel_config and the proxy's flags say the value's own problem,
    each at the key as its user typed it."""
    given = {**needed(name), name: typed}
    with pytest.raises(ReplaySettingsError) as caught:
        ReplaySettings.from_mapping(given)
    problem, key = caught.value.problem, caught.value.key

    with pytest.raises(ScenarioError) as in_file:
        load_scenario(write_scenario(tmp_path, scenario_text(given)))
    assert str(in_file.value).endswith(f"key '{SPECS[name].table}.{key}': {problem}")

    with pytest.raises(ReelError) as in_config:
        reel_plan(tmp_path, given)
    assert str(in_config.value).endswith(f"key {key}: {problem}")

    parser = proxy_cli._parser()
    errors: list[str] = []

    def error(message: str) -> typing.NoReturn:
        errors.append(message)
        raise SystemExit(2)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "error", lambda self, message: error(message))
        patch.setattr(proxy_cli, "_parser", lambda: parser)
        with pytest.raises(SystemExit):
            proxy_settings(proxy_args("replay", given))
    assert errors
    assert errors[0].endswith(problem)


def test_a_setting_needing_another_is_refused_alone_everywhere(tmp_path: Path) -> None:
    problem = 'only means something with schedule = "recorded"'
    with pytest.raises(ScenarioError, match=f"'replay.schedule_timeout': {problem}"):
        load_scenario(write_scenario(tmp_path, "[replay]\nschedule_timeout = 3\n"))
    with pytest.raises(ReelError, match=f"key schedule_timeout: {problem}"):
        reel_plan(tmp_path, {"schedule_timeout": 3})
    with pytest.raises(SystemExit):
        proxy_settings(["replay", "--fixture", "f", "--schedule-timeout", "3"])


def test_the_recorded_pace_is_refused_where_the_agent_replays_in_process(
    tmp_path: Path,
) -> None:
    # Frame times are kept with the answers as sent (wire.ndjson, the proxy's): an
    # in-process replay has nothing to pace by, and must say so rather than run instant.
    directory = write_scenario(tmp_path, '[replay]\npace = "recorded"\n')
    with pytest.raises(ScenarioError, match=r"key 'replay\.pace': 'recorded' needs the proxy"):
        load_scenario(directory)
    proxied = write_scenario(tmp_path, '[model]\nvia = "proxy"\n[replay]\npace = "recorded"\n')
    assert load_scenario(proxied).replay.pace == "recorded"


RECORD_SPECS = RecordSettings.specs()


def record_sample(name: str) -> tuple[list[str], Any]:
    """A value other than the default for record setting ``name``: ``(as typed, as the
    value holds it)``. A new record setting needs a line here."""
    if name == "allow_secrets":
        digest = hashlib.sha256(b"a deliberate fake key").hexdigest()
        return [digest], (digest,)
    raise AssertionError(f"no sample for record setting {name}: add one here")


def record_flags(name: str, typed: list[str]) -> list[str]:
    return [word for item in typed for word in (RECORD_SPECS[name].flag, item)]


async def started_with(tmp_path: Path, **settings: Any) -> RecordSettings:
    """The record settings a ``start_proxy`` record run was given ``settings`` holds."""
    context = start_proxy(
        "record", upstream="http://127.0.0.1:9", sessions_root=tmp_path / "logs", **settings
    )
    async with context as proxy:
        return proxy.settings.record


@pytest.mark.parametrize("name", list(RECORD_SPECS))
def test_each_record_setting_reaches_every_way_of_running(name: str, tmp_path: Path) -> None:
    typed, held = record_sample(name)
    expected = RecordSettings.from_mapping({name: held})
    assert getattr(expected, name) == held != getattr(RecordSettings(), name)

    # scenario.toml's [record] table.
    text = f"[record]\n{name} = {toml_value(typed)}\n"
    assert load_scenario(write_scenario(tmp_path, text)).record.settings == expected

    # The pytest fixture's agentreel_config (and marker keys).
    assert reel(tmp_path, {name: typed}).record == expected

    # agentreel proxy: its flag, once per item, on record and on a replay that re-records
    # what drifts (``--record-drifted``; without it, a usage error: test_proxy_cli).
    record = ["record", "--upstream", "u", "--fixture", "f", *record_flags(name, typed)]
    assert proxy_cli._record_settings(proxy_cli._parser().parse_args(record)) == expected
    drifted = ["replay", "--fixture", "f", "--record-drifted", "--upstream", "u"]
    drifted += record_flags(name, typed)
    assert proxy_cli._record_settings(proxy_cli._parser().parse_args(drifted)) == expected

    # start_proxy: the keyword of the same name, or the value; the drifted record run.
    assert asyncio.run(started_with(tmp_path, **{name: held})) == expected
    assert asyncio.run(started_with(tmp_path, record=expected)) == expected
    assert drifted_record_settings("http://u", tmp_path, record=expected).record == expected

    # MCP record: the shim's command line the harness writes, read back by agentreel-mcp.
    mcp = McpSettings("record", tmp_path, tmp_path / "state", record=expected)
    shim = mcp_cli._parser().parse_args(["stdio", *mcp.shim_args("demo"), "--", "server"])
    assert mcp_cli._record_settings(shim) == expected


def test_the_record_keywords_are_the_fields() -> None:
    keys = set(typing.get_type_hints(RecordSettingsKeywords))
    assert keys == set(RecordSettings.names())


def test_a_bad_record_setting_is_worded_once_everywhere(tmp_path: Path) -> None:
    """``[record]``, agentreel_config, the proxy's flag and ``start_proxy`` say the value's
    own problem, each at the key as its user typed it."""
    with pytest.raises(RecordSettingsError) as caught:
        RecordSettings.from_mapping({"allow_secrets": ["not-a-digest"]})
    problem = caught.value.problem
    assert "entry 0" in problem
    assert "not-a-digest" not in problem  # never echoes the value

    text = "[record]\nallow_secrets = ['not-a-digest']\n"
    with pytest.raises(ScenarioError) as in_file:
        load_scenario(write_scenario(tmp_path, text))
    assert str(in_file.value).endswith(f"key 'record.allow_secrets': {problem}")

    with pytest.raises(ReelError) as in_config:
        reel(tmp_path, {"allow_secrets": ["not-a-digest"]})
    assert str(in_config.value).endswith(f"key allow_secrets: {problem}")

    errors: list[str] = []

    def error(message: str) -> typing.NoReturn:
        errors.append(message)
        raise SystemExit(2)

    words = ["record", "--upstream", "u", "--fixture", "f", "--allow-secret", "not-a-digest"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "error", lambda self, message: error(message))
        with pytest.raises(SystemExit):
            proxy_cli._record_settings(proxy_cli._parser().parse_args(words))
    assert errors == [f"argument --allow-secret: {problem}"]

    with pytest.raises(RecordSettingsError, match="allow_secrets: entry 0"):
        asyncio.run(started_with(tmp_path, allow_secrets=("not-a-digest",)))
