"""The compatibility corpus (``corpus/scenarios``, SPEC 15): the committed scenarios as
earlier versions of this repository recorded them — the oldest recording and each landing
that changed the recording or golden format — replay on today's agentreel after
``agentreel upgrade``, and match their goldens. Upgrading twice changes nothing the second
time. (``corpus/README.md`` names each source commit; the real agents' recordings there are
checked offline in ``packages/llm_proxy/tests/test_proxy_compat_corpus.py``.)"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from agentreel.session import RECORDING_FORMAT, load_session_log
from agentreel.snapshot_harness._cli import main

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "corpus" / "scenarios"
SCENARIOS = sorted(path.parent for path in CORPUS.glob("*/*/scenario.toml"))


def _name(scenario: Path) -> str:
    """``<scenario>-<commit>``: the corpus holds one scenario at several commits."""
    return f"{scenario.name}-{scenario.parent.name}"


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The corpus scenarios side by side in one fixtures directory (each agent path that
    named this repository's ``examples/`` pointed at it), upgraded; the upgrade's output."""
    fixtures = tmp_path_factory.mktemp("corpus") / "fixtures"
    fixtures.mkdir()
    shutil.copy(ROOT / "fixtures" / "agentreel.toml", fixtures / "agentreel.toml")
    for scenario in SCENARIOS:
        copy = fixtures / _name(scenario)
        shutil.copytree(scenario, copy)
        toml = copy / "scenario.toml"
        toml.write_text(toml.read_text().replace("../../examples/", f"{ROOT}/examples/"))
    code, output = _run("upgrade", "--fixtures", str(fixtures))
    assert code == 0, output
    return fixtures, output


def test_the_corpus_holds_the_oldest_recording_and_each_format() -> None:
    commits = {scenario.parent.name for scenario in SCENARIOS}
    # The oldest (12936e3), wire API (2bd4f1f), message texts (6a502f4), wire.ndjson
    # (c86a118), format 2 (86b893e), format 3 with mask set 3 (5b64ffe): corpus/README.md.
    assert commits >= {"12936e3", "2bd4f1f", "6a502f4", "c86a118", "86b893e", "5b64ffe"}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=_name)
def test_each_corpus_scenario_replays_after_upgrade(
    upgraded: tuple[Path, str], scenario: Path
) -> None:
    # One replay each (pytest-xdist spreads them); the upgrade stamped every log.
    fixtures, output = upgraded
    stamped = f"{fixtures / _name(scenario) / 'session.jsonl'}: format stamp" in output
    # An entry of today's format is left as it is; every older one was upgraded.
    current = load_session_log(scenario / "session.jsonl").header.format == RECORDING_FORMAT
    assert stamped != current, output
    code, replayed = _run("replay", "--fixtures", str(fixtures), _name(scenario))
    assert code == 0, replayed
    assert f"PASS  {_name(scenario)}" in replayed, replayed


def test_upgrading_the_corpus_twice_changes_nothing_the_second_time(
    upgraded: tuple[Path, str],
) -> None:
    fixtures, _ = upgraded
    before = {path: path.read_bytes() for path in fixtures.rglob("*") if path.is_file()}
    code, output = _run("upgrade", "--fixtures", str(fixtures))
    assert code == 0, output
    assert f"0 file(s) upgraded in {len(SCENARIOS)} recording(s)" in output
    after = {path: path.read_bytes() for path in fixtures.rglob("*") if path.is_file()}
    assert before == after
