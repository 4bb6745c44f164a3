"""Every agentreel error derives from ``AgentreelError`` and each package draws its own
hierarchy in its ``exceptions`` module's docstring (docs/spec.md section 10).

Walks every ``packages/*/src/agentreel/<name>/exceptions.py``, so a package added later is
held to the same rules. Needs every package installed (the ``tests`` session).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

from agentreel.brand.exceptions import AgentreelError

REPO = Path(__file__).resolve().parents[2]
PACKAGES = sorted(p.parent.name for p in REPO.glob("packages/*/src/agentreel/*/exceptions.py"))
# A name in a hierarchy drawing: after the tree's indentation and branch, a class name.
_TREE_ENTRY = re.compile(r"^    (?:[│ ]   )*(?:[├└]── )?(?P<name>[A-Z]\w*)")


def exceptions_module(package: str) -> ModuleType:
    return importlib.import_module(f"agentreel.{package}.exceptions")


def public_classes(module: ModuleType) -> dict[str, type[BaseException]]:
    """Every public exception or warning class the module defines."""
    return {
        name: value
        for name, value in vars(module).items()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == module.__name__
        and not name.startswith("_")
    }


def test_every_package_has_an_exceptions_module() -> None:
    assert set(PACKAGES) >= {
        "acp_agent",
        "brand",
        "llm",
        "llm_proxy",
        "llm_replay",
        "session",
        "snapshot_harness",
    }


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_error_of_a_package_is_an_agentreel_error(package: str) -> None:
    module = exceptions_module(package)
    classes = public_classes(module)
    errors = {n: c for n, c in classes.items() if not issubclass(c, Warning)}
    assert errors, f"agentreel.{package}.exceptions defines no error"
    assert [n for n, c in errors.items() if not issubclass(c, AgentreelError)] == []
    # Re-exported where users look, and every public class listed in __all__.
    assert module.AgentreelError is AgentreelError
    assert set(classes) | {"AgentreelError"} <= set(module.__all__)


@pytest.mark.parametrize("package", PACKAGES)
def test_the_hierarchy_docstring_draws_every_class_under_its_base(package: str) -> None:
    module = exceptions_module(package)
    known = {**public_classes(module), "AgentreelError": AgentreelError}
    drawing = (module.__doc__ or "").partition("Hierarchy::")[2].partition("\n\n\n")[0]
    assert drawing, f"agentreel.{package}.exceptions has no 'Hierarchy::' drawing"
    drawn: dict[str, str | None] = {}
    above: list[str] = []  # the class drawn last at each depth
    for line in drawing.splitlines():
        entry = _TREE_ENTRY.match(line)
        if entry is None or (
            entry["name"] not in known and not line.lstrip("│ ").startswith(("├", "└"))
        ):
            continue
        depth = (entry.start("name") - 4) // 4
        del above[depth:]
        drawn[entry["name"]] = above[-1] if above else None
        above.append(entry["name"])
    assert set(known) <= set(drawn), f"not drawn: {sorted(set(known) - set(drawn))}"
    for name, cls in known.items():
        parent = drawn[name]
        if parent is None:  # a root: the common base, or a warning beside the tree
            assert cls is AgentreelError or issubclass(cls, Warning), name
        else:
            assert parent in {base.__name__ for base in cls.__bases__}, (name, parent)


def test_no_two_packages_define_an_error_of_one_name() -> None:
    """One name per meaning: ``except FixtureError`` means one thing, whichever package
    it came from."""
    owners: dict[str, list[str]] = {}
    for package in PACKAGES:
        for name in public_classes(exceptions_module(package)):
            owners.setdefault(name, []).append(package)
    assert {name: where for name, where in owners.items() if len(where) > 1} == {}
