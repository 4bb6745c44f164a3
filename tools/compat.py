"""Does installing agentreel hold back an agent framework or its SDK? (``nox -s compat``)

For each framework of ``FRAMEWORKS`` this resolves (``uv pip compile``, nothing installed)
the framework's newest release alone, then beside ``agentreel-snapshot-harness`` from the
built wheels (``dist/``, from ``nox -s build``), and compares what the resolver chose for
the framework's own distributions and every provider SDK it brought in. A version lower
beside agentreel — or a resolution that fails — is a failure: agentreel must never decide
which release of the code under test a user gets. Prints one table. Resolves against the
package index, so it needs the network (CI has it; the default test run does not).

Usage: ``python -m tools.compat --dist dist [--only crewai ...]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from tools import release

PYTHON = "3.11"
SDKS = ("openai", "anthropic", "google-genai")
"""The provider SDKs whose release a framework pins and agentreel must leave alone."""


@dataclass(frozen=True)
class Framework:
    """A framework as a user installs it: ``requirements`` (its newest release, extras and
    companions), ``own`` the distributions of it whose version must not drop."""

    name: str
    requirements: tuple[str, ...]
    own: tuple[str, ...]


FRAMEWORKS: tuple[Framework, ...] = (
    Framework("strands-agents[openai]", ("strands-agents[openai]",), ("strands-agents",)),
    Framework("strands-agents[anthropic]", ("strands-agents[anthropic]",), ("strands-agents",)),
    Framework(
        "llama-index + openai-like",
        ("llama-index-core", "llama-index-llms-openai-like"),
        ("llama-index-core", "llama-index-llms-openai-like"),
    ),
    Framework("crewai", ("crewai",), ("crewai",)),
    Framework(
        "langgraph + langchain-openai",
        ("langgraph", "langchain-openai"),
        ("langgraph", "langchain-openai"),
    ),
    Framework("pydantic-ai", ("pydantic-ai",), ("pydantic-ai",)),
    Framework("google-adk", ("google-adk",), ("google-adk",)),
    Framework("agno", ("agno",), ("agno",)),
    Framework("autogen-agentchat", ("autogen-agentchat",), ("autogen-agentchat",)),
    Framework("openai-agents", ("openai-agents",), ("openai-agents",)),
    Framework("smolagents", ("smolagents",), ("smolagents",)),
)


@dataclass(frozen=True)
class Row:
    framework: str
    package: str
    alone: str
    beside: str

    @property
    def held_back(self) -> bool:
        return is_held_back(self.alone, self.beside)


def is_held_back(alone: str, beside: str) -> bool:
    """Beside agentreel the resolver chose an older release (or none) than alone."""
    if not beside:
        return True
    try:
        return Version(beside) < Version(alone)
    except InvalidVersion:
        return beside != alone


def parse_pins(text: str) -> dict[str, str]:
    """``{distribution: version}`` of a ``uv pip compile`` output's ``name==version`` lines."""
    pins: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line and not line.startswith("-"):
            name, _, version = line.partition("==")
            name = name.split("[", 1)[0].strip()
            pins[str(canonicalize_name(name))] = version.split(";", 1)[0].strip()
    return pins


def rows(framework: Framework, alone: dict[str, str], beside: dict[str, str]) -> list[Row]:
    """The framework's own distributions and the SDKs it brought in, alone and beside."""
    watched = [str(canonicalize_name(n)) for n in framework.own]
    watched += [s for s in SDKS if s in alone and s not in watched]
    return [
        Row(framework.name, name, alone.get(name, ""), beside.get(name, "")) for name in watched
    ]


def table(all_rows: Sequence[Row], failures: Iterable[str] = ()) -> str:
    """The rows as an aligned text table, then one line per resolution that failed."""
    header = ("framework", "package", "alone", "beside agentreel", "")
    lines = [header] + [
        (
            r.framework,
            r.package,
            r.alone or "-",
            r.beside or "-",
            "HELD BACK" if r.held_back else "ok",
        )
        for r in all_rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]
    return "\n".join([*text, *(f"FAILED: {failure}" for failure in failures)])


def compile_pins(requirements: Sequence[str], dist: Path | None) -> dict[str, str]:
    """What ``uv pip compile`` resolves ``requirements`` to (for Python ``PYTHON``)."""
    command = ["uv", "pip", "compile", "--quiet", "--no-header", "--python-version", PYTHON]
    if dist is not None:
        command += ["--find-links", str(dist)]
    done = subprocess.run(
        [*command, "-"],
        input="\n".join(requirements) + "\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
    return parse_pins(done.stdout)


def check(frameworks: Sequence[Framework], dist: Path, harness: str) -> tuple[list[Row], list[str]]:
    """Each framework resolved alone and beside ``harness`` (a pinned requirement)."""
    all_rows: list[Row] = []
    failures: list[str] = []
    for framework in frameworks:
        try:
            alone = compile_pins(framework.requirements, None)
        except RuntimeError as exc:
            failures.append(f"{framework.name} alone does not resolve: {exc}")
            continue
        try:
            beside = compile_pins([*framework.requirements, harness], dist)
        except RuntimeError as exc:
            failures.append(f"{framework.name} beside {harness} does not resolve: {exc}")
            continue
        all_rows += rows(framework, alone, beside)
    return all_rows, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.compat", description=__doc__)
    parser.add_argument("--dist", type=Path, default=release.ROOT / "dist")
    parser.add_argument("--only", nargs="*", default=[], help="framework names (the table's)")
    args = parser.parse_args(argv)
    wheels = sorted(args.dist.glob("agentreel_snapshot_harness-*.whl"))
    if not wheels:
        print(f"no agentreel-snapshot-harness wheel in {args.dist}: run nox -s build first")
        return 2
    harness = f"agentreel-snapshot-harness=={release.workspace_version(release.ROOT)}"
    chosen = [f for f in FRAMEWORKS if not args.only or f.name in args.only]
    unknown = set(args.only) - {f.name for f in FRAMEWORKS}
    if unknown:
        print(f"unknown framework(s) {sorted(unknown)}; known: {[f.name for f in FRAMEWORKS]}")
        return 2
    all_rows, failures = check(chosen, args.dist, harness)
    print(table(all_rows, failures))
    held = [r for r in all_rows if r.held_back]
    if held or failures:
        print(
            f"\n{len(held)} held back, {len(failures)} failed to resolve: installing {harness} "
            "must leave every framework and its SDK at the release it gets alone. Widen the "
            "range agentreel declares (packages/*/pyproject.toml) or drop the dependency."
        )
        return 1
    print(f"\nevery framework keeps its newest release and its SDK beside {harness}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
