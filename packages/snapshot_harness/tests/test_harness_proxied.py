"""``[model] via = "proxy"``: an agent that knows nothing of agentreel, recorded through the
proxy in front of the stub server and replayed keylessly with the same goldens and checks.

What must hold: the agent's config file is rendered into its fresh HOME and its key
variable gets the dummy key; the proxy's logs become the recordings and the goldens;
replay needs no upstream; the agent command's relative path still resolves in record's
trial replay (which runs from a scratch copy); an agent that keeps serving after stdin
closes is stopped with SIGTERM when the scenario says so; and a drifted request fails with
the readable, masked diff.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from agentreel.llm_proxy import DUMMY_KEY
from agentreel.session import RERECORD_COMMAND_ENV
from agentreel.snapshot_harness import (
    GoldenMismatchError,
    RecordError,
    ReplayConsumptionError,
    SecretLeakError,
    check_scenario,
    load_scenario,
)

AGENT = Path(__file__).with_name("harness_proxy_agent.py")
SCENARIO = """
timeout = 90
agent = ["{{python}}", "./agent.py"]
{extra}
[env]
{env}

[[steps]]
type = "initialize"

[[steps]]
type = "new_session"

[[steps]]
type = "prompt"
text = "say hello"

[model]
via = "proxy"
api = "openai"
base_url_env = []
key_env = ["TINY_KEY"]

