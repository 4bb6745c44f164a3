"""Fixture loading and script derivation: file set, seed slicing, calls split at finish."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentreel.brand import new_session_id
from agentreel.llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    TextDelta,
    TextPart,
    ToolCallPart,
)
from agentreel.llm_replay import (
    FixtureError,
    IncompleteCallError,
    ReplayProvider,
    load_recording,
)
from agentreel.llm_replay.testing import (
    RECORD_CWD,
    FixtureRecorder,
    collect,
    options_for,
    text_call,
    tool_call,
)
from agentreel.session import rerecord_command


def _three_sessions(recorder: FixtureRecorder, fixture_dir: Path) -> list[str]:
    main = recorder.main()
    recorder.call(main, text_call("main"))
    recorder.call(recorder.spawn(main, 0), text_call("child 0"))
    recorder.call(recorder.spawn(main, 1), text_call("child 1"))
    return recorder.save(fixture_dir)


def test_scripts_follow_file_numbering_with_lineage(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    ids = _three_sessions(recorder, fixture_dir)
    recording = load_recording(fixture_dir)

    assert [s.file for s in recording.scripts] == [
        "session.jsonl",
        "session.1.jsonl",
        "session.2.jsonl",
    ]
    assert [s.header.id for s in recording.scripts] == ids
    assert recording.lineage == {(ids[0], 0): 1, (ids[0], 1): 2}
    assert [len(s.calls) for s in recording.scripts] == [1, 1, 1]
    assert isinstance(recording.scripts[0].calls[0].chunks[-1], Finish)


def test_missing_main_session_is_named(recorder: FixtureRecorder, fixture_dir: Path) -> None:
    _three_sessions(recorder, fixture_dir)
    (fixture_dir / "session.jsonl").unlink()

    with pytest.raises(FixtureError, match=r"missing .*my-scenario/session\.jsonl") as caught:
        load_recording(fixture_dir)
    assert caught.value.path == fixture_dir / "session.jsonl"
    assert rerecord_command("my-scenario") in str(caught.value)


def test_gap_in_child_numbers_names_the_missing_file(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _three_sessions(recorder, fixture_dir)
    (fixture_dir / "session.1.jsonl").unlink()

    with pytest.raises(FixtureError, match=r"missing .*session\.1\.jsonl.*without gaps"):
        load_recording(fixture_dir)


@pytest.mark.parametrize("stray", ["session.01.jsonl", "session.x.jsonl", "session.json"])
def test_stray_session_file_is_named(
    recorder: FixtureRecorder, fixture_dir: Path, stray: str
) -> None:
    _three_sessions(recorder, fixture_dir)
    shutil.copyfile(fixture_dir / "session.1.jsonl", fixture_dir / stray)

    with pytest.raises(FixtureError, match=rf"stray file .*{stray.replace('.', chr(92) + '.')}"):
        load_recording(fixture_dir)


def test_other_files_are_ignored(recorder: FixtureRecorder, fixture_dir: Path) -> None:
    _three_sessions(recorder, fixture_dir)
    (fixture_dir / "transcript.jsonl").write_text("{}\n")
    (fixture_dir / "scenario.toml").write_text("")

    assert len(load_recording(fixture_dir).scripts) == 3


def test_missing_fixture_directory(tmp_path: Path) -> None:
    with pytest.raises(FixtureError, match="does not exist"):
        load_recording(tmp_path / "nope")


def test_call_without_finish_names_session_turn_and_step(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    main = recorder.main()
    recorder.call(main, text_call("complete"))
    child = recorder.spawn(main, 0)
    recorder.call(child, text_call("cut")[:-1])
    ids = recorder.save(fixture_dir)

    with pytest.raises(IncompleteCallError) as caught:
        load_recording(fixture_dir)

    message = str(caught.value)
    assert "session.1.jsonl" in message
    assert f"session {ids[1]}, turn 1, step 1" in message
    assert "no finish chunk" in message
    assert rerecord_command("my-scenario") in message
    assert (caught.value.turn, caught.value.step) == (1, 1)


def test_torn_last_line_is_a_fixture_error(recorder: FixtureRecorder, fixture_dir: Path) -> None:
    _three_sessions(recorder, fixture_dir)
    path = fixture_dir / "session.2.jsonl"
    path.write_bytes(path.read_bytes() + b'{"type":"turn/st')

    with pytest.raises(FixtureError, match=r"session\.2\.jsonl:\d+: the last line is cut"):
        load_recording(fixture_dir)


def test_corrupt_line_is_a_fixture_error(recorder: FixtureRecorder, fixture_dir: Path) -> None:
    _three_sessions(recorder, fixture_dir)
    path = fixture_dir / "session.1.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(1, b"garbage\n")
    path.write_bytes(b"".join(lines))

    with pytest.raises(FixtureError, match=r"session\.1\.jsonl:2") as caught:
        load_recording(fixture_dir)
    assert rerecord_command("my-scenario") in str(caught.value)
    assert "<scenario>" not in str(caught.value)


@pytest.mark.asyncio
async def test_fork_child_script_excludes_its_seed(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    main = recorder.main()
    recorder.call(main, text_call("parent turn one"))
    recorder.end_turn(main)
    recorder.turn(main)
    recorder.call(main, text_call("parent forks"))
    child = recorder.fork(main, 0)
    recorder.call(child, text_call("fork child works"))
    recorder.call(main, text_call("parent ends"))
    recorder.save(fixture_dir)

    recording = load_recording(fixture_dir)
    assert recording.scripts[1].header.seed_length > 0
    assert len(recording.scripts[1].calls) == 1

    provider = ReplayProvider(fixture_dir)
    parent, forked = new_session_id(), new_session_id()
    await collect(provider.stream(options_for(parent)))
    await collect(provider.stream(options_for(parent)))
    chunks = await collect(provider.stream(options_for(forked, parent=parent, spawn_index=0)))
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "fork child works"


@pytest.mark.asyncio
async def test_ignoring_the_seed_replays_the_parents_calls_to_the_child(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    """The respect_seed_length test hook shows why the seed slice exists."""
    main = recorder.main()
    recorder.call(main, text_call("parent turn one"))
    recorder.end_turn(main)
    child = recorder.fork(main, 0)
    recorder.call(child, text_call("fork child works"))
    recorder.save(fixture_dir)

    provider = ReplayProvider(fixture_dir, respect_seed_length=False)
    parent, forked = new_session_id(), new_session_id()
    await collect(provider.stream(options_for(parent)))
    chunks = await collect(provider.stream(options_for(forked, parent=parent, spawn_index=0)))

    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "parent turn one"


def test_fork_seed_longer_than_a_block_of_the_loader_is_sliced_off(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    """The loader hands the events over a block of lines at a time; the seed slice must
    hold across block boundaries, however long the parent's history is."""
    main = recorder.main()
    for number in range(1500):  # ~300 KB of seed: several of the loader's blocks
        recorder.call(main, text_call(f"parent call {number}"))
    recorder.end_turn(main)
    child = recorder.fork(main, 0)
    recorder.call(child, text_call("fork child works"))
    recorder.save(fixture_dir)
    assert (fixture_dir / "session.1.jsonl").stat().st_size > 4 * (1 << 16)

    recording = load_recording(fixture_dir)
    assert recording.scripts[1].header.seed_length > 1500 * 8
    assert len(recording.scripts[0].calls) == 1500
    [own] = recording.scripts[1].calls
    assert "".join(c.text for c in own.chunks if isinstance(c, TextDelta)) == "fork child works"
    assert own.number == 1


