"""Protocol-only stdout, in a real subprocess: what reaches fd 1 and what reaches stderr."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import IO

PROBE = textwrap.dedent(
    """
    import asyncio, os, subprocess, sys
    from agentreel.agent_kit import protocol_streams, take_protocol_stdout

    out = take_protocol_stdout()
    print("print noise")                      # sys.stdout
    os.write(1, b"fd noise\\n")                 # the descriptor, as C code writes
    sys.__stdout__.write("dunder noise\\n"); sys.__stdout__.flush()
    subprocess.run([sys.executable, "-c", "print('child noise')"], check=True)

    async def main():
        reader, writer = await protocol_streams(sys.stdin.buffer, out)
        line = await reader.readline()
        writer.write(b'{"echo": ' + line.strip() + b'}\\n')
        await writer.drain()
        writer.close()

    asyncio.run(main())
    """
)


def run_probe(stdout: int | IO[bytes] = subprocess.PIPE) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", PROBE],
        input=b'{"jsonrpc": "2.0"}\n',
        stdout=stdout,
        stderr=subprocess.PIPE,
        check=True,
        timeout=60,
    )


def test_only_protocol_frames_reach_stdout_and_the_noise_goes_to_stderr() -> None:
    done = run_probe()
    assert done.stdout.splitlines() == [b'{"echo": {"jsonrpc": "2.0"}}']
    noise = done.stderr.decode().splitlines()
    for expected in ("print noise", "fd noise", "dunder noise", "child noise"):
        assert expected in noise


def test_a_regular_file_as_stdout_gets_the_frames_too(tmp_path: Path) -> None:
    target = tmp_path / "transcript.jsonl"
    with target.open("wb") as file:
        run_probe(stdout=file)
    assert json.loads(target.read_bytes()) == {"echo": {"jsonrpc": "2.0"}}


def test_importing_the_kit_for_stdout_loads_nothing_else() -> None:
    probe = (
        "import json, sys\n"
        "from agentreel.agent_kit import take_protocol_stdout\n"
        "names = [m for m in sys.modules if m.startswith(('agentreel.', 'msgspec', 'acp'))]\n"
        "print(json.dumps(sorted(names)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == ["agentreel.agent_kit", "agentreel.agent_kit._stdio"]


def test_every_kit_name_resolves_to_its_home_layer() -> None:
    from agentreel import agent_kit, llm, session

    for name in agent_kit.__all__:
        value = getattr(agent_kit, name)
        home = llm if hasattr(llm, name) else session if hasattr(session, name) else None
        if home is not None:  # one object, re-exported: no second copy in the kit
            assert value is getattr(home, name), name
