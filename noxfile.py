"""Everything agentreel runs: tests, lint, build; replay, record, refresh and bench as they land.

Packages are discovered from ``packages/*/pyproject.toml``: adding a package is creating its
folder. ``nox -s tests`` is the README's test command; ``.ci/run`` runs it and ``lint``.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import nox

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["tests", "lint"]

ROOT = Path(__file__).parent
PACKAGES_DIR = ROOT / "packages"
PYTHON = "3.11"
# The bench's peers: vcrpy patches the legacy httpx (openai 3.x uses httpx2). Lint
# installs them too so mypy can check bench/.
BENCH_DEPS = ("vcrpy", "openai", "httpx")


def _package_dirs() -> list[Path]:
    return sorted(p.parent for p in PACKAGES_DIR.glob("*/pyproject.toml"))


def _test_group(package_dir: Path) -> list[str]:
    pyproject = nox.project.load_toml(package_dir / "pyproject.toml")
    return list(nox.project.dependency_groups(pyproject, "test"))


def _extras(package_dir: Path) -> str:
    """``[a,b]`` with every optional extra, so tests can exercise the adapters."""
    with (package_dir / "pyproject.toml").open("rb") as f:
        extras = tomllib.load(f).get("project", {}).get("optional-dependencies", {})
    return f"[{','.join(sorted(extras))}]" if extras else ""


def _install_workspace(session: nox.Session) -> None:
    """Every package editable (with extras and test groups) into the session's venv."""
    args: list[str] = []
    groups: set[str] = set()
    for package_dir in _package_dirs():
        args += ["-e", f"{package_dir}{_extras(package_dir)}"]
        groups.update(_test_group(package_dir))
    session.install(*args, *sorted(groups))


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Every package's tests in one venv with all packages editable, in parallel (xdist).

    Extra arguments go to pytest: ``nox -s tests -- -k fork -x``.
    """
    _install_workspace(session)
    targets = [str(p / "tests") for p in _package_dirs() if (p / "tests").is_dir()]
    if (ROOT / "fixtures").is_dir() and any((ROOT / "fixtures").glob("*/scenario.toml")):
        targets.append("fixtures")
    session.run("pytest", "-n", "auto", *(session.posargs or targets))


def _make_isolated_tests_session(package_dir: Path) -> None:
    name = package_dir.name

    @nox.session(name=f"tests-{name}", python=PYTHON, default=False, tags=["isolated"])
    def isolated_tests(session: nox.Session) -> None:
        session.install(f"{package_dir}{_extras(package_dir)}", *_test_group(package_dir))
        session.run("pytest", "-n", "auto", str(package_dir / "tests"), *session.posargs)

    isolated_tests.__doc__ = (
        f"agentreel-{name.replace('_', '-')} tests alone in a fresh venv holding only it and its "
        "declared dependencies, so an undeclared sibling import fails."
    )


for _package_dir in _package_dirs():
    _make_isolated_tests_session(_package_dir)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, mypy strict over every package, and the layer contract."""
    _install_workspace(session)
    session.install("ruff", "mypy", "import-linter", "nox", *BENCH_DEPS)
    session.run("ruff", "check", *session.posargs, ".")
    session.run("ruff", "format", "--check", ".")
    sources = [str(p / "src") for p in _package_dirs()] + [
        str(p / "tests") for p in _package_dirs() if (p / "tests").is_dir()
    ]
    session.run("mypy", *sources, "bench", "noxfile.py")
    session.run("lint-imports")


FIXTURES = ROOT / "fixtures"


@nox.session(python=PYTHON)
def replay(session: nox.Session) -> None:
    """The main job: replay every scenario in fixtures/ keylessly and diff with its goldens.

    No key and no network: the agent gets the replay provider and proxies aimed at a closed
    port. Name scenarios to run only those: ``nox -s replay -- plain-turn``.
    """
    _install_workspace(session)
    session.run("agentreel", "replay", "--fixtures", str(FIXTURES), *session.posargs)


@nox.session(python=PYTHON, default=False)
def record(session: nox.Session) -> None:
    """Record scenarios: ``nox -s record -- <scenario> [--provider openai --model NAME]``.

    Without ``--provider`` the scenario's ``[record]`` table decides (``stub``: the stub
    model server with the scenario's rules, through the real openai adapter). A real
    provider reads its key from your environment; a recording holding it is refused.
    """
    if not session.posargs:
        session.error("name what to record: nox -s record -- <scenario> [--provider ...]")
    _install_workspace(session)
    session.run("agentreel", "record", "--fixtures", str(FIXTURES), *session.posargs)


@nox.session(python=PYTHON, default=False)
def refresh(session: nox.Session) -> None:
    """Replay scenarios keylessly and rewrite their goldens (recordings untouched).

    For an intended change in what the agent prints or logs while its model calls stay
    the same: ``nox -s refresh`` (all) or ``nox -s refresh -- <scenario>``.
    """
    _install_workspace(session)
    session.run("agentreel", "refresh", "--fixtures", str(FIXTURES), *session.posargs)


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Performance as ratios measured side by side in one run (SPEC 9); not a test.

    Prints a table and writes ``bench/results.json``. Arguments go to ``bench/run.py``:
    ``nox -s bench -- --only replay --quick``.
    """
    _install_workspace(session)
    session.install(*BENCH_DEPS)
    session.run("python", "-m", "bench.run", *session.posargs)


@nox.session(python=PYTHON, default=False)
def build(session: nox.Session) -> None:
    """Build every package's sdist and wheel with hatch, then install each wheel alone.

    Each wheel goes into a fresh venv with only its declared dependencies and is
    imported there: the proof that another project can install any one package.
    """
    session.install("hatch", "uv")
    dist = ROOT / "dist"
    if dist.exists():
        for stale in dist.iterdir():
            stale.unlink()
    # hatch keeps build environments in its data dir; a private one per run cannot be
    # left half-made by an earlier interrupted build.
    hatch_data = ROOT / ".nox" / "hatch-data"
    shutil.rmtree(hatch_data, ignore_errors=True)
    for package_dir in _package_dirs():
        with session.chdir(package_dir):
            session.run(
                "hatch",
                "build",
                "-t",
                "sdist",
                "-t",
                "wheel",
                str(dist),
                # nox points uv at its own venv; unset that so hatch syncs its build env.
                env={
                    "HATCH_DATA_DIR": str(hatch_data),
                    "VIRTUAL_ENV": None,
                    "UV_PROJECT_ENVIRONMENT": None,
                    "UV_PYTHON": None,
                },
            )
    for package_dir in _package_dirs():
        module = f"agentreel.{package_dir.name}"
        dist_name = f"agentreel_{package_dir.name}"
        wheels = sorted(dist.glob(f"{dist_name}-*.whl"))
        if not wheels:
            session.error(f"no wheel for {dist_name} in {dist}")
        venv = ROOT / ".nox" / "build-check" / package_dir.name
        session.run("uv", "venv", "--quiet", "--python", PYTHON, str(venv))
        python = str(venv / "bin" / "python")
        session.run("uv", "pip", "install", "--quiet", "--python", python, str(wheels[-1]))
        session.run(
            python, "-c", f"import {module}; print('{module}', 'imports alone')", external=True
        )
