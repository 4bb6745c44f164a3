"""The pytest plugin (entry point ``pytest11``): every ``scenario.toml`` is a test item.

``pytest fixtures/`` replays every scenario; ``-n 2`` works because each item is
independent (its own temp directory and agent process). Options, in the ``agentreel``
group: ``--agentreel-mode=replay|record|refresh`` and ``--agentreel-scenario=NAME``
(repeatable, or comma-separated) to pick scenarios; ``--agentreel-report=FILE`` writes the
HTML report of every scenario item run (also under xdist: workers send each item's result
with its test report, the controller writes the page). A failure shows one unified diff per
differing file plus the agent's stderr tail. In record and refresh modes the terminal
summary lists the files each scenario wrote (as the CLI does), so the user knows what to
review before committing.

The ``agentreel`` fixture (SPEC 14, ``_reel``) serves tests that call their agent as a
function: a proxy run per test, its recording in ``recordings/<module>/<test>/`` beside the
test; ``--agentreel-record=none|once|all`` (none, the default and the only mode under
``CI``: replay) and ``--agentreel-upstream=URL`` in the same group; ``agentreel_config``
(override it at any scope) and the ``agentreel`` marker's keyword arguments configure it.
At the test's end an unrecorded, drifted or unconsumed call fails the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agentreel.snapshot_harness._reel import (
    NETWORK_MODES,
    NETWORK_OPTION,
    RECORD_MODES,
    RECORD_OPTION,
    UPSTREAM_OPTION,
    OpenReel,
    RecordingUnusableError,
    Reel,
    ReelError,
    refuse_under_ci,
)
from agentreel.snapshot_harness._scenario import (
    MODES,
    SCENARIO_FILE,
    Mode,
    validate_scenario_name,
)
from agentreel.snapshot_harness.exceptions import HarnessError, ScenarioError

if TYPE_CHECKING:
    from agentreel.snapshot_harness._check import Outcome

_MODE_OPTION = "--agentreel-mode"
_SCENARIO_OPTION = "--agentreel-scenario"
_REPORT_OPTION = "--agentreel-report"
# The key of the scenario result in each item's ``user_properties`` (sent by xdist workers).
_REPORT_PROPERTY = "agentreel_scenario_result"
# The key of the files a record/refresh item wrote, in its ``user_properties``.
_WRITTEN_PROPERTY = "agentreel_written"
# The outside connections a test's sealed network refused, in its ``user_properties``.
_BLOCKED_PROPERTY = "agentreel_blocked"
_DRIFTED_PROPERTY = "agentreel_drifted"
# The reel a test's ``agentreel`` fixture opened, judged when the test's call phase ends.
_REEL_KEY = pytest.StashKey[OpenReel]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentreel", "agentreel snapshot scenarios")
    group.addoption(
        _MODE_OPTION,
        choices=MODES,
        default="replay",
        help="replay (default: keyless, compare with golden/), record (run a real or stub "
        "model, write recordings and goldens) or refresh (replay, rewrite golden/).",
    )
    group.addoption(
        _SCENARIO_OPTION,
        action="append",
        default=[],
        metavar="NAME",
        help="only these scenarios (directory names; repeatable or comma-separated).",
    )
    group.addoption(
        _REPORT_OPTION,
        default=None,
        metavar="FILE",
        help="write one self-contained HTML report of the scenarios run (status, session "
        "tree, timeline, transcript, diffs) to FILE.",
    )
    group.addoption(
        RECORD_OPTION,
        choices=RECORD_MODES,
        default="none",
        help="the agentreel fixture: none (default; replay the recordings, the only mode "
        "under CI), once (record tests that have no recording), all (re-record) or drifted "
        "(replay; re-record only the sessions that drift, and what depends on them).",
    )
    group.addoption(
        UPSTREAM_OPTION,
        default=None,
        metavar="URL",
        help="the agentreel fixture records from URL (default: the stub model server on "
        "the recording folder's stub-rules.toml, else the one beside the test module).",
    )
    group.addoption(
        NETWORK_OPTION,
        choices=NETWORK_MODES,
        default="sealed",
        help="the agentreel fixture's test network: sealed (default; every proxy variable "
        "at a blocker that names each outside host tried, loopback exempt) or open (proxy "
        "variables left as they are; the model calls still go through agentreel's proxy).",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "agentreel(**config): configure this test's agentreel fixture (keys of "
        "agentreel_config: upstream, record_mode, cwd, and the replay settings masks, "
        "partial_lanes, captures, drift, schedule, ...)",
    )
    try:
        refuse_under_ci(config.getoption(RECORD_OPTION))
    except ReelError as exc:
        raise pytest.UsageError(str(exc)) from None
    for name in _selected(config):
        try:
            validate_scenario_name(name, where=f"{_SCENARIO_OPTION}")
        except ScenarioError as exc:
            raise pytest.UsageError(str(exc)) from None
    report = config.getoption(_REPORT_OPTION)
    if report and not hasattr(config, "workerinput"):  # xdist workers only send results
        config.pluginmanager.register(_ReportWriter(Path(report)), "agentreel-report")
    if config.getoption(_MODE_OPTION) != "replay" and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_WrittenSummary(), "agentreel-written")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(_BlockedSummary(), "agentreel-blocked")


class _BlockedSummary:
    """Lists, at the end of the run, the outside connections each test's sealed network
    refused (a test whose agent swallowed the refusal still passes)."""

    def __init__(self) -> None:
        self.blocked: dict[str, list[str]] = {}

        self.drifted: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            for key, value in report.user_properties:
                if key == _BLOCKED_PROPERTY and isinstance(value, list):
                    self.blocked[report.nodeid] = [str(line) for line in value]
                if key == _DRIFTED_PROPERTY and isinstance(value, str):
                    self.drifted[report.nodeid] = value

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.drifted:
            # --agentreel-record=drifted (SPEC 20): what each test kept and re-recorded.
            terminalreporter.section("agentreel: re-recorded only what drifted")
            for nodeid in sorted(self.drifted):
                terminalreporter.write_line(self.drifted[nodeid])
        if not self.blocked:
            return
        terminalreporter.section("agentreel: outside connections blocked")
        for nodeid in sorted(self.blocked):
            for line in self.blocked[nodeid]:
                terminalreporter.write_line(f"{nodeid}: {line}")


class _WrittenSummary:
    """Lists, at the end of a record or refresh run, the files each scenario wrote."""

    def __init__(self) -> None:
        self.written: dict[str, list[str]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            for key, value in report.user_properties:
                if key == _WRITTEN_PROPERTY and isinstance(value, dict):
                    self.written[str(value["scenario"])] = [str(f) for f in value["files"]]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.written:
            return
        terminalreporter.section("agentreel: files written")
        for scenario in sorted(self.written):
            terminalreporter.write_line(f"{scenario}: wrote {', '.join(self.written[scenario])}")


class _ReportWriter:
    """Collects each scenario item's result from its test report; writes the page at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.results: list[dict[str, Any]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            for key, value in report.user_properties:
                if key == _REPORT_PROPERTY and isinstance(value, dict):
                    self.results.append(value)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from agentreel.snapshot_harness._html_report import write_report
        from agentreel.snapshot_harness._report_data import ScenarioResult

        ordered = sorted(self.results, key=lambda r: str(r["directory"]))
        write_report(self.path, [ScenarioResult.from_dict(r) for r in ordered])

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_line(f"agentreel report: {self.path}")


