"""The ``agentreel`` pytest fixture (SPEC 14), through pytester: in process, or under xdist.

Each inner test calls the real ``openai`` SDK at ``agentreel.base_url``; record mode goes
through the stub model server on the ``stub-rules.toml`` beside the test module, replay
runs with every proxy variable aimed at a closed port (loopback exempt), as a keyless CI
machine without network would.
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

# What the inner tests import, imported here: an in-process inner run drops the modules it
# imported when it ends, so without these each run would import both SDKs again.
import anthropic  # noqa: F401
import openai  # noqa: F401
import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

QUIET = ("-p", "no:cacheprovider", "-p", "no:asyncio", "-q")
RULES = """
[[rule]]
match = { last_user = "hello" }
text = "Hi there."

[[rule]]
match = { last_user = "bye" }
text = "Goodbye."
"""
TESTS = """
import openai


def ask(agentreel, text):
    with openai.OpenAI(base_url=agentreel.base_url, api_key=agentreel.api_key) as client:
        reply = client.chat.completions.create(
            model="stub-model", messages=[{"role": "user", "content": text}]
        )
    return reply.choices[0].message.content


def test_hello(agentreel):
    assert ask(agentreel, HELLO) == "Hi there."


def test_bye(agentreel):
    assert ask(agentreel, "bye") == "Goodbye."


def test_anthropic(agentreel):
    import anthropic

    with anthropic.Anthropic(
        base_url=agentreel.anthropic_base_url, api_key=agentreel.api_key
    ) as client:
        reply = client.messages.create(
            model="stub-model", max_tokens=64, messages=[{"role": "user", "content": "bye"}]
        )
    assert reply.content[0].text == "Goodbye."
"""


def closed_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every proxy variable at a port nothing listens on; loopback exempt."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "CI"):
        monkeypatch.delenv(name, raising=False)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The inner pytest in this process (the SDKs imported once, below), unless it runs
    xdist: a controller and workers of its own are what those tests are about."""
    if "-n" in args:
        return pytester.runpytest_subprocess(*QUIET, *args)
    return pytester.runpytest_inprocess(*QUIET, *args)


def write_tests(pytester: pytest.Pytester, hello: str = "hello", extra: str = "") -> Path:
    pytester.makefile(".toml", **{"stub-rules": RULES})
    return pytester.makepyfile(test_chat=f"HELLO = {hello!r}\n{TESTS}{extra}")


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    closed_network(monkeypatch)
    monkeypatch.delenv("AGENTREEL_RERECORD_COMMAND", raising=False)


@pytest.mark.usefixtures("offline")
def test_record_once_under_xdist_then_replay_with_the_network_closed(
    pytester: pytest.Pytester,
) -> None:
    write_tests(pytester)
    recorded = run(pytester, "-n", "2", "--agentreel-record=once")
    recorded.assert_outcomes(passed=3)
    folder = pytester.path / "recordings" / "test_chat"
    assert sorted(p.name for p in folder.iterdir()) == ["test_anthropic", "test_bye", "test_hello"]
    header = json.loads((folder / "test_hello" / "session.jsonl").read_text().splitlines()[0])
    assert header["type"] == "session"
    written = {p: p.read_bytes() for p in folder.rglob("*.jsonl")}

    replayed = run(pytester, "-n", "2")
    replayed.assert_outcomes(passed=3)
    # once: recorded tests are replayed, not recorded again
    run(pytester, "--agentreel-record=once").assert_outcomes(passed=3)
    assert {p: p.read_bytes() for p in folder.rglob("*.jsonl")} == written


@pytest.mark.usefixtures("offline")
def test_a_missing_recording_fails_with_the_command_that_records_it(
    pytester: pytest.Pytester,
) -> None:
    write_tests(pytester)
    result = run(pytester, "-k", "hello")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_chat.py::test_hello: no recording at *recordings/test_chat/test_hello "
            "(session.jsonl), and --agentreel-record=none only replays. Record it through the "
            "stub or your upstream: pytest test_chat.py::test_hello --agentreel-record=once"
        ]
    )


