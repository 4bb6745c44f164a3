"""What a user sees when a third-party agent's request drifts: a short, readable, masked diff.

The agent is ``examples/pydantic-ai-agent`` (pydantic-ai, not agentreel's provider layer),
replayed from its committed scenario through the proxy. Like real agents, its system prompt
holds content that differs on every run — today's date, the working directory, the session
id — which must never show up as drift. The user edits one phrase of the system prompt
next to that content and runs ``agentreel replay``: the failure must say first that the
request drifted, name the system prompt change with the volatile parts masked on both
sides, and stay short (about 20 lines) before the agent's stderr tail — and say it once.
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
SCENARIO = "example-pydantic-ai"
AGENT = Path("examples") / "pydantic-ai-agent"
RECORDED = "Working directory: "
EDITED = "Workspace: "
STDERR_MARK = "--- agent stderr (tail) ---"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def test_a_changed_system_prompt_fails_with_a_short_masked_diff(tmp_path: Path) -> None:
    # The user's checkout: the committed scenario and the example agent, which they edit.
    shutil.copytree(REPO / "fixtures" / SCENARIO, tmp_path / "fixtures" / SCENARIO)
    shutil.copytree(REPO / AGENT, tmp_path / AGENT)
    agent = tmp_path / AGENT / "agent.py"
    source = agent.read_text()
    assert source.count(RECORDED) == 1, "the example's system prompt no longer says this"
    agent.write_text(source.replace(RECORDED, EDITED))
    fixtures = str(tmp_path / "fixtures")

    run = subprocess.run(
        [sys.executable, "-m", "agentreel.snapshot_harness", "replay", "--fixtures", fixtures],
        capture_output=True,
        text=True,
        env={**os.environ, "AGENTREEL_RERECORD_COMMAND": "nox -s record -- {scenario}"},
        timeout=600,
        check=False,
    )
    assert run.returncode != 0, run.stdout
    report = run.stdout.split(f"=== {SCENARIO} ===\n", 1)[1]
    failure, marked, _ = report.partition(STDERR_MARK)
    assert marked, f"no stderr tail in the failure:\n{report}"
    lines = failure.strip().splitlines()

    # The cause, first: the request drifted, in the lead's first call.
    assert lines[0].startswith(f"{SCENARIO}: RequestDriftError: "), lines[0]
    # The diff names the system prompt change, the old and the new phrase...
    (change,) = [line for line in lines if "system prompt differs" in line]
    recorded, _, live = change.partition(", live ")
    assert RECORDED.strip() in recorded
    assert EDITED.strip() not in recorded
    assert EDITED.strip() in live
    assert RECORDED.strip() not in live
    # ...with the volatile content around it masked the same way on both sides: the date
    # and the working directory as tokens, no raw id, date or path anywhere in the diff.
    for side in (recorded, live):
        assert "{{date}}" in side, side
    # the diff's own lines; the line naming the full masked request files is not a difference
    diff = [
        line
        for line in lines
        if line.startswith("  ") and not line.startswith("  full masked requests: ")
    ]
    assert diff == [change], "only the system prompt drifted: no message, tool or model line"
    assert datetime.date.today().isoformat() not in change
    assert "/tmp/" not in change
    assert str(tmp_path) not in failure
    assert not UUID.search(change), change
    assert "re-record: nox -s record -- example-pydantic-ai" in failure
    assert len(lines) <= 20, failure
    # Once: the proxy's own log of the same drift is not printed a second time, bare.
    assert (run.stdout + run.stderr).count("system prompt differs") == 1, run.stderr
