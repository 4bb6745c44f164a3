"""Fixture set-up time, summed per fixture over a run: the "costliest fixtures" that
``nox -s tests`` prints at its end (``tools/suite_report.py`` sums the files up).

Loaded by the noxfile into every test run (``-p agentreel_fixture_times`` with this folder
on ``PYTHONPATH``; the folder holds nothing else, so a package's venv gains no module it
could import by mistake). Each process — the run, or each xdist worker — writes one JSON file
into ``--fixture-times-dir``. A fixture's dependencies are set up before the hook runs, so
each time is the fixture's own.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator
from pathlib import Path

import pytest

_totals: dict[str, list[float]] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fixture-times-dir",
        default=None,
        help="write this process's fixture set-up times (JSON) into this folder",
    )


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest
) -> Generator[None, object, object]:
    started = time.perf_counter()
    try:
        return (yield)
    finally:
        entry = _totals.setdefault(f"{fixturedef.argname} ({fixturedef.scope})", [0.0, 0])
        entry[0] += time.perf_counter() - started
        entry[1] += 1


def pytest_sessionfinish(session: pytest.Session) -> None:
    directory = session.config.getoption("--fixture-times-dir")
    if not directory or not _totals:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    path = Path(directory) / f"fixtures-{os.getpid()}-{worker}.json"
    path.write_text(json.dumps(_totals))
