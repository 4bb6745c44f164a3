"""The workspace's one version, and the checks that keep every package publishable.

Every agentreel package has the version in the root ``pyproject.toml``
(``[tool.agentreel] version``) and pins its siblings to exactly that version
(``agentreel-llm==X.Y.Z``); the uv workspace resolves them to their folders during
development. Nothing may name a sibling by path or URL, because such a wheel cannot be
uploaded to an index or installed away from this checkout (SPEC section 1).

Used by the noxfile (``lint`` checks the sources, ``build`` the built artifacts, ``version``
rewrites every version) and as a command line::

    python -m tools.release version             # print the workspace version
    python -m tools.release check               # pyprojects, uv sources, README install lines
    python -m tools.release check-dist dist/    # METADATA / PKG-INFO of built wheels and sdists
    python -m tools.release set-version 0.2.0   # rewrite every version and sibling pin

Only the standard library and ``packaging`` (which nox itself depends on), so the noxfile can
import it into nox's own interpreter.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parent.parent
PACKAGES_GLOB = "packages/*/pyproject.toml"
DIST_PREFIX = "agentreel-"
SET_VERSION_HINT = "nox -s version -- X.Y.Z"
# `pip install ...agentreel-name[extra]...` in a README: each named package and extra must exist.
_INSTALL_LINE = re.compile(r"pip install\b")
_DIST_TOKEN = re.compile(r"\bagentreel-[a-z0-9-]*[a-z0-9](?:\[([A-Za-z0-9_,\s-]*)\])?")
# A sibling pin inside a pyproject string: "agentreel-llm[openai]==0.1.0".
_PIN = re.compile(r'("agentreel-[a-z0-9-]+(?:\[[^\]]*\])?)==[^";,\s]*"')
_PROJECT_VERSION = re.compile(r'^(version\s*=\s*)"[^"]*"', re.MULTILINE)


class ReleaseCheckError(Exception):
    """The workspace cannot be read at all (no root version, a pyproject that is not TOML)."""


@dataclass(frozen=True)
class Member:
    """One workspace package: its folder, distribution name and parsed pyproject."""

    directory: Path
    pyproject: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.pyproject.get("project", {}).get("name", ""))

    @property
    def pyproject_path(self) -> Path:
        return self.directory / "pyproject.toml"

    @property
    def extras(self) -> set[str]:
        optional = self.pyproject.get("project", {}).get("optional-dependencies", {})
        return {str(canonicalize_name(extra)) for extra in optional}


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ReleaseCheckError(f"{path}: cannot read it as TOML: {exc}") from exc


def workspace_version(root: Path = ROOT) -> str:
    """The one version of every package: ``[tool.agentreel] version`` of the root pyproject."""
    path = root / "pyproject.toml"
    version = _load_toml(path).get("tool", {}).get("agentreel", {}).get("version")
    if not isinstance(version, str):
        raise ReleaseCheckError(
            f'{path}: no [tool.agentreel] version = "X.Y.Z"; it is the one version of every '
            "package, add it"
        )
    try:
        Version(version)
    except InvalidVersion as exc:
        raise ReleaseCheckError(f"{path}: [tool.agentreel] version: {exc}") from exc
    return version


def package_dirs(root: Path = ROOT) -> list[Path]:
    """Every package folder (``packages/<name>/`` holding a pyproject), sorted by name."""
    return sorted(p.parent for p in root.glob(PACKAGES_GLOB))


def members(root: Path = ROOT) -> list[Member]:
    return [Member(d, _load_toml(d / "pyproject.toml")) for d in package_dirs(root)]


def _requirements(member: Member) -> Iterator[tuple[str, str]]:
    """``(where, requirement text)`` for every dependency and extra of the package."""
    project = member.pyproject.get("project", {})
    for text in project.get("dependencies", []):
        yield "dependencies", text
    for extra, texts in project.get("optional-dependencies", {}).items():
        for text in texts:
            yield f"optional-dependencies.{extra}", text


def _check_requirement(
    text: str, where: str, version: str, member_names: set[str]
) -> Iterator[str]:
    """Problems of one requirement: a direct reference, or a sibling not pinned to ``version``."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        yield f"{where}: {text!r} is not a valid requirement: {exc}"
        return
    if requirement.url is not None:
        yield (
            f"{where}: {text!r} is a direct reference ({requirement.url}); an index refuses "
            "it and it installs only beside this checkout. Name the package by version"
            + (f" ({requirement.name}=={version})" if _is_ours(requirement.name) else "")
        )
        return
    name = str(canonicalize_name(requirement.name))
    if name in member_names:
        if str(requirement.specifier) != f"=={version}":
            yield (
                f"{where}: {text!r} must pin the workspace version exactly "
                f"({requirement.name}=={version}); run {SET_VERSION_HINT}"
            )
    elif _is_ours(name):
        yield (
            f"{where}: {text!r} names no package of this workspace "
            f"(members: {', '.join(sorted(member_names))})"
        )


