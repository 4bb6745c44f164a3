"""``render_goldens`` builds goldens from the normalizer's bytes outputs (no text copy):
they must be exactly the normalized texts, encoded, numbered transcript first then by
session. ``render_recordings`` is the other half of ``render_run``, on its own."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agentreel.session import (
    Normalizer,
    SessionStore,
    ToolCallData,
    TurnEndData,
    TurnStartData,
    UserMessageData,
    harvest_session_logs,
)
from agentreel.snapshot_harness import (
    RunResult,
    load_scenario,
    render_goldens,
    render_recordings,
    render_run,
)

OTHER = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"


def _run_result(tmp_path: Path, make_scenario: Callable[..., Path]) -> RunResult:
    run_dir = tmp_path / "run"
    cwd = run_dir / "cwd"
    cwd.mkdir(parents=True)
    store = SessionStore(run_dir / "sessions")
    main = store.create(cwd)
    main.append(TurnStartData(turn=1))
    main.append(UserMessageData(turn=1, text=f"read {cwd}/a.txt\u2028→🙂 {OTHER}"))
    child = store.spawn(main, 0)
    child.append(
        ToolCallData(
            turn=1,
            step=1,
            call_id="c1",
            name="read",
            arguments=json.dumps({"path": f"{cwd}/é.txt", "in": str(run_dir / "home")}),
        )
    )
    main.append(TurnEndData(turn=1, reason="completed"))
    store.close_all()
    logs = harvest_session_logs(run_dir / "sessions")
    transcript = (
        json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"sessionId": str(main.id)}})
        + "\n"
        + json.dumps({"jsonrpc": "2.0", "method": "n", "params": {"u": OTHER, "ts": 3}})
        + "\n"
    ).encode()
    return RunResult(
        scenario=load_scenario(make_scenario()),
        mode="replay",
        cwd=cwd,
        run_dir=run_dir,
        transcript=transcript,
        session_logs=logs,
        session_log_bytes=[log.path.read_bytes() for log in logs],
        stderr="",
        exit_code=0,
        replay_report=None,
        duration=0.0,
    )


def test_render_goldens_are_the_normalized_texts_encoded(
    tmp_path: Path, make_scenario: Callable[..., Path]
) -> None:
    result = _run_result(tmp_path, make_scenario)
    run_dir, cwd, logs, transcript = (
        result.run_dir,
        result.cwd,
        result.session_logs,
        result.transcript,
    )

    goldens = render_goldens(result)

    text_normalizer = Normalizer.for_logs(
        cwd,
        logs,
        extra_paths={
            str(run_dir / "sessions"): "{{sessions}}",
            str(run_dir / "home"): "{{home}}",
            str(run_dir / "tmp"): "{{tmp}}",
        },
    )
    expected = {"transcript.jsonl": text_normalizer.transcript(transcript).encode()}
    expected["session.jsonl"] = text_normalizer.session_log(logs[0]).encode()
    expected["session.1.jsonl"] = text_normalizer.session_log(logs[1]).encode()
    assert goldens == expected
    assert all(type(data) is bytes for data in goldens.values())
    assert b"{{session:main}}" in goldens["transcript.jsonl"]
    assert b"{{uuid:1}}" in goldens["transcript.jsonl"]  # numbered in the transcript first
    assert b"{{uuid:1}}" in goldens["session.jsonl"]
    assert b"{{cwd}}/" in goldens["session.1.jsonl"]
    assert not any(str(run_dir).encode() in data for data in goldens.values())
    assert b"{{home}}" in goldens["session.1.jsonl"]


def test_render_run_is_goldens_plus_recordings(
    tmp_path: Path, make_scenario: Callable[..., Path]
) -> None:
    result = _run_result(tmp_path, make_scenario)
    rendered = render_run(result)
    assert rendered.goldens == render_goldens(result)
    recordings = render_recordings(result)
    assert rendered.recordings == recordings
    assert list(recordings) == ["session.jsonl", "session.1.jsonl"]
    raw = result.session_log_bytes[0]
    assert recordings["session.jsonl"] == raw.replace(str(result.cwd).encode(), b"{{cwd}}")
    assert b"{{cwd}}" in recordings["session.jsonl"]


def test_render_recordings_needs_one_raw_content_per_log(
    tmp_path: Path, make_scenario: Callable[..., Path]
) -> None:
    result = _run_result(tmp_path, make_scenario)
    short = dataclasses.replace(result, session_log_bytes=result.session_log_bytes[:1])
    with pytest.raises(ValueError, match="no recordings can be made") as caught:
        render_recordings(short)
    assert "2 session logs but 1 raw contents, so no recordings can be made" in str(caught.value)
    assert "run_scenario(..., keep_raw_logs=True)" in str(caught.value)
