"""Request drift checking, the consumption report file, and the registry factory."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentreel.brand import SessionId, new_session_id
from agentreel.llm import GenerateOptions, Message, ToolSpec, available_providers, load_provider
from agentreel.llm_replay import (
    REPORT_FORMAT,
    FixtureError,
    ReplayProvider,
    RequestDriftError,
    RequestDriftWarning,
    ScriptExhaustedError,
    UnconsumedScriptError,
    UnrecordedSessionError,
    read_report,
)
from agentreel.llm_replay.testing import RECORD_CWD, FixtureRecorder, collect, text_call
from agentreel.session import rerecord_command

_TOOLS = (
    ToolSpec(
        name="read_file",
        description="Read a file under the workspace",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    ),
)


def _request(
    session_id: str | None = None,
    *,
    system: str = "You are a careful coding agent. Work in {cwd}.",
    cwd: str = RECORD_CWD,
    tools: tuple[ToolSpec, ...] = _TOOLS,
    messages: tuple[Message, ...] = (Message.user("fix the bug"),),
) -> GenerateOptions:
    return GenerateOptions(
        model="test-model",
        system=system.format(cwd=cwd),
        tools=tools,
        messages=messages,
        session_id=SessionId(session_id) if session_id is not None else None,
    )


def _record_with_header(recorder: FixtureRecorder, fixture_dir: Path) -> None:
    main = recorder.main()
    recorder.call(main, text_call("on it"), options=_request())
    recorder.save(fixture_dir)


@pytest.mark.asyncio
async def test_same_request_in_another_cwd_does_not_drift(
    recorder: FixtureRecorder, fixture_dir: Path, tmp_path: Path
) -> None:
    _record_with_header(recorder, fixture_dir)
    live = str(tmp_path / "live")
    provider = ReplayProvider(fixture_dir, live_cwd=live)

    await collect(provider.stream(_request(cwd=live)))
    provider.assert_consumed()


@pytest.mark.asyncio
async def test_changed_system_prompt_is_drift_with_a_readable_diff(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _record_with_header(recorder, fixture_dir)
    provider = ReplayProvider(fixture_dir, live_cwd=RECORD_CWD)

    with pytest.raises(RequestDriftError) as caught:
        provider.stream(_request(system="You are a reckless coding agent. Work in {cwd}."))

    message = str(caught.value)
    assert "call 1 of session.jsonl ({{session:main}})" in message
    assert "recorded turn 1, step 1" in message
    assert "system prompt differs at character 10:" in message
    assert "recorded 'You are a careful coding agent. Work in {…'" in message
    assert "live 'You are a reckless coding agent. Work in {…'" in message
    assert rerecord_command("my-scenario") in message
    assert len(caught.value.differences) == 1


@pytest.mark.asyncio
async def test_changed_tool_and_message_are_named(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _record_with_header(recorder, fixture_dir)
    provider = ReplayProvider(fixture_dir, live_cwd=RECORD_CWD)
    changed_tool = ToolSpec(name="read_file", description="Read any file", parameters={})

    with pytest.raises(RequestDriftError) as caught:
        provider.stream(
            _request(
                tools=(changed_tool,),
                messages=(Message.user("fix the other bug"), Message.user("now")),
            )
        )

    differences = caught.value.differences
    assert any(d.startswith("tool 'read_file': schema or description changed") for d in differences)
    assert "message count: recorded 1, live 2" in differences
    assert "messages[0] (user): recorded 'fix the bug', live 'fix the other bug'" in differences
    assert "messages[1] (user): live 'now', not recorded" in differences


@pytest.mark.asyncio
async def test_drift_in_warn_mode_warns_streams_and_reports(
    recorder: FixtureRecorder, fixture_dir: Path, tmp_path: Path
) -> None:
    _record_with_header(recorder, fixture_dir)
    report_path = tmp_path / "report.json"
    provider = ReplayProvider(
        fixture_dir, live_cwd=RECORD_CWD, drift="warn", report_path=report_path
    )

    with pytest.warns(RequestDriftWarning, match="system prompt differs"):
        chunks = await collect(provider.stream(_request(system="Different.")))

    assert chunks == text_call("on it")
    provider.close()
    report = read_report(report_path)
    assert len(report.drift_warnings) == 1
    assert report.ok


@pytest.mark.asyncio
async def test_drift_off_skips_the_check(recorder: FixtureRecorder, fixture_dir: Path) -> None:
    _record_with_header(recorder, fixture_dir)
    provider = ReplayProvider(fixture_dir, drift="off")

    assert await collect(provider.stream(_request(system="Different."))) == text_call("on it")


def test_bad_drift_mode_is_rejected(recorder: FixtureRecorder, fixture_dir: Path) -> None:
    _record_with_header(recorder, fixture_dir)
    with pytest.raises(ValueError, match="drift must be one of error, warn, off"):
        ReplayProvider(fixture_dir, drift="loud")  # type: ignore[arg-type]


def test_a_report_that_cannot_be_written_does_not_hide_the_replay_error(
    recorder: FixtureRecorder, fixture_dir: Path, tmp_path: Path
) -> None:
    main = recorder.main()
    recorder.call(main, text_call("one"))
    recorder.save(fixture_dir)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the report's directory should be")
    provider = ReplayProvider(fixture_dir, report_path=blocker / "report.json")
    sid = new_session_id()
    provider.stream(_request(sid))

    with pytest.raises(ScriptExhaustedError) as caught:
        provider.stream(_request(sid))

    assert "the replay report could not be written" in "\n".join(caught.value.__notes__)
    assert provider.consumption_report().errors[0].type == "ScriptExhaustedError"
    with pytest.raises(OSError, match="not-a-directory"):  # close() raises its own failure
        provider.close()


@pytest.mark.asyncio
async def test_report_file_records_consumption_and_errors(
    recorder: FixtureRecorder, fixture_dir: Path, tmp_path: Path
) -> None:
    main = recorder.main()
    recorder.call(main, text_call("one"))
    recorder.call(main, text_call("two"))
    ids = recorder.save(fixture_dir)
    report_path = tmp_path / "out" / "replay-report.json"
    provider = ReplayProvider(fixture_dir, report_path=report_path)
    sid = new_session_id()
    await collect(provider.stream(_request(sid)))
    with pytest.raises(UnrecordedSessionError):
        provider.stream(_request(new_session_id()))

    # Errors are written at once, before close(), in case the agent dies afterwards.
    assert read_report(report_path).errors[0].type == "UnrecordedSessionError"
    provider.close()
    provider.close()

    raw = json.loads(report_path.read_text())
    assert raw["format"] == REPORT_FORMAT
    assert raw["version"] == 1
    assert raw["scripts"] == [
        {
            "session": 0,
            "file": "session.jsonl",
            "recorded_session_id": ids[0],
            "parent_session": None,
            "spawn_index": None,
            "calls": 2,
            "consumed": 1,
            "bound_to": sid,
            "partial": False,
            "interrupted": [],
        }
    ]
    report = read_report(report_path)
    assert not report.ok
    assert "made 1 of 2 call(s); call 2 never requested" in report.unconsumed()[0]
    with pytest.raises(UnconsumedScriptError, match=re.escape(rerecord_command("my-scenario"))):
        report.assert_consumed()
    assert report.to_dict() == raw


def test_read_report_rejects_other_files(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not a replay consumption report"):
        read_report(path)
    with pytest.raises(FileNotFoundError, match="no replay report"):
        read_report(tmp_path / "missing.json")


def test_write_report_without_a_path_is_an_error(
    recorder: FixtureRecorder, fixture_dir: Path, tmp_path: Path
) -> None:
    _record_with_header(recorder, fixture_dir)
    provider = ReplayProvider(fixture_dir)
    with pytest.raises(ValueError, match="needs a path"):
        provider.write_report()
    written = provider.write_report(tmp_path / "r.json")
    assert read_report(written).scripts[0].consumed == 0


@pytest.mark.asyncio
async def test_registry_creates_the_provider_from_string_settings(
    recorder: FixtureRecorder, fixture_dir: Path, tmp_path: Path
) -> None:
    _record_with_header(recorder, fixture_dir)
    assert "replay" in available_providers()

    provider = load_provider(
        "replay",
        fixture_dir=str(fixture_dir),
        live_cwd=RECORD_CWD,
        drift="error",
        pacing_ms="0",
        report_path="",
        lineage_binding="true",
    )

    assert isinstance(provider, ReplayProvider)
    assert await collect(provider.stream(_request())) == text_call("on it")


@pytest.mark.parametrize(
    ("setting", "value"),
    [("lineage_binding", "flase"), ("respect_seed_length", ""), ("pacing_ms", "fast")],
)
def test_registry_rejects_a_setting_text_it_cannot_parse(
    recorder: FixtureRecorder, fixture_dir: Path, setting: str, value: str
) -> None:
    """A typo in a text setting is an error naming the setting, never a silent default."""
    _record_with_header(recorder, fixture_dir)
    with pytest.raises(ValueError, match=rf"setting {setting} must be .*got {value!r}"):
        load_provider("replay", fixture_dir=str(fixture_dir), **{setting: value})


def test_registry_rejects_unknown_or_missing_settings(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _record_with_header(recorder, fixture_dir)
    with pytest.raises(TypeError, match=r"unknown replay provider setting.*fixture_path"):
        load_provider("replay", fixture_path=str(fixture_dir))
    with pytest.raises(TypeError, match="needs fixture_dir"):
        load_provider("replay")


def test_registry_reports_a_fixture_that_cannot_load(fixture_dir: Path, tmp_path: Path) -> None:
    fixture_dir.mkdir()
    report_path = tmp_path / "report.json"

    with pytest.raises(FixtureError, match=r"missing .*session\.jsonl"):
        load_provider("replay", fixture_dir=str(fixture_dir), report_path=str(report_path))

    report = read_report(report_path)
    assert not report.ok
    assert report.scripts == []
    assert report.errors[0].type == "FixtureError"
    assert rerecord_command("my-scenario") in report.errors[0].message