def sibling_closure(name: str, extras: Iterable[str], root: Path = ROOT) -> set[str]:
    """The workspace packages that installing ``name[extras]`` brings in, ``name`` included.

    Follows sibling requirements (and the extras they ask for) through every package's
    pyproject; marker-free, as every sibling requirement here is.
    """
    by_name = {str(canonicalize_name(m.name)): m for m in members(root)}
    found: set[str] = set()
    pending = [(str(canonicalize_name(name)), {str(canonicalize_name(e)) for e in extras})]
    seen: set[tuple[str, str]] = set()
    while pending:
        current, wanted = pending.pop()
        found.add(current)
        project = by_name[current].pyproject.get("project", {})
        texts = list(project.get("dependencies", []))
        for extra, extra_texts in project.get("optional-dependencies", {}).items():
            if str(canonicalize_name(extra)) in wanted:
                texts += extra_texts
        for text in texts:
            requirement = Requirement(text)
            sibling = str(canonicalize_name(requirement.name))
            key = (sibling, ",".join(sorted(requirement.extras)))
            if sibling in by_name and key not in seen:
                seen.add(key)
                pending.append((sibling, set(requirement.extras)))
    return found


def _is_ours(name: str) -> bool:
    return str(canonicalize_name(name)).startswith(DIST_PREFIX)


def check_sources(root: Path = ROOT) -> list[str]:
    """Every problem that would make a package unpublishable or out of step, as messages.

    Checked: each package's name (``agentreel-<folder>``) and static version equal to the
    workspace version; a description, README, the root LICENSE and ``Typing :: Typed``;
    each sibling requirement pinned ``==`` that version and no direct reference anywhere;
    no ``allow-direct-references``; a ``workspace = true`` uv source for exactly the
    members; and every ``pip install`` line of a README naming only packages and extras
    that exist.
    """
    version = workspace_version(root)
    found = members(root)
    member_names = {str(canonicalize_name(m.name)) for m in found}
    problems: list[str] = []
    for member in found:
        where = str(member.pyproject_path.relative_to(root))
        project = member.pyproject.get("project", {})
        expected_name = DIST_PREFIX + member.directory.name.replace("_", "-")
        if member.name != expected_name:
            problems.append(
                f"{where}: project.name is {member.name!r}; it must be {expected_name!r}"
            )
        if "version" in project.get("dynamic", []) or project.get("version") != version:
            problems.append(
                f"{where}: project.version is {project.get('version')!r}, the workspace version "
                f"is {version!r} (root pyproject.toml [tool.agentreel]); run {SET_VERSION_HINT}"
            )
        for field, text in _requirements(member):
            problems.extend(_check_requirement(text, f"{where} {field}", version, member_names))
        problems.extend(_check_user_metadata(member, where, root))
        hatch_metadata = member.pyproject.get("tool", {}).get("hatch", {}).get("metadata", {})
        if hatch_metadata.get("allow-direct-references"):
            problems.append(
                f"{where}: [tool.hatch.metadata] allow-direct-references is set; remove it, "
                "siblings resolve through the uv workspace"
            )
    problems.extend(_check_uv_sources(root, member_names))
    problems.extend(_check_ranges(root, found))
    readmes = [root / "README.md", *(m.directory / "README.md" for m in found)]
    extras = {str(canonicalize_name(m.name)): m.extras for m in found}
    for readme in readmes:
        if readme.is_file():
            problems.extend(_check_install_lines(readme, root, extras))
    for member in found:
        if (member.directory / "README.md").is_file():
            problems.extend(_check_index_links(member.directory / "README.md", root))
    problems.extend(check_scenario_mentions(root))
    problems.extend(check_spec_citations(root))
    return problems


