"""``python -m tools.release``: the one version and the publishable-metadata checks.

Each test builds a small workspace (or wheelhouse) in a temp folder and runs the command
line exactly as the noxfile and a developer do, then reads its exit code and messages.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tools.release import (
    check_spec_citations,
    sibling_closure,
    spec_citations,
    spec_sections,
)

REPO = Path(__file__).resolve().parents[2]

ROOT_PYPROJECT = """\
# the one version
[tool.agentreel]
version = "1.0.0"

[tool.uv.workspace]
members = ["packages/*"]

[tool.uv.sources]
agentreel-core = { workspace = true }
agentreel-cli = { workspace = true }
"""

CORE = """\
[project]
name = "agentreel-core"
version = "1.0.0"
description = "The core."
readme = "README.md"
classifiers = ["Typing :: Typed"]
dependencies = ["msgspec>=0.18"]

[project.optional-dependencies]
fast = ["orjson"]
"""

CLI = """\
[project]
name = "agentreel-cli"
version = "1.0.0"  # kept in step by nox -s version
description = "The command line."
readme = "README.md"
classifiers = ["Typing :: Typed"]
dependencies = [
    "agentreel-core==1.0.0",
]

[project.optional-dependencies]
fast = ["agentreel-core[fast]==1.0.0"]
"""


def run(*args: str, root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.release", "--root", str(root), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )


def add_package(root: Path, folder: str, pyproject: str) -> Path:
    directory = root / "packages" / folder
    (directory / "src" / "agentreel" / folder).mkdir(parents=True)
    (directory / "src" / "agentreel" / folder / "py.typed").write_text("")
    (directory / "pyproject.toml").write_text(pyproject)
    (directory / "README.md").write_text(f"# {folder}\n")
    (directory / "LICENSE").write_text((root / "LICENSE").read_text())
    return directory


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(ROOT_PYPROJECT)
    (tmp_path / "LICENSE").write_text("MIT License\n")
    add_package(tmp_path, "core", CORE)
    cli = add_package(tmp_path, "cli", CLI)
    (cli / "README.md").write_text(
        'pip install "agentreel-cli[fast]"   # or [slow] once it exists\n'
    )
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


def test_a_workspace_in_step_passes(workspace: Path) -> None:
    result = run("check", root=workspace)
    assert result.returncode == 0, result.stderr
    assert "workspace metadata: ok" in result.stdout
    assert run("version", root=workspace).stdout.strip() == "1.0.0"


@pytest.mark.parametrize(
    "reference",
    ["agentreel-core @ file:///src/packages/core", "agentreel-core @ {root:parent:uri}/core"],
)
def test_a_direct_reference_to_a_sibling_is_refused(workspace: Path, reference: str) -> None:
    edit(workspace / "packages/cli/pyproject.toml", '"agentreel-core==1.0.0"', f'"{reference}"')
    result = run("check", root=workspace)
    assert result.returncode == 1
    assert "packages/cli/pyproject.toml dependencies" in result.stderr
    assert "is a direct reference" in result.stderr
    assert "Name the package by version (agentreel-core==1.0.0)" in result.stderr


def test_a_direct_reference_to_a_third_party_is_refused_too(workspace: Path) -> None:
    edit(workspace / "packages/core/pyproject.toml", '"orjson"', '"orjson @ https://x/o.whl"')
    result = run("check", root=workspace)
    assert result.returncode == 1
    assert "optional-dependencies.fast: 'orjson @ https://x/o.whl' is a direct reference" in (
        result.stderr
    )


def test_a_package_version_out_of_step_is_named(workspace: Path) -> None:
    edit(workspace / "packages/core/pyproject.toml", 'version = "1.0.0"', 'version = "1.0.1"')
    result = run("check", root=workspace)
    assert result.returncode == 1
    assert "packages/core/pyproject.toml: project.version is '1.0.1'" in result.stderr
    assert "nox -s version -- X.Y.Z" in result.stderr


@pytest.mark.parametrize("pin", ["agentreel-core>=1.0", "agentreel-core==0.9.0", "agentreel-core"])
def test_a_sibling_not_pinned_to_the_workspace_version_is_named(workspace: Path, pin: str) -> None:
    edit(workspace / "packages/cli/pyproject.toml", '"agentreel-core==1.0.0"', f'"{pin}"')
    result = run("check", root=workspace)
    assert result.returncode == 1
    assert f"'{pin}' must pin the workspace version exactly (agentreel-core==1.0.0)" in (
        result.stderr
    )


def test_an_agentreel_requirement_that_is_no_member_is_named(workspace: Path) -> None:
    edit(
        workspace / "packages/cli/pyproject.toml",
        '"agentreel-core==1.0.0"',
        '"agentreel-kore==1.0.0"',
    )
    result = run("check", root=workspace)
    assert result.returncode == 1
    assert "'agentreel-kore==1.0.0' names no package of this workspace" in result.stderr


def test_uv_sources_must_list_exactly_the_members(workspace: Path) -> None:
    add_package(workspace, "proxy", CORE.replace("agentreel-core", "agentreel-proxy"))
    edit(
        workspace / "pyproject.toml",
        "agentreel-cli = { workspace = true }",
        'agentreel-old = { workspace = true }\nagentreel-cli = { path = "x" }',
    )
    result = run("check", root=workspace)
    assert result.returncode == 1
    assert "agentreel-proxy has no entry" in result.stderr
    assert "add `agentreel-proxy = { workspace = true }`" in result.stderr
    assert "agentreel-old is no package under packages/" in result.stderr
    assert "agentreel-cli must be { workspace = true }" in result.stderr


def test_allow_direct_references_is_refused(workspace: Path) -> None:
    with (workspace / "packages/core/pyproject.toml").open("a") as f:
        f.write("\n[tool.hatch.metadata]\nallow-direct-references = true\n")
    result = run("check", root=workspace)
    assert result.returncode == 1
    assert "allow-direct-references is set" in result.stderr


def test_a_package_named_unlike_its_folder_is_named(workspace: Path) -> None:
    edit(workspace / "packages/core/pyproject.toml", 'name = "agentreel-core"', 'name = "core"')
    result = run("check", root=workspace)
    assert "project.name is 'core'; it must be 'agentreel-core'" in result.stderr


def test_what_a_user_of_the_published_package_sees_is_required(workspace: Path) -> None:
    core = workspace / "packages/core"
    (core / "src/agentreel/core/py.typed").unlink()
    (core / "LICENSE").write_text("All rights reserved\n")
    edit(core / "pyproject.toml", 'description = "The core."', 'description = " "')
    (workspace / "packages/cli/README.md").unlink()
    result = run("check", root=workspace)
    assert result.returncode == 1
    assert "packages/core/pyproject.toml: project.description is empty" in result.stderr
    assert "needs the classifier 'Typing :: Typed' and the marker" in result.stderr
    assert "packages/core/LICENSE must be a copy of the root LICENSE" in result.stderr
    assert 'packages/cli/pyproject.toml: readme = "README.md"' in result.stderr
    assert result.stderr.count("packages/cli/") == 1, result.stderr


def test_a_readme_install_line_naming_a_missing_extra_or_package_is_named(workspace: Path) -> None:
    (workspace / "README.md").write_text(
        "intro\n\n```sh\npip install agentreel-core[fast]\n"
        'pip install "agentreel-cli[fast,openai]"\npip install agentreel-nope\n```\n'
    )
    result = run("check", root=workspace)
    assert result.returncode == 1
    problems = [line for line in result.stderr.splitlines() if line.startswith("README.md")]
    assert len(problems) == 2, result.stderr
    assert problems[0].startswith("README.md:5:")
    assert "asks for extra [openai] of agentreel-cli, which has ['fast']" in problems[0]
    assert problems[1].startswith("README.md:6:")
    assert "installs agentreel-nope, which is no package here" in problems[1]


def test_set_version_moves_every_package_and_pin_and_keeps_comments(workspace: Path) -> None:
    edit(workspace / "packages/core/pyproject.toml", 'version = "1.0.0"', 'version = "0.9.9"')
    result = run("set-version", "2.0.0rc1", root=workspace)
    assert result.returncode == 0, result.stderr
    assert "workspace metadata: ok" in result.stdout
    root_text = (workspace / "pyproject.toml").read_text()
    assert '[tool.agentreel]\nversion = "2.0.0rc1"' in root_text
    assert root_text.startswith("# the one version\n")
    cli = (workspace / "packages/cli/pyproject.toml").read_text()
    assert 'version = "2.0.0rc1"  # kept in step by nox -s version' in cli
    assert '"agentreel-core==2.0.0rc1",' in cli
    assert '"agentreel-core[fast]==2.0.0rc1"' in cli
    assert 'version = "2.0.0rc1"' in (workspace / "packages/core/pyproject.toml").read_text()
    assert run("version", root=workspace).stdout.strip() == "2.0.0rc1"


def test_set_version_refuses_a_version_that_is_not_pep_440(workspace: Path) -> None:
    result = run("set-version", "two", root=workspace)
    assert result.returncode == 2
    assert "Invalid version: 'two'" in result.stderr
    assert 'version = "1.0.0"' in (workspace / "pyproject.toml").read_text()


METADATA = """\
Metadata-Version: 2.4
Name: {name}
Version: {version}
Summary: test
{requires}
"""


def write_artifacts(
    dist: Path, name: str, requires: list[str], *, version: str = "1.0.0", sdist: bool = True
) -> None:
    dist.mkdir(exist_ok=True)
    stem = f"{name.replace('-', '_')}-{version}"
    text = METADATA.format(
        name=name, version=version, requires="\n".join(f"Requires-Dist: {r}" for r in requires)
    )
    with zipfile.ZipFile(dist / f"{stem}-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{stem}.dist-info/METADATA", text)
        wheel.writestr(f"{stem}.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    if sdist:
        with tarfile.open(dist / f"{stem}.tar.gz", "w:gz") as archive:
            data = text.encode()
            info = tarfile.TarInfo(f"{stem}/PKG-INFO")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def test_check_dist_passes_clean_artifacts(workspace: Path) -> None:
    write_artifacts(workspace / "dist", "agentreel-core", ["msgspec>=0.18"])
    write_artifacts(workspace / "dist", "agentreel-cli", ["agentreel-core==1.0.0"])
    result = run("check-dist", str(workspace / "dist"), root=workspace)
    assert result.returncode == 0, result.stderr


def test_check_dist_finds_a_direct_reference_in_wheel_metadata(workspace: Path) -> None:
    write_artifacts(workspace / "dist", "agentreel-core", ["msgspec>=0.18"])
    write_artifacts(
        workspace / "dist",
        "agentreel-cli",
        ['agentreel-core[fast] @ file:///work/packages/core ; extra == "fast"'],
    )
    result = run("check-dist", str(workspace / "dist"), root=workspace)
    assert result.returncode == 1
    # Once for the wheel's METADATA, once for the sdist's PKG-INFO.
    assert result.stderr.count("is a direct reference (file:///work/packages/core)") == 2
    assert "agentreel_cli-1.0.0-py3-none-any.whl Requires-Dist" in result.stderr
    assert "agentreel_cli-1.0.0.tar.gz Requires-Dist" in result.stderr


def test_check_dist_names_a_missing_sdist_a_stale_version_and_a_loose_pin(workspace: Path) -> None:
    write_artifacts(workspace / "dist", "agentreel-core", [], sdist=False)
    write_artifacts(workspace / "dist", "agentreel-cli", ["agentreel-core>=1"], version="0.9.0")
    result = run("check-dist", str(workspace / "dist"), root=workspace)
    assert result.returncode == 1
    assert "agentreel-core must have one wheel and one sdist, found ['wheel']" in result.stderr
    assert "Version 0.9.0 is not the workspace version 1.0.0" in result.stderr
    assert "'agentreel-core>=1' must pin the workspace version exactly" in result.stderr


def test_a_third_party_range_that_differs_between_packages_is_named(workspace: Path) -> None:
    # The harness promised agent-client-protocol>=0.12 while the agent, tested, pins <0.13.
    edit(
        workspace / "packages/cli/pyproject.toml",
        "dependencies = [",
        'dependencies = [\n    "msgspec>=0.17",',
    )
    result = run("check", root=workspace)
    assert result.returncode == 1
    assert (
        "msgspec is required with different ranges: >=0.17 in packages/cli/pyproject.toml "
        "dependencies; >=0.18 in packages/core/pyproject.toml dependencies"
    ) in result.stderr
    edit(workspace / "packages/cli/pyproject.toml", '"msgspec>=0.17"', '"msgspec>=0.18"')
    assert run("check", root=workspace).returncode == 0


def test_a_root_dependency_group_range_counts_too(workspace: Path) -> None:
    text = (workspace / "pyproject.toml").read_text()
    (workspace / "pyproject.toml").write_text(
        text + '\n[dependency-groups]\nexamples = ["msgspec>=0.18,<1"]\n'
    )
    result = run("check", root=workspace)
    assert result.returncode == 1
    assert "<1,>=0.18 in pyproject.toml dependency-groups.examples" in result.stderr


@pytest.mark.parametrize(
    ("link", "shown"),
    [
        ("[the docs](../../docs/review.md)", "'../../docs/review.md'"),
        ("[SPEC]: ../../SPEC.md", "'../../SPEC.md'"),
        ("see [the layout](docs/layout.md#files)", "'docs/layout.md#files'"),
    ],
)
def test_a_package_readme_link_relative_to_the_repository_is_named(
    workspace: Path, link: str, shown: str
) -> None:
    readme = workspace / "packages/core/README.md"
    readme.write_text(f"# core\n\n{link}\n")
    result = run("check", root=workspace)
    assert result.returncode == 1
    assert f"packages/core/README.md:3: link to {shown} is relative" in result.stderr


def test_absolute_links_and_anchors_in_a_package_readme_pass(workspace: Path) -> None:
    (workspace / "packages/core/README.md").write_text(
        "# core\n\n[home](https://example.org/x) [up](#core) [mail](mailto:a@b.c)\n"
        "[ref]: https://example.org/y\n"
    )
    result = run("check", root=workspace)
    assert result.returncode == 0, result.stderr


def add_scenarios(root: Path, *names: str) -> None:
    for name in names:
        (root / "fixtures" / name).mkdir(parents=True)
        (root / "fixtures" / name / "scenario.toml").write_text("")


@pytest.mark.parametrize(
    "prose",
    ["the ten committed scenarios", "the 2 committed scenarios", "the committed scenarios (8)"],
)
def test_a_count_of_the_committed_scenarios_that_is_wrong_is_named(
    workspace: Path, prose: str
) -> None:
    add_scenarios(workspace, "plain", "tools")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "guide.md").write_text(f"intro\n\nSee {prose} here.\n")
    (workspace / "README.md").write_text("See the two committed scenarios.\n")
    result = run("check", root=workspace)
    if prose == "the 2 committed scenarios":
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 1
    assert "docs/guide.md:3: " in result.stderr, result.stderr
    assert "fixtures/*/scenario.toml finds 2" in result.stderr
    assert "README.md:1" not in result.stderr


def test_the_scenario_table_must_list_exactly_the_committed_scenarios(workspace: Path) -> None:
    add_scenarios(workspace, "plain", "tools")
    (workspace / "fixtures" / "README.md").write_text(
        "| scenario | what |\n| --- | --- |\n| `plain` | one |\n| `gone` | removed |\n"
    )
    result = run("check", root=workspace)
    assert result.returncode == 1
    assert "fixtures/README.md: the table does not list fixtures/tools" in result.stderr
    assert "fixtures/README.md: the table lists 'gone'" in result.stderr


def test_this_repository_is_in_step() -> None:
    result = run("check", root=REPO)
    assert result.returncode == 0, result.stderr


def test_sibling_closure_follows_dependencies_and_the_extras_asked_for(workspace: Path) -> None:
    add_package(workspace, "plugin", CORE.replace("agentreel-core", "agentreel-plugin"))
    edit(
        workspace / "packages/core/pyproject.toml",
        'fast = ["orjson"]',
        'fast = ["agentreel-plugin"]',
    )
    assert sibling_closure("agentreel-core", [], workspace) == {"agentreel-core"}
    assert sibling_closure("agentreel-cli", [], workspace) == {"agentreel-cli", "agentreel-core"}
    # cli[fast] asks for core[fast], which brings the plugin.
    assert sibling_closure("agentreel-cli", ["fast"], workspace) == {
        "agentreel-cli",
        "agentreel-core",
        "agentreel-plugin",
    }


SPEC_TEXT = """\
# the contract

