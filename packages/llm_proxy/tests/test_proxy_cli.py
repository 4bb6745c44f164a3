"""``python -m agentreel.llm_proxy record|replay``: base URL and environment printed (in
replay a dummy key too), the port file written, every log, fixture and report flushed on
SIGTERM or stdin EOF, and exit status 1 when a replay failed."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import (
    DUMMY_KEY,
    KEY_VARIABLES,
    PARENT_HEADER,
    SESSION_HEADER,
    SPAWN_INDEX_HEADER,
    start_proxy,
)
from agentreel.llm_replay import read_report
from agentreel.session import RERECORD_COMMAND_ENV

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
    assert not [line for line in lines if "_API_KEY=" in line]  # record: the caller's own key
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


@pytest.mark.parametrize(
    ("capture", "problem"),
    [("agent-id", "is not TOKEN=REGEX"), ("uuid=x", "built-in normalizer token")],
)
def test_a_bad_capture_is_a_usage_error_naming_it(
    tmp_path: Path, capture: str, problem: str
) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "agentreel.llm_proxy", "replay", "--fixture", str(tmp_path)),
            *("--capture", capture),
        ],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"argument --capture: '{capture}'" in done.stderr.decode()
    assert problem in done.stderr.decode()


def _exports(process: subprocess.Popen[bytes]) -> dict[str, str]:
    """The ``export NAME=value`` lines the proxy printed on start (read while it runs)."""
    assert process.stdout is not None
    exports: dict[str, str] = {}
    line = process.stdout.readline().decode()
    assert line.startswith("agentreel proxy (replay) listening on "), line
    for _ in range(4 + len(KEY_VARIABLES)):  # the three base URLs, the proxy URL, the keys
        line = process.stdout.readline().decode().strip()
        name, _, value = line.removeprefix("export ").partition("=")
        exports[name] = value
    return exports


async def _record_hello(stub: StubServer, fixture: Path) -> None:
    """A one-call fixture ("hello", not streamed) recorded in process through the stub."""
    async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
        client = openai.AsyncOpenAI(
            base_url=proxy.openai_base_url, api_key="sk-cli-test-key-2", max_retries=0
        )
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}]
        )
        await client.close()


@pytest.mark.parametrize("run", ["nothing asked", "drifted call"])
def test_a_failed_replay_exits_1_with_the_report_written(
    run: str, weather_stub: StubServer, tmp_path: Path, proxy_cli: ProxyCli
) -> None:
    """A replay whose recorded call is never made, or which meets a call that differs from its
    recording, exits 1 naming the report — written all the same. The printed dummy key is what
    an SDK that insists on a key starts with."""
    fixture = tmp_path / "fixture"
    asyncio.run(_record_hello(weather_stub, fixture))
    weather_stub.stop()
    report = tmp_path / "report.json"
    process, _ = proxy_cli(["replay", "--fixture", str(fixture), "--report", str(report)])
    exports = _exports(process)
    keys = {name: exports[name] for name in KEY_VARIABLES}
    assert keys == dict.fromkeys(KEY_VARIABLES, DUMMY_KEY)
    if run == "drifted call":
        client = openai.OpenAI(
            base_url=exports["OPENAI_BASE_URL"], api_key=exports["OPENAI_API_KEY"], max_retries=0
        )
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "hello, again"}],
            )
        client.close()
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1, err.decode()
    last = err.decode().splitlines()[-1]
    assert last.startswith(f"agentreel proxy: replay of {fixture} failed: "), last
    assert last.endswith(f"the report is {report}"), last
    written = read_report(report)
    assert [e.type for e in written.errors] == (
        ["RequestDriftError"] if run == "drifted call" else []
    )
    (script,) = written.scripts
    # A drifted call still consumes its recorded call (it was bound, then refused).
    assert (script.calls, script.consumed) == (1, 1 if run == "drifted call" else 0)


@pytest.mark.parametrize("target", ["--fixture", "--sessions-root"])
def test_a_record_run_that_received_no_call_exits_1_and_writes_nothing(
    target: str, weather_stub: StubServer, tmp_path: Path, proxy_cli: ProxyCli
) -> None:
    destination = tmp_path / "recorded"
    process, _port = proxy_cli(
        ["record", "--upstream", weather_stub.base_url, target, str(destination)]
    )
    process.send_signal(signal.SIGTERM)  # stopped before any agent called it
    # Closing waits for the provider SDKs' import (minutes on a loaded 2-core machine).
    _, err = process.communicate(timeout=240)
    assert process.returncode == 1, err.decode()
    reasons = [line for line in err.decode().splitlines() if line.startswith("agentreel proxy:")]
    assert len(reasons) == 1, err.decode()
    assert "no model call reached the proxy, so nothing was written" in reasons[0]
    assert not destination.exists() or not any(destination.iterdir())


def test_a_record_run_that_received_no_call_keeps_the_earlier_fixture(
    weather_stub: StubServer, tmp_path: Path, proxy_cli: ProxyCli
) -> None:
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "session.jsonl").write_text("the earlier recording\n")
    process, _port = proxy_cli(
        ["record", "--upstream", weather_stub.base_url, "--fixture", str(fixture)]
    )
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=240)
    assert process.returncode == 1, err.decode()
    assert (fixture / "session.jsonl").read_text() == "the earlier recording\n"


@pytest.mark.parametrize("hint", ["unset", "set"])
def test_a_standalone_replay_names_the_proxys_own_record_command(
    hint: str,
    weather_stub: StubServer,
    tmp_path: Path,
    proxy_cli: ProxyCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user of the standalone proxy re-records with ``agentreel proxy record``, with their
    own ``--fixture``, ``--cwd`` and ``--mask`` — not ``agentreel record <folder>``, a
    harness command they may not have. ``$AGENTREEL_RERECORD_COMMAND`` still wins."""
    fixture = tmp_path / "fixtures" / "mine"
    workdir = tmp_path / "work dir"
    workdir.mkdir()
    asyncio.run(_record_hello(weather_stub, fixture))
    weather_stub.stop()
    if hint == "set":
        monkeypatch.setenv(RERECORD_COMMAND_ENV, "make record-{scenario}")
    else:
        monkeypatch.delenv(RERECORD_COMMAND_ENV, raising=False)
    args = ["replay", "--fixture", str(fixture), "--cwd", str(workdir), "--mask", r"id-\d+"]
    process, _ = proxy_cli(args)
    exports = _exports(process)
    client = openai.OpenAI(
        base_url=exports["OPENAI_BASE_URL"], api_key=exports["OPENAI_API_KEY"], max_retries=0
    )
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello, again"}]
        )
    client.close()
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1, err.decode()
    expected = (
        f"agentreel proxy record --upstream URL --fixture {fixture} "
        f"--cwd '{workdir}' --mask 'id-\\d+'"
        if hint == "unset"
        else "make record-mine"
    )
    assert expected in str(raised.value)  # the client's error names it
    assert expected in err.decode()  # and so does the proxy's own stderr
    assert "agentreel record " not in str(raised.value) + err.decode()


