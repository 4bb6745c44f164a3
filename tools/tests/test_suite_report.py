"""What ``nox -s tests`` prints at its end and keeps for the bench (``tools.suite_report``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import suite_report

pytest_plugins = ["pytester"]

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="{n}">
{cases}
</testsuite></testsuites>
"""


def write_run(reports: Path, run: str, cases: list[tuple[str, str, float]]) -> None:
    body = "\n".join(
        f'<testcase classname="{classname}" name="{name}" time="{seconds}" />'
        for classname, name, seconds in cases
    )
    suite_report.junit_report(run, reports).write_text(JUNIT.format(n=len(cases), cases=body))


def test_a_dotted_classname_is_named_as_pytest_names_the_test(tmp_path: Path) -> None:
    (tmp_path / "packages" / "llm" / "tests").mkdir(parents=True)
    (tmp_path / "packages" / "llm" / "tests" / "test_x.py").write_text("")
    assert (
        suite_report.node_id("packages.llm.tests.test_x", "test_a[p.1]", tmp_path)
        == "packages/llm/tests/test_x.py::test_a[p.1]"
    )
    assert (
        suite_report.node_id("packages.llm.tests.test_x.TestGroup", "test_b", tmp_path)
        == "packages/llm/tests/test_x.py::TestGroup::test_b"
    )
    # A scenario item (no file of that name): kept as the report has it.
    assert suite_report.node_id("fixtures.cancel", "cancel", tmp_path) == "fixtures.cancel::cancel"


def test_the_summary_counts_every_run_and_lists_the_slowest_first(tmp_path: Path) -> None:
    write_run(tmp_path, "llm", [("m", f"test_{i}", float(i)) for i in range(8)])
    write_run(tmp_path, "repository", [("r", "test_slow", 30.0), ("r", "test_fast", 0.1)])
    lines, summary = suite_report.summarize(
        [("llm", 12.0), ("repository", 40.0), ("gone", 1.0)],
        55.0,
        complete=True,
        reports_dir=tmp_path,
        root=tmp_path,
    )
    assert summary["tests"] == 10
    assert summary["runs"] == {"llm": 12.0, "repository": 40.0, "gone": 1.0}
    assert "total                 55.0 s wall, 10 tests" in lines
    slowest = lines[lines.index("10 slowest tests:") + 1 :]
    assert slowest[0].split() == ["30.0", "s", "r::test_slow"]
    assert slowest[1].split() == ["7.0", "s", "m::test_7"]
    assert len(slowest) == 10


def test_only_a_complete_run_is_read_back(tmp_path: Path) -> None:
    path = tmp_path / "suite.json"
    assert suite_report.read_summary(path) is None
    _, part = suite_report.summarize([], 3.0, complete=False, reports_dir=tmp_path)
    suite_report.write_summary(part, path)
    assert suite_report.read_summary(path) is None  # `nox -s tests -- -k x` is no suite time
    _, whole = suite_report.summarize([], 400.0, complete=True, reports_dir=tmp_path)
    suite_report.write_summary(whole, path)
    assert suite_report.read_summary(path) == json.loads(path.read_text())
    assert json.loads(path.read_text())["wall_seconds"] == 400.0


def test_fixture_times_of_every_process_are_summed_costliest_first(tmp_path: Path) -> None:
    (tmp_path / "fixtures-1-gw0.json").write_text(
        json.dumps({"proxy (session)": [4.0, 1], "tmp_path (function)": [0.5, 10]})
    )
    (tmp_path / "fixtures-2-gw1.json").write_text(json.dumps({"proxy (session)": [3.5, 1]}))
    assert suite_report.costliest_fixtures(tmp_path) == [
        ("proxy (session)", 7.5, 2),
        ("tmp_path (function)", 0.5, 10),
    ]
    suite_report.clear_fixture_times(tmp_path)
    assert suite_report.costliest_fixtures(tmp_path) == []


def test_the_fixture_timer_writes_each_fixtures_own_set_up_time(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(suite_report.FIXTURE_PLUGIN_DIR))
    pytester.makepyfile(
        """
        import time
        import pytest

        @pytest.fixture(scope="module")
        def slow():
            time.sleep(0.2)

        @pytest.fixture
        def quick(slow):
            return 1

        def test_a(quick):
            pass

        def test_b(quick):
            pass
        """
    )
    reports = tmp_path / "reports"
    reports.mkdir()
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-p", "no:asyncio", *suite_report.fixture_plugin_args(reports)
    )
    result.assert_outcomes(passed=2)
    ranked = {name: (sec, count) for name, sec, count in suite_report.costliest_fixtures(reports)}
    slow_seconds, slow_setups = ranked["slow (module)"]
    quick_seconds, quick_setups = ranked["quick (function)"]
    assert (slow_setups, quick_setups) == (1, 2)
    assert slow_seconds >= 0.2
    # quick's own time: its dependency's sleep is not counted in it as well
    assert quick_seconds < slow_seconds / 2
