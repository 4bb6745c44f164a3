"""``agentreel record --drifted``: only the sessions that drifted go live (SPEC 20).

The committed three-level tree ``data/subagent-tree`` (main → route, hotel at once; route →
weather) was recorded through the stub. Changing the grandchild's prompt (the task its
parent's recorded answer hands it) and recording with ``--drifted`` must re-record the
grandchild, then its parent from the call carrying the new answer, then the main session
from the call carrying that — the hotel subtree byte for byte as committed — and the merged
recording must replay. Deleting a child's recording records just that child. The same
through the proxy, with the drifted tests' shared tree program as a command scenario.
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
from pathlib import Path

import pytest

from agentreel.session import MASKS_VERSION, RECORDING_FORMAT, load_session_log
from agentreel.snapshot_harness import check_scenario, load_scenario
from agentreel.snapshot_harness._cli import main as cli_main
from agentreel.snapshot_harness._drifted import DriftedOutcome, record_drifted
from agentreel.snapshot_harness._pending import accept, list_pending
from agentreel.snapshot_harness._record_proof import TRIALS_ENV
from agentreel.snapshot_harness.exceptions import RecordError, SecretLeakError

pytestmark = pytest.mark.slow

DATA = Path(__file__).with_name("data")
TREE = "subagent-tree"
OLD_TASK = "Check the weather on the coast"
NEW_TASK = "Check the weather inland, away from the coast,"
PRICES = """
currency = "EUR"
[models."stub-model"]
prompt = 3.0
completion = 15.0
"""


def copy_tree(root: Path) -> Path:
    """The committed tree (and its directory's ``agentreel.toml``) under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy2(DATA / "agentreel.toml", root / "agentreel.toml")
    shutil.copytree(DATA / TREE, root / TREE)
    return root / TREE


def change_delegated_task(path: Path, old: str, new: str) -> None:
    """Change the task a recorded answer in ``path`` hands a subagent: the tool call's
    streamed argument deltas (spread over as many chunks as before) and every whole copy."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    calls: dict[str, list[int]] = {}
    for number, line in enumerate(lines):
        if '"tool-call-delta"' in line:
            calls.setdefault(json.loads(line)["data"]["chunk"]["id"], []).append(number)
    changed_any = False
    for numbers in calls.values():
        events = [json.loads(lines[n]) for n in numbers]
        whole = "".join(event["data"]["chunk"]["arguments_delta"] for event in events)
        if old not in whole:
            continue
        changed_any = True
        changed = whole.replace(old, new)
        size = max(len(whole) // len(events), 1)
        for index, (number, event) in enumerate(zip(numbers, events, strict=True)):
            end = None if index == len(events) - 1 else (index + 1) * size
            event["data"]["chunk"]["arguments_delta"] = changed[index * size : end]
            lines[number] = json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n"
    assert changed_any, f"no tool call in {path} hands on {old!r}"
    path.write_text("".join(lines).replace(old, new), encoding="utf-8")


def fates(outcome: DriftedOutcome) -> dict[str, tuple[str, int | None]]:
    return {
        fate.file or f"({fate.recorded_file})": (fate.status, fate.from_call)
        for fate in outcome.summary.sessions
    }


@pytest.fixture(scope="module")
def grandchild_changed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DriftedOutcome]:
    directory = copy_tree(tmp_path_factory.mktemp("drifted") / "fixtures")
    change_delegated_task(directory / "session.1.jsonl", OLD_TASK, NEW_TASK)
    (directory.parent / "agentreel-prices.toml").write_text(PRICES)
    return directory, record_drifted(load_scenario(directory))


def test_a_changed_grandchild_re_records_up_the_chain_and_nothing_else(
    grandchild_changed: tuple[Path, DriftedOutcome],
) -> None:
    directory, outcome = grandchild_changed
    assert fates(outcome) == {
        "session.jsonl": ("re-recorded", 2),  # main: from the call carrying route's answer
        "session.1.jsonl": ("re-recorded", 2),  # route: from the call carrying the weather
        "session.2.jsonl": ("re-recorded", 1),  # weather: its task changed
        "session.3.jsonl": ("kept", None),  # hotel: replayed, untouched
    }
    assert (directory / "session.3.jsonl").read_bytes() == (
        DATA / TREE / "session.3.jsonl"
    ).read_bytes()
    assert outcome.written == ["session.jsonl", "session.1.jsonl", "session.2.jsonl"]
    # Lineage holds across kept and re-recorded files: each keeps its recorded id.
    for name in ("session.jsonl", "session.1.jsonl", "session.2.jsonl", "session.3.jsonl"):
        committed = load_session_log(DATA / TREE / name).header
        merged = load_session_log(directory / name).header
        assert (merged.id, merged.parent_session, merged.spawn_index) == (
            committed.id,
            committed.parent_session,
            committed.spawn_index,
        )
    assert "Trip: the inland road to Hotel Miramar." in (directory / "session.jsonl").read_text()


def test_the_report_counts_calls_tokens_and_money(
    grandchild_changed: tuple[Path, DriftedOutcome],
) -> None:
    _, outcome = grandchild_changed
    summary = outcome.summary
    assert summary.upstream_calls == 3
    assert summary.saved_calls == 3  # main's first call, route's first, the hotel's
    # From the recorded usage: main 340+60, route 320+30, hotel 300+3 not spent again;
    # weather 300+1, route 360+9, main 520+12 spent on the inland answers.
    assert summary.saved_tokens == (960, 93)
    assert summary.live_tokens == (1180, 22)
    assert summary.money_saved() == pytest.approx((960 * 3.0 + 93 * 15.0) / 1e6)
    text = summary.text()
    assert "1 kept, 3 re-recorded, 0 new, 0 dropped" in text
    assert "session.jsonl: re-recorded from call 2" in text
    assert "session.3.jsonl: kept" in text
    assert "money not spent: 0.0043 EUR" in text


def test_goldens_are_pending_for_what_changed_and_the_merge_replays(
    grandchild_changed: tuple[Path, DriftedOutcome],
) -> None:
    directory, outcome = grandchild_changed
    assert sorted(p.golden.name for p in outcome.pending) == [
        "session.1.jsonl",
        "session.2.jsonl",
        "session.jsonl",
        "transcript.jsonl",
    ]
    for pending in list_pending(directory):
        accept(pending)
    # The tree's kept log was made with mask set 3, the re-recorded ones with today's: a
    # log's stamp is its own (replay reads the set per log), so the merge leaves them so.
    stamps = {
        path.name: json.loads(path.read_text().split("\n", 1)[0])["masks"]
        for path in directory.glob("session*.jsonl")
    }
    assert stamps["session.3.jsonl"] == 3 < MASKS_VERSION == stamps["session.jsonl"]
    assert check_scenario(directory, "replay").sessions == 4


def test_a_deleted_child_is_recorded_alone(tmp_path: Path) -> None:
    directory = copy_tree(tmp_path / "fixtures")
    (directory / "session.3.jsonl").unlink()
    outcome = record_drifted(load_scenario(directory))
    assert fates(outcome) == {
        "session.jsonl": ("kept", None),
        "session.1.jsonl": ("kept", None),
        "session.2.jsonl": ("kept", None),
        "session.3.jsonl": ("new", 1),
    }
    assert outcome.summary.upstream_calls == 1
    assert outcome.written == ["session.3.jsonl"]
    for name in ("session.jsonl", "session.1.jsonl", "session.2.jsonl"):
        assert (directory / name).read_bytes() == (DATA / TREE / name).read_bytes()
    # The new child takes the id its kept parent's recording started it under.
    assert (
        load_session_log(directory / "session.3.jsonl").header.id
        == load_session_log(DATA / TREE / "session.3.jsonl").header.id
    )
    assert outcome.pending == []  # the same answer: no golden changed
    check_scenario(directory, "replay")


def test_a_deleted_grandchild_leaving_a_numbering_gap_is_recorded_alone(tmp_path: Path) -> None:
    directory = copy_tree(tmp_path / "fixtures")
    (directory / "session.2.jsonl").unlink()  # the weather: session.3.jsonl stays
    outcome = record_drifted(load_scenario(directory))
    assert fates(outcome) == {
        "session.jsonl": ("kept", None),
        "session.1.jsonl": ("kept", None),
        "session.2.jsonl": ("new", 1),
        "session.3.jsonl": ("kept", None),
    }
    assert [f.recorded_file for f in outcome.summary.sessions if f.status == "kept"] == [
        "session.jsonl",
        "session.1.jsonl",
        "session.3.jsonl",
    ]
    assert outcome.summary.upstream_calls == 1
    assert outcome.written == ["session.2.jsonl"]
    for name in ("session.jsonl", "session.1.jsonl", "session.3.jsonl"):
        assert (directory / name).read_bytes() == (DATA / TREE / name).read_bytes()
    # The new weather takes the id its kept parent's recording started it under.
    assert (
        load_session_log(directory / "session.2.jsonl").header.id
        == load_session_log(DATA / TREE / "session.2.jsonl").header.id
    )
    check_scenario(directory, "replay")


def test_the_cli_prints_the_report_writes_it_into_html_and_rejects_drifted_outside_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = copy_tree(tmp_path / "fixtures")
    stream = io.StringIO()
    page = tmp_path / "report.html"
    argv = ["record", "--drifted", "--html", str(page), "--fixtures", str(directory.parent), TREE]
    code = cli_main(argv, out=stream)
    printed = stream.getvalue()
    assert code == 0, printed
    assert "4 kept, 0 re-recorded, 0 new, 0 dropped" in printed
    assert "calls: 6 replayed, 0 to the upstream" in printed
    html = page.read_text()  # the report written into the HTML page too
    assert "re-recorded only what drifted" in html
    assert "4 kept, 0 re-recorded, 0 new, 0 dropped" in html
    assert cli_main(["replay", "--drifted", "--fixtures", str(directory.parent), TREE]) == 2
    assert "--drifted only apply to record" in capsys.readouterr().err


# Through the proxy: a command scenario whose agent is the drifted tests' shared tree
# program (``drifted_tree``: plain openai SDK calls named by identity headers, route and
# hotel in two threads at once), its weather agent's prompt given on its command line.
PROXIED_FATES = {
    "session.jsonl": ("re-recorded", 2),
    "session.1.jsonl": ("re-recorded", 2),
    "session.2.jsonl": ("re-recorded", 1),
    "session.3.jsonl": ("kept", None),
}


def proxied_scenario(weather: str) -> str:
    return (
        'protocol = "command"\ntimeout = 120\n'
        f'agent = ["{{python}}", "./tree.py", "{weather}", "--headers"]\n'
        '[[steps]]\ntype = "prompt"\ntext = "Plan a trip."\n'
        '[model]\nvia = "proxy"\napi = "openai"\n'
    )


@pytest.fixture(scope="module")
def proxied_tree(tmp_path_factory: pytest.TempPathFactory, drifted_tree: Path) -> Path:
    """The proxied scenario, recorded once (each test works on a copy)."""
    directory = tmp_path_factory.mktemp("proxied") / "proxied-tree"
    directory.mkdir()
    shutil.copy2(drifted_tree, directory / "tree.py")
    shutil.copy2(drifted_tree.with_suffix(".toml"), directory / "stub-rules.toml")
    (directory / "scenario.toml").write_text(proxied_scenario("coast"))
    check_scenario(directory, "record")
    return directory


def proxied_copy(proxied_tree: Path, tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    directory = tmp_path / "fixtures" / proxied_tree.name
    shutil.copytree(proxied_tree, directory)
    return directory, {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}


def test_a_proxied_scenario_re_records_only_what_drifted(
    proxied_tree: Path, tmp_path: Path
) -> None:
    directory, committed = proxied_copy(proxied_tree, tmp_path)
    # The grandchild's prompt changed: the weather agent's system prompt.
    (directory / "scenario.toml").write_text(proxied_scenario("inland"))

    outcome = record_drifted(load_scenario(directory))
    assert fates(outcome) == PROXIED_FATES
    assert outcome.summary.upstream_calls == 3
    # Recorded usage of the calls replayed: main's first, route's first, the hotel's.
    assert outcome.summary.saved_tokens == (30 + 12 + 10, 5 + 4 + 2)
    assert (directory / "session.3.jsonl").read_bytes() == committed["session.3.jsonl"]
    assert "wire.ndjson" in outcome.written
    for pending in list_pending(directory):
        accept(pending)
    assert check_scenario(directory, "replay").sessions == 4


def test_a_proxied_scenario_records_a_deleted_child_alone(
    proxied_tree: Path, tmp_path: Path
) -> None:
    directory, committed = proxied_copy(proxied_tree, tmp_path)
    (directory / "session.2.jsonl").unlink()  # the weather: a gap in the numbering

    outcome = record_drifted(load_scenario(directory))
    assert fates(outcome) == {
        "session.jsonl": ("kept", None),
        "session.1.jsonl": ("kept", None),
        "session.2.jsonl": ("new", 1),
        "session.3.jsonl": ("kept", None),
    }
    assert outcome.summary.upstream_calls == 1
    assert outcome.written == ["session.2.jsonl", "wire.ndjson"]
    for name in ("session.jsonl", "session.1.jsonl", "session.3.jsonl"):
        assert (directory / name).read_bytes() == committed[name]
    weather = load_session_log(directory / "session.2.jsonl").header
    assert (weather.parent_session, weather.spawn_index) == (
        load_session_log(directory / "session.1.jsonl").header.id,
        0,
    )
    assert outcome.pending == []  # the same answers: no golden changed
    check_scenario(directory, "replay")


def test_a_secret_in_what_is_re_recorded_is_refused_and_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A credential of this environment turns up in the re-recorded answers (the new route
    # and main): the scan over what is new refuses it before anything is written.
    directory = copy_tree(tmp_path / "fixtures")
    change_delegated_task(directory / "session.1.jsonl", OLD_TASK, NEW_TASK)
    changed = (directory / "session.1.jsonl").read_bytes()
    monkeypatch.setenv("TRIP_API_TOKEN", "the inland road")
    with pytest.raises(SecretLeakError, match=r"(?s)refusing.*\$TRIP_API_TOKEN.*Nothing was"):
        record_drifted(load_scenario(directory))
    for name in ("session.jsonl", "session.2.jsonl", "session.3.jsonl"):
        assert (directory / name).read_bytes() == (DATA / TREE / name).read_bytes()
    assert (directory / "session.1.jsonl").read_bytes() == changed
    assert list_pending(directory) == []


def test_an_older_recording_is_upgraded_first_never_mixed(tmp_path: Path) -> None:
    directory = copy_tree(tmp_path / "fixtures")
    main = directory / "session.jsonl"
    head, rest = main.read_bytes().split(b"\n", 1)
    # The recording's own stamp (its mask set may be older than this agentreel's).
    masks = json.loads(head)["masks"]
    stamp = f',"format":{RECORDING_FORMAT},"masks":{masks}'.encode()
    assert stamp in head
    main.write_bytes(head.replace(stamp, b"") + b"\n" + rest)  # no stamp: format 1
    with pytest.raises(RecordError, match="agentreel upgrade subagent-tree"):
        record_drifted(load_scenario(directory))
    assert (directory / "session.3.jsonl").read_bytes() == (
        DATA / TREE / "session.3.jsonl"
    ).read_bytes()


def test_the_merged_recording_passes_records_trial_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `record` proves a recording by perturbed trial replays (issue 39); --drifted proves
    # the merged whole the same way (the suite turns trials off by default).
    monkeypatch.delenv(TRIALS_ENV)
    directory = copy_tree(tmp_path / "fixtures")
    (directory / "session.3.jsonl").unlink()
    scenario = load_scenario(directory)
    outcome = record_drifted(scenario, record=dataclasses.replace(scenario.record, trials=2))
    assert outcome.trials == 2
    assert outcome.written == ["session.3.jsonl"]