@pytest.mark.usefixtures("offline")
def test_ci_refuses_to_record(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tests(pytester)
    monkeypatch.setenv("CI", "true")
    result = run(pytester, "--agentreel-record=once")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentreel-record=once is refused under CI (CI=true)*"])
    assert not (pytester.path / "recordings").exists()
    # a config's record_mode is refused too, for that test
    pytester.makeconftest(
        "import pytest\n@pytest.fixture\ndef agentreel_config():\n"
        "    return {'record_mode': 'all'}\n"
    )
    result = run(pytester)
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(["*--agentreel-record=all is refused under CI (CI=true)*"])
    assert not (pytester.path / "recordings").exists()


@pytest.mark.usefixtures("offline")
def test_drift_unconsumed_and_unrecorded_calls_fail_the_test_with_the_scenario_error(
    pytester: pytest.Pytester,
) -> None:
    write_tests(pytester)
    run(pytester, "--agentreel-record=once").assert_outcomes(passed=3)

    write_tests(pytester, hello="hello you")  # the prompt changed
    drift = run(pytester, "-k", "hello")
    drift.assert_outcomes(failed=1)  # the test fails (its call), not its teardown
    drift.stdout.fnmatch_lines(
        [
            "*test_chat.py::test_hello: RequestDriftError: *",
            "*messages[[]0] (user) differs at character 5 (line 1):",
            "*recorded | hello⟨end⟩",
            "*live     | hello you",
            "*re-record: pytest test_chat.py::test_hello --agentreel-record=all",
        ]
    )
    assert "Captured log" not in drift.stdout.str()  # said once

    # A test that stops calling the model leaves its recorded call unconsumed.
    write_tests(pytester, extra="\n\ndef test_silent(agentreel):\n    pass\n")
    shutil_copy(pytester, "test_hello", "test_silent")
    silent = run(pytester, "-k", "silent")
    silent.assert_outcomes(failed=1)
    silent.stdout.fnmatch_lines(
        [
            "*test_chat.py::test_silent: the replay ended with recorded model calls never made",
            "*Recorded calls not used:*",
        ]
    )

    # A test that calls more than was recorded: the call is unrecorded.
    twice = (
        "\n\ndef test_twice(agentreel):\n    ask(agentreel, 'hello')\n    ask(agentreel, 'bye')\n"
    )
    write_tests(pytester, extra=twice)
    shutil_copy(pytester, "test_hello", "test_twice")
    more = run(pytester, "-k", "twice")
    more.assert_outcomes(failed=1)
    more.stdout.fnmatch_lines(["*test_chat.py::test_twice: *Error: *"])
    assert "re-record: pytest test_chat.py::test_twice --agentreel-record=all" in more.stdout.str()


def shutil_copy(pytester: pytest.Pytester, source: str, target: str) -> None:
    folder = pytester.path / "recordings" / "test_chat"
    (folder / target).mkdir()
    for path in (folder / source).iterdir():
        (folder / target / path.name).write_bytes(path.read_bytes())


@pytest.mark.usefixtures("offline")
def test_config_and_marker_configure_the_fixture(pytester: pytest.Pytester) -> None:
    """agentreel_config (overridden in a conftest) masks a volatile part of the prompt; a
    marker argument overrides the config; an unknown key is named."""
    pytester.makefile(".toml", **{"stub-rules": RULES})
    pytester.makeconftest(
        "import pytest\n@pytest.fixture(scope='module')\ndef agentreel_config():\n"
        "    return {'masks': [r'run-[0-9]+']}\n"
    )
    pytester.makepyfile(
        test_config="""
import time
import openai
import pytest


def ask(agentreel, text):
    with openai.OpenAI(base_url=agentreel.base_url, api_key=agentreel.api_key) as client:
        return client.chat.completions.create(
            model="stub-model", messages=[{"role": "user", "content": text}]
        ).choices[0].message.content


def test_masked(agentreel):
    assert ask(agentreel, f"hello from run-{time.time_ns()}") == "Hi there."


@pytest.mark.agentreel(masks=[])
def test_unmasked(agentreel):
    assert ask(agentreel, f"hello from run-{time.time_ns()}") == "Hi there."


@pytest.mark.agentreel(record_modes="all")
def test_typo(agentreel):
    pass
"""
    )
    recorded = run(pytester, "--agentreel-record=once")
    recorded.assert_outcomes(passed=2, errors=1)
    recorded.stdout.fnmatch_lines(
        ["*test_typo: unknown agentreel_config / marker key(s) record_modes; known: *"]
    )
    replayed = run(pytester, "-k", "masked")
    replayed.assert_outcomes(passed=1, failed=1)
    replayed.stdout.fnmatch_lines(["*test_config.py::test_unmasked: RequestDriftError*"])


@pytest.mark.usefixtures("offline")
def test_a_failing_test_writes_no_recording(pytester: pytest.Pytester) -> None:
    write_tests(
        pytester,
        extra="\n\ndef test_fails(agentreel):\n    ask(agentreel, 'hello')\n"
        "    raise AssertionError('the agent answered wrong')\n",
    )
    result = run(pytester, "-k", "fails", "--agentreel-record=once")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*agentreel: the test failed, so its recording was not written to *test_fails"]
    )
    assert not (pytester.path / "recordings" / "test_chat" / "test_fails").exists()