def _third_party_ranges(root: Path, found: list[Member]) -> Iterator[tuple[str, str, str]]:
    """``(distribution, specifier, where)`` for every third-party requirement of the
    workspace: each package's dependencies, extras and dependency groups, and the root's
    dependency groups."""
    sources = [(m.pyproject_path, m.pyproject) for m in found]
    sources.append((root / "pyproject.toml", _load_toml(root / "pyproject.toml")))
    for path, pyproject in sources:
        where = str(path.relative_to(root))
        project = pyproject.get("project", {})
        texts = [("dependencies", t) for t in project.get("dependencies", [])]
        for extra, extra_texts in project.get("optional-dependencies", {}).items():
            texts += [(f"optional-dependencies.{extra}", t) for t in extra_texts]
        for group, group_texts in pyproject.get("dependency-groups", {}).items():
            texts += [(f"dependency-groups.{group}", t) for t in group_texts if isinstance(t, str)]
        for field, text in texts:
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue  # named by _check_requirement
            if not _is_ours(requirement.name):
                name = str(canonicalize_name(requirement.name))
                yield name, str(requirement.specifier), f"{where} {field}"


def _check_ranges(root: Path, found: list[Member]) -> Iterator[str]:
    """One version range per third-party distribution across the workspace: the range the
    tests run with is the range every package promises (a looser one in a package's
    metadata installs versions no test ran against)."""
    ranges: dict[str, dict[str, list[str]]] = {}
    for name, specifier, where in _third_party_ranges(root, found):
        ranges.setdefault(name, {}).setdefault(specifier, []).append(where)
    for name, by_range in sorted(ranges.items()):
        if len(by_range) > 1:
            listed = "; ".join(
                f"{specifier or '(any version)'} in {', '.join(wheres)}"
                for specifier, wheres in sorted(by_range.items())
            )
            yield (
                f"{name} is required with different ranges: {listed}. Use the one range the "
                "tests run with everywhere"
            )


# A Markdown link's target: inline ``[text](target)``, or a reference ``[label]: target``.
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)|^[ \t]*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
_ABSOLUTE_LINK = re.compile(r"(?:https?|mailto):|#", re.IGNORECASE)


def _check_index_links(readme: Path, root: Path) -> Iterator[str]:
    """A package README is its index page (the long description): a link relative to the
    repository (``../../docs/x.md``) leads nowhere there. Links must be absolute URLs or
    anchors; name a repository file in text instead."""
    text = readme.read_text(encoding="utf-8")
    for match in _LINK.finditer(text):
        target = match.group(1) or match.group(2)
        if not _ABSOLUTE_LINK.match(target):
            number = text.count("\n", 0, match.start()) + 1
            yield (
                f"{readme.relative_to(root)}:{number}: link to {target!r} is relative to the "
                "repository; on the package's index page it leads nowhere. Use an absolute "
                "https:// URL, or name the file in text without a link"
            )


