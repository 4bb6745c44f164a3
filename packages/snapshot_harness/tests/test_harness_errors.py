"""The harness's errors: ``FixtureError`` was the name of two meanings (a scenario directory
with the wrong files here, a recording replay cannot use in ``agentreel.llm_replay``); the
harness's is ``ScenarioFilesError`` now, its old name a deprecated alias."""

from __future__ import annotations

import importlib

import pytest

import agentreel.llm_replay
from agentreel.brand import AgentreelError
from agentreel.snapshot_harness.exceptions import (
    FixtureInventoryError,
    HarnessError,
    ScenarioFilesError,
    UnreadableFixtureError,
)


@pytest.mark.parametrize(
    "module", ["agentreel.snapshot_harness", "agentreel.snapshot_harness.exceptions"]
)
def test_the_old_name_still_resolves_with_a_deprecation_warning(module: str) -> None:
    with pytest.warns(DeprecationWarning, match=r"FixtureError is renamed ScenarioFilesError"):
        old = importlib.import_module(module).FixtureError
    assert old is ScenarioFilesError
    assert not issubclass(old, agentreel.llm_replay.FixtureError)  # the other meaning


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    harness = importlib.import_module("agentreel.snapshot_harness")
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchError'"):
        _ = harness.NoSuchError


def test_what_a_user_catches_today_still_catches_it() -> None:
    for cls in (FixtureInventoryError, UnreadableFixtureError):
        assert issubclass(cls, ScenarioFilesError)
    assert issubclass(ScenarioFilesError, HarnessError)
    assert issubclass(HarnessError, AgentreelError)