def test_a_bad_line_after_a_call_without_finish_is_named_first(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    """The log's own errors come first, as when the log was loaded whole before the calls
    were derived: the cut call is a symptom, the corrupt line the cause."""
    main = recorder.main()
    recorder.call(main, text_call("cut")[:-1])
    for number in range(800):  # the bad line lands in a later block of the loader
        recorder.call(main, text_call(f"call {number}"))
    recorder.save(fixture_dir)
    path = fixture_dir / "session.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    original = lines[-3]
    lines[-3] = b"garbage\n"
    path.write_bytes(b"".join(lines))

    with pytest.raises(FixtureError, match=rf"session\.jsonl:{len(lines) - 2}: invalid event"):
        load_recording(fixture_dir)
    lines[-3] = original  # the same file without the bad line: now the cut call is named
    path.write_bytes(b"".join(lines))
    with pytest.raises(IncompleteCallError, match="turn 1, step 1: the recorded model call"):
        load_recording(fixture_dir)


def test_session_without_model_calls_is_never_a_first_call_candidate(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    main = recorder.main()
    recorder.call(main, text_call("main"))
    recorder.child_without_index(main)  # a child that failed before calling the model
    late = recorder.child_without_index(main)
    recorder.call(late, text_call("late child"))
    recorder.save(fixture_dir)

    recording = load_recording(fixture_dir)
    assert [len(s.calls) for s in recording.scripts] == [1, 0, 1]
    provider = ReplayProvider(fixture_dir)
    provider.stream(options_for(None))
    stream = provider.stream(options_for(new_session_id()))
    assert stream is not None
    provider.assert_consumed()


def test_calls_keep_their_request_headers_and_block_order(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    main = recorder.main()
    recorder.call(main, text_call("with header"), options=options_for("x"))
    recorder.call(main, text_call("without header"))
    recorder.save(fixture_dir)

    calls = load_recording(fixture_dir).scripts[0].calls
    assert calls[0].request is not None
    assert calls[0].request.system == "You are a test agent."
    assert calls[1].request is None
    assert isinstance(calls[1].chunks[0], BlockStart)
    assert [(c.number, c.turn, c.step) for c in calls] == [(1, 1, 1), (2, 1, 2)]


@pytest.mark.parametrize(
    ("pieces", "healed"),
    [
        (["a {", "{cw", "d}", "} b"], ["a {{cwd}}", "", "", " b"]),
        (["{{cwd}}/x {{c", "wd}}/y"], ["{{cwd}}/x {{cwd}}", "/y"]),
        (["x", "{{cwd", "}}", "{{cwd}}"], ["x", "{{cwd}}", "", "{{cwd}}"]),
        (["{{cw", "d"], ["{{cw", "d"]),  # never completed: left alone
    ],
)
def test_tokens_split_across_deltas_are_moved_whole(
    recorder: FixtureRecorder, fixture_dir: Path, pieces: list[str], healed: list[str]
) -> None:
    main = recorder.main()
    text = "".join(pieces)
    chunks: list[Chunk] = [
        BlockStart(index=0, block_type="text"),
        *[TextDelta(index=0, text=piece) for piece in pieces],
        Finish(reason="stop"),
    ]
    recorder.call(main, chunks)
    recorder.save(fixture_dir)

    call = load_recording(fixture_dir).scripts[0].calls[0]

    deltas = [c for c in call.chunks if isinstance(c, TextDelta)]
    assert [d.text for d in deltas] == healed
    assert "".join(d.text for d in deltas) == text
    assert len(call.chunks) == len(chunks)
    assert call.cwd_chunks == tuple(i + 1 for i, piece in enumerate(healed) if "{{cwd}}" in piece)


@pytest.mark.asyncio
async def test_token_outside_the_deltas_is_replaced_too(
    recorder: FixtureRecorder, fixture_dir: Path, tmp_path: Path
) -> None:
    """No delta holds a brace (derivation skips the token search in them), but a block
    end (arguments sent whole, no deltas) and a finish message name the cwd: still found
    and replaced, and a brace in another call's delta does not leak into this one."""
    main = recorder.main()
    arguments = '{"path": "{{cwd}}/a.txt"}'
    recorder.call(
        main,
        [
            BlockStart(index=0, block_type="text"),
            TextDelta(index=0, text="plain"),
            BlockEnd(index=0, block=TextPart("plain")),
            BlockStart(index=1, block_type="tool-call"),
            BlockEnd(index=1, block=ToolCallPart(id="c1", name="read", arguments=arguments)),
            Finish(reason="error", message="cut in {{cwd}}", code="stream-cut"),
        ],
    )
    recorder.call(main, text_call("{ not a token }"))
    recorder.save(fixture_dir)

    calls = load_recording(fixture_dir).scripts[0].calls
    assert calls[0].cwd_chunks == (4, 5)
    assert calls[1].cwd_chunks == ()
    live = tmp_path / "live"
    provider = ReplayProvider(fixture_dir, live_cwd=live)
    streamed = await collect(provider.stream(options_for(None)))
    assert streamed[4] == BlockEnd(
        index=1,
        block=ToolCallPart(id="c1", name="read", arguments=f'{{"path": "{live}/a.txt"}}'),
    )
    assert streamed[5] == Finish(reason="error", message=f"cut in {live}", code="stream-cut")
    assert streamed[1] == TextDelta(index=0, text="plain")


# -- consistency checks on every load (SPEC 10) ---------------------------------------


def _edit_header(path: Path, **fields: object) -> None:
    header, rest = path.read_bytes().split(b"\n", 1)
    data = json.loads(header)
    data.update(fields)
    path.write_bytes(json.dumps(data, separators=(",", ":")).encode() + b"\n" + rest)


def test_one_session_in_two_files_names_both(recorder: FixtureRecorder, fixture_dir: Path) -> None:
    ids = _three_sessions(recorder, fixture_dir)
    shutil.copyfile(fixture_dir / "session.1.jsonl", fixture_dir / "session.2.jsonl")

    with pytest.raises(FixtureError) as caught:
        load_recording(fixture_dir)
    message = str(caught.value)
    assert f"both record session {ids[1]}" in message
    assert "session.1.jsonl" in message
    assert caught.value.path == fixture_dir / "session.2.jsonl"


def test_child_whose_id_is_its_parents_is_named(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    ids = _three_sessions(recorder, fixture_dir)
    _edit_header(fixture_dir / "session.1.jsonl", parent_session=ids[1])

    with pytest.raises(FixtureError, match=r"session\.1\.jsonl:1: session .* names itself"):
        load_recording(fixture_dir)


def test_child_with_lineage_its_parent_never_started_is_named(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    ids = _three_sessions(recorder, fixture_dir)
    main = fixture_dir / "session.jsonl"
    lines = main.read_bytes().split(b"\n")
    # The parent's subagent/start for spawn index 1 now names another index.
    lines = [
        line.replace(b'"spawn_index":1', b'"spawn_index":7') if b"subagent/start" in line else line
        for line in lines
    ]
    main.write_bytes(b"\n".join(lines))

    with pytest.raises(FixtureError) as caught:
        load_recording(fixture_dir)
    message = str(caught.value)
    assert f"session.2.jsonl:1: session {ids[2]} claims parent {ids[0]}" in message
    assert "no subagent/start for spawn index 1" in message
    assert str(main) in message


def test_parent_log_without_delegation_events_does_not_need_subagent_start(
    tmp_path: Path, fixture_dir: Path
) -> None:
    # A proxy records model calls only: its parent log holds no tool calls or subagent/start.
    recorder = FixtureRecorder(tmp_path / "proxy-sessions")
    main = recorder.main()
    recorder.call(main, text_call("main"))
    child = recorder.store.spawn(main, 0)
    recorder.call(child, text_call("child"))
    recorder.save(fixture_dir)

    recording = load_recording(fixture_dir)
    assert len(recording.scripts) == 2


def test_child_files_out_of_session_order_are_named(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    ids = _three_sessions(recorder, fixture_dir)
    first, second = fixture_dir / "session.1.jsonl", fixture_dir / "session.2.jsonl"
    first_bytes = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(first_bytes)

    with pytest.raises(FixtureError) as caught:
        load_recording(fixture_dir)
    message = str(caught.value)
    assert f"session.2.jsonl holds session {ids[1]}, which comes at session.1.jsonl" in message
    assert "numbered in session order" in message


def test_recording_runs_absolute_cwd_where_the_token_belongs_is_named(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    main = recorder.main()
    arguments = json.dumps({"path": f"{RECORD_CWD}/notes.txt"})
    recorder.call(main, tool_call("c1", "read_file", [arguments]))
    recorder.save(fixture_dir)

    with pytest.raises(FixtureError) as caught:
        load_recording(fixture_dir)
    message = str(caught.value)
    assert (
        f"session.jsonl:{_first_line_with(fixture_dir / 'session.jsonl', RECORD_CWD)}:" in message
    )
    assert f"absolute path {RECORD_CWD}" in message
    assert "{{cwd}} belongs" in message


def _first_line_with(path: Path, text: str) -> int:
    lines = path.read_text().splitlines()
    return next(n for n, line in enumerate(lines[1:], start=2) if text in line)


def test_blank_line_in_a_recording_is_named_with_the_rerecord_command(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _three_sessions(recorder, fixture_dir)
    path = fixture_dir / "session.1.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(2, b"\n")
    path.write_bytes(b"".join(lines))

    with pytest.raises(FixtureError) as caught:
        load_recording(fixture_dir)
    assert f"{path}:3: blank line" in str(caught.value)
    assert rerecord_command("my-scenario") in str(caught.value)
