"""A run's temp folder goes away even when the agent left a process writing into it.

Codex's sandbox child outlives the agent in a session of its own, so killing the agent's
process group does not reach it; it kept writing into the run's folder, and removing the
folder failed with an unhandled ``OSError: Directory not empty`` that the CLI reported as
a bug in agentreel. Here a real agent process (a command scenario's script) starts a
detached writer that creates files in its working directory without pause.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from agentreel.snapshot_harness import load_scenario, run_scenario

WRITER = """
import itertools, os, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
end = time.monotonic() + 120  # never outlives a broken test by long
for number in itertools.count():
    if time.monotonic() > end:
        break
    try:
        with open(f"burst-{number}.txt", "w") as file:
            file.write("x")
    except OSError:
        pass
"""

AGENT = """
import subprocess, sys, time
from pathlib import Path
pid_file = Path(sys.argv[1])
subprocess.Popen(
    [sys.executable, sys.argv[2], str(pid_file)],
    start_new_session=True,  # detached: not in the agent's process group
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
while not pid_file.exists() or not pid_file.read_text():
    time.sleep(0.01)
while len(list(Path.cwd().glob("burst-*"))) < 50:
    time.sleep(0.01)
print("done")
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped by its parent, init here) is no longer running.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the writer through /proc")
def test_a_detached_writer_in_the_run_folder_is_stopped_and_the_folder_removed(
    tmp_path: Path,
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    writer_script = tmp_path / "writer.py"
    writer_script.write_text(WRITER)
    pid_file = tmp_path / "writer.pid"
    directory = tmp_path / "detached"
    directory.mkdir()
    command = [sys.executable, str(agent), str(pid_file), str(writer_script)]
    (directory / "scenario.toml").write_text(
        f'protocol = "command"\nagent = {json.dumps(command)}\n'
        '[[steps]]\ntype = "prompt"\ntext = "go"\n'
    )
    before = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("agentreel-detached-*"))
    try:
        result = run_scenario(load_scenario(directory), "replay")
        assert b"done" in result.transcript
        writer = int(pid_file.read_text())
        deadline = time.monotonic() + 10
        while _alive(writer) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(writer), "the detached writer was left running"
        assert not result.run_dir.exists()
        left = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("agentreel-detached-*"))
        assert left - before == set()  # neither the run folder nor an empty drift folder
    finally:
        if pid_file.exists() and pid_file.read_text():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
