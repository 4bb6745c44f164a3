"""``python -m agentreel.llm_proxy record|replay``: base URL and environment printed, the port
file written, and every log, fixture and report flushed on SIGTERM or stdin EOF."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import openai

from agentreel.llm.stub import StubServer
from agentreel.llm_replay import read_report


def _start(args: list[str], tmp_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    port_file = tmp_path / "port"
    port_file.unlink(missing_ok=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "agentreel.llm_proxy", *args, "--port-file", str(port_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "OPENAI_API_KEY": ""},
    )
    deadline = time.monotonic() + 60
    while not port_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            _, err = process.communicate(timeout=10)
            raise AssertionError(f"the proxy did not start: {err.decode()}")
        time.sleep(0.05)
    return process, int(port_file.read_text())


def _ask(port: int) -> str:
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-cli-test-key-1", max_retries=0
    )
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    client.close()
    return text


def test_record_on_sigterm_and_replay_on_stdin_eof(
    weather_stub: StubServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "fixture"
    process, port = _start(
        ["record", "--upstream", weather_stub.base_url, "--fixture", str(fixture)], tmp_path
    )
    assert _ask(port) == "Hello! How can I help?"
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[0] == f"agentreel proxy (record) listening on http://127.0.0.1:{port}"
    assert f"export OPENAI_BASE_URL=http://127.0.0.1:{port}/v1" in lines
    assert f"export ANTHROPIC_BASE_URL=http://127.0.0.1:{port}" in lines
    assert (fixture / "session.jsonl").is_file()
    weather_stub.stop()

    report = tmp_path / "report.json"
    process, port = _start(["replay", "--fixture", str(fixture), "--report", str(report)], tmp_path)
    assert _ask(port) == "Hello! How can I help?"
    _, err = process.communicate(timeout=30)  # closes stdin: end of input, flush and exit
    assert process.returncode == 0, err.decode()
    (script,) = read_report(report).scripts
    assert (script.calls, script.consumed) == (1, 1)


def test_usage_errors_exit_2_naming_the_problem(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    done = subprocess.run(
        [sys.executable, "-m", "agentreel.llm_proxy", "replay", "--fixture", str(missing)],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 2
    assert str(missing) in done.stderr.decode()
    assert "does not exist" in done.stderr.decode()
