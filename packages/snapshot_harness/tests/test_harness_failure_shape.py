"""What a realistic failure prints: drift in a 3-session scenario (the committed
``subagent-multi`` with its prompt edited), through the CLI and the pytest report.

The cause once, first; then the recorded scripts left unused; then one line naming the
step; then the agent's stderr tail without the cause again — at most about 20 lines
before that tail, so the reader sees what broke without scrolling.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from agentreel.snapshot_harness._cli import main

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
NAME = "subagent-multi"
STDERR_MARK = "--- agent stderr (tail) ---"
MAX_LINES_BEFORE_TAIL = 20


@pytest.fixture
def drifted(tmp_path: Path) -> Path:
    """A copy of subagent-multi whose prompt changed: the main session's first call drifts."""
    directory = tmp_path / "fixtures" / NAME
    shutil.copytree(FIXTURES / NAME, directory)
    toml = directory / "scenario.toml"
    original = toml.read_text()
    edited = original.replace("Plan a picnic:", "Plan a picnic today:")
    assert edited != original
    toml.write_text(edited)
    return directory


def _check_shape(failure: str) -> None:
    before, _, stderr_tail = failure.partition(STDERR_MARK)
    lines = before.strip().splitlines()
    assert len(lines) <= MAX_LINES_BEFORE_TAIL, before
    assert lines[0].startswith(f"{NAME}: RequestDriftError: live session"), before
    assert sum("differs from the recorded request/header" in line for line in lines) == 1
    listing = lines.index("Recorded calls not used:")
    assert [line[:17] for line in lines[listing + 1 : listing + 4]] == [
        "- session.jsonl (",
        "- session.1.jsonl",
        "- session.2.jsonl",
    ]
    assert lines[-1].startswith("The run failed at step 3 (prompt 'Plan a picnic today")
    assert "differs from the recorded request/header" not in stderr_tail
    assert "Traceback" not in stderr_tail


def test_cli_drift_failure_reads_cause_first_in_at_most_20_lines(drifted: Path) -> None:
    out = io.StringIO()
    code = main(["replay", "--fixtures", str(drifted.parent)], out=out)
    text = out.getvalue()
    assert code == 1, text
    section = text.split(f"=== {NAME} ===\n", 1)[1]
    _check_shape(section.rsplit("\n0 passed, 1 failed", 1)[0])


def test_pytest_drift_failure_reads_cause_first_in_at_most_20_lines(
    pytester: pytest.Pytester, drifted: Path
) -> None:
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-p", "no:asyncio", "-q", str(drifted.parent)
    )
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    report = text.split(f"replay of scenario {NAME} failed:\n", 1)[1]
    _check_shape(report.split("\n=====", 1)[0])
