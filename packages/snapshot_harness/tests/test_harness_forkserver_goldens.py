"""The committed scenarios give byte-identical goldens with the fork server on and off.

Each scenario is copied twice: into a fixtures directory whose ``agentreel.toml`` turns
the fork server on (so the per-directory configuration is what enables it), and into one
without. Both copies are refreshed — the goldens rewritten from a live replay — and every
golden file must equal the committed one byte for byte, so neither way of starting the
reference agent changes what it prints or logs.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from agentreel.snapshot_harness import DIRECTORY_CONFIG_FILE, check_scenario, discover_scenarios

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
EXAMPLES = FIXTURES.parent / "examples"
SCENARIOS = [directory.name for directory in discover_scenarios(FIXTURES)]


def _golden_files(directory: Path) -> dict[str, bytes]:
    golden = directory / "golden"
    return {path.name: path.read_bytes() for path in sorted(golden.iterdir())}


@pytest.mark.parametrize("name", SCENARIOS)
def test_goldens_are_byte_identical_forked_and_spawned(name: str, tmp_path: Path) -> None:
    committed = _golden_files(FIXTURES / name)
    started: dict[str, str] = {}
    # Each copy sits two levels below tmp_path, as fixtures/<name> sits below the repository,
    # so an agent path relative to the scenario (../../examples/...) resolves here too.
    (tmp_path / EXAMPLES.name).symlink_to(EXAMPLES, target_is_directory=True)
    for method in ("fork", "spawn"):
        root = tmp_path / method
        root.mkdir()
        if method == "fork":
            (root / DIRECTORY_CONFIG_FILE).write_text("[fork_server]\nenabled = true\n")
        copy = root / name
        shutil.copytree(FIXTURES / name, copy)
        for golden in (copy / "golden").iterdir():
            golden.write_bytes(b"stale\n")  # refresh must write every one of them anew
        outcome = check_scenario(copy, "refresh")
        assert outcome.result is not None
        started[method] = outcome.result.started_by
        assert outcome.result.fork_fallback is None
        assert _golden_files(copy) == committed, f"{method}: goldens differ from fixtures/{name}"
    # A command scenario runs its command, not an ACP agent: the fork server has nothing to
    # start there, so both copies spawn it (and give the same goldens all the same).
    scenario = tomllib.loads((FIXTURES / name / "scenario.toml").read_text())
    forked = "spawn" if scenario.get("protocol") == "command" else "fork"
    assert started == {"fork": forked, "spawn": "spawn"}


def test_there_are_committed_scenarios_to_compare() -> None:
    assert len(SCENARIOS) >= 10