def _selected(config: pytest.Config) -> list[str]:
    raw: list[str] = config.getoption(_SCENARIO_OPTION) or []
    return [name.strip() for item in raw for name in item.split(",") if name.strip()]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name != SCENARIO_FILE:
        return None
    selected = _selected(parent.config)
    if selected and file_path.parent.name not in selected:
        return None
    collector: ScenarioFile = ScenarioFile.from_parent(parent, path=file_path)
    return collector


class ScenarioFile(pytest.File):
    """A ``scenario.toml``: yields the one item that runs it."""

    def collect(self) -> Iterator[ScenarioItem]:
        yield ScenarioItem.from_parent(self, name=self.path.parent.name)


class ScenarioItem(pytest.Item):
    """One scenario run in the session's mode."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mode: Mode = self.config.getoption(_MODE_OPTION)

    def runtest(self) -> None:
        # Imported here so that loading the plugin (in every pytest run of the venv) stays
        # cheap: the runner pulls in the ACP SDK and the session and replay packages.
        from agentreel.snapshot_harness._check import check_scenario
        from agentreel.snapshot_harness._pending import pending_allowed

        pending = pending_allowed()
        if not self.config.getoption(_REPORT_OPTION):
            self._note_written(check_scenario(self.path.parent, self.mode, pending=pending))
            return
        from agentreel.snapshot_harness._report_data import scenario_result

        begun = time.monotonic()
        error: BaseException | None = None
        try:
            self._note_written(check_scenario(self.path.parent, self.mode, pending=pending))
        except BaseException as exc:
            error = exc
            raise
        finally:
            result = scenario_result(self.path.parent, time.monotonic() - begun, error)
            self.user_properties.append((_REPORT_PROPERTY, result.as_dict()))

    def _note_written(self, outcome: Outcome) -> None:
        # Sent with the test report, so xdist workers' files reach the controller's summary.
        if outcome.written:
            written = {"scenario": self.name, "files": list(outcome.written)}
            self.user_properties.append((_WRITTEN_PROPERTY, written))

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | Any:
        if isinstance(excinfo.value, HarnessError):
            return f"{self.mode} of scenario {self.name} failed:\n{excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"agentreel {self.mode}: {self.name}"


@pytest.fixture
def agentreel_config() -> dict[str, Any]:
    """The ``agentreel`` fixture's configuration; override it at any scope (as
    pytest-recording's ``vcr_config``): ``upstream``, ``record_mode``, ``cwd``,
    ``private_home``, every record setting by name (``agentreel.session.RecordSettings``:
    ``allow_secrets``) and every replay setting by name
    (``agentreel.llm_replay.ReplaySettings``: ``masks``, ``partial_lanes``, ``captures``,
    ``drift``, ``schedule``, ...), checked as those values check them."""
    return {}


@pytest.fixture
def agentreel(request: pytest.FixtureRequest, agentreel_config: dict[str, Any]) -> Iterator[Reel]:
    """A recording/replaying model endpoint for this test (SPEC 14): point the agent's SDK
    at ``agentreel.base_url`` (OpenAI style) or ``agentreel.anthropic_base_url`` with
    ``agentreel.api_key``; name subagents with ``agentreel.headers(...)``."""
    from agentreel.snapshot_harness._reel import open_reel, plan, recording_dir, sealed

    config = dict(agentreel_config)
    for marker in reversed(list(request.node.iter_markers("agentreel"))):
        config.update(marker.kwargs)
    path = Path(request.node.path)
    cls = request.cls.__name__ if request.cls is not None else None
    try:
        reel_plan = plan(
            nodeid=request.node.nodeid,
            directory=recording_dir(path, request.node.name, cls),
            module_dir=path.parent,
            option_mode=request.config.getoption(RECORD_OPTION),
            option_upstream=request.config.getoption(UPSTREAM_OPTION),
            config=config,
            basetemp=request.getfixturevalue("tmp_path_factory").getbasetemp(),
        )
        opened = open_reel(reel_plan)
        private = (
            None
            if config.get("private_home", True) is False
            else request.getfixturevalue("tmp_path_factory").mktemp("agentreel-private")
        )
        opened.guard = opened.stack.enter_context(
            sealed(
                reel_plan,
                network=request.config.getoption(NETWORK_OPTION),
                private_root=private,
            )
        )
    except RecordingUnusableError as exc:
        # The test fails (its call phase, first thing in its report), not its setup.
        request.node.stash[_UNUSABLE_KEY] = str(exc)
        yield _UnusableReel(str(exc))  # type: ignore[misc]
        return
    except ReelError as exc:
        refused = str(exc)
    else:
        refused = ""
    if refused:
        pytest.fail(refused, pytrace=False)
    request.node.stash[_REEL_KEY] = opened
    try:
        yield opened.reel
    finally:
        # Judged in the call phase (pytest_runtest_call); here only if the test never ran.
        problem = opened.finish(passed=False)
        if problem is not None and not request.node.stash.get(_REEL_KEY_JUDGED, False):
            pytest.fail(problem, pytrace=False)


_REEL_KEY_JUDGED = pytest.StashKey[bool]()
_UNUSABLE_KEY = pytest.StashKey[str]()


class _UnusableReel:
    """What the fixture hands a test whose recording cannot be replayed; the test body never
    runs (``pytest_runtest_call`` fails it first), so any use is a mistake, said as such."""

    def __init__(self, problem: str) -> None:
        self._problem = problem

    def __getattr__(self, name: str) -> Any:
        raise ReelError(self._problem)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Closes the test's reel as its call ends, so a replay problem fails the test itself
    (not its teardown) and, when the test failed because of it, comes first. A recording
    that cannot be replayed fails the test before its body runs."""
    unusable = item.stash.get(_UNUSABLE_KEY, None)
    if unusable is not None:
        raise pytest.fail.Exception(unusable, pytrace=False)
    try:
        result = yield
    except BaseException as failure:
        opened = item.stash.get(_REEL_KEY, None)
        if opened is None:
            raise
        item.stash[_REEL_KEY_JUDGED] = True
        problem = opened.finish(passed=False)
        _note_blocked(item, opened)
        for line in opened.blocked:
            failure.add_note(f"agentreel: {line}")
        if problem is None:
            if opened.reel.mode == "record":
                failure.add_note(
                    f"agentreel: the test failed, so its recording was not written to "
                    f"{opened.reel.recording}"
                )
            raise
        said = str(failure).strip().splitlines()
        then = f"{type(failure).__name__}: {said[0] if said else ''}"
        raise pytest.fail.Exception(
            f"{problem}\nThe test failed because of it ({then[:200]})", pytrace=False
        ) from None
    opened = item.stash.get(_REEL_KEY, None)
    if opened is not None:
        item.stash[_REEL_KEY_JUDGED] = True
        if opened.reel.mode == "record":
            opened.prove = _trial_replays(item, opened.reel.plan.trials)
        problem = opened.finish(passed=True)
        _note_blocked(item, opened)
        if problem is not None:
            pytest.fail(problem, pytrace=False)
    return result