[[model.files]]
path = ".config/tiny-agent/config.json"
text = '{{"base_url": "{{base_url}}", "home": "{{home}}"}}'
"""
RULES = """
[[rule]]
match = { last_user = "say hello", system_contains = "You are tiny" }
text = "hello from the stub"
"""


def _scenario(root: Path, *, extra: str = "", env: str = "") -> Path:
    directory = root / "fixtures" / "tiny"
    directory.mkdir(parents=True)
    (directory / "scenario.toml").write_text(SCENARIO.format(extra=extra, env=env))
    (directory / "stub-rules.toml").write_text(RULES)
    shutil.copy(AGENT, directory / "agent.py")
    return directory


def test_a_proxied_agent_records_and_replays_with_goldens(tmp_path: Path) -> None:
    directory = _scenario(tmp_path)
    recorded = check_scenario(load_scenario(directory), "record")
    assert recorded.sessions == 1
    assert (directory / "session.jsonl").is_file()
    # The goldens hold the proxy's log of what replay served (the agent writes none).
    golden = (directory / "golden" / "session.jsonl").read_text()
    assert '"text":"hello fr"' in golden
    assert '"id":"{{session:main}}"' in golden
    transcript = (directory / "golden" / "transcript.jsonl").read_text()
    assert "hello fr" in transcript
    # The recording holds the request the agent sent through the proxy, masked.
    recording = (directory / "session.jsonl").read_text()
    assert "You are tiny." in recording
    assert "agentreel-proxy-not-a-secret" not in recording
    replayed = check_scenario(load_scenario(directory), "replay")
    assert replayed.sessions == 1


def test_a_recorded_answer_replays_byte_for_byte(tmp_path: Path) -> None:
    # The agent keeps the bytes of its models listing and its streamed answer on every run:
    # record (what the stub upstream sent, passed through), record's trial replay, and a
    # replay must all be the same bytes, because the fixture carries the answers as sent
    # (wire.ndjson) and the listing (models.json), not only the chunks re-encoded.
    raw = tmp_path / "raw"
    raw.mkdir()
    directory = _scenario(tmp_path, env=f'TINY_RAW_LOG = "{raw}"')
    check_scenario(load_scenario(directory), "record")
    assert (directory / "wire.ndjson").is_file()
    assert (directory / "models.json").is_file()
    # The fixture holds no machine path: the run's cwd is the token, as in the logs.
    assert str(tmp_path) not in (directory / "wire.ndjson").read_text()
    assert check_scenario(load_scenario(directory), "replay").sessions == 1
    answers = [p.read_bytes() for p in sorted(raw.glob("*.sse"))]
    listings = [p.read_bytes() for p in sorted(raw.glob("*.models.json"))]
    assert len(answers) == len(listings) == 3  # record, its trial replay, the replay
    upstream, *replayed = answers
    assert upstream.startswith(b"data: {")
    assert replayed == [upstream, upstream]
    assert listings[1:] == [listings[0], listings[0]]


def test_a_key_in_a_recorded_answer_is_refused_by_the_harness_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A key of the user's environment that the proxy cannot know (the agent never sent it)
    # streamed by the upstream: the harness's own scan (issue 29) finds it in every file of
    # the recording — the answers as sent among them — and writes nothing.
    key = "tiny-service-" + "q7w2" * 6  # no known key shape: only the environment names it
    monkeypatch.setenv("TINY_SERVICE_TOKEN", key)
    directory = _scenario(tmp_path)
    rules = directory / "stub-rules.toml"
    rules.write_text(
        rules.read_text().replace('"hello from the stub"', f'"the key: {key}"\nchunk_size = 64')
    )
    with pytest.raises(SecretLeakError) as caught:
        check_scenario(load_scenario(directory), "record")
    message = str(caught.value)
    # Line 2: the first is the format stamp.
    assert "\n  wire.ndjson:2: the value of $TINY_SERVICE_TOKEN" in message
    assert key not in message
    assert not (directory / "wire.ndjson").exists()
    assert not (directory / "session.jsonl").exists()


def test_an_agent_serving_past_eof_needs_shutdown_sigterm(tmp_path: Path) -> None:
    directory = _scenario(tmp_path, extra='shutdown = "sigterm"', env='TINY_IGNORE_EOF = "1"')
    assert check_scenario(load_scenario(directory), "record").sessions == 1
    assert check_scenario(load_scenario(directory), "replay").sessions == 1


def test_a_drifted_system_prompt_fails_with_the_readable_masked_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The re-record hint as nox sets it, so the test holds however pytest is run.
    monkeypatch.setenv(RERECORD_COMMAND_ENV, "nox -s record -- {scenario}")
    directory = _scenario(tmp_path)
    check_scenario(load_scenario(directory), "record")
    toml = directory / "scenario.toml"
    toml.write_text(toml.read_text().replace("[env]\n", '[env]\nTINY_SYSTEM = "You are big."\n'))
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(load_scenario(directory), "replay")
    message = str(caught.value)
    assert "RequestDriftError" in message
    assert "system prompt differs" in message
    assert "You are tiny." in message
    assert "You are big." in message
    assert "nox -s record -- tiny" in message


def test_a_recording_the_proxy_refuses_to_keep_writes_nothing(tmp_path: Path) -> None:
    # The stub answers with the key the agent sent: the proxy refuses to write that call's
    # log, so what is left would be a recording without its session.
    directory = _scenario(tmp_path)
    rules = directory / "stub-rules.toml"
    rules.write_text(rules.read_text().replace("hello from the stub", f"the key: {DUMMY_KEY}"))
    with pytest.raises(RecordError) as caught:
        check_scenario(load_scenario(directory), "record")
    message = str(caught.value)
    assert message.startswith("tiny: the recording proxy did not keep the whole recording")
    assert "refus" in message
    assert "record again: " in message
    assert DUMMY_KEY not in message
    assert not (directory / "session.jsonl").exists()
    assert not (directory / "golden").exists()


GOLDEN_MASKS = r"""
[[golden_masks]]
regex = "\\bses_[0-9A-Za-z]{26}\\b"
token = "tiny-session"

