"""The stateless libfaketime ``nox -s interop -- --faketime`` builds
(``tools.faketime_build``): the pinned sdist is checked, and the library is made with
``FAKE_STATELESS`` (no semaphore, no ``/dev/shm``: Debian's 0.9.10 breaks Claude Code's
and Codex's children with them). The build itself (network, compiler) is not run here."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from tools import faketime_build


def test_a_download_that_is_not_the_pinned_release_is_refused_naming_both_digests(
    tmp_path: Path,
) -> None:
    sdist = tmp_path / "libfaketime-3.0.1.tar.gz"
    sdist.write_bytes(b"not the release")
    with pytest.raises(ValueError, match="expected") as raised:
        faketime_build.check_sdist(sdist)
    message = str(raised.value)
    assert str(sdist) in message
    assert hashlib.sha256(b"not the release").hexdigest() in message
    assert faketime_build.SHA256 in message
    assert "delete it and run again" in message


def test_the_library_is_made_stateless_from_the_vendored_upstream_source(
    tmp_path: Path,
) -> None:
    # A stand-in sdist with the layout of python-libfaketime's.
    sdist = tmp_path / "libfaketime-3.0.1.tar.gz"
    c_source = f"int clock_nanosleep(...)\n{{\n{faketime_build.MONOTONIC_SLEEP_FIX[0]}\n}}\n"
    with tarfile.open(sdist, "w:gz") as archive:
        for name, data in (("Makefile", b"all:\n"), ("libfaketime.c", c_source.encode())):
            info = tarfile.TarInfo(f"libfaketime-3.0.1/libfaketime/vendor/libfaketime/src/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    source = faketime_build.unpack(sdist, tmp_path / "unpacked")
    assert (source / "src" / "Makefile").read_bytes() == b"all:\n"
    # A real monotonic clock's absolute deadline is passed on untouched (else EINVAL).
    faketime_build.fix_source(source)
    fixed = (source / "src" / "libfaketime.c").read_text()
    assert "else if (clock_id == CLOCK_MONOTONIC && fake_monotonic_clock)" in fixed
    with pytest.raises(ValueError, match=r"libfaketime\.c: clock_nanosleep's CLOCK_MONOTONIC"):
        faketime_build.fix_source(source)  # already fixed: not there as 3.0.1 has it
    command = faketime_build.make_command(source, platform="linux")
    assert command[:3] == ["make", "-C", str(source / "src")]
    assert "FAKETIME_COMPILE_CFLAGS=-DFAKE_STATELESS" in command
    assert command[-1] == "libfaketime.so.1"
    assert faketime_build.make_command(source, platform="darwin")[3:5] == ["-f", "Makefile.OSX"]
    assert faketime_build.download_command(tmp_path)[-1] == "libfaketime==3.0.1"
