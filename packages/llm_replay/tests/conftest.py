"""Fixtures shared by the llm_replay tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentreel.llm_replay.testing import FixtureRecorder


@pytest.fixture
def recorder(tmp_path: Path) -> FixtureRecorder:
    return FixtureRecorder(tmp_path / "sessions")


@pytest.fixture
def fixture_dir(tmp_path: Path) -> Path:
    return tmp_path / "my-scenario"