# The examples' own fixture tests as a user runs them (issue 27's Done-when): each
# example's test (examples/langgraph-agent, examples/pydantic-ai-agent) copied without its
# recording, recorded once through the stub with --agentreel-record=once, then replayed
# under -n 2 with the network closed beside two broken copies of it: one whose prompt
# changed, one whose child's recording is gone.
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CASES = {
    "langgraph-agent": ("test_langgraph_agent", "test_fan_out", "Compare Python and Rust."),
    "pydantic-ai-agent": (
        "test_pydantic_ai_agent",
        "test_two_helpers",
        "Summarize both files, alpha.txt and beta.txt, with one helper each.",
    ),
}


@pytest.mark.parametrize("example", sorted(CASES))
def test_example_records_once_replays_offline_and_names_what_broke(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, example: str
) -> None:
    module, test, prompt = CASES[example]
    source = EXAMPLES / example
    for path in source.iterdir():
        if path.is_file() and path.suffix in {".py", ".toml"}:
            shutil.copy2(path, pytester.path / path.name)
    closed_network(monkeypatch)

    # Recorded as a user records it, in a pytest of its own: the example's prompt holds its
    # working directory, which the replay below (xdist workers) must see as recorded.
    recording = pytester.runpytest_subprocess(*QUIET, "--agentreel-record=once")
    recording.assert_outcomes(passed=1)
    recordings = pytester.path / "recordings"
    recorded = recordings / module / test
    # The logs, and the answers as the upstream sent them (replay serves them byte for byte).
    assert sorted(p.name for p in recorded.iterdir()) == [
        "session.1.jsonl",
        "session.2.jsonl",
        "session.jsonl",
        "wire.ndjson",
    ]

    text = (pytester.path / f"{module}.py").read_text()
    (pytester.path / f"{module}_prompt.py").write_text(text.replace(prompt, prompt + " Now."))
    shutil.copytree(recorded, recordings / f"{module}_prompt" / test)
    (pytester.path / f"{module}_child.py").write_text(text)
    shutil.copytree(recorded, recordings / f"{module}_child" / test)
    (recordings / f"{module}_child" / test / "session.2.jsonl").unlink()

    result = run(pytester, "-n", "2")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    # whichever xdist worker reports first
    result.stdout.fnmatch_lines([f"*{module}_prompt.py::{test}: RequestDriftError: *"])
    result.stdout.fnmatch_lines([f"*{module}_child.py::{test}: UnrecordedSessionError: *"])
    assert f"pytest {module}_child.py::{test} --agentreel-record=all" in out


# Issue 29: the fixture's record path is a writing path like the others. A key the stub
# answers with, and one the test reads from a file and sends back as a tool result, are
# refused by the one scan: the test fails naming each rule, nothing is written, and no
# output holds a key.
LEAK_TESTS = """
import json
from pathlib import Path

import openai


def test_leak(agentreel):
    with openai.OpenAI(base_url=agentreel.base_url, api_key=agentreel.api_key) as client:
        client.chat.completions.create(
            model="stub-model", messages=[{"role": "user", "content": "leak"}]
        )


def test_leak_tool(agentreel):
    content = Path("keys.txt").read_text()
    call = {"id": "call_0", "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": "keys.txt"})}}
    messages = [
        {"role": "user", "content": "read keys.txt"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": content},
    ]
    with openai.OpenAI(base_url=agentreel.base_url, api_key=agentreel.api_key) as client:
        client.chat.completions.create(model="stub-model", messages=messages)
"""