SCENARIOS_GLOB = "fixtures/*/scenario.toml"
SCENARIO_TABLE = "fixtures/README.md"
_NUMBER_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
# "the ten committed scenarios", "13 committed scenarios", "the committed scenarios (8)".
_SCENARIO_COUNT = re.compile(
    r"\b(?:(\w+)\s+)?committed\s+scenarios\b(?:\s+\((\d+)\))?", re.IGNORECASE
)
_TABLE_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|", re.MULTILINE)


def _count(word: str) -> int | None:
    """``"ten"`` or ``"10"`` as a number; ``None`` for any other word (``"the"``)."""
    if word.isdigit():
        return int(word)
    return _NUMBER_WORDS.index(word.lower()) if word.lower() in _NUMBER_WORDS else None


def committed_scenarios(root: Path = ROOT) -> list[str]:
    """The scenario folders under ``fixtures/`` (each holding a ``scenario.toml``)."""
    return sorted(p.parent.name for p in root.glob(SCENARIOS_GLOB))


def check_scenario_mentions(root: Path = ROOT) -> list[str]:
    """Counts and lists of the committed scenarios in the docs, checked against
    ``fixtures/``: a number before "committed scenarios" (in words or digits) in any
    README or ``docs/*.md`` must be how many there are, and the table of
    ``fixtures/README.md`` must list exactly them."""
    scenarios = committed_scenarios(root)
    if not scenarios:
        return []
    problems: list[str] = []
    documents = [root / "README.md", *sorted(root.glob("*/README.md"))]
    documents += sorted(root.glob("packages/*/README.md")) + sorted(root.glob("docs/*.md"))
    for document in documents:
        if not document.is_file():
            continue
        text = document.read_text(encoding="utf-8")
        for match in _SCENARIO_COUNT.finditer(text):
            counts = [_count(word) for word in match.groups() if word]
            if any(count is not None and count != len(scenarios) for count in counts):
                number = text.count("\n", 0, match.start()) + 1
                problems.append(
                    f"{document.relative_to(root)}:{number}: {match.group(0)!r}, but "
                    f'{SCENARIOS_GLOB} finds {len(scenarios)}; say "the committed scenarios" '
                    "(no count to keep in step) or correct it"
                )
    table = root / SCENARIO_TABLE
    if table.is_file():
        listed = _TABLE_ROW.findall(table.read_text(encoding="utf-8"))
        listed = [name for name in listed if name != "scenario"]
        for name in sorted(set(scenarios) - set(listed)):
            problems.append(f"{SCENARIO_TABLE}: the table does not list fixtures/{name}; add a row")
        for name in sorted(set(listed) - set(scenarios)):
            problems.append(
                f"{SCENARIO_TABLE}: the table lists {name!r}, which is no folder with a "
                "scenario.toml under fixtures/; remove the row"
            )
    return problems


SPEC_DOCUMENT = "docs/spec.md"
"""The behaviour contract; "SPEC n" in code and docs cites its section n."""
# "## 11. llm_proxy ..." is section 11; "### 11.2 ..." would be section 11.2.
_SPEC_HEADING = re.compile(r"^#{2,4}\s+(\d+(?:\.\d+)*)\.?\s", re.MULTILINE)
_SECTION_LIST = r"(\d+(?:\.\d+)*(?:(?:\s*,\s*|\s+and\s+)\d+(?:\.\d+)*)*)"
# "SPEC 13", "SPEC section 4", "SPEC sections 4, 5", "SPEC 11 and 13", "(SPEC\n11)",
# "SPEC 9's"; also "spec.md section 9". What follows a list ("SPEC 11, issue 18",
# "SPEC 11, identity rule 4") is no section.
_SPEC_CITATION = re.compile(
    r"(?:\bSPEC|\bspec\.md)(?:'s)?[\s#]+(?:sections?\s+|§\s*)?" + _SECTION_LIST
)
# The table of docs/architecture.md under a "(SPEC section)" header: "(3, 11)" in a row's
# first cell names sections too.
_ARCHITECTURE = "docs/architecture.md"
_SECTION_GROUP = re.compile(r"\((\d+(?:\.\d+)?(?:, \d+(?:\.\d+)?)*)\)")
_CITING_SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".sh"}
_SKIPPED_FOLDERS = {"node_modules", "dist", "build", "__pycache__", "site-packages"}


