"""End-to-end runs of the fake agent: record → replay, and every failure path.

The fake agent (harness_fake_agent.py) is a real ACP subprocess using agentreel's llm and
session packages; the replay runs go through the real replay provider.
"""

from __future__ import annotations

import errno
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentreel.session import refresh_command, rerecord_command
from agentreel.snapshot_harness import (
    AgentCrashError,
    AgentOutputError,
    AgentTimeoutError,
    FixtureInventoryError,
    GoldenMismatchError,
    RecordError,
    ReplayConsumptionError,
    ScenarioFilesError,
    SecretLeakError,
    StepError,
    check_scenario,
    load_scenario,
    run_scenario,
)

pytestmark = pytest.mark.slow
FAKE_AGENT = Path(__file__).with_name("harness_fake_agent.py")
MakeScenario = Callable[..., Path]
# The one fallback a test here provokes on purpose (an agent command that is no program).
EXPECTED_FALLBACK = "not started as a Python program"


@pytest.fixture(params=["spawn", "fork"])
def agent_start(request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture) -> Iterator[str]:
    """Every test here twice: agent spawned, and forked by the fork server — which must
    really fork (a fallback to spawning would make the second run prove nothing)."""
    yield request.param
    if request.param == "fork":
        fallbacks = [
            record.getMessage()
            for record in caplog.records
            if "fork server not used" in record.getMessage()
        ]
        assert all(EXPECTED_FALLBACK in message for message in fallbacks), fallbacks


def recorded(make_scenario: MakeScenario, name: str = "echo-turn", **kwargs: object) -> Path:
    directory = make_scenario(name, **kwargs)
    check_scenario(directory, "record")
    return directory


def test_record_then_replay_passes_and_writes_the_layout(make_scenario: MakeScenario) -> None:
    directory = recorded(make_scenario)
    assert sorted(p.name for p in directory.iterdir()) == [
        "golden",
        "scenario.toml",
        "session.jsonl",
    ]
    assert sorted(p.name for p in (directory / "golden").iterdir()) == [
        "session.jsonl",
        "transcript.jsonl",
    ]
    transcript = (directory / "golden" / "transcript.jsonl").read_text()
    assert '"sessionId":"{{session:main}}"' in transcript
    assert "echo: " in transcript
    recording = (directory / "session.jsonl").read_text()
    assert '"cwd":"{{cwd}}"' in recording
    assert "/cwd" not in recording  # the live cwd never lands in a recording
    outcome = check_scenario(directory, "replay")
    assert outcome.sessions == 1
    assert outcome.result is not None
    assert outcome.result.replay_report is not None
    assert outcome.result.replay_report.ok


def test_run_result_holds_raw_stdout_logs_and_exit_code(
    make_scenario: MakeScenario, recorded_echo_turn: Path, agent_start: str
) -> None:
    directory = recorded_echo_turn
    result = run_scenario(load_scenario(directory), "replay")
    assert result.started_by == agent_start
    assert result.fork_fallback is None
    assert result.exit_code == 0
    lines = result.transcript.splitlines()
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in lines)
    assert str(result.cwd).encode() not in result.transcript  # cwd only in session/new params
    assert [log.header.parent_session for log in result.session_logs] == [None]
    assert result.stop_reasons == ["end_turn"]


def test_raw_logs_are_kept_for_recordings_only(
    make_scenario: MakeScenario, recorded_echo_turn: Path
) -> None:
    """A replay holds no second (raw) copy of its logs unless asked (SPEC 9 memory)."""
    scenario = load_scenario(recorded_echo_turn)
    assert run_scenario(scenario, "replay").session_log_bytes == []
    kept = run_scenario(scenario, "replay", keep_raw_logs=True)
    assert len(kept.session_log_bytes) == len(kept.session_logs) == 1
    header = json.loads(kept.session_log_bytes[0].split(b"\n", 1)[0])
    assert header["id"] == kept.session_logs[0].header.id


