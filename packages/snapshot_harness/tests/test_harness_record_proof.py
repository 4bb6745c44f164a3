"""``record`` proves what it writes (issue 39): it refuses a recording that cannot be
right, records again when the recorded order cannot be held, replays the new recording
under perturbations, and finds the masks a volatile value needs instead of leaving them to
the next replay's diff. Each test fails without its part; every agent is a small scripted
one (the fake agent, the kit agent), forked where it can be."""

from __future__ import annotations

import io
import json
import shutil
import tomllib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import openai  # noqa: F401 (the inner tests import it: once, here)
import pytest

from agentreel.snapshot_harness import (
    RecordError,
    ScenarioError,
    VolatileValuesError,
    _check,
    check_scenario,
    load_scenario,
)
from agentreel.snapshot_harness._cli import main
from agentreel.snapshot_harness._faketime import faketime_library
from agentreel.snapshot_harness._record_proof import (
    TRIALS_ENV,
    TranscriptRule,
    accept_masks,
    capture_proposals,
    crash_on_stderr,
    propose_masks,
    schedule_problems,
    trial_day,
)

MakeScenario = Callable[..., Path]
pytest_plugins = ["pytester"]
KIT_AGENT = Path(__file__).with_name("kit_agent.py")
INTEROP = Path(__file__).resolve().parents[3] / "interop" / "fixtures"