def spec_sections(root: Path = ROOT) -> set[str]:
    """The section numbers ``docs/spec.md`` has (``"11"``, ``"11.2"``); empty without it."""
    path = root / SPEC_DOCUMENT
    if not path.is_file():
        return set()
    return set(_SPEC_HEADING.findall(path.read_text(encoding="utf-8")))


def _citing_files(root: Path) -> Iterator[Path]:
    """Every text file that may cite the contract: sources, docs, configuration — not
    hidden folders (``.git``, ``.nox``, virtual environments) nor built or vendored ones."""
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(
            d for d in subfolders if not d.startswith(".") and d not in _SKIPPED_FOLDERS
        )
        for name in sorted(files):
            if Path(name).suffix in _CITING_SUFFIXES:
                yield Path(folder) / name


def spec_citations(root: Path = ROOT) -> Iterator[tuple[Path, int, str]]:
    """``(file, line, section)`` for every citation of the contract under ``root``."""
    for path in _citing_files(root):
        if path == root / SPEC_DOCUMENT:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for match in _SPEC_CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            for section in re.split(r"\s*,\s*|\s+and\s+", match.group(1)):
                yield path, line, section
        if path == root / _ARCHITECTURE:
            yield from _architecture_citations(path, text)


def _architecture_citations(path: Path, text: str) -> Iterator[tuple[Path, int, str]]:
    in_table = False
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("|"):
            in_table = False
            continue
        if "(SPEC section)" in line:
            in_table = True
            continue
        if in_table:
            first_cell = line.split("|")[1]
            for group in _SECTION_GROUP.findall(first_cell):
                for section in group.split(", "):
                    yield path, number, section


def check_spec_citations(root: Path = ROOT) -> list[str]:
    """Every citation of a section ``docs/spec.md`` does not have, named by file and line.

    A citation is "SPEC n" (also "SPEC section n", "SPEC sections n, m", "SPEC n and m",
    "SPEC n.m" for a sub-section headed ``### n.m``) or "spec.md section n" in any source,
    doc or configuration file, and a section list "(n, m)" in the first cell of
    ``docs/architecture.md``'s table of rules. Without ``docs/spec.md`` every citation is
    a problem."""
    sections = spec_sections(root)
    problems: list[str] = []
    for path, line, section in spec_citations(root):
        if section in sections:
            continue
        where = f"{path.relative_to(root)}:{line}"
        if not sections:
            problems.append(
                f"{where}: cites SPEC {section}, but there is no {SPEC_DOCUMENT}; the contract "
                "the code cites must be in the repository"
            )
            continue
        known = ", ".join(sorted(sections, key=lambda s: [int(p) for p in s.split(".")]))
        problems.append(
            f"{where}: cites SPEC {section}, but {SPEC_DOCUMENT} has no section {section} "
            f"(it has {known}); cite the section that holds the rule, or add it to "
            f"{SPEC_DOCUMENT}"
        )
    return problems


def _check_user_metadata(member: Member, where: str, root: Path) -> Iterator[str]:
    """What a user of the published package sees: a description, a README, the license text,
    and the ``Typing :: Typed`` promise backed by a ``py.typed`` marker."""
    project = member.pyproject.get("project", {})
    if not str(project.get("description", "")).strip():
        yield f"{where}: project.description is empty; say in one line what the package is for"
    if project.get("readme") != "README.md" or not (member.directory / "README.md").is_file():
        yield f'{where}: readme = "README.md" (next to it) is the page an index shows; add both'
    marker = member.directory / "src" / "agentreel" / member.directory.name / "py.typed"
    if "Typing :: Typed" not in project.get("classifiers", []) or not marker.is_file():
        yield (
            f"{where}: needs the classifier 'Typing :: Typed' and the marker "
            f"{marker.relative_to(root)} (both, or type checkers ignore the package's hints)"
        )
    license_text = root / "LICENSE"
    copy = member.directory / "LICENSE"
    if license_text.is_file() and (
        not copy.is_file() or copy.read_bytes() != license_text.read_bytes()
    ):
        folder = copy.parent.relative_to(root)
        yield (
            f"{where}: {folder}/LICENSE must be a copy of the root LICENSE (the wheel and "
            f"sdist carry it; a symlink would escape the sdist): `cp LICENSE {folder}/`"
        )


