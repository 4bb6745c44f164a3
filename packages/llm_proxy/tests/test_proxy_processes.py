"""Out-of-process subagents: a parent process starts two child processes concurrently, each
calling the proxy with its identity; replay is deterministic, and a child whose recording
was deleted gets ``UnrecordedSessionError`` — in the HTTP error body and in the report —
never another session's answer."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report

AGENT = Path(__file__).with_name("proxy_process_agent.py")
RULES = """
[[rule]]
match.last_user = "apples and pears"
tool_calls = [
  { name = "delegate", arguments = { task = "count the apples" } },
  { name = "delegate", arguments = { task = "count the pears" } },
]
[[rule]]
match.last_user = "count the apples"
text = "7 apples"
[[rule]]
match.last_user = "count the pears"
text = "3 pears"
[[rule]]
match.last_tool_result_regex = "(?s)7 apples.*3 pears"
text = "7 apples and 3 pears"
"""


async def run_parent(base_url: str) -> tuple[int, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(AGENT), "parent", base_url, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    return process.returncode or 0, json.loads(out.decode())


@pytest.mark.slow
@pytest.mark.asyncio
async def test_child_processes_replay_and_a_missing_child_recording_fails_loudly(
    tmp_path: Path,
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            code, recorded = await run_parent(proxy.base_url)
    assert code == 0
    assert recorded == {"children": ["7 apples", "3 pears"], "final": "7 apples and 3 pears"}
    for run in range(2):
        report = tmp_path / f"report-{run}.json"
        async with start_proxy("replay", fixture=fixture, report=report) as proxy:
            code, replayed = await run_parent(proxy.base_url)
        assert (code, replayed) == (0, recorded)
        assert [(s.calls, s.consumed) for s in read_report(report).scripts] == [
            (2, 2),
            (1, 1),
            (1, 1),
        ]

    (fixture / "session.2.jsonl").unlink()  # one child's recording is gone
    report = tmp_path / "report-missing.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        code, outcome = await run_parent(proxy.base_url)
    assert code == 1
    errors = [c for c in outcome["children"] if "error" in c]
    answers = [c["answer"] for c in outcome["children"] if "answer" in c]
    assert len(errors) == 1
    assert len(answers) == 1  # the recorded child still gets its own answer, only it
    assert answers[0] in ("7 apples", "3 pears")
    body = errors[0]["body"]
    message = body.get("error", body)["message"]
    assert errors[0]["error"] == 400
    assert "UnrecordedSessionError" in json.dumps(errors[0]["body"])
    assert "recorded no child with spawn index" in message
    assert [e.type for e in read_report(report).errors] == ["UnrecordedSessionError"]
