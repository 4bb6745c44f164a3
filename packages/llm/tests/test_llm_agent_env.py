"""The AGENTREEL_* contract: one reader and one writer that agree, and what they refuse."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentreel.llm import (
    SETTING_VARIABLES,
    AgentEnv,
    AgentEnvironment,
    AgentEnvironmentError,
    provider_from_env,
)

text = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12)
settings = st.dictionaries(
    st.sampled_from(["base_url", "fixture_dir", "report_path", "drift", "pacing_ms"]),
    st.one_of(text, st.integers(0, 9), st.booleans()),
    max_size=4,
)


@given(
    provider=st.none() | text,
    model=st.none() | text,
    settings=settings,
    live_cwd=st.none() | text,
    sessions_root=st.none() | text,
)
def test_the_writer_and_the_reader_agree(
    provider: str | None,
    model: str | None,
    settings: dict[str, object],
    live_cwd: str | None,
    sessions_root: str | None,
) -> None:
    written = AgentEnvironment(
        provider=provider,
        model=model,
        settings=settings,
        live_cwd=live_cwd,
        sessions_root=sessions_root,
    )
    environ = written.to_environ()
    assert set(environ) <= {str(name) for name in AgentEnv}
    assert all(type(name) is str for name in environ)
    assert AgentEnvironment.from_environ(environ) == written


def test_one_setting_variables_win_over_the_settings_json() -> None:
    read = AgentEnvironment.from_environ(
        {
            AgentEnv.PROVIDER_SETTINGS: '{"fixture_dir": "/json", "drift": "warn"}',
            AgentEnv.REPLAY_DIR: "/variable",
            AgentEnv.REPLAY_REPORT: "",  # empty: unset
        }
    )
    assert read.settings == {"fixture_dir": "/variable", "drift": "warn"}
    assert set(SETTING_VARIABLES.values()) == {"fixture_dir", "report_path"}


def test_flags_overlay_the_environment() -> None:
    read = AgentEnvironment.from_environ(
        {AgentEnv.PROVIDER: "stub", AgentEnv.PROVIDER_SETTINGS: '{"a": 1, "b": 2}'}
    )
    laid = read.overlay(provider="openai", settings={"b": 3}, sessions_root="/r")
    assert (laid.provider, laid.settings, laid.sessions_root) == ("openai", {"a": 1, "b": 3}, "/r")
    assert read.overlay() == read


@pytest.mark.parametrize(
    ("raw", "problem"),
    [("{not json", "is not valid JSON"), ("[1, 2]", "must be a JSON object, got list")],
)
def test_bad_settings_json_is_named(raw: str, problem: str) -> None:
    with pytest.raises(AgentEnvironmentError, match=problem) as caught:
        AgentEnvironment.from_environ({AgentEnv.PROVIDER_SETTINGS: raw})
    assert str(caught.value).startswith("AGENTREEL_PROVIDER_SETTINGS ")


def test_no_provider_and_no_default_says_what_to_set() -> None:
    with pytest.raises(AgentEnvironmentError, match="set AGENTREEL_PROVIDER"):
        provider_from_env({})


def test_the_live_cwd_goes_only_to_a_factory_that_takes_it() -> None:
    # The stub factory takes **settings and no live_cwd: it must never get one.
    read = AgentEnvironment.from_environ({AgentEnv.REPLAY_LIVE_CWD: "/live"})
    assert read.provider_settings("stub", cwd="/session") == {}
    provider = provider_from_env(
        {AgentEnv.PROVIDER_SETTINGS: '{"base_url": "http://127.0.0.1:9"}'},
        cwd="/session",
        default="stub",
    )
    assert type(provider).__name__ == "OpenAIProvider"