## 0. What it is

## 4. session

## 11. proxy

### 11.1 identity

## 13. timing
"""


def write_spec_and_citations(workspace: Path, citing: str) -> None:
    (workspace / "docs").mkdir(exist_ok=True)
    (workspace / "docs" / "spec.md").write_text(SPEC_TEXT)
    module = workspace / "packages" / "core" / "src" / "agentreel" / "core" / "_x.py"
    module.write_text(citing)


# Built, not written out: this file is itself checked as a citing file by the test below
# that runs the check on the repository.
MISSING = "SPEC " + "21"


@pytest.mark.parametrize(
    ("citing", "line", "section"),
    [
        (f'"""The rule.\n\nHeld since ({MISSING})."""\n', 3, "21"),
        (f"# two rules (SPEC sections 4, {MISSING[5:]})\n", 1, "21"),
        (f"# two rules (SPEC 13 and {MISSING[5:]})\n", 1, "21"),
        (f'"""A rule cited over a line break (SPEC\n{MISSING[5:]})."""\n', 1, "21"),
        ("# a sub-section (SPEC 11." + "2)\n", 1, "11.2"),
        ("# " + "spec.md section " + "5\n", 1, "5"),
    ],
)
def test_a_citation_of_a_section_the_spec_lacks_is_named(
    workspace: Path, citing: str, line: int, section: str
) -> None:
    write_spec_and_citations(workspace, citing)
    result = run("check", root=workspace)
    assert result.returncode == 1, result.stderr
    where = f"packages/core/src/agentreel/core/_x.py:{line}: "
    assert f"{where}cites SPEC {section}, but docs/spec.md has no section {section}" in (
        result.stderr
    )
    assert "(it has 0, 4, 11, 11.1, 13)" in result.stderr


def test_citations_of_sections_the_spec_has_pass(workspace: Path) -> None:
    write_spec_and_citations(
        workspace,
        '"""Bound by lineage (SPEC 4), lanes (SPEC section 11, identity rule 9), the '
        "schedule\n(SPEC 11 and 13; SPEC 11, issue 18; SPEC 11"
        ".1; SPEC 13's holds; "
        'spec.md section 0)."""\n',
    )
    result = run("check", root=workspace)
    assert result.returncode == 0, result.stderr


