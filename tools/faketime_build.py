"""A stateless libfaketime for ``nox -s interop -- --faketime``: built from upstream's C
source as the PyPI sdist ``libfaketime`` (python-libfaketime) vendors it, pinned and
checked by sha256, with upstream's default flags plus ``-DFAKE_STATELESS``.

Why not Debian's ``faketime``: bookworm's libfaketime 0.9.10 keeps a clock shared between
an agent's processes in ``/dev/shm`` behind a semaphore that each child inherits
(``FAKETIME_SHARED``) and ignores ``FAKETIME_DISABLE_SHM``; Claude Code's native CLI cannot
open that semaphore again (``sem_open failed … File exists``, ``session/new`` -32603) and
Codex's sandboxed commands (``codex-linux-sandbox``) cannot see ``/dev/shm`` at all. Built
with ``FAKE_STATELESS``, libfaketime never calls ``ft_shm_init()``: each process computes
its time from ``FAKETIME`` alone. Needs a C compiler and ``make``.

One fix to upstream's source (``MONOTONIC_SLEEP_FIX``): with ``DONT_FAKE_MONOTONIC``, its
``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, …)`` still shifts the (real) deadline by
the faked start time, gets a negative one and fails with EINVAL. Python >= 3.11's
``time.sleep`` sleeps that way, so ``subprocess`` waits with a timeout raised ``OSError:
[Errno 22] Invalid argument`` at random (Mistral Vibe's git status in its system prompt;
Debian's 0.9.10 has the same bug). Fixed, a real monotonic deadline is passed on as is.

Only the standard library, so the noxfile imports it; the noxfile runs the commands.
"""

from __future__ import annotations

import hashlib
import sys
import tarfile
from pathlib import Path

SDIST = "libfaketime"
VERSION = "3.0.1"
SHA256 = "49c2b06250bd5a1206efe5ecfdc575850517081b50b42c6c58718be1a4a09fbd"
"""Of ``libfaketime-3.0.1.tar.gz`` on PyPI."""
VENDORED = Path("libfaketime", "vendor", "libfaketime")
"""Upstream libfaketime's source inside the sdist's top folder."""
STATELESS_CFLAGS = "-DFAKE_STATELESS"
"""Added to upstream's default flags through its Makefile's ``FAKETIME_COMPILE_CFLAGS``."""
BUILD = "stateless-2"
"""Names the build folder: a change of flags or of the source fix builds afresh."""
_MONOTONIC_SLEEP = """      else if (clock_id == CLOCK_MONOTONIC)
      {
        timespecadd(&ftpl_starttime.mon, &tdiff, &real_req);"""
MONOTONIC_SLEEP_FIX = (
    _MONOTONIC_SLEEP,
    _MONOTONIC_SLEEP.replace(
        "(clock_id == CLOCK_MONOTONIC)", "(clock_id == CLOCK_MONOTONIC && fake_monotonic_clock)"
    ),
)
"""In ``src/libfaketime.c``'s ``clock_nanosleep``: an absolute deadline on a real
monotonic clock falls through to "leave untouched"."""


def build_dir(root: Path) -> Path:
    """Where the build of this version lives (a new version builds afresh beside it)."""
    return root / ".nox" / "interop-faketime" / f"{SDIST}-{VERSION}-{BUILD}"


def library_name(platform: str = sys.platform) -> str:
    return "libfaketime.1.dylib" if platform == "darwin" else "libfaketime.so.1"


def download_command(into: Path) -> list[str]:
    """pip (through uvx) fetching the pinned sdist, source only, into ``into``."""
    return [
        "uvx",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--dest",
        str(into),
        f"{SDIST}=={VERSION}",
    ]


def check_sdist(sdist: Path) -> None:
    """``ValueError`` naming ``sdist``, both digests and what to do when it is not the
    pinned release."""
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SHA256:
        raise ValueError(
            f"{sdist}: sha256 {digest}, expected {SHA256} ({SDIST} {VERSION} on PyPI); "
            "the download is not the pinned release: delete it and run again, or check "
            "your package index"
        )


def unpack(sdist: Path, into: Path) -> Path:
    """Unpacks ``sdist`` into ``into``; returns upstream libfaketime's source folder."""
    with tarfile.open(sdist) as archive:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4+, 3.12
            archive.extractall(into, filter="data")
        else:
            for member in archive.getmembers():
                target = (into / member.name).resolve()
                if not target.is_relative_to(into.resolve()):
                    raise ValueError(f"{sdist}: {member.name} would unpack outside {into}")
            archive.extractall(into)
    return into / f"{SDIST}-{VERSION}" / VENDORED


def fix_source(source: Path) -> None:
    """Applies ``MONOTONIC_SLEEP_FIX`` to ``source``'s ``src/libfaketime.c``; ``ValueError``
    naming the file when the code it fixes is not there exactly once."""
    c_file = source / "src" / "libfaketime.c"
    old, new = MONOTONIC_SLEEP_FIX
    text = c_file.read_text()
    if text.count(old) != 1:
        raise ValueError(
            f"{c_file}: clock_nanosleep's CLOCK_MONOTONIC branch is not there once as "
            f"{SDIST} {VERSION} has it; update MONOTONIC_SLEEP_FIX in tools/faketime_build.py"
        )
    c_file.write_text(text.replace(old, new))


def make_command(source: Path, platform: str = sys.platform) -> list[str]:
    """``make`` of just the preloaded library, upstream's flags plus ``FAKE_STATELESS``."""
    makefile = ["-f", "Makefile.OSX"] if platform == "darwin" else []
    return [
        "make",
        "-C",
        str(source / "src"),
        *makefile,
        f"FAKETIME_COMPILE_CFLAGS={STATELESS_CFLAGS}",
        library_name(platform),
    ]
