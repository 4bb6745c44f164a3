"""ACP agents that require ``authenticate`` (Cline ``--acp``, agents offering an API-key
method): the ``authenticate`` step, the automatic call after ``initialize``, and the keys
they read refused from recordings like every key. Driven against the fake agent with
``FAKE_AUTH_METHOD`` (it refuses ``session/new`` until authenticated)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentreel.snapshot_harness import (
    RecordSetupError,
    SecretLeakError,
    StepError,
    check_scenario,
    load_scenario,
)

pytestmark = pytest.mark.slow
MakeScenario = Callable[..., Path]
KEY_VAR = "CLINE_ACCESS"  # no credential-looking name: refused because the method reads it
KEY = "cline-access-0123456789abcdef"
AGENT_ENV = {"FAKE_AUTH_METHOD": "api-key", "FAKE_AUTH_ENV": KEY_VAR}
AUTO = f'[authenticate]\nmethod = "api-key"\nenv = ["{KEY_VAR}"]'
STEPS = [
    {"type": "initialize"},
    {"type": "authenticate", "method": "api-key", "env": [KEY_VAR]},
    {"type": "new_session"},
    {"type": "prompt", "text": "Say hi"},
]


def test_the_authenticate_table_is_called_after_initialize_and_replays_keyless(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = make_scenario(env=AGENT_ENV, extra=AUTO)
    monkeypatch.setenv(KEY_VAR, KEY)
    check_scenario(directory, "record")
    assert KEY not in "".join(p.read_text() for p in directory.rglob("*.jsonl"))
    monkeypatch.delenv(KEY_VAR)
    outcome = check_scenario(directory, "replay")
    assert outcome.result is not None
    assert outcome.result.stop_reasons == ["end_turn"]


def test_an_authenticate_step_is_sent_where_the_scenario_puts_it(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = make_scenario(env=AGENT_ENV, steps=STEPS)
    assert load_scenario(directory).auth_env() == (KEY_VAR,)
    monkeypatch.setenv(KEY_VAR, KEY)
    check_scenario(directory, "record")
    monkeypatch.delenv(KEY_VAR)
    check_scenario(directory, "replay")


def test_without_authenticate_the_agent_refuses_the_session(make_scenario: MakeScenario) -> None:
    directory = make_scenario(env=AGENT_ENV)
    with pytest.raises(StepError, match="Authentication required"):
        check_scenario(directory, "record")


def test_a_method_the_agent_does_not_offer_is_named_with_the_offered_ones(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = make_scenario(env=AGENT_ENV, extra=AUTO.replace('"api-key"', '"token"'))
    monkeypatch.setenv(KEY_VAR, KEY)
    with pytest.raises(StepError) as caught:
        check_scenario(directory, "record")
    assert "offers auth methods api-key, oauth, not 'token'" in str(caught.value)


def test_recording_needs_the_methods_variables_set(make_scenario: MakeScenario) -> None:
    directory = make_scenario(env=AGENT_ENV, extra=AUTO)
    with pytest.raises(RecordSetupError, match=f"reads {KEY_VAR}, not set"):
        check_scenario(directory, "record")


def test_a_key_the_auth_method_reads_is_refused_from_the_recording(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = make_scenario(env={**AGENT_ENV, "FAKE_AUTH_LEAK": "1"}, extra=AUTO)
    monkeypatch.setenv(KEY_VAR, KEY)
    with pytest.raises(SecretLeakError) as caught:
        check_scenario(directory, "record")
    assert f"${KEY_VAR}" in str(caught.value)
    assert KEY not in str(caught.value)
    assert not (directory / "session.jsonl").exists()
