"""``ReplaySettings``: one value for how calls are replayed, checked when made (issue 37)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentreel.llm_replay import (
    PartialLanes,
    ReplaySettings,
    ReplaySettingsError,
    create_replay_provider,
)


def test_made_values_are_normalized_and_laid_over() -> None:
    settings = ReplaySettings(partial_lanes=["title"], drift_dir="kept")  # type: ignore[arg-type]
    assert settings.partial_lanes == ("title",)
    assert settings.drift_dir == Path("kept")
    over = settings.with_values({"schedule": "recorded", "schedule_timeout": 2})
    assert (over.partial_lanes, over.schedule, over.schedule_timeout) == (
        ("title",),
        "recorded",
        2.0,
    )
    with pytest.raises(TypeError, match="unknown replay setting"):
        settings.with_values({"pace_ms": 1})


def test_only_the_settings_that_differ_are_written_as_text_and_read_back() -> None:
    assert ReplaySettings().settings() == {}
    settings = ReplaySettings(captures=["agent-id=id=([0-9]+)"], masks=("a", "b"))  # type: ignore[arg-type]
    text = settings.settings()
    assert text == {"masks": "a\nb", "captures": "agent-id=id=([0-9]+)"}
    assert ReplaySettings.from_text(text) == settings


def test_partial_lanes_made_anywhere_are_checked_by_the_value() -> None:
    with pytest.raises(ReplaySettingsError) as by_value:
        ReplaySettings(partial_lanes=("ok", "[title"))
    with pytest.raises(ReplaySettingsError) as by_lanes:
        PartialLanes(["ok", "[title"])
    assert str(by_lanes.value) == str(by_value.value)
    assert by_value.value.key == "partial_lanes[1]"
    assert "partial lane 2 '[title' is not a valid regex" in by_value.value.problem


def test_a_setting_given_by_name_without_the_one_it_needs_is_refused() -> None:
    with pytest.raises(
        ReplaySettingsError, match='only means something with schedule = "recorded"'
    ):
        ReplaySettings.from_mapping({"schedule_divergence": "allow"})
    with pytest.raises(ReplaySettingsError, match="unknown setting"):
        ReplaySettings.from_mapping({"schedul": "recorded"})
    # Made in code, every field has a value: nothing is "given alone".
    assert ReplaySettings(schedule_divergence="allow").schedule == "free"


def test_the_in_process_provider_refuses_the_recorded_pace() -> None:
    # The provider factory is what an agent replaying in process loads (AGENTREEL_*): it
    # keeps no frame times, so pace = "recorded" is named instead of served instantly.
    fixture = Path(__file__).resolve().parents[3] / "fixtures" / "plain-turn"
    assert create_replay_provider(fixture_dir=str(fixture)).settings.pace == "instant"
    with pytest.raises(ReplaySettingsError, match="served by the proxy only"):
        create_replay_provider(fixture_dir=str(fixture), pace="recorded")
