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


def build_dir(root: Path) -> Path:
    """Where the build of this version lives (a new version builds afresh beside it)."""
    return root / ".nox" / "interop-faketime" / f"{SDIST}-{VERSION}-stateless"


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