def _check_uv_sources(root: Path, member_names: set[str]) -> Iterator[str]:
    sources = _load_toml(root / "pyproject.toml").get("tool", {}).get("uv", {}).get("sources", {})
    listed = {str(canonicalize_name(name)): spec for name, spec in sources.items()}
    for name in sorted(member_names - listed.keys()):
        yield (
            f"pyproject.toml [tool.uv.sources]: {name} has no entry, so the workspace would "
            f"fetch it from an index; add `{name} = {{ workspace = true }}`"
        )
    for name, spec in sorted(listed.items()):
        if not _is_ours(name):
            continue
        if name not in member_names:
            yield (
                f"pyproject.toml [tool.uv.sources]: {name} is no package under packages/; "
                "remove the entry or add the package"
            )
        elif spec != {"workspace": True}:
            yield (
                f"pyproject.toml [tool.uv.sources]: {name} must be {{ workspace = true }}, "
                f"not {spec}"
            )


def _check_install_lines(readme: Path, root: Path, extras: dict[str, set[str]]) -> Iterator[str]:
    for number, line in enumerate(readme.read_text(encoding="utf-8").splitlines(), start=1):
        if not _INSTALL_LINE.search(line):
            continue
        command = line.split("#", 1)[0]
        for match in _DIST_TOKEN.finditer(command):
            where = f"{readme.relative_to(root)}:{number}"
            name = str(canonicalize_name(match.group(0).split("[", 1)[0]))
            if name not in extras:
                yield f"{where}: `{line.strip()}` installs {name}, which is no package here"
                continue
            for extra in filter(None, (e.strip() for e in (match.group(1) or "").split(","))):
                if str(canonicalize_name(extra)) not in extras[name]:
                    yield (
                        f"{where}: `{line.strip()}` asks for extra [{extra}] of {name}, which "
                        f"has {sorted(extras[name]) or 'no extras'}"
                    )


def _artifact_metadata(path: Path) -> Message:
    """The core metadata of a wheel (``*.dist-info/METADATA``) or an sdist (``PKG-INFO``)."""
    if path.name.endswith(".whl"):
        with zipfile.ZipFile(path) as wheel:
            names = [n for n in wheel.namelist() if n.count("/") == 1]
            metadata = [n for n in names if n.endswith(".dist-info/METADATA")]
            if len(metadata) != 1:
                raise ReleaseCheckError(
                    f"{path}: expected one *.dist-info/METADATA, found {metadata}"
                )
            text = wheel.read(metadata[0]).decode("utf-8")
    else:
        with tarfile.open(path) as sdist:
            members = [m for m in sdist.getmembers() if m.name.count("/") == 1]
            pkg_info = [m for m in members if m.name.endswith("/PKG-INFO")]
            handle = sdist.extractfile(pkg_info[0]) if len(pkg_info) == 1 else None
            if handle is None:
                raise ReleaseCheckError(f"{path}: expected one top-level PKG-INFO, found none")
            text = handle.read().decode("utf-8")
    return HeaderParser().parsestr(text)


