"""Pending goldens (SPEC 12) and ``agentreel review``: written by failing local replays from
the CLI and the plugin (also under xdist), never under ``CI``; reviewed through a real
pseudo-terminal and through ``--accept-all`` / ``--reject-all``."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest

from agentreel.snapshot_harness import check_scenario
from agentreel.snapshot_harness._cli import main
from agentreel.snapshot_harness._pending import list_pending, review_hint, write_pending

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

MakeScenario = Callable[..., Path]
GOLDENS = ("transcript.jsonl", "session.jsonl", "session.1.jsonl", "session.2.jsonl")
TWEAK = b'{"tweaked":"by the test"}\n'


@pytest.fixture(scope="module")
def three_session_template(
    tmp_path_factory: pytest.TempPathFactory, scenario_text: Callable[..., str]
) -> Path:
    """A recorded scenario with a parent and two children (four goldens), made once."""
    directory = tmp_path_factory.mktemp("review-template") / "family"
    directory.mkdir()
    (directory / "scenario.toml").write_text(scenario_text(env={"FAKE_SUBAGENTS": "2"}))
    check_scenario(directory, "record")
    assert sorted(p.name for p in (directory / "golden").iterdir()) == sorted(GOLDENS)
    return directory


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside CI: CI runs this suite with CI=true, which turns pending files off."""
    monkeypatch.delenv("CI", raising=False)


def copy_of(template: Path, fixtures: Path, name: str) -> Path:
    target = fixtures / name
    shutil.copytree(template, target)
    return target


def tweak(directory: Path, *names: str) -> dict[str, bytes]:
    """Make ``names`` differ from what a replay produces; returns their replayed bytes."""
    originals = {}
    for name in names:
        golden = directory / "golden" / name
        originals[name] = golden.read_bytes()
        golden.write_bytes(TWEAK + originals[name])
    return originals


def digest(directory: Path, pattern: str) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.glob(pattern))
    }


def run_cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(args), out=out), out.getvalue()


def pending_names(directory: Path) -> list[str]:
    return sorted(p.name for p in (directory / "golden").glob("*.pending"))


def test_a_failing_replay_writes_pending_goldens_and_a_passing_one_removes_them(
    three_session_template: Path, tmp_path: Path, local: None
) -> None:
    directory = copy_of(three_session_template, tmp_path, "family")
    live = tweak(directory, "transcript.jsonl", "session.2.jsonl")
    recordings = digest(directory, "session*.jsonl")

    code, text = run_cli("replay", "--fixtures", str(tmp_path))
    assert code == 1, text
    assert pending_names(directory) == ["session.2.jsonl.pending", "transcript.jsonl.pending"]
    for name, data in live.items():  # the pending file is exactly the live golden
        assert (directory / "golden" / f"{name}.pending").read_bytes() == data
    assert f"agentreel review --fixtures {tmp_path} family" in text
    assert digest(directory, "session*.jsonl") == recordings

    # The inventory ignores pending files: the next replay fails on the diff again, and
    # a transcript that now matches drops its stale pending file.
    (directory / "golden" / "transcript.jsonl").write_bytes(live["transcript.jsonl"])
    code, text = run_cli("replay", "--fixtures", str(tmp_path))
    assert code == 1, text
    assert "orphan" not in text
    assert pending_names(directory) == ["session.2.jsonl.pending"]

    (directory / "golden" / "session.2.jsonl").write_bytes(live["session.2.jsonl"])
    code, text = run_cli("replay", "--fixtures", str(tmp_path))
    assert code == 0, text
    assert pending_names(directory) == []


