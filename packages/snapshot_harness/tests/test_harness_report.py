"""The report's data and page without a browser: what it reads from recordings (tolerant of
fields and events it does not know), how it embeds them, and ``--agentreel-report`` in the
pytest plugin under xdist."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentreel.snapshot_harness import check_scenario
from agentreel.snapshot_harness._html_report import render_html, write_report
from agentreel.snapshot_harness._report_data import ScenarioResult, report_data

pytest_plugins = ["pytester"]

MAIN = "11111111-1111-4111-8111-111111111111"
CHILD = "22222222-2222-4222-8222-222222222222"
LANE = "33333333-3333-4333-8333-333333333333"


def log(path: Path, header: dict[str, Any], events: list[tuple[int, str, dict[str, Any]]]) -> None:
    lines = [json.dumps({"type": "session", "version": 1, "cwd": "{{cwd}}", **header})]
    lines += [
        json.dumps({"type": kind, "seq": seq, "time": at, "data": data})
        for seq, (at, kind, data) in enumerate(events)
    ]
    path.write_text("\n".join(lines) + "\n")


def chunk(at: int, body: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
    return (at, "assistant/chunk", {"turn": 0, "step": 0, "chunk": body})


def header_event(at: int) -> tuple[int, str, dict[str, Any]]:
    data = {"turn": 0, "step": 0, "model": "m", "system": "s", "tools_digest": "d"}
    return (at, "request/header", {**data, "message_count": 1})


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    """A hand-written fixture: a main session, a process child and a side lane (headers
    with fields this reader does not know), and an event type it does not know."""
    directory = tmp_path / "handmade"
    directory.mkdir()
    (directory / "scenario.toml").write_text('description = "made by hand"\n')
    log(
        directory / "session.jsonl",
        {"id": MAIN, "created_at": 1000, "parent_session": None, "origin": "main"},
        [
            (1000, "user/message", {"turn": 0, "text": "go </script><b>bold</b>"}),
            header_event(1001),
            chunk(1005, {"type": "tool-call-delta", "index": 0, "id": "c", "name": "subagent"}),
            chunk(
                1006, {"type": "tool-call-delta", "index": 0, "id": "c", "arguments_delta": "{}"}
            ),
            chunk(1040, {"type": "finish", "reason": "tool-calls"}),
            (1041, "subagent/start", {"child_session": CHILD, "spawn_index": 0, "mode": "process"}),
            (1042, "future/event", {"anything": [1, 2]}),
            (1090, "subagent/end", {"child_session": CHILD, "outcome": "completed"}),
        ],
    )
    log(
        directory / "session.1.jsonl",
        {
            "id": CHILD,
            "created_at": 1041,
            "parent_session": MAIN,
            "spawn_index": 0,
            "origin": "spawn",
            "wire_api": "responses",
        },
        [
            header_event(1050),
            chunk(1060, {"type": "text-delta", "index": 0, "text": "hel"}),
            chunk(1061, {"type": "text-delta", "index": 0, "text": "lo"}),
            chunk(1070, {"type": "usage", "input_tokens": 3, "output_tokens": 2}),
            chunk(1080, {"type": "finish", "reason": "stop"}),
        ],
    )
    log(
        directory / "session.2.jsonl",
        {"id": LANE, "created_at": 1002, "parent_session": MAIN, "origin": "spawn", "lane": "t"},
        [header_event(1003), chunk(1030, {"type": "finish", "reason": "stop"})],
    )
    return directory


def test_sessions_calls_and_kinds_come_from_the_recordings(scenario: Path) -> None:
    data = report_data([ScenarioResult(scenario, "passed", 1.5)])
    (entry,) = data["scenarios"]
    assert entry["description"] == "made by hand"
    main, child, lane = entry["sessions"]
    assert [s["label"] for s in entry["sessions"]] == ["main", "process #0", "lane"]
    assert [s["parent"] for s in entry["sessions"]] == [None, 0, 0]
    assert [s["depth"] for s in entry["sessions"]] == [0, 1, 1]
    assert child["extra"] == {"wire_api": "responses"}
    assert lane["extra"] == {"lane": "t"}
    # A call runs from its request header to its finish chunk, in recorded epoch ms.
    assert [(c["s"], c["e"], c["finish"]) for c in child["calls"]] == [(1050, 1080, "stop")]
    assert child["calls"][0]["text"] == "hello"
    assert child["calls"][0]["usage"] == {"input_tokens": 3, "output_tokens": 2}
    assert main["calls"][0]["tools"] == [{"name": "subagent", "arguments": "{}"}]
    assert (entry["t0"], entry["t1"]) == (1000, 1090)
    kinds = [item["k"] for item in main["story"]]
    assert kinds == ["user", "call", "subagent", "future/event", "subagent"]
    assert entry["problems"] == []


def test_a_broken_line_is_a_named_problem_and_the_rest_is_shown(scenario: Path) -> None:
    path = scenario / "session.1.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:3], "{not json", *lines[3:]]) + "\n")
    (entry,) = report_data([ScenarioResult(scenario, "passed", 0)])["scenarios"]
    assert len(entry["problems"]) == 1
    assert entry["problems"][0].startswith(f"{path}:4: not JSON")
    assert entry["sessions"][1]["calls"][0]["text"] == "hel"  # read up to the broken line


def test_recorded_text_cannot_end_the_data_block(scenario: Path, tmp_path: Path) -> None:
    failing = ScenarioResult(
        scenario, "failed", 0, "boom", {"transcript.jsonl": "-</script><script>alert(1)\n"}
    )
    html = write_report(tmp_path / "out" / "r.html", [failing]).read_text()
    assert html.count("</script>") == 2  # the data block's and the script's own
    block = re.search(r'id="agentreel-data">(.*?)</script>', html, re.S)
    assert block is not None
    data = json.loads(block.group(1))
    assert data["scenarios"][0]["diffs"][0]["text"] == "-</script><script>alert(1)\n"
    assert data["scenarios"][0]["sessions"][0]["story"][0]["text"] == "go </script><b>bold</b>"
    assert "http://" not in render_html(data)
    assert "https://" not in render_html(data)


@pytest.mark.slow
def test_plugin_option_writes_one_report_from_xdist_workers(
    pytester: pytest.Pytester,
    make_scenario: Callable[..., Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CI", "true")  # the report is written under CI too; pending files not
    good = make_scenario("good", env={"FAKE_SUBAGENTS": "1"})
    check_scenario(good, "record")
    bad = good.parent / "bad"
    shutil.copytree(good, bad)
    golden = bad / "golden" / "session.1.jsonl"
    golden.write_text('{"stale":true}\n' + golden.read_text())
    report = tmp_path / "reports" / "run.html"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:asyncio", "-q", "-n", "2",
        f"--agentreel-report={report}", str(good.parent),
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"agentreel report: {report}"])
    block = re.search(r'id="agentreel-data">(.*?)</script>', report.read_text(), re.S)
    assert block is not None
    data = json.loads(block.group(1))
    assert (data["passed"], data["failed"]) == (1, 1)
    by_name = {s["name"]: s for s in data["scenarios"]}
    assert by_name["good"]["status"] == "passed"
    assert by_name["good"]["diffs"] == []
    assert by_name["bad"]["status"] == "failed"
    assert [d["file"] for d in by_name["bad"]["diffs"]] == ["session.1.jsonl"]
    assert "-{" in by_name["bad"]["diffs"][0]["text"]
    assert [len(by_name[n]["sessions"]) for n in ("good", "bad")] == [2, 2]
    assert not list(bad.glob("golden/*.pending"))


REPO = Path(__file__).resolve().parents[3]


def test_mcp_calls_sit_in_their_sessions_story_after_the_tool_call() -> None:
    """fixtures/mcp-tools: each connection names its session (main, main/0); each call goes
    right after the agent's tool call for it, at that time on the timeline."""
    (entry,) = report_data([ScenarioResult(REPO / "fixtures" / "mcp-tools", "passed", 0)])[
        "scenarios"
    ]
    main, child = entry["sessions"]
    for session, calls in (
        (main, ['calc: add({"a": 2, "b": 3}) → 5', 'web: echo({"text": "parent"}) → parent']),
        (child, ['calc: add({"a": 40, "b": 2}) → 42', 'web: echo({"text": "child"}) → child']),
    ):
        story = session["story"]
        mcp = [i for i, item in enumerate(story) if item["k"] == "mcp"]
        assert [story[i]["text"] for i in mcp] == calls
        for i in mcp:  # each follows the tool call that asked for it, at its time
            assert story[i - 1]["k"] == "tool"
            assert story[i]["t"] == story[i - 1]["t"]
        assert session["mcp"] == [story[i]["t"] for i in mcp]
    assert entry["mcp"] == []


