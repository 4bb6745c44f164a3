"""Agents run on another day (SPEC 13): ``AGENTREEL_FAKETIME`` puts libfaketime, started at
the given moment, into every agent's environment (``faketime_env``, the one owner that
``nox -s interop -- --faketime`` and record's trial replays use)."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentreel.snapshot_harness._faketime as faketime_module
from agentreel.snapshot_harness import (
    FAKETIME_ENV,
    FAKETIME_LIBRARY_ENV,
    FaketimeError,
    faketime_env,
)
from agentreel.snapshot_harness._environment import base_environment

LIBRARY = Path("/opt/faketime/libfaketime.so.1")


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(faketime_module, "faketime_library", lambda: LIBRARY)
    return LIBRARY


def test_faketime_env_preloads_the_library_from_the_moment_given(installed: Path) -> None:
    env = faketime_env("2026-12-31 23:59:59")
    assert env["LD_PRELOAD"] == str(installed)
    assert env["FAKETIME"] == "@2026-12-31 23:59:59"
    # The monotonic clock stays real (timeouts keep their length); a child goes on from
    # its parent's clock.
    assert env["DONT_FAKE_MONOTONIC"] == env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"
    assert env["FAKETIME_DONT_RESET"] == "1"
    # No semaphore handed from parent to child (which some agents' processes cannot open).
    assert env["FAKETIME_DISABLE_SHM"] == "1"
    assert faketime_env("2028-02-29")["FAKETIME"] == "@2028-02-29 00:00:00"
    assert faketime_env("2026-12-07", preload="/lib/other.so")["LD_PRELOAD"] == (
        f"{installed}:/lib/other.so"
    )


def test_the_agents_environment_runs_on_the_day_the_harness_is_given(
    installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "FAKETIME" not in base_environment(tmp_path)
    monkeypatch.setenv(FAKETIME_ENV, "2027-01-01T00:00:05")
    env = base_environment(tmp_path)
    assert env["FAKETIME"] == "@2027-01-01 00:00:05"
    assert env["LD_PRELOAD"] == str(installed)


def test_no_date_and_no_library_each_say_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(FaketimeError, match=r"'next friday' is no date; give one as 2026-12-07"):
        faketime_env("next friday")
    monkeypatch.setattr(faketime_module, "faketime_library", lambda: None)
    with pytest.raises(FaketimeError, match=r"not installed; install libfaketime: `apt-get"):
        faketime_env("2026-12-07")


def test_the_library_variable_is_preloaded_before_any_installed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # nox -s interop -- --faketime builds a stateless libfaketime and names it here: it,
    # not Debian's 0.9.10 (which shares a semaphore between processes), is preloaded.
    built = tmp_path / "libfaketime.so.1"
    built.write_bytes(b"\x7fELF")
    monkeypatch.setenv(FAKETIME_LIBRARY_ENV, str(built))
    assert faketime_module.faketime_library() == built
    assert faketime_env("2028-02-29")["LD_PRELOAD"] == str(built)


def test_a_library_variable_naming_no_file_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "gone" / "libfaketime.so.1"
    monkeypatch.setenv(FAKETIME_LIBRARY_ENV, str(missing))
    with pytest.raises(FaketimeError) as raised:
        faketime_env("2028-02-29")
    message = str(raised.value)
    assert f"AGENTREEL_FAKETIME_LIBRARY={missing}: no such file" in message
    assert "nox -s interop -- --faketime <date>` builds one" in message
    assert "unset AGENTREEL_FAKETIME_LIBRARY to use the installed libfaketime" in message