def test_under_ci_nothing_is_written_or_removed(
    three_session_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = copy_of(three_session_template, tmp_path, "family")
    tweak(directory, "transcript.jsonl")
    stale = directory / "golden" / "session.1.jsonl.pending"
    stale.write_bytes(b"left by an earlier local run\n")
    before = digest(directory / "golden", "*")
    monkeypatch.setenv("CI", "true")
    code, text = run_cli("replay", "--fixtures", str(tmp_path))
    assert code == 1, text
    assert "agentreel review" not in text
    assert digest(directory / "golden", "*") == before


def test_plugin_writes_pending_goldens_under_xdist_and_never_under_ci(
    three_session_template: Path,
    tmp_path: Path,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fixtures = tmp_path / "plugin-fixtures"
    first = copy_of(three_session_template, fixtures, "first")
    second = copy_of(three_session_template, fixtures, "second")
    tweak(first, "session.1.jsonl")
    tweak(second, "transcript.jsonl")
    quiet = ("-p", "no:cacheprovider", "-p", "no:asyncio", "-q")

    monkeypatch.setenv("CI", "true")  # one worker is enough to show CI writes nothing
    result = pytester.runpytest_inprocess(*quiet, "-p", "no:xdist", str(fixtures))
    result.assert_outcomes(failed=2)
    assert pending_names(first) == pending_names(second) == []

    monkeypatch.delenv("CI")
    result = pytester.runpytest_subprocess(*quiet, "-n", "2", str(fixtures))
    result.assert_outcomes(failed=2)
    assert pending_names(first) == ["session.1.jsonl.pending"]
    assert pending_names(second) == ["transcript.jsonl.pending"]
    result.stdout.fnmatch_lines(["*agentreel review --fixtures * first*"])


def test_review_in_a_terminal_accepts_rejects_and_skips(
    three_session_template: Path, tmp_path: Path, local: None
) -> None:
    directory = copy_of(three_session_template, tmp_path, "family")
    live = tweak(directory, "transcript.jsonl", "session.1.jsonl", "session.2.jsonl")
    committed = {name: (directory / "golden" / name).read_bytes() for name in live}
    recordings = digest(directory, "session*.jsonl")
    assert run_cli("replay", "--fixtures", str(tmp_path))[0] == 1
    assert len(pending_names(directory)) == 3

    child = pexpect.spawn(
        sys.executable,
        ["-m", "agentreel.snapshot_harness", "review", "--fixtures", str(tmp_path)],
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"},
        dimensions=(40, 120),
        timeout=60,
        encoding="utf-8",
        codec_errors="replace",
    )
    try:
        # Files come in golden order: transcript, then the sessions by number.
        child.expect(r"\[1/3\] family: golden/transcript\.jsonl")
        child.expect(r"\+\+\+ live/transcript\.jsonl")
        child.expect(r"uit: ")
        shown = child.before or ""
        assert "\x1b[31m" in shown  # the removed (tweaked) line is drawn red
        assert "tweaked" in shown
        child.sendline("a")
        child.expect(r"\[2/3\] family: golden/session\.1\.jsonl")
        child.expect(r"uit: ")
        child.sendline("x")  # not a choice: asked again
        child.expect(r"uit: ")
        child.sendline("r")
        child.expect(r"\[3/3\] family: golden/session\.2\.jsonl")
        child.expect(r"uit: ")
        child.sendline("s")
        child.expect("1 accepted, 1 rejected, 1 skipped")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0

    golden = directory / "golden"
    assert (golden / "transcript.jsonl").read_bytes() == live["transcript.jsonl"]  # accepted
    assert (golden / "session.1.jsonl").read_bytes() == committed["session.1.jsonl"]  # rejected
    assert (golden / "session.2.jsonl").read_bytes() == committed["session.2.jsonl"]  # skipped
    assert pending_names(directory) == ["session.2.jsonl.pending"]
    assert (golden / "session.2.jsonl.pending").read_bytes() == live["session.2.jsonl"]
    assert digest(directory, "session*.jsonl") == recordings  # recordings never change


def test_review_quit_keeps_the_rest_pending(
    three_session_template: Path, tmp_path: Path, local: None
) -> None:
    directory = copy_of(three_session_template, tmp_path, "family")
    tweak(directory, "transcript.jsonl", "session.jsonl")
    assert run_cli("replay", "--fixtures", str(tmp_path))[0] == 1
    child = pexpect.spawn(
        sys.executable,
        ["-m", "agentreel.snapshot_harness", "review", "family", "--fixtures", str(tmp_path)],
        timeout=60,
        encoding="utf-8",
    )
    try:
        child.expect(r"uit: ")
        child.sendline("q")
        child.expect("0 accepted, 0 rejected, 2 skipped")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert pending_names(directory) == ["session.jsonl.pending", "transcript.jsonl.pending"]


def test_accept_all_and_reject_all_decide_without_a_terminal(
    three_session_template: Path, tmp_path: Path, local: None
) -> None:
    accepted = copy_of(three_session_template, tmp_path, "accepted")
    rejected = copy_of(three_session_template, tmp_path, "rejected")
    live = tweak(accepted, "session.jsonl", "session.1.jsonl")
    tweak(rejected, "transcript.jsonl")
    committed = (rejected / "golden" / "transcript.jsonl").read_bytes()
    assert run_cli("replay", "--fixtures", str(tmp_path))[0] == 1

    # No terminal and no decision: nothing can be asked, nothing changes.
    code, text = run_cli("review", "--fixtures", str(tmp_path))
    assert code == 2
    assert len(pending_names(accepted)) == 2

    code, text = run_cli("review", "accepted", "--fixtures", str(tmp_path), "--accept-all")
    assert code == 0, text
    assert "2 accepted, 0 rejected, 0 skipped" in text
    assert "\x1b[" not in text  # not a terminal: no color codes
    for name, data in live.items():
        assert (accepted / "golden" / name).read_bytes() == data
    assert pending_names(accepted) == []
    assert pending_names(rejected) == ["transcript.jsonl.pending"]  # not selected: untouched

    code, text = run_cli("review", "--reject-all", "--fixtures", str(tmp_path))
    assert code == 0, text
    assert "0 accepted, 1 rejected, 0 skipped" in text
    assert (rejected / "golden" / "transcript.jsonl").read_bytes() == committed
    assert pending_names(rejected) == []

    assert run_cli("replay", "accepted", "--fixtures", str(tmp_path))[0] == 0
    code, text = run_cli("review", "--fixtures", str(tmp_path), "--accept-all")
    assert (code, "nothing to review" in text) == (0, True)


def test_an_empty_pending_file_deletes_its_golden_on_accept(
    tmp_path: Path, local: None, scenario_text: Callable[..., str]
) -> None:
    directory = tmp_path / "fixtures" / "shrunk"
    (directory / "golden").mkdir(parents=True)
    (directory / "scenario.toml").write_text(scenario_text())
    (directory / "golden" / "transcript.jsonl").write_text("{}\n")
    (directory / "golden" / "session.1.jsonl").write_text("{}\n")
    # session.1 differs but the live run has no such golden: its pending file is empty.
    written = write_pending(directory, {"transcript.jsonl": b"{}\n"}, ["session.1.jsonl"])
    assert [(p.name, p.removes_golden) for p in written] == [("golden/session.1.jsonl", True)]
    code, text = run_cli("review", "--fixtures", str(tmp_path / "fixtures"), "--accept-all")
    assert code == 0, text
    assert "golden/session.1.jsonl (deleted)" in text
    assert not (directory / "golden" / "session.1.jsonl").exists()
    assert list_pending(directory) == []


def test_review_names_an_unknown_scenario(tmp_path: Path) -> None:
    (tmp_path / "fixtures").mkdir()
    code, _ = run_cli("review", "nope", "--fixtures", str(tmp_path / "fixtures"))
    assert code == 2


def test_the_review_hint_names_the_nox_session_for_the_default_fixtures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fixtures" / "plain").mkdir(parents=True)
    (tmp_path / "elsewhere" / "plain").mkdir(parents=True)
    default = review_hint(Path("fixtures") / "plain")
    assert default == "`agentreel review plain` (or `nox -s review -- plain`)"
    # Any other directory is repeated as given: absolute stays absolute, relative relative.
    other = review_hint(tmp_path / "elsewhere" / "plain")
    assert other == f"`agentreel review --fixtures {tmp_path / 'elsewhere'} plain`"
    assert (
        review_hint(Path("elsewhere") / "plain") == "`agentreel review --fixtures elsewhere plain`"
    )


@pytest.mark.parametrize("spelling", ["absolute", "relative"])
def test_a_failing_replays_hints_repeat_the_fixtures_argument_as_typed(
    three_session_template: Path,
    tmp_path: Path,
    local: None,
    monkeypatch: pytest.MonkeyPatch,
    spelling: str,
) -> None:
    # As a user runs it: no nox around, so no command hints in the environment.
    monkeypatch.delenv("AGENTREEL_RERECORD_COMMAND", raising=False)
    monkeypatch.delenv("AGENTREEL_REFRESH_COMMAND", raising=False)
    monkeypatch.chdir(tmp_path)
    directory = copy_of(three_session_template, tmp_path / "fx", "family")
    tweak(directory, "transcript.jsonl")
    typed = str(tmp_path / "fx") if spelling == "absolute" else "fx"
    code, text = run_cli("replay", "--fixtures", typed)
    assert code == 1, text
    assert f"`agentreel review --fixtures {typed} family`" in text
    assert f"`agentreel refresh --fixtures {typed} family` rewrites the goldens" in text
    assert f"re-record: agentreel record --fixtures {typed} family" in text
    if spelling == "absolute":
        assert "--fixtures fx " not in text
    assert "AGENTREEL_RERECORD_COMMAND" not in os.environ  # set for the run only


MCP_TOOLS = Path(__file__).resolve().parents[3] / "fixtures" / "mcp-tools"


def test_review_shows_each_sessions_mcp_calls_before_its_goldens(tmp_path: Path) -> None:
    """A scenario with MCP servers (SPEC 19): review lists what each session called and got,
    in its story's order, once per scenario, ahead of the goldens' diffs."""
    directory = copy_of(MCP_TOOLS, tmp_path, "mcp-tools")
    golden = directory / "golden" / "session.1.jsonl"
    write_pending(directory, {"session.1.jsonl": TWEAK + golden.read_bytes()}, ["session.1.jsonl"])
    code, out = run_cli("review", "--fixtures", str(tmp_path), "--reject-all")
    assert code == 0
    lines = [line.rstrip() for line in out.splitlines()]
    start = next(i for i, line in enumerate(lines) if "mcp-tools: MCP calls by session" in line)
    assert lines[start + 1 : start + 7] == [
        "main (session.jsonl)",
        '  calc: add({"a": 2, "b": 3}) → 5',
        '  web: echo({"text": "parent"}) → parent',
        "spawn #0 (session.1.jsonl)",
        '  calc: add({"a": 40, "b": 2}) → 42',
        '  web: echo({"text": "child"}) → child',
    ]
    assert start < next(i for i, line in enumerate(lines) if "golden/session.1.jsonl" in line)