[[golden_masks]]
regex = "(?<![\\w/.-]){cwd_from_root}(?![\\w.-])"
token = "cwd-from-root"
"""


def test_golden_masks_hide_what_only_the_agent_knows_is_volatile(tmp_path: Path) -> None:
    # The agent prints a session id of its own and its cwd relative to "/", both new on
    # every run: with the scenario's golden masks the goldens hold tokens and replay
    # passes; without them the same recording fails on exactly those two.
    directory = _scenario(tmp_path, extra=GOLDEN_MASKS, env='TINY_OWN_IDS = "1"')
    check_scenario(load_scenario(directory), "record")
    transcript = (directory / "golden" / "transcript.jsonl").read_text()
    assert "ses_" not in transcript
    assert '"sessionId":"{{tiny-session:1}}"' in transcript
    assert '"text":"{{cwd-from-root:1}}/notes.txt"' in transcript
    assert check_scenario(load_scenario(directory), "replay").sessions == 1

    toml = directory / "scenario.toml"
    toml.write_text(toml.read_text().replace(GOLDEN_MASKS, ""))
    with pytest.raises(GoldenMismatchError) as caught:
        check_scenario(load_scenario(directory), "replay")
    message = str(caught.value)
    assert "transcript.jsonl" in message
    assert '+{"jsonrpc":"2.0","id":1,"result":{"sessionId":"ses_' in message


def test_a_cwd_the_model_streams_in_pieces_is_recorded_as_the_token(tmp_path: Path) -> None:
    # The stub streams 8 characters a delta, so the run's cwd (some 40 characters) reaches
    # the proxy split across several deltas. The recording must still hold {{cwd}}, so
    # the golden (from the trial replay, in another cwd) shows the token, not the
    # recording run's path.
    directory = _scenario(tmp_path, env='TINY_CWD_IN_SYSTEM = "1"')
    (directory / "stub-rules.toml").write_text(
        '[[rule]]\nmatch = { system_regex = "Working directory: (?P<cwd>/\\\\S+)" }\n'
        'text = "I see {{cwd}}/notes.txt"\n'
    )
    check_scenario(load_scenario(directory), "record")

    recording = (directory / "session.jsonl").read_text()
    deltas = [
        json.loads(line)["data"]["chunk"]["text"]
        for line in recording.splitlines()
        if '"text-delta"' in line
    ]
    assert len(deltas) > 2
    assert "".join(deltas) == "I see {{cwd}}/notes.txt"
    assert "agentreel-" not in recording
    transcript = (directory / "golden" / "transcript.jsonl").read_text()
    streamed = "".join(
        json.loads(line)["params"]["update"]["content"]["text"]
        for line in transcript.splitlines()
        if "agent_message_chunk" in line
    )
    assert streamed == "I see {{cwd}}/notes.txt"
    assert check_scenario(load_scenario(directory), "replay").sessions == 1


def _title_scenario(root: Path, *, partial: bool) -> Path:
    """The tiny agent with a title side call, recorded; ``partial`` names it a partial lane."""
    directory = _scenario(root, env='TINY_TITLE = "1"')
    (directory / "stub-rules.toml").write_text(
        '[[rule]]\nmatch.model = "tiny-title-model"\ntext = "A greeting"\n' + RULES
    )
    if partial:
        toml = directory / "scenario.toml"
        toml.write_text(
            toml.read_text().replace("[model]\n", '[model]\npartial_lanes = ["title"]\n')
        )
    # The title call is recorded, a lane of its own.
    assert check_scenario(load_scenario(directory), "record").sessions == 2
    recordings = [p.read_text() for p in directory.glob("session*.jsonl")]
    assert sum("tiny-title-model" in text for text in recordings) == 1
    return directory


def _skip_title(directory: Path) -> None:
    toml = directory / "scenario.toml"
    toml.write_text(toml.read_text().replace('TINY_TITLE = "1"', 'TINY_TITLE = "0"'))


def test_a_side_call_named_in_partial_lanes_may_go_unmade_in_replay(tmp_path: Path) -> None:
    directory = _title_scenario(tmp_path, partial=True)
    # The partial lane is in no golden: whether it runs is timing, not behaviour.
    goldens = "".join(p.read_text() for p in (directory / "golden").glob("*.jsonl"))
    assert "tiny-title-model" not in goldens
    assert "hello fr" in goldens
    assert check_scenario(load_scenario(directory), "replay").sessions == 1
    _skip_title(directory)  # this time the agent skips its title call: fine for a partial lane
    assert check_scenario(load_scenario(directory), "replay").sessions == 1


def test_a_side_call_not_named_partial_must_be_made_in_replay(tmp_path: Path) -> None:
    directory = _title_scenario(tmp_path, partial=False)
    _skip_title(directory)
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(load_scenario(directory), "replay")
    (title,) = [p.name for p in directory.glob("session*.jsonl") if "tiny-title" in p.read_text()]
    assert f"- {title} ({{{{session:1}}}}, side lane): never bound" in str(caught.value)
    assert "never bound to a live session" in str(caught.value)


def _set_env(directory: Path, old: str, new: str) -> None:
    toml = directory / "scenario.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new))


def _replays_only_with(directory: Path, setting: str, recorded: str, live: str) -> Exception:
    """The scenario recorded with ``recorded`` in its env replays with ``live`` while
    ``setting`` is in its scenario.toml, and fails its goldens without it: that failure."""
    _set_env(directory, recorded, live)
    assert check_scenario(load_scenario(directory), "replay").sessions == 1
    _set_env(directory, setting, "")
    with pytest.raises(GoldenMismatchError) as caught:
        check_scenario(load_scenario(directory), "replay")
    return caught.value


KEY_MASK = """
[[golden_masks]]
key = "outputTokens"
token = "tokens"
"""


def test_a_key_mask_hides_a_volatile_number_at_any_depth(tmp_path: Path) -> None:
    # The agent reports a count that differs between runs, a number deep in a tool call's
    # raw output under a key no built-in rule knows: with the key mask the golden holds the
    # token and a replay printing another count passes; without it the replay fails there.
    directory = _scenario(tmp_path, extra=KEY_MASK, env='TINY_TOKENS = "17"')
    check_scenario(load_scenario(directory), "record")
    transcript = (directory / "golden" / "transcript.jsonl").read_text()
    assert '"usage":{"model":"tiny-model","outputTokens":"{{tokens}}"}' in transcript
    error = _replays_only_with(directory, KEY_MASK, 'TINY_TOKENS = "17"', 'TINY_TOKENS = "42"')
    assert '"outputTokens":42' in str(error)


UNORDERED = """
[transcript]
unordered = ["session_info_update", "available_commands_update"]
"""


def test_unordered_notifications_may_race_within_a_turn(tmp_path: Path) -> None:
    # Recorded with the commands first, replayed with the title first: the kinds named in
    # [transcript] unordered are a multiset per turn, written at the turn's end in one
    # canonical order; without the setting the same replay fails on the order.
    directory = _scenario(tmp_path, extra=UNORDERED, env='TINY_RACE = "commands-first"')
    check_scenario(load_scenario(directory), "record")
    lines = (directory / "golden" / "transcript.jsonl").read_text().splitlines()
    kinds = [json.loads(line).get("params", {}).get("update", {}) for line in lines]
    # Written last in the turn, right before its response.
    assert [kind.get("sessionUpdate") for kind in kinds[-3:-1]] == [
        "available_commands_update",
        "session_info_update",
    ]
    assert '"stopReason":"end_turn"' in lines[-1]
    error = _replays_only_with(
        directory, UNORDERED, 'TINY_RACE = "commands-first"', 'TINY_RACE = "title-first"'
    )
    assert "transcript.jsonl" in str(error)


def test_an_unordered_notification_may_race_the_session_new_response(tmp_path: Path) -> None:
    # Recorded with the agent's commands before its session/new response, replayed with them
    # after it, in the first prompt turn (mistral-vibe 3.0 does either by timing): both
    # belong to the first prompt turn's multiset, written at its end; without the setting
    # the same replay fails on the order.
    unordered = '[transcript]\nunordered = ["available_commands_update"]\n'
    directory = _scenario(tmp_path, extra=unordered, env='TINY_SET_UP = "before"')
    check_scenario(load_scenario(directory), "record")
    lines = (directory / "golden" / "transcript.jsonl").read_text().splitlines()
    assert '"sessionUpdate":"available_commands_update"' in lines[-2]
    assert '"stopReason":"end_turn"' in lines[-1]
    assert '"sessionId"' in lines[1]  # session/new's response, before the turn
    error = _replays_only_with(
        directory, unordered, 'TINY_SET_UP = "before"', 'TINY_SET_UP = "after"'
    )
    assert "transcript.jsonl" in str(error)


MERGE = """
[transcript]
merge = ["tool_call_update"]
"""


def test_updates_of_one_tool_call_merge_sent_as_one_or_two(tmp_path: Path) -> None:
    # Recorded with a command's output and completion as two tool_call_updates, replayed
    # with them as one (Codex 2.6 does either, by timing): [transcript] merge writes both
    # as one line; without the setting the same replay fails on the transcript.
    directory = _scenario(tmp_path, extra=MERGE, env='TINY_SPLIT = "two"')
    check_scenario(load_scenario(directory), "record")
    golden = (directory / "golden" / "transcript.jsonl").read_text()
    assert golden.count('"tool_call_update"') == 1
    assert '"data":"alpha beta\\n"' in golden
    assert '"status":"completed"' in golden
    error = _replays_only_with(directory, MERGE, 'TINY_SPLIT = "two"', 'TINY_SPLIT = "one"')
    assert "transcript.jsonl" in str(error)


def test_a_drift_in_a_real_agent_sized_request_is_short_and_shows_the_text(
    tmp_path: Path,
) -> None:
    # A 60 KB request whose one differing line is far past the preview: the failure shows
    # that line on both sides in a few lines (no digests), at most 20 lines before the
    # stderr tail, and names the full masked requests it wrote beside the run.
    directory = _scenario(tmp_path, env='TINY_PAD = "alpha"')
    (directory / "stub-rules.toml").write_text('[[rule]]\ntext = "hello from the stub"\n')
    check_scenario(load_scenario(directory), "record")
    recording = (directory / "session.jsonl").read_text()
    assert len(recording) > 50_000  # the whole text is kept once, for the excerpt
    _set_env(directory, 'TINY_PAD = "alpha"', 'TINY_PAD = "omega"')
    runs = tmp_path / "runs"
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(load_scenario(directory), "replay", work_dir=runs)
    message = str(caught.value)
    head = message.split("--- agent stderr (tail) ---")[0]
    assert len(head.splitlines()) <= 20, head
    assert "digest" not in head
    assert "line 1200: the word of the day is alpha" in head
    assert "line 1200: the word of the day is omega" in head
    recorded_file, live_file = re.findall(r"(\S+\.call-1\.(?:recorded|live)\.txt)", head)
    assert "the word of the day is alpha" in Path(recorded_file).read_text()
    assert "the word of the day is omega" in Path(live_file).read_text()
    assert len(Path(live_file).read_text()) > 50_000
    assert Path(live_file).parent == runs / "drift"  # kept beside the run's files

    # Without --keep-runs the run's folder is removed after the run: the files it names
    # are kept outside it, and still hold both sides.
    with pytest.raises(ReplayConsumptionError) as caught:
        check_scenario(load_scenario(directory), "replay")
    head = str(caught.value).split("--- agent stderr (tail) ---")[0]
    named = re.findall(r"(\S+\.call-1\.(?:recorded|live)\.txt)", head)
    assert len(named) == 2, head
    try:
        recorded_text, live_text = (Path(name).read_text() for name in named)
        assert "line 1200: the word of the day is alpha" in recorded_text
        assert "line 1200: the word of the day is omega" in live_text
    finally:
        shutil.rmtree(Path(named[0]).parent, ignore_errors=True)