def _listing(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


# -- refusals ---------------------------------------------------------------------------------


def test_a_no_rule_answer_the_agent_swallowed_is_refused_naming_the_request(
    make_scenario: MakeScenario,
) -> None:
    # The fake agent takes a model error in its stride (it ends the turn normally): only
    # the stub knows its 400 was no model's answer.
    directory = make_scenario(provider="stub", model="stub-model")
    (directory / "stub-rules.toml").write_text(
        '[[rule]]\nname = "greets"\nmatch = { last_user = "good morning" }\ntext = "hi"\n'
    )
    with pytest.raises(RecordError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert "nothing was written (the committed recording is untouched)" in message
    assert "which the agent took in as the model's answer" in message
    assert "no rule in" in message
    assert "matches request #0" in message
    assert "last user message 'hello there'" in message
    assert "the closest is rule 1 ('greets'), which fails on last_user = 'good morning'" in (
        message
    )
    assert _listing(directory) == ["scenario.toml", "stub-rules.toml"]


def _kit_scenario(tmp_path: Path, rules: str) -> Path:
    directory = tmp_path / "fixtures" / "delegates"
    directory.mkdir(parents=True)
    (directory / "scenario.toml").write_text(
        f'timeout = 60\nagent = ["{{python}}", "{KIT_AGENT}"]\n'
        '[[steps]]\ntype = "initialize"\n[[steps]]\ntype = "new_session"\n'
        '[[steps]]\ntype = "prompt"\ntext = "Ask a helper for a colour"\n'
        '[record]\nprovider = "stub"\nmodel = "stub-model"\n'
    )
    (directory / "stub-rules.toml").write_text(rules)
    return directory


def test_a_delegation_rule_that_matched_nothing_names_the_missing_child(
    tmp_path: Path,
) -> None:
    # As with Codex's namespaced tools: the delegation rule's tool_offered_regex sees no
    # tool, the catch-all answers, and without the check a "subagent" scenario records
    # with no subagent.
    directory = _kit_scenario(
        tmp_path,
        '[[rule]]\nname = "delegates"\n'
        'match = { last_user = "Ask a helper", tool_offered_regex = "^agents\\\\.delegate$" }\n'
        'call_subagent = { tool = "delegate", prompt = "name a colour", '
        'arguments = { text = "name a colour" } }\n'
        '[[rule]]\nname = "catch-all"\ntext = "done"\n',
    )
    with pytest.raises(RecordError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert "rule 1 ('delegates')" in message
    assert "the child it starts was never started" in message
    assert '"tool_offered_regex": "^agents\\\\.delegate$"' in message
    assert _listing(directory) == ["scenario.toml", "stub-rules.toml"]


def test_a_delegation_answered_whose_child_never_called_the_model_is_refused(
    tmp_path: Path,
) -> None:
    # call_subagent picked a tool that starts no subagent (the kit agent's `shout`).
    directory = _kit_scenario(
        tmp_path,
        '[[rule]]\nname = "delegates"\nmatch = { last_user = "Ask a helper" }\n'
        'call_subagent = { tool = "shout", prompt = "x", arguments = { text = "x" } }\n'
        '[[rule]]\nname = "sums up"\nmatch = { last_tool_result = "X" }\ntext = "done"\n',
    )
    with pytest.raises(RecordError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert "1 delegation(s) answered (request #0 answered by rule 1 ('delegates')" in message
    assert "only 0 child session(s) called the model" in message
    assert _listing(directory) == ["scenario.toml", "stub-rules.toml"]


def test_a_traceback_on_stderr_warns_and_refuses_when_strict(
    make_scenario: MakeScenario,
) -> None:
    directory = make_scenario(env={"FAKE_BEHAVIOUR": "traceback"})
    outcome = check_scenario(directory, "record")
    assert len(outcome.warnings) == 1
    assert "exited 0 but printed a Python traceback" in outcome.warnings[0]
    assert "ValueError: fake agent: failing on purpose" in outcome.warnings[0]
    assert "[record] strict = true" in outcome.warnings[0]
    (directory / "golden").rename(directory.parent / "kept-golden")
    toml = directory / "scenario.toml"
    toml.write_text(toml.read_text().replace("[record]\n", "[record]\nstrict = true\n"))
    with pytest.raises(RecordError, match="printed a Python traceback"):
        check_scenario(directory, "record")
    assert not (directory / "golden").exists()


@pytest.mark.parametrize(
    ("stderr", "found"),
    [
        ("thread 'main' panicked at src/main.rs:3:5:\nboom\n", "a Rust panic"),
        ("[UnhandledPromiseRejection: This error originated]\n", "an unhandled promise"),
        ("warning: something slow\nretrying the request\n", None),
        ("the word Traceback in prose is no crash\n", None),
    ],
)
def test_crash_patterns_on_stderr(stderr: str, found: str | None) -> None:
    named = crash_on_stderr(stderr)
    assert (named is None) if found is None else (named is not None and named.startswith(found))


# -- the schedule -----------------------------------------------------------------------------


def _async_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "claude-code-101-async"
    shutil.copytree(INTEROP / "claude-code-101-async", copy)
    return copy


def test_a_child_call_starting_inside_its_parents_open_call_is_named(tmp_path: Path) -> None:
    copy = _async_copy(tmp_path)
    assert schedule_problems(copy, "recorded") == []  # the committed recording holds
    # Claude Code 0.101's bad recording: the child's second call started before the
    # parent's "launched" call ended.
    from agentreel.llm_replay import load_recording

    last = load_recording(copy).scripts[0].calls[-1]
    child = copy / "session.1.jsonl"
    lines = child.read_text().splitlines()
    headers = [i for i, line in enumerate(lines) if '"type":"request/header"' in line]
    event = json.loads(lines[headers[1]])
    event["time"] = (last.started + last.ended) / 2
    lines[headers[1]] = json.dumps(event, separators=(",", ":"))
    child.write_text("\n".join(lines) + "\n")
    assert schedule_problems(copy, "free") == []  # a free replay serves calls as asked
    problems = schedule_problems(copy, "recorded")
    assert len(problems) == 1
    assert problems[0].startswith("session.1.jsonl ({{session:1}}) call 2 started ")
    assert "into session.jsonl ({{session:main}}) call 3, which ended" in problems[0]


def test_record_records_again_when_the_order_cannot_be_held_and_fails_naming_it(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = make_scenario()
    orders = iter([["session.1.jsonl call 2 started inside session.jsonl call 3"], []])
    monkeypatch.setattr(_check, "schedule_problems", lambda *_: next(orders))
    assert check_scenario(directory, "record").written  # the second recording holds
    (directory / "golden").rename(directory.parent / "kept-golden")
    monkeypatch.setattr(_check, "schedule_problems", lambda *_: ["child call 2 inside call 3"])
    toml = directory / "scenario.toml"
    toml.write_text(toml.read_text().replace("[record]\n", "[record]\nretries = 1\n"))
    with pytest.raises(RecordError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert "recorded 2 time(s), nothing was written" in message
    assert "- child call 2 inside call 3" in message
    assert not (directory / "golden").exists()


# -- trials and masks -------------------------------------------------------------------------


def test_random_values_are_named_with_rules_and_accepted_masks_make_replays_pass(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TRIALS_ENV)
    directory = make_scenario(env={"FAKE_BEHAVIOUR": "random-output"})
    toml = directory / "scenario.toml"
    toml.write_text(toml.read_text().replace("[record]\n", "[record]\ntrials = 1\n"))
    with pytest.raises(VolatileValuesError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert "trial replay 1 of 1 (TZ=Pacific/Kiritimati" in message
    assert "golden/transcript.jsonl" in message
    assert "[[golden_masks]]\nregex = 'agent-[0-9a-f]{16}'\ntoken = \"agent-id\"" in message
    assert "regex = '(?<=used: )[0-9]+'" in message
    assert len(caught.value.proposals) == 2
    assert _listing(directory) == ["scenario.toml"]

    out = io.StringIO()
    assert main(["record", str(directory), "--accept-masks"], out=out) == 0, out.getvalue()
    assert "agent-[0-9a-f]{16}" in toml.read_text()
    assert len(load_scenario(directory).golden_masks) == 2
    for _ in range(5):
        check_scenario(directory, "replay")


def test_trials_zero_turns_them_off_and_the_command_line_wins(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TRIALS_ENV)
    directory = make_scenario(env={"FAKE_BEHAVIOUR": "random-output"})
    out = io.StringIO()
    assert main(["record", str(directory), "--trials", "0"], out=out) == 0, out.getvalue()
    assert main(["record", str(directory), "--trials", "1"], out=out) == 1
    assert "echo-turn: recorded, but trial replay 1 of 1" in out.getvalue()
    # refresh proves the goldens it writes the same way
    before = (directory / "golden" / "transcript.jsonl").read_bytes()
    assert main(["refresh", str(directory), "--trials", "1"], out=out) == 1
    assert "echo-turn: replayed, but trial replay 1 of 1" in out.getvalue()
    assert (directory / "golden" / "transcript.jsonl").read_bytes() == before


def test_a_key_whose_whole_value_changed_gets_a_key_mask() -> None:
    first = {"transcript.jsonl": b'{"usage":{"totalDurationMs":1234,"tokens":5}}\n'}
    other = {"transcript.jsonl": b'{"usage":{"totalDurationMs":98,"tokens":5}}\n'}
    (proposal,) = propose_masks(first, other, ())
    assert proposal.toml == '[[golden_masks]]\nkey = "totalDurationMs"\ntoken = "total-duration-ms"'
    assert proposal.where == "transcript.jsonl line 1"


@pytest.mark.parametrize(
    ("key", "value"), [("trials", -1), ("retries", "2"), ("strict", "yes"), ("trials", True)]
)
def test_record_settings_are_checked(make_scenario: MakeScenario, key: str, value: object) -> None:
    directory = make_scenario()
    toml = directory / "scenario.toml"
    shown = json.dumps(value) if not isinstance(value, bool) else "true"
    toml.write_text(toml.read_text().replace("[record]\n", f"[record]\n{key} = {shown}\n"))
    with pytest.raises(ScenarioError, match=f"record.{key}"):
        load_scenario(directory)


# -- the pytest fixture's record modes ---------------------------------------------------------

SWALLOWING_TEST = """
import openai


def test_swallows(agentreel):
    key = agentreel.api_key
    with openai.OpenAI(base_url=agentreel.base_url, api_key=key, max_retries=0) as client:
        try:
            client.chat.completions.create(
                model="stub-model", messages=[{"role": "user", "content": "bye"}]
            )
        except openai.BadRequestError:
            pass  # an agent that takes the error in its stride
"""


def test_the_fixture_refuses_to_write_a_recording_holding_a_no_rule_answer(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CI", "AGENTREEL_RERECORD_COMMAND"):
        monkeypatch.delenv(name, raising=False)
    pytester.makefile(
        ".toml", **{"stub-rules": '[[rule]]\nmatch = { last_user = "hello" }\ntext = "hi"\n'}
    )
    pytester.makepyfile(test_chat=SWALLOWING_TEST)
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-p", "no:asyncio", "-q", "--agentreel-record=once"
    )
    output = result.stdout.str()
    assert "no rule in" in output, output
    assert "the closest is rule 1, which fails on last_user = 'hello'" in output
    assert "--agentreel-record=all" in output
    assert not (pytester.path / "recordings" / "test_chat" / "test_swallows").exists()


def test_twice_records_again_and_names_what_differs_between_the_two(
    make_scenario: MakeScenario,
) -> None:
    steady = make_scenario("steady")
    out = io.StringIO()
    assert main(["record", str(steady), "--twice"], out=out) == 0, out.getvalue()
    directory = make_scenario(env={"FAKE_BEHAVIOUR": "random-output"})
    assert main(["record", str(directory), "--twice"], out=out) == 1
    shown = out.getvalue()
    assert "echo-turn: recorded, but a second recording through the same upstream (--twice) " in (
        shown
    )
    assert "regex = 'agent-[0-9a-f]{16}'" in shown
    assert _listing(directory) == ["scenario.toml"]


def test_a_variable_the_scenario_sets_is_one_no_trial_perturbs(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent whose request names ``$USER`` when it is set (Claude Code's classifier):
    recorded with none, a trial under another user fails naming the request; with the
    scenario setting USER itself (the trial's own advice, "set it in [env]"), the trials
    keep it — the same on every machine — and record passes."""
    monkeypatch.delenv(TRIALS_ENV)
    directory = make_scenario(env={"FAKE_BEHAVIOUR": "names-user"})
    toml = directory / "scenario.toml"
    toml.write_text(toml.read_text().replace("[record]\n", "[record]\ntrials = 1\n"))
    with pytest.raises(RecordError) as caught:
        check_scenario(directory, "record")
    assert "trial replay 1 of 1 (TZ=Pacific/Kiritimati, USER=reel-trial-a" in str(caught.value)
    assert "The user is reel-trial-a." in str(caught.value)
    pinned = make_scenario("pinned", env={"FAKE_BEHAVIOUR": "names-user", "USER": ""})
    toml = pinned / "scenario.toml"
    toml.write_text(toml.read_text().replace("[record]\n", "[record]\ntrials = 1\n"))
    check_scenario(pinned, "record")
    assert (pinned / "golden").is_dir()


def _two_trials(directory: Path) -> None:
    toml = directory / "scenario.toml"
    toml.write_text(toml.read_text().replace("[record]\n", "[record]\ntrials = 2\n"))


def test_the_date_trial_catches_an_agent_naming_the_day(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that writes today's weekday into its request (in UTC, in words no built-in
    mask covers): the other trials (other zones, users, hosts) replay it, the date trial
    (its second, under libfaketime 403 days on) fails naming the day it asked with. Where
    libfaketime is missing, record says that trial ran on today's date."""
    monkeypatch.delenv(TRIALS_ENV)
    directory = make_scenario(env={"FAKE_BEHAVIOUR": "names-day"})
    _two_trials(directory)
    if faketime_library() is None:
        outcome = check_scenario(directory, "record")
        assert any("libfaketime is not installed" in note for note in outcome.notes)
        return
    with pytest.raises(RecordError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert "trial replay 2 of 2 (TZ=Etc/GMT+12" in message, message
    assert "under libfaketime)" in message, message
    day = trial_day()
    moved = datetime.fromisoformat(day).strftime("%A")
    assert f"It is {moved} here." in message, message
    assert not (directory / "golden").exists()


def test_an_agent_that_cannot_run_under_libfaketime_is_said_so_at_record(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that will not start under libfaketime (Claude Code's binary, whose second
    libfaketime start in one process fails): recorded, with a line saying its date trial
    ran on today's date — not a failure, and not silence."""
    monkeypatch.delenv(TRIALS_ENV)
    directory = make_scenario(env={"FAKE_BEHAVIOUR": "no-faketime"})
    _two_trials(directory)
    outcome = check_scenario(directory, "record")
    (line,) = [note for note in outcome.notes if "libfaketime" in note]
    if faketime_library() is not None:
        assert "its agent does not run under libfaketime" in line, line
    assert "trial replay 2 of 2" in line, line
    assert "ran on today's date" in line, line
    assert (directory / "golden").is_dir()


TRIALED_TESTS = """
import os

import openai


def _ask(agentreel, system):
    with openai.OpenAI(base_url=agentreel.base_url, api_key=agentreel.api_key) as client:
        reply = client.chat.completions.create(
            model="stub-model",
            messages=[{"role": "system", "content": system}, {"role": "user", "content": "hello"}],
        )
    assert reply.choices[0].message.content == "hi"


def test_names_user(agentreel):
    _ask(agentreel, f"The user is {os.environ.get('USER', 'nobody')}.")
"""


def test_the_fixtures_record_modes_run_trial_replays_of_the_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--agentreel-record=once`` runs the test again, a pytest of its own replaying the
    fresh recording under each trial's perturbation, before writing it: a test whose
    request names $USER fails its first trial (another user) and nothing is written."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CI", "AGENTREEL_RERECORD_COMMAND", "USER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(TRIALS_ENV)
    pytester.makefile(
        ".toml", **{"stub-rules": '[[rule]]\nmatch = { last_user = "hello" }\ntext = "hi"\n'}
    )
    pytester.makepyfile(test_chat=TRIALED_TESTS)
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-p", "no:asyncio", "-q", "--agentreel-record=once"
    )
    output = result.stdout.str()
    result.assert_outcomes(failed=1)
    assert "test_names_user: recorded, but trial replay 1 of 3 (TZ=Pacific/Kiritimati" in output
    assert "The user is reel-trial-a." in output, output
    recordings = pytester.path / "recordings" / "test_chat"
    assert not (recordings / "test_names_user").exists()


@pytest.mark.parametrize(
    ("behaviour", "rule"),
    [
        ("zone-order", '[transcript]\nunordered = ["agent_thought_chunk"]'),
        ("zone-chunked", '[transcript]\nmerge = ["tool_call_update"]'),
    ],
)
def test_an_order_or_a_chunking_that_differs_gets_its_transcript_rule(
    make_scenario: MakeScenario, monkeypatch: pytest.MonkeyPatch, behaviour: str, rule: str
) -> None:
    """Updates whose order or chunking differs under a trial (a race between the agent's
    tasks): record proposes the ``[transcript]`` rule that makes the goldens equal — the
    smallest, checked on both runs — and ``--accept-masks`` writes it and records."""
    monkeypatch.delenv(TRIALS_ENV)
    directory = make_scenario(env={"FAKE_BEHAVIOUR": behaviour})
    toml = directory / "scenario.toml"
    toml.write_text(toml.read_text().replace("[record]\n", "[record]\ntrials = 1\n"))
    with pytest.raises(VolatileValuesError) as caught:
        check_scenario(directory, "record")
    message = str(caught.value)
    assert rule in message, message
    assert _listing(directory) == ["scenario.toml"]
    out = io.StringIO()
    assert main(["record", str(directory), "--accept-masks"], out=out) == 0, out.getvalue()
    assert rule in toml.read_text()
    check_scenario(directory, "replay")


def test_a_value_the_answer_carries_back_from_its_request_gets_a_capture() -> None:
    """A value that differs between two recordings and sits in a recorded request and then
    in that log's recorded answer (the model names back what the agent sent): besides its
    golden mask, a ``[[model.captures]]`` table with the same regex and token."""
    request = '{"type":"request/header","data":{"messages":[{"preview":"spawned task-%s"}]}}'
    answer = '{"type":"assistant/chunk","data":{"chunk":{"text":"wait for task-%s"}}}'
    first = {"session.jsonl": "\n".join([request % "3f9a", answer % "3f9a"]).encode()}
    other = {"session.jsonl": "\n".join([request % "07bc", answer % "07bc"]).encode()}
    proposals = propose_masks(first, other, ())
    (capture,) = capture_proposals(first, proposals)
    assert capture.toml == "[[model.captures]]\nregex = 'task-[0-9a-f]{4}'\ntoken = \"task-id\""
    assert "carried back in its answer" in capture.said
    # A value only in answers (never sent) is no capture: a mask covers it.
    alone = {"session.jsonl": (answer % "3f9a").encode()}
    assert (
        capture_proposals(
            alone, propose_masks(alone, {"session.jsonl": (answer % "07bc").encode()}, ())
        )
        == []
    )


def test_an_accepted_order_rule_joins_the_scenarios_transcript_table(tmp_path: Path) -> None:
    toml = tmp_path / "scenario.toml"
    toml.write_text('[transcript]\nunordered = ["session_info_update"]\n\n[record]\n')
    rule = TranscriptRule(
        "unordered", ("session_info_update", "agent_thought_chunk"), ("agent_thought_chunk",)
    )
    accept_masks(toml, [rule])
    assert tomllib.loads(toml.read_text())["transcript"] == {
        "unordered": ["session_info_update", "agent_thought_chunk"]
    }