def test_a_citation_without_the_spec_in_the_repository_is_named(workspace: Path) -> None:
    write_spec_and_citations(workspace, "# bound by lineage (SPEC 4)\n")
    (workspace / "docs" / "spec.md").unlink()
    result = run("check", root=workspace)
    assert result.returncode == 1
    assert "_x.py:1: cites SPEC 4, but there is no docs/spec.md" in result.stderr


def test_the_architecture_table_cites_sections_in_its_first_cells(workspace: Path) -> None:
    write_spec_and_citations(workspace, "")
    (workspace / "docs" / "architecture.md").write_text(
        "| rule (SPEC section) | module |\n| --- | --- |\n"
        "| binding (4, 11) | `_binding` (1,000 calls) |\n"
        f"| schedule (13, {MISSING[5:]}) | `_schedule` (7) |\n\n| other | (9) |\n"
    )
    result = run("check", root=workspace)
    assert result.returncode == 1
    problems = [line for line in result.stderr.splitlines() if "cites SPEC" in line]
    assert problems == [
        f"docs/architecture.md:4: cites {MISSING}, but docs/spec.md has no section 21 (it has "
        "0, 4, 11, 11.1, 13); cite the section that holds the rule, or add it to docs/spec.md"
    ]


def test_every_citation_in_this_repository_names_a_section_of_its_spec() -> None:
    citations = list(spec_citations(REPO))
    assert len({path for path, _, _ in citations}) > 30
    assert {section for _, _, section in citations} <= spec_sections(REPO)
    assert check_spec_citations(REPO) == []