def test_replay_environment_has_no_key_and_a_dead_proxy(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-should-never-reach-the-agent")
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-live-should-never-reach-the-agent")
    directory = recorded(make_scenario, env={"FAKE_BEHAVIOUR": "dump-env"})
    result = run_scenario(load_scenario(directory), "replay")
    env = json.loads(result.stderr.split("ENV=", 1)[1].splitlines()[0])
    assert "OPENAI_API_KEY" not in env
    assert "SOME_SERVICE_TOKEN" not in env
    assert env["AGENTREEL_PROVIDER"] == "replay"
    assert env["HTTPS_PROXY"].startswith("http://127.0.0.1:")
    assert env["NO_PROXY"] == ""


def test_a_stray_network_call_in_replay_is_refused_by_the_dead_proxy(
    make_scenario: MakeScenario,
    recorded_echo_turn: Path,
) -> None:
    directory = recorded_echo_turn
    make_scenario("echo-turn", env={"FAKE_BEHAVIOUR": "network"})
    result = run_scenario(load_scenario(directory), "replay")
    assert "network blocked" in result.stderr
    assert "Connection refused" in result.stderr
    assert "NETWORK REACHED" not in result.stderr


def test_a_golden_difference_fails_with_a_unified_diff(
    make_scenario: MakeScenario, recorded_echo_turn: Path
) -> None:
    directory = recorded_echo_turn
    golden = directory / "golden" / "transcript.jsonl"
    golden.write_text(golden.read_text().replace("echo: ", "ECHO: "))
    with pytest.raises(GoldenMismatchError) as caught:
        check_scenario(directory, "replay")
    message = str(caught.value)
    assert list(caught.value.diffs) == ["transcript.jsonl"]
    assert "--- golden/transcript.jsonl" in message
    assert "+++ live/transcript.jsonl" in message
    assert '-{"jsonrpc"' in message
    assert refresh_command("echo-turn") in message


def test_refresh_rewrites_the_goldens_and_replay_passes_again(
    make_scenario: MakeScenario, recorded_echo_turn: Path
) -> None:
    directory = recorded_echo_turn
    golden = directory / "golden" / "transcript.jsonl"
    original = golden.read_bytes()
    golden.write_text("stale\n")
    (directory / "golden" / "session.1.jsonl").write_text("stale child\n")
    recording = (directory / "session.jsonl").read_bytes()
    outcome = check_scenario(directory, "refresh")
    assert outcome.written == ["golden/transcript.jsonl", "golden/session.jsonl"]
    assert golden.read_bytes() == original
    assert not (directory / "golden" / "session.1.jsonl").exists()
    assert (directory / "session.jsonl").read_bytes() == recording  # recordings untouched
    check_scenario(directory, "replay")


def test_record_removes_stale_numbered_children(make_scenario: MakeScenario) -> None:
    directory = recorded(make_scenario, env={"FAKE_SUBAGENTS": "2"})
    assert (directory / "session.2.jsonl").is_file()
    assert (directory / "golden" / "session.2.jsonl").is_file()
    check_scenario(directory, "replay")
    make_scenario("echo-turn", env={"FAKE_SUBAGENTS": "1"})
    check_scenario(directory, "record")
    assert (directory / "session.1.jsonl").is_file()
    assert not (directory / "session.2.jsonl").exists()
    assert not (directory / "golden" / "session.2.jsonl").exists()
    outcome = check_scenario(directory, "replay")
    assert outcome.sessions == 2


def test_agent_crash_shows_exit_code_and_stderr_tail(
    make_scenario: MakeScenario, recorded_echo_turn: Path
) -> None:
    directory = recorded_echo_turn
    make_scenario("echo-turn", env={"FAKE_BEHAVIOUR": "crash"})
    with pytest.raises(AgentCrashError) as caught:
        check_scenario(directory, "replay")
    message = str(caught.value)
    assert "exit code 3" in message
    assert "step 3 (prompt 'hello there')" in message
    assert "crashing on purpose" in message
    assert "agent stderr (tail)" in message


def test_agent_exiting_non_zero_at_eof_is_a_crash(
    make_scenario: MakeScenario, recorded_echo_turn: Path
) -> None:
    directory = recorded_echo_turn
    make_scenario("echo-turn", env={"FAKE_BEHAVIOUR": "fail-exit"})
    with pytest.raises(AgentCrashError, match="exited with code 5 after stdin was closed"):
        check_scenario(directory, "replay")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno != errno.ESRCH
    # A zombie still answers kill(0); it is dead for our purposes once reaped or defunct.
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return status != "Z"


def test_agent_hang_is_killed_at_the_timeout_with_its_children(
    make_scenario: MakeScenario, recorded_echo_turn: Path, tmp_path: Path, agent_start: str
) -> None:
    directory = recorded_echo_turn
    pid_file = tmp_path / "grandchild.pid"
    # The timeout must outlast the agent's start-up to catch it hanging at step 3: a
    # spawned agent imports the ACP SDK first (seconds on a loaded machine), a forked one
    # has it already.
    timeout = 3 if agent_start == "fork" else 15
    make_scenario(
        "echo-turn",
        timeout=timeout,
        env={"FAKE_BEHAVIOUR": "hang", "FAKE_PID_FILE": str(pid_file)},
    )
    with pytest.raises(AgentTimeoutError) as caught:
        check_scenario(directory, "replay")
    message = str(caught.value)
    assert f"did not finish within {timeout}s" in message
    assert "step 3 (prompt 'hello there')" in message
    assert "process group was killed" in message
    assert "hanging on purpose" in message
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the agent's child process outlived the run"


def test_garbage_on_stdout_names_the_line(
    make_scenario: MakeScenario, recorded_echo_turn: Path
) -> None:
    directory = recorded_echo_turn
    make_scenario("echo-turn", env={"FAKE_BEHAVIOUR": "garbage"})
    with pytest.raises(AgentOutputError) as caught:
        check_scenario(directory, "replay")
    message = str(caught.value)
    assert "stdout line 3 is not a JSON-RPC frame: 'this line is not json'" in message
    assert "send logs and prints to stderr" in message


def test_a_missing_golden_is_named(make_scenario: MakeScenario, recorded_echo_turn: Path) -> None:
    directory = recorded_echo_turn
    (directory / "golden" / "transcript.jsonl").unlink()
    with pytest.raises(FixtureInventoryError) as caught:
        check_scenario(directory, "replay")
    assert caught.value.missing == ["golden/transcript.jsonl"]
    assert rerecord_command("echo-turn") in str(caught.value)


def test_a_missing_recording_and_a_gap_are_named(make_scenario: MakeScenario) -> None:
    directory = recorded(make_scenario, env={"FAKE_SUBAGENTS": "2"})
    (directory / "session.1.jsonl").unlink()
    with pytest.raises(FixtureInventoryError) as caught:
        check_scenario(directory, "replay")
    assert caught.value.missing == ["session.1.jsonl"]


def test_orphan_files_are_named(make_scenario: MakeScenario, recorded_echo_turn: Path) -> None:
    directory = recorded_echo_turn
    (directory / "notes.txt").write_text("?")
    (directory / "session.3.jsonl").write_text("{}\n")
    (directory / "golden" / "extra.json").write_text("{}")
    with pytest.raises(FixtureInventoryError) as caught:
        check_scenario(directory, "replay")
    assert caught.value.orphans == ["golden/extra.json", "notes.txt", "session.3.jsonl"]
    assert "delete them" in str(caught.value)


def test_a_corrupt_recording_fails_naming_file_and_line(
    make_scenario: MakeScenario, recorded_echo_turn: Path
) -> None:
    directory = recorded_echo_turn
    recording = directory / "session.jsonl"
    lines = recording.read_text().splitlines(keepends=True)
    lines[2] = '{"type": "turn/start", "seq": oops}\n'
    recording.write_text("".join(lines))
    with pytest.raises(ScenarioFilesError) as caught:
        check_scenario(directory, "replay")
    assert f"{recording}:3" in str(caught.value)
    assert rerecord_command("echo-turn") in str(caught.value)
    assert "<scenario>" not in str(caught.value)


def test_a_truncated_recording_fails_naming_the_file(
    make_scenario: MakeScenario, recorded_echo_turn: Path
) -> None:
    directory = recorded_echo_turn
    recording = directory / "session.jsonl"
    recording.write_bytes(recording.read_bytes()[:-25])
    with pytest.raises(ScenarioFilesError) as caught:
        check_scenario(directory, "replay")
    assert str(recording) in str(caught.value)
    assert rerecord_command("echo-turn") in str(caught.value)


def test_an_unconsumed_script_fails(make_scenario: MakeScenario) -> None:
    directory = recorded(make_scenario, env={"FAKE_SUBAGENTS": "1"})
    make_scenario("echo-turn", env={"FAKE_SUBAGENTS": "0"})
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(directory, "replay")
    message = str(caught.value)
    assert "session.1.jsonl" in message
    assert "never" in message
    assert rerecord_command("echo-turn") in message


def test_an_unrecorded_subagent_fails(make_scenario: MakeScenario) -> None:
    directory = recorded(make_scenario, env={"FAKE_SUBAGENTS": "1"})
    make_scenario("echo-turn", env={"FAKE_SUBAGENTS": "2"})
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(directory, "replay")
    message = str(caught.value)
    assert "UnrecordedSessionError" in message
    assert "spawn index 1" in message or "spawn_index 1" in message


def test_record_refuses_to_write_a_live_key(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("ACME_API_KEY", secret)
    directory = make_scenario(
        steps=[
            {"type": "initialize"},
            {"type": "new_session"},
            {"type": "prompt", "text": f"my key is {secret}"},
        ]
    )
    with pytest.raises(SecretLeakError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert "$ACME_API_KEY" in message
    assert "session.jsonl:" in message
    assert secret not in message
    assert sorted(p.name for p in directory.iterdir()) == ["scenario.toml"]


def test_expect_error_passes_on_an_error_and_fails_on_success(make_scenario: MakeScenario) -> None:
    steps: list[dict[str, object]] = [
        {"type": "initialize"},
        {"type": "expect_error", "method": "prompt", "session": "unknown", "text": "hi"},
    ]
    directory = make_scenario("errors", steps=steps)
    check_scenario(directory, "record")
    check_scenario(directory, "replay")
    assert not (directory / "session.jsonl").exists()
    steps[1] = {"type": "expect_error", "method": "initialize"}
    make_scenario("errors", steps=steps)
    with pytest.raises(StepError, match="expected a JSON-RPC error from initialize"):
        check_scenario(directory, "record")


def test_unused_permission_answers_fail(make_scenario: MakeScenario) -> None:
    directory = make_scenario(permissions=["allow"])
    with pytest.raises(StepError, match=r"permission answer\(s\) were never asked for"):
        check_scenario(directory, "record")


def test_agent_that_cannot_start_is_reported(make_scenario: MakeScenario, tmp_path: Path) -> None:
    directory = make_scenario(agent=[str(tmp_path / "no-such-agent")])
    with pytest.raises(AgentCrashError, match="cannot start the agent"):
        check_scenario(directory, "record")


def test_the_fake_agent_exists() -> None:
    assert FAKE_AGENT.is_file()


def test_the_workspace_is_copied_into_a_fresh_cwd(make_scenario: MakeScenario) -> None:
    directory = make_scenario(env={"FAKE_ECHO_FILES": "1"})
    (directory / "workspace" / "src").mkdir(parents=True)
    (directory / "workspace" / "notes.md").write_text("notes")
    (directory / "workspace" / "src" / "main.py").write_text("print()")
    check_scenario(directory, "record")
    golden = (directory / "golden" / "session.jsonl").read_text()
    assert "echo: hello there files: notes.md, src" in golden
    work = directory.parent.parent / "run"
    result = run_scenario(load_scenario(directory), "replay", work_dir=work)
    assert result.cwd == work.resolve() / "cwd"
    assert sorted(p.name for p in work.iterdir()) == [
        "agent.stderr",
        "cwd",
        "home",
        "replay-report.json",
        "sessions",
        "tmp",
    ]
    assert (result.cwd / "src" / "main.py").read_text() == "print()"
    check_scenario(directory, "replay")


def test_record_writes_nothing_when_the_new_recording_does_not_replay(
    make_scenario: MakeScenario,
) -> None:
    directory = make_scenario(env={"FAKE_BEHAVIOUR": "random-system"})
    with pytest.raises(RecordError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert "the new recording does not replay, so nothing was written" in message
    assert "RequestDriftError" in message
    assert "system prompt differs" in message
    assert sorted(p.name for p in directory.iterdir()) == ["scenario.toml"]


def test_an_agent_that_never_loads_the_replay_provider_fails(
    make_scenario: MakeScenario, recorded_echo_turn: Path
) -> None:
    """Same transcript, but no consumption report while the recording holds model calls."""
    make_scenario("echo-turn", env={"AGENTREEL_PROVIDER": "echo"})
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(recorded_echo_turn, "replay")
    message = str(caught.value)
    assert "wrote no replay consumption report" in message
    assert rerecord_command("echo-turn") in message
