"""The CLI accepts options before scenario names, the way ``nox -s record`` calls it."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from agentreel.snapshot_harness._cli import main

MakeScenario = Callable[..., Path]


def test_scenario_names_after_options_select_those_scenarios(make_scenario: MakeScenario) -> None:
    # noxfile: `agentreel record --fixtures DIR <posargs>`; argparse's plain parse_args
    # rejects positionals after an option ("unrecognized arguments").
    directory = make_scenario("picked")
    make_scenario("other")
    out = io.StringIO()
    code = main(["record", "--fixtures", str(directory.parent), "picked"], out=out)
    assert code == 0, out.getvalue()
    assert "picked" in out.getvalue()
    assert "other" not in out.getvalue()
    assert (directory / "golden" / "transcript.jsonl").is_file()
