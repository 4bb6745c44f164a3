"""Agents run on another day: libfaketime preloaded into the agent's process, its clock
started at a given moment and running on from there.

Which libfaketime: the one ``AGENTREEL_FAKETIME_LIBRARY`` names (``nox -s interop --
--faketime`` builds one *stateless*, ``-DFAKE_STATELESS``, and sets it), else the
installed one (Debian's ``faketime`` package and the like). A stateless build shares no
clock between processes: no semaphore, no ``/dev/shm``. Debian bookworm's 0.9.10 always
shares one (it ignores ``FAKETIME_DISABLE_SHM``) and hands each child its parent's
semaphore, which Claude Code's native CLI cannot open again and Codex's sandboxed commands
(``codex-linux-sandbox``, no ``/dev/shm``) cannot open at all: those agents fail under it.

One owner for it (SPEC 13, 15): ``nox -s interop -- --faketime "<date>"`` sets
``AGENTREEL_FAKETIME`` for ``agentreel replay``, and the harness's agent environment
(``_environment.base_environment``, built from nothing) adds ``faketime_env`` of it; a
caller building an agent's environment itself adds ``faketime_env(when)``. Only what
is started afresh with the variables is moved in time: a dynamically linked program (node,
Python, most agents). A statically linked one (Codex's musl binary) keeps the real clock,
as does an agent the fork server forks (it was started before). The monotonic clock stays
real (``DONT_FAKE_MONOTONIC``), so timeouts and pacing keep their length.
"""

from __future__ import annotations

import os
import shutil
from datetime import datetime
from pathlib import Path

from agentreel.snapshot_harness.exceptions import FaketimeError

__all__ = [
    "FAKETIME_ENV",
    "FAKETIME_LIBRARY_ENV",
    "faketime_env",
    "faketime_library",
    "faketime_start",
]

FAKETIME_ENV = "AGENTREEL_FAKETIME"
"""Set to a date (``2026-12-07``) or a moment (``2026-12-31 23:59:59``): every agent the
harness starts runs with its clock starting there."""

FAKETIME_LIBRARY_ENV = "AGENTREEL_FAKETIME_LIBRARY"
"""Set to a libfaketime shared library (``libfaketime.so.1``): preloaded instead of the
installed one. ``nox -s interop -- --faketime`` sets it to its stateless build."""

# Where Debian and Ubuntu (multiarch), Fedora and Homebrew put the library.
_LIBRARY_NAMES = ("libfaketime.so.1", "libfaketime.1.dylib")
_LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu/faketime",
    "/usr/lib/aarch64-linux-gnu/faketime",
    "/usr/lib/faketime",
    "/usr/lib64/faketime",
    "/usr/local/lib/faketime",
    "/opt/homebrew/lib/faketime",
)
_INSTALL = (
    "install libfaketime: `apt-get install faketime` (Debian, Ubuntu), `dnf install "
    "libfaketime` (Fedora) or `brew install libfaketime` (macOS)"
)


def faketime_library() -> Path | None:
    """libfaketime's shared library: the file ``AGENTREEL_FAKETIME_LIBRARY`` names
    (``FaketimeError`` when it is no file), else the installed one, else ``None``."""
    chosen = os.environ.get(FAKETIME_LIBRARY_ENV)
    if chosen:
        if not Path(chosen).is_file():
            raise FaketimeError(
                f"{FAKETIME_LIBRARY_ENV}={chosen}: no such file; point it at a libfaketime "
                "shared library (libfaketime.so.1; `nox -s interop -- --faketime <date>` "
                f"builds one under .nox/interop-faketime/), or unset {FAKETIME_LIBRARY_ENV} "
                "to use the installed libfaketime"
            )
        return Path(chosen)
    dirs = list(_LIBRARY_DIRS)
    binary = shutil.which("faketime")
    if binary is not None:
        prefix = Path(binary).resolve().parent.parent
        dirs += [str(prefix / "lib" / "faketime"), str(prefix / "lib")]
    for folder in dirs:
        for name in _LIBRARY_NAMES:
            candidate = Path(folder) / name
            if candidate.is_file():
                return candidate
    return None


def faketime_start(when: str) -> str:
    """``when`` (``2026-12-07``, ``2026-12-31 23:59:59``, ``2026-12-31T23:59:59``) as
    libfaketime's absolute start, ``@YYYY-MM-DD HH:MM:SS``; ``FaketimeError`` naming it
    when it is no date."""
    try:
        moment = datetime.fromisoformat(when.strip())
    except ValueError:
        raise FaketimeError(
            f"faketime: {when!r} is no date; give one as 2026-12-07 or '2026-12-31 23:59:59'"
        ) from None
    return f"@{moment:%Y-%m-%d %H:%M:%S}"


def faketime_env(when: str, *, preload: str | None = None) -> dict[str, str]:
    """What an agent's environment needs to run from ``when`` on: ``LD_PRELOAD`` (or, on
    macOS, ``DYLD_INSERT_LIBRARIES``) with libfaketime before ``preload`` (the
    environment's own, if any), ``FAKETIME``, ``DONT_FAKE_MONOTONIC`` and ``FAKETIME_DISABLE_SHM``.
    ``FaketimeError`` when libfaketime is not installed (naming how to install it),
    ``AGENTREEL_FAKETIME_LIBRARY`` names no file, or ``when`` is no date."""
    start = faketime_start(when)
    library = faketime_library()
    if library is None:
        raise FaketimeError(f"faketime {when!r}: libfaketime is not installed; {_INSTALL}")
    variable = "DYLD_INSERT_LIBRARIES" if library.suffix == ".dylib" else "LD_PRELOAD"
    env = {
        variable: f"{library}{os.pathsep}{preload}" if preload else str(library),
        "FAKETIME": start,
        "DONT_FAKE_MONOTONIC": "1",
        # libfaketime 0.9.10 (Debian 12) reads only this spelling of it.
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_DONT_RESET": "1",
        # No clock shared between an agent's processes through /dev/shm: libfaketime hands
        # each child its parent's semaphore, which Claude Code 2.1.318's native CLI cannot
        # open and Codex's sandboxed commands do not see, so they exit at start. Honoured by
        # an installed libfaketime after 0.9.10; Debian's 0.9.10 ignores it (those agents
        # fail there), and a stateless build (FAKETIME_LIBRARY_ENV) has no shm to disable.
        # Each process then starts at ``when`` itself.
        "FAKETIME_DISABLE_SHM": "1",
    }
    if variable == "DYLD_INSERT_LIBRARIES":
        env["DYLD_FORCE_FLAT_NAMESPACE"] = "1"
    return env
