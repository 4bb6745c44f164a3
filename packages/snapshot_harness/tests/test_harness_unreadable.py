"""A fixture file that cannot be read is a named failure of its scenario; the run goes on.

Run as a non-root user would meet it (the ``unprivileged`` fixture: CI runs as root, and
root reads a mode-000 file), through the real CLI and the real pytest plugin as
subprocesses, next to a healthy scenario that must still pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Breakage = Callable[[Path], str]


def _no_permission(path: Path) -> str:
    path.chmod(0)
    return "permission denied (mode ----------"


def _directory_instead(path: Path) -> str:
    path.unlink()
    path.mkdir()
    (path / "stray").write_text("x")
    return "a directory is where the file belongs"


def _dangling_symlink(path: Path) -> str:
    path.unlink()
    path.symlink_to(path.with_name("gone.jsonl"))
    return "it is a dangling symlink (it points to"


BREAKAGES = {
    "session.jsonl-permission": ("session.jsonl", _no_permission),
    "transcript-directory": ("golden/transcript.jsonl", _directory_instead),
    "session.jsonl-dangling-symlink": ("session.jsonl", _dangling_symlink),
    "scenario.toml-permission": ("scenario.toml", _no_permission),
}


@pytest.fixture
def two_scenarios(recorded_echo_turn: Path) -> tuple[Path, Path]:
    """``alpha`` (to be broken) and ``beta`` (healthy), recorded, side by side."""
    fixtures = recorded_echo_turn.parent
    alpha, beta = fixtures / "alpha", fixtures / "beta"
    shutil.copytree(recorded_echo_turn, alpha)
    shutil.copytree(recorded_echo_turn, beta)
    shutil.rmtree(recorded_echo_turn)
    return alpha, beta


def _run(
    command: list[str], cwd: Path, preexec: Callable[[], None] | None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CI": "1"}
    return subprocess.run(
        command,
        cwd=cwd,
        env=env,
        preexec_fn=preexec,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("case", list(BREAKAGES))
def test_cli_names_the_unreadable_file_and_runs_every_other_scenario(
    two_scenarios: tuple[Path, Path],
    unprivileged: Callable[[], None] | None,
    case: str,
) -> None:
    alpha, _ = two_scenarios
    target, breakage = BREAKAGES[case]
    path = alpha / target
    problem = breakage(path)
    fixtures = alpha.parent

    done = _run(
        [sys.executable, "-m", "agentreel.snapshot_harness", "replay", "--fixtures", str(fixtures)],
        fixtures,
        unprivileged,
    )
    output = done.stdout
    assert done.returncode == 1, output + done.stderr
    assert "FAIL  alpha" in output
    assert "PASS  beta" in output
    assert output.rstrip().splitlines()[-1].startswith("1 passed, 1 failed in ")
    assert f"alpha: cannot read {path}: {problem}" in output
    assert "Traceback" not in output + done.stderr


def test_pytest_fails_only_the_item_whose_file_cannot_be_read(
    two_scenarios: tuple[Path, Path],
    unprivileged: Callable[[], None] | None,
) -> None:
    alpha, _ = two_scenarios
    path = alpha / "session.jsonl"
    problem = _no_permission(path)
    fixtures = alpha.parent

    done = _run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(fixtures)],
        fixtures,
        unprivileged,
    )
    output = done.stdout
    assert done.returncode == 1, output + done.stderr
    assert "1 failed, 1 passed" in output
    assert f"alpha: cannot read {path}: {problem}" in output
    assert "Traceback" not in output