def check_dist(dist: Path, root: Path = ROOT) -> list[str]:
    """Problems of the built artifacts in ``dist``: what an index and an installer will read.

    Each package must have exactly one wheel and one sdist of the workspace version, and
    no ``Requires-Dist`` may be a direct reference or a sibling not pinned to that version.
    """
    version = workspace_version(root)
    member_names = {str(canonicalize_name(m.name)) for m in members(root)}
    artifacts = sorted([*dist.glob("*.whl"), *dist.glob("*.tar.gz")])
    problems: list[str] = []
    seen: dict[str, list[str]] = {}
    for path in artifacts:
        try:
            metadata = _artifact_metadata(path)
        except (ReleaseCheckError, zipfile.BadZipFile, tarfile.TarError, OSError) as exc:
            problems.append(f"{path.name}: cannot read its metadata: {exc}")
            continue
        name = str(canonicalize_name(metadata.get("Name", "")))
        kind = "wheel" if path.name.endswith(".whl") else "sdist"
        seen.setdefault(name, []).append(kind)
        if name not in member_names:
            problems.append(f"{path.name}: {name!r} is no package of this workspace (stale?)")
        if metadata.get("Version") != version:
            problems.append(
                f"{path.name}: Version {metadata.get('Version')} is not the workspace version "
                f"{version}; rebuild (nox -s build)"
            )
        for text in metadata.get_all("Requires-Dist") or []:
            problems.extend(
                _check_requirement(text, f"{path.name} Requires-Dist", version, member_names)
            )
    for name in sorted(member_names):
        kinds = sorted(seen.get(name, []))
        if kinds != ["sdist", "wheel"]:
            problems.append(
                f"{dist}: {name} must have one wheel and one sdist, found {kinds or 'none'}"
            )
    return problems


def set_version(new: str, root: Path = ROOT) -> list[Path]:
    """Write ``new`` as the workspace version, every package's version and every sibling pin.

    Edits the files as text so comments and layout stay; returns the files it changed.
    """
    Version(new)
    changed: list[Path] = []
    root_file = root / "pyproject.toml"
    text = root_file.read_text(encoding="utf-8")
    section = re.search(r"^\[tool\.agentreel\]\n(?:[^\[].*\n|\n)*", text, re.MULTILINE)
    if section is None:
        raise ReleaseCheckError(f"{root_file}: no [tool.agentreel] table to write the version into")
    body = _PROJECT_VERSION.sub(rf'\g<1>"{new}"', section.group(0), count=1)
    changed += _write_if_changed(root_file, text[: section.start()] + body + text[section.end() :])
    for member in members(root):
        text = member.pyproject_path.read_text(encoding="utf-8")
        text = _PROJECT_VERSION.sub(rf'\g<1>"{new}"', text, count=1)
        text = _PIN.sub(rf'\g<1>=={new}"', text)
        changed += _write_if_changed(member.pyproject_path, text)
    return changed


def _write_if_changed(path: Path, text: str) -> list[Path]:
    if path.read_text(encoding="utf-8") == text:
        return []
    path.write_text(text, encoding="utf-8")
    return [path]


def _report(problems: Iterable[str], what: str) -> int:
    problems = list(problems)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"{what}: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"{what}: ok")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.release", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the workspace root (default: this checkout)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("version", help="print the workspace version")
    commands.add_parser(
        "check",
        help="check pyprojects, uv sources, version ranges, README install lines and links, "
        "and the docs' counts and lists of the committed scenarios",
    )
    check_dist_parser = commands.add_parser("check-dist", help="check built wheels and sdists")
    check_dist_parser.add_argument("dist", type=Path)
    set_parser = commands.add_parser("set-version", help="rewrite every version and sibling pin")
    set_parser.add_argument("version")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        if args.command == "version":
            print(workspace_version(root))
            return 0
        if args.command == "check":
            return _report(check_sources(root), "workspace metadata")
        if args.command == "check-dist":
            return _report(check_dist(args.dist, root), f"artifacts in {args.dist}")
        for path in set_version(args.version, root):
            print(f"wrote {path.relative_to(root)}")
        return _report(check_sources(root), "workspace metadata")
    except (ReleaseCheckError, InvalidVersion) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