@pytest.mark.usefixtures("offline")
@pytest.mark.parametrize("source", ["answer", "tool"])
def test_the_fixture_refuses_known_key_shapes_and_writes_nothing(
    pytester: pytest.Pytester, source: str
) -> None:
    from agentreel.session.testing import FAKE_CREDENTIAL_RULES, fake_credentials

    keys = fake_credentials()
    leaked = "\n".join(keys.values())
    pytester.makefile(
        ".toml",
        **{
            # a JSON string is a TOML basic string: the keys keep their newlines
            "stub-rules": "[[rule]]\nmatch = { last_user = 'leak' }\n"
            f"text = {json.dumps(leaked)}\n\n"
            "[[rule]]\nmatch = { last_tool_result_regex = '.' }\ntext = 'Read it.'\n"
        },
    )
    (pytester.path / "keys.txt").write_text(leaked)
    pytester.makepyfile(test_chat=LEAK_TESTS)
    name = "test_leak" if source == "answer" else "test_leak_tool"
    result = run(pytester, "-k", f"{name} and not {name}_", "--agentreel-record=once")
    result.assert_outcomes(failed=1)
    said = result.stdout.str() + result.stderr.str()
    for rule in set(FAKE_CREDENTIAL_RULES.values()):
        assert rule in said, f"the refusal does not name the rule {rule!r}"
    secret_lines = [line for v in keys.values() for line in v.splitlines() if "-----" not in line]
    assert not [line for line in secret_lines if line in said], "a key was printed"
    assert not (pytester.path / "recordings" / "test_chat" / name).exists()


@pytest.mark.usefixtures("offline")
def test_a_numbering_gap_fails_the_test_first_with_its_node_id_command(
    pytester: pytest.Pytester,
) -> None:
    write_tests(pytester)
    run(pytester, "--agentreel-record=once", "-k", "hello").assert_outcomes(passed=1)
    folder = pytester.path / "recordings" / "test_chat" / "test_hello"
    # A child recording past a deleted one: session.2.jsonl with no session.1.jsonl.
    shutil.copy(folder / "session.jsonl", folder / "session.2.jsonl")
    result = run(pytester, "-k", "hello", "-rN")
    result.assert_outcomes(failed=1)  # a failure of the test, not an error of its setup
    lines = [line for line in result.stdout.lines if line.strip()]
    failure = lines.index(next(line for line in lines if "FixtureError" in line))
    assert "test_chat.py::test_hello: FixtureError: " in lines[failure]
    section = lines[failure - 1 :]
    end = next(i for i, line in enumerate(section) if line.startswith(("=", "1 failed")))
    section = section[:end]
    assert section[0].startswith("_")  # the failure's header
    assert "test_hello" in section[0]
    assert len(section) <= 20, "\n".join(section)
    assert "pytest test_chat.py::test_hello --agentreel-record=all" in "\n".join(section)
    assert "recordings/test_chat/test_hello/session.1.jsonl" in lines[failure]
    assert str(pytester.path) not in lines[failure]
    assert "Traceback" not in result.stdout.str()


@pytest.mark.usefixtures("offline")
def test_a_secret_refused_after_a_record_names_the_tests_pytest_command(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A credential of this environment in what ``--agentreel-record=once`` recorded is
    refused after the run (the harness's own scan): the refusal names the test's pytest
    record command, as ``--agentreel-record=drifted``'s does — never a scenario's
    ``agentreel record``."""
    write_tests(pytester)
    monkeypatch.setenv("CHAT_API_TOKEN", "Hi there.")  # what the stub answers
    refused = run(pytester, "-k", "hello", "--agentreel-record=once")
    refused.assert_outcomes(failed=1)
    refused.stdout.fnmatch_lines(
        [
            "*test_chat.py::test_hello: refusing to write the recording*",
            "*the value of $CHAT_API_TOKEN*",
            "*Nothing was written*record again: "
            "pytest test_chat.py::test_hello --agentreel-record=all.*",
        ]
    )
    assert "in the test's agentreel_config (or agentreel marker) allow_secrets" in (
        refused.stdout.str()
    )
    assert "agentreel record" not in refused.stdout.str()
    assert "[record] allow_secrets" not in refused.stdout.str()
    assert not (pytester.path / "recordings" / "test_chat" / "test_hello").exists()
