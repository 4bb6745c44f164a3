"""``python -m agentreel.llm_proxy record|replay``: base URL and environment printed, the port
file written, and every log, fixture and report flushed on SIGTERM or stdin EOF."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import openai

from agentreel.llm.stub import StubServer
from agentreel.llm_replay import read_report

# conftest.py's proxy_cli fixture (test modules cannot import conftest under importlib mode).
ProxyCli = Callable[[list[str]], tuple["subprocess.Popen[bytes]", int]]


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
    weather_stub: StubServer, tmp_path: Path, proxy_cli: ProxyCli
) -> None:
    fixture = tmp_path / "fixture"
    process, port = proxy_cli(
        ["record", "--upstream", weather_stub.base_url, "--fixture", str(fixture)]
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
    process, port = proxy_cli(["replay", "--fixture", str(fixture), "--report", str(report)])
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