def test_an_mcp_call_without_identity_goes_to_the_session_whose_model_asked_for_it(
    tmp_path: Path,
) -> None:
    """As a real agent records (Claude Code, Gemini CLI): the connection names no session and
    the logs, written by the proxy, hold model calls only. Each call goes to the session
    whose model call asked for a tool of that name suffix with the same arguments."""
    directory = tmp_path / "mcp-tools"
    shutil.copytree(REPO / "fixtures" / "mcp-tools", directory)
    for path in (directory / "mcp").iterdir():
        lines = path.read_text().splitlines()
        lines[0] = lines[0].replace('"session":"main/0"', '"session":null')
        lines[0] = lines[0].replace('"session":"main"', '"session":null')
        path.write_text("\n".join(lines) + "\n")
    for path in directory.glob("session*.jsonl"):
        kept = [x for x in path.read_text().splitlines() if '"type":"tool/call"' not in x]
        path.write_text("\n".join(kept) + "\n")
    (entry,) = report_data([ScenarioResult(directory, "passed", 0)])["scenarios"]
    main, child = entry["sessions"]
    for session, add in (
        (main, 'add({"a": 2, "b": 3}) → 5'),
        (child, 'add({"a": 40, "b": 2}) → 42'),
    ):
        story = session["story"]
        mcp = [i for i, item in enumerate(story) if item["k"] == "mcp"]
        assert f"calc: {add}" in [story[i]["text"] for i in mcp]
        for i in mcp:  # after the model call that asked for it, at that call's end
            assert story[i - 1]["k"] in {"call", "mcp"}
    assert entry["mcp"] == []