def _note_blocked(item: pytest.Item, opened: OpenReel) -> None:
    if opened.blocked:
        item.user_properties.append((_BLOCKED_PROPERTY, list(opened.blocked)))
    if opened.drifted_report is not None:
        item.user_properties.append((_DRIFTED_PROPERTY, opened.drifted_report))


def _trial_replays(item: pytest.Item, trials: int | None) -> Callable[[Path], str | None]:
    """Record's trial replays for a test of the ``agentreel`` fixture (issue 39): the test
    run again, as a pytest of its own (fresh fixtures, its own process), replaying the fresh
    recording in ``recorded`` (``TRIAL_RECORDING_ENV``) under each trial's perturbation —
    the same as ``agentreel proxy record -- COMMAND``'s (``proxy_trials``): another zone,
    user, host, and one date under libfaketime, the test process being the agent. What
    failed, or ``None``; a date that could not move is a warning on the test."""
    from agentreel.snapshot_harness._record_proof import trials_wanted
    from agentreel.snapshot_harness._record_trials import proxy_trials
    from agentreel.snapshot_harness._scenario import RecordConfig

    def prove(recorded: Path) -> str | None:
        plan = proxy_trials()
        wanted = trials_wanted(RecordConfig(trials=trials))
        for number in range(wanted):
            trial = plan.trial(number)
            if trial.note is not None:
                item.warn(pytest.PytestWarning(f"agentreel: {trial.note}"))
            failure = _replay_test(item, recorded, trial.env)
            if (
                failure is not None
                and trial.today is not None
                and trial.plain is not None
                and _replay_test(item, recorded, trial.today) is not None
            ):
                item.warn(
                    pytest.PytestWarning(
                        f"agentreel: {item.nodeid} does not run under libfaketime (it fails "
                        f"under it on today's date too), so trial replay {number + 1} ran on "
                        "today's date and no trial moved the date"
                    )
                )
                failure = _replay_test(item, recorded, trial.plain)
            if failure is not None:
                return (
                    f"{item.nodeid}: recorded, but trial replay {number + 1} of {wanted} "
                    f"({trial.said}) failed, so nothing was written:\n{failure}\nThe "
                    "recording replays in one environment and not in another: what the test "
                    "sends depends on the date, time zone, user or host (mask it: "
                    "agentreel_config's masks; or agentreel_config's trials = 0)"
                )
        return None

    return prove


def _replay_test(item: pytest.Item, recorded: Path, env: Mapping[str, str]) -> str | None:
    """Run ``item`` alone in a pytest of its own replaying ``recorded`` under ``env``; its
    output's tail when it failed, else ``None``."""
    from agentreel.snapshot_harness._reel import TRIAL_RECORDING_ENV

    config = item.config
    given = list(config.invocation_params.args)
    plugins = [
        word
        for at, word in enumerate(given)
        if word.startswith("-p") or (at > 0 and given[at - 1] == "-p")
    ]
    command = [
        sys.executable,
        "-m",
        "pytest",
        item.nodeid,
        "-q",
        "-p",
        "no:cacheprovider",
        *plugins,
        f"{RECORD_OPTION}=none",
    ]
    run = subprocess.run(
        command,
        env={**os.environ, **env, TRIAL_RECORDING_ENV: f"{item.nodeid} {recorded}"},
        cwd=config.invocation_params.dir,
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode == 0:
        return None
    lines = (run.stdout + run.stderr).strip().splitlines()
    return "\n".join(lines[-40:])
