"""The README's development path installs what every committed scenario's agent imports.

``uv run agentreel replay`` and ``uv run pytest fixtures/ -n 2`` (the README's development
lines) sync the root project's default dependency groups (``[tool.uv] default-groups``;
``dev`` alone when unset) and nothing else. A committed scenario whose agent imports a
distribution outside what those groups bring in dies with ``ModuleNotFoundError`` on a
fresh clone (``example-pydantic-ai`` did: ``pydantic_ai`` is in the ``examples`` group).

For each scenario: the modules its agent command imports (a ``-m`` module, or a script's
imports and those of the modules beside it that it imports), mapped to the distributions
that provide them in this venv, must lie in the requirement closure of the default groups.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from agentreel.snapshot_harness import load_scenario

REPO = Path(__file__).resolve().parents[2]
DEFAULT_UV_GROUPS = ["dev"]  # uv's default when [tool.uv] default-groups is unset


def default_groups(root: Path) -> list[str]:
    with (root / "pyproject.toml").open("rb") as f:
        pyproject = tomllib.load(f)
    groups = pyproject.get("tool", {}).get("uv", {}).get("default-groups", DEFAULT_UV_GROUPS)
    names: list[str] = list(pyproject.get("dependency-groups", {})) if groups == "all" else groups
    return names


def group_requirements(root: Path, groups: Iterable[str]) -> list[Requirement]:
    with (root / "pyproject.toml").open("rb") as f:
        table = tomllib.load(f).get("dependency-groups", {})
    found: list[Requirement] = []
    for group in groups:
        for item in table.get(group, []):
            if isinstance(item, str):
                found.append(Requirement(item))
            else:  # {include-group = "name"}
                found += group_requirements(root, [item["include-group"]])
    return found


def _applies(marker: Marker | None, extra: str) -> bool:
    return marker is None or marker.evaluate({"extra": extra})


def closure(requirements: Iterable[Requirement]) -> set[str]:
    """Every distribution installing ``requirements`` brings in, from installed metadata."""
    seen: set[tuple[str, str]] = set()
    found: set[str] = set()
    pending = [(r, "") for r in requirements if _applies(r.marker, "")]
    while pending:
        requirement, _ = pending.pop()
        name = str(canonicalize_name(requirement.name))
        extras = sorted(requirement.extras)
        key = (name, ",".join(extras))
        if key in seen:
            continue
        seen.add(key)
        found.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # not in this venv (its own dependencies unknown): the name counts
        for text in requires:
            nested = Requirement(text)
            if any(_applies(nested.marker, e) for e in ["", *extras]):
                pending.append((nested, ""))
    return found


def _imports(source: Path) -> Iterator[str]:
    tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def agent_modules(command: list[str]) -> set[str]:
    """The modules the agent command imports, beyond the standard library and the files
    beside its script (those are followed: their imports count)."""
    if "-m" in command:
        return {command[command.index("-m") + 1]}
    scripts = [Path(part) for part in command if part.endswith(".py")]
    modules: set[str] = set()
    todo, done = list(scripts), set()
    while todo:
        script = todo.pop()
        if script in done:
            continue
        done.add(script)
        for module in _imports(script):
            top = module.split(".")[0]
            local = script.parent / f"{top}.py"
            if local.is_file():
                todo.append(local)
            elif top not in sys.stdlib_module_names and top != "__future__":
                modules.add(module)
    return modules


def distributions_of(module: str) -> set[str]:
    parts = module.split(".")
    if parts[0] == "agentreel" and len(parts) > 1:  # a namespace: one distribution a package
        return {str(canonicalize_name(f"agentreel-{parts[1]}"))}
    providers = metadata.packages_distributions().get(parts[0], [])
    return {str(canonicalize_name(name)) for name in providers}


SCENARIOS = sorted(p.parent for p in (REPO / "fixtures").glob("*/scenario.toml"))


def test_every_committed_scenario_is_checked() -> None:
    assert len(SCENARIOS) >= 13
    assert any("examples" in " ".join(load_scenario(d).agent or []) for d in SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_uv_run_installs_what_a_committed_scenarios_agent_imports(scenario: Path) -> None:
    installed = closure(group_requirements(REPO, default_groups(REPO)))
    missing: dict[str, set[str]] = {}
    for module in sorted(agent_modules(load_scenario(scenario).agent_command())):
        providers = distributions_of(module)
        assert providers, f"{module}: no installed distribution provides it (this venv)"
        if not providers & installed:
            missing[module] = providers
    assert not missing, (
        f"{scenario.name}: its agent imports {missing}, which `uv run` (default groups "
        f"{default_groups(REPO)}) does not install; add them to a default group "
        "([tool.uv] default-groups in pyproject.toml)"
    )


def test_the_closure_would_miss_a_group_left_out_of_the_defaults() -> None:
    # The control: with only `dev` (uv's default), pydantic-ai is not installed.
    assert "pydantic-ai-slim" not in closure(group_requirements(REPO, DEFAULT_UV_GROUPS))
    assert "pydantic-ai-slim" in closure(group_requirements(REPO, default_groups(REPO)))
