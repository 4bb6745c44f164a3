"""``tools.compat``: installing agentreel must not hold back an agent framework or its SDK.

The comparison and the table offline; the resolution and a real install beside the built
wheels against the package index in
``test_the_built_wheels_leave_strands_crewai_and_llama_index_at_their_newest`` (marked
``index``: skipped unless ``AGENTREEL_INDEX_TESTS=1``, which ``nox -s compat`` sets).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tools import compat, release


def test_pins_are_read_from_uv_pip_compile_output() -> None:
    text = (
        "annotated-types==0.7.0\n    # via pydantic\nOpenAI==3.60.0\n"
        "strands-agents[openai]==1.20.0\n-e file:///x\n"
    )
    assert compat.parse_pins(text) == {
        "annotated-types": "0.7.0",
        "openai": "3.60.0",
        "strands-agents": "1.20.0",
    }


def test_a_framework_or_its_sdk_resolved_older_beside_agentreel_is_held_back() -> None:
    strands = compat.FRAMEWORKS[0]
    alone = {"strands-agents": "1.20.0", "openai": "2.54.0", "httpx": "0.29.0"}
    # The case: openai forced to 3, strands falling back to its 0.0.1 placeholder.
    beside = {"strands-agents": "0.0.1", "openai": "3.60.0"}
    rows = compat.rows(strands, alone, beside)
    assert [(r.package, r.alone, r.beside, r.held_back) for r in rows] == [
        ("strands-agents", "1.20.0", "0.0.1", True),
        ("openai", "2.54.0", "3.60.0", False),
    ]
    same = compat.rows(strands, alone, dict(alone))
    assert not any(r.held_back for r in same)
    gone = compat.rows(strands, alone, {"strands-agents": "1.20.0"})
    assert [r.held_back for r in gone] == [False, True]


def test_the_table_names_what_was_held_back_and_what_failed() -> None:
    rows = [
        compat.Row("crewai", "crewai", "1.16.0", "1.6.1"),
        compat.Row("crewai", "openai", "2.54.0", "2.54.0"),
    ]
    text = compat.table(rows, ["agno alone does not resolve: no network"])
    lines = text.splitlines()
    assert lines[0].split() == ["framework", "package", "alone", "beside", "agentreel"]
    assert lines[1].split() == ["crewai", "crewai", "1.16.0", "1.6.1", "HELD", "BACK"]
    assert lines[2].split() == ["crewai", "openai", "2.54.0", "2.54.0", "ok"]
    assert lines[3] == "FAILED: agno alone does not resolve: no network"


@pytest.mark.index
def test_the_built_wheels_leave_strands_crewai_and_llama_index_at_their_newest(
    tmp_path: Path,
) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        ["uv", "build", "--all-packages", "--wheel", "--out-dir", str(dist)],
        cwd=release.ROOT,
        check=True,
        capture_output=True,
        timeout=600,
    )
    chosen = [
        f
        for f in compat.FRAMEWORKS
        if f.name in ("strands-agents[openai]", "crewai", "llama-index + openai-like")
    ]
    harness = f"agentreel-snapshot-harness=={release.workspace_version(release.ROOT)}"
    rows, failures = compat.check(chosen, dist, harness)
    print(compat.table(rows, failures))
    assert failures == []
    assert {r.framework for r in rows} == {f.name for f in chosen}
    assert [r for r in rows if r.held_back] == []
    # What the resolver chose beside agentreel is each framework's newest release, not the
    # placeholder and the old releases of the issue (strands-agents 0.0.1, crewai 1.6.1).
    versions = {r.package: r.beside for r in rows}
    assert versions["strands-agents"] != "0.0.1"
    assert versions["crewai"] == next(r.alone for r in rows if r.package == "crewai")

    # And installed as a user installs them: the built wheels and the three frameworks in a
    # fresh venv; what lands there is each framework's (and its SDK's) newest release.
    venv = tmp_path / "venv"
    subprocess.run(["uv", "venv", "--quiet", "--python", compat.PYTHON, str(venv)], check=True)
    python = venv / "bin" / "python"
    requirements = [harness, *(req for f in chosen for req in f.requirements)]
    install = ["uv", "pip", "install", "--quiet", "--python", str(python)]
    subprocess.run([*install, "--find-links", str(dist), *requirements], check=True, timeout=600)
    names = sorted({r.package for r in rows} | {"agentreel-snapshot-harness"})
    listing = subprocess.run(
        [str(python), "-c", "import sys\nfrom importlib.metadata import version\n"
         "for n in sys.argv[1:]: print(n, version(n))", *names],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    installed = dict(line.split() for line in listing.stdout.splitlines())
    assert installed.pop("agentreel-snapshot-harness") == release.workspace_version(release.ROOT)
    newest = {r.package: r.alone for r in rows}
    assert installed == newest