@pytest.mark.parametrize("sent", ["parent only", "parent and spawn index"])
def test_a_child_numbered_by_arrival_is_named_once_at_the_end_with_the_header_to_send(
    sent: str, weather_stub: StubServer, tmp_path: Path, proxy_cli: ProxyCli
) -> None:
    """A child whose header names its parent but not its spawn index, with no delegating
    call of the parent to number it by, is numbered by arrival: the record command still
    succeeds, and its output ends by naming the child, its parent, the fixture and the
    header to send — once. With the spawn index sent, no such line."""
    fixture = tmp_path / "fixture"
    process, port = proxy_cli(
        ["record", "--upstream", weather_stub.base_url, "--fixture", str(fixture)]
    )
    child_headers = {SESSION_HEADER: "child-1", PARENT_HEADER: "parent-1"}
    if sent == "parent and spawn index":
        child_headers[SPAWN_INDEX_HEADER] = "0"
    for headers in ({SESSION_HEADER: "parent-1"}, child_headers):
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="sk-cli-test-key-3",
            max_retries=0,
            default_headers=headers,
        )
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])
        client.close()
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=240)
    text = err.decode()
    assert process.returncode == 0, text
    assert (fixture / "session.1.jsonl").is_file()
    guesses = [line for line in text.splitlines() if "numbered by arrival" in line]
    if sent == "parent and spawn index":
        assert guesses == [], text
        assert SPAWN_INDEX_HEADER not in text
        return
    (guess,) = guesses
    assert guess.startswith(f"agentreel proxy: warning: record (fixture {fixture}): "), guess
    assert "session.1.jsonl" in guess  # the child, as the fixture names it
    assert "'child-1'" in guess
    assert "parent 'parent-1'" in guess
    assert "its parent (session.jsonl," in guess
    assert f"the header {SPAWN_INDEX_HEADER}: N" in guess
    assert "The recording is kept and replays as recorded" in guess
    last = text.splitlines()[-1]
    assert "the recording is written and valid (exit status 0)" in last, text


def test_the_record_command_carries_every_record_setting_as_typed() -> None:
    """Each replay setting that applies to record (``--mask``, ``--capture``: flags built
    from ``ReplaySettings``) goes into the re-record command as the user typed it; a
    replay-only one (``--partial-lane``) does not."""
    from agentreel.llm_proxy._cli import _parser, _record_command

    args = _parser().parse_args(
        [
            *("replay", "--fixture", "fixtures/mine", "--mask", "id-[0-9]+"),
            *("--capture", "agent-id=id=([0-9]+)", "--partial-lane", "title"),
        ]
    )
    assert _record_command(args) == (
        "agentreel proxy record --upstream URL --fixture fixtures/{scenario} "
        "--mask 'id-[0-9]+' --capture 'agent-id=id=([0-9]+)'"
    )
