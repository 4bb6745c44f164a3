"""What a bound call streams: cwd substitution, overrides, pacing, cancellation."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agentreel.brand import new_session_id
from agentreel.llm import (
    AgentEnv,
    BlockEnd,
    Chunk,
    LlmError,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    provider_from_env,
    validate_stream,
)
from agentreel.llm_replay import OverrideError, ReplayProvider, load_recording
from agentreel.llm_replay.testing import (
    FixtureRecorder,
    collect,
    options_for,
    text_call,
    tool_call,
)
from agentreel.session import tokenize_cwd


def _write_overrides(fixture_dir: Path, overrides: list[dict[str, object]]) -> None:
    (fixture_dir / "replay.override.json").write_text(json.dumps({"overrides": overrides}))


def _two_call_main(recorder: FixtureRecorder, fixture_dir: Path) -> None:
    main = recorder.main()
    recorder.call(main, text_call("the first answer, long enough"))
    recorder.call(main, text_call("the second answer"))
    recorder.save(fixture_dir)


@pytest.mark.asyncio
async def test_replayed_stream_is_the_recorded_stream(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    main = recorder.main()
    recorded = tool_call("call_1", "read_file", ['{"path":', ' "notes.txt"}'])
    recorder.call(main, recorded)
    recorder.save(fixture_dir)

    chunks = await collect(ReplayProvider(fixture_dir).stream(options_for(None)))

    assert chunks == recorded
    validate_stream(chunks)


@pytest.mark.asyncio
async def test_cwd_token_is_replaced_in_text_tool_arguments_and_blocks(
    recorder: FixtureRecorder, fixture_dir: Path, tmp_path: Path
) -> None:
    main = recorder.main()
    recorder.call(main, text_call("I will edit {{cwd}}/a.txt now"))
    # The token split across argument deltas must still be replaced.
    recorder.call(main, tool_call("c1", "write_file", ['{"path": "{{c', 'wd}}/a.txt"}']))
    recorder.save(fixture_dir)
    live = tmp_path / "live dir"
    provider = ReplayProvider(fixture_dir, live_cwd=live)

    text = await collect(provider.stream(options_for(None)))
    tool = await collect(provider.stream(options_for(None)))

    assert "".join(c.text for c in text if isinstance(c, TextDelta)) == (
        f"I will edit {live}/a.txt now"
    )
    assert BlockEnd(index=0, block=TextPart(f"I will edit {live}/a.txt now")) in text
    arguments = "".join(c.arguments_delta for c in tool if isinstance(c, ToolCallDelta))
    assert json.loads(arguments) == {"path": f"{live}/a.txt"}
    end = next(c for c in tool if isinstance(c, BlockEnd))
    assert isinstance(end.block, ToolCallPart)
    assert json.loads(end.block.arguments) == {"path": f"{live}/a.txt"}
    validate_stream(tool)


_RECORD_CWD = "/tmp/agentreel-rec-q1/cwd"
_SPLIT_TEXT = f"Reading {_RECORD_CWD}/notes.txt"
_SPLIT_ARGUMENTS = json.dumps({"filePath": f"{_RECORD_CWD}/notes.txt"})


def _record_split_cwd(sessions: Path, fixture_dir: Path, cut: int) -> None:
    """A recording whose model streamed the cwd cut after ``cut`` of its characters, in
    text and in tool arguments, written as the harness and the proxy write one."""
    recorder = FixtureRecorder(sessions, cwd=_RECORD_CWD)
    text_at = len("Reading ") + cut
    args_at = _SPLIT_ARGUMENTS.index(_RECORD_CWD) + cut
    text = text_call(_SPLIT_TEXT)
    main = recorder.main()
    recorder.call(
        main,
        [
            *text[:1],
            TextDelta(index=0, text=_SPLIT_TEXT[:text_at]),
            TextDelta(index=0, text=_SPLIT_TEXT[text_at:]),
            *text[3:],
        ],
    )
    pieces = [_SPLIT_ARGUMENTS[:args_at], _SPLIT_ARGUMENTS[args_at:]]
    recorder.call(main, tool_call("c1", "read", pieces))
    recorder.save(fixture_dir)
    for path in fixture_dir.glob("session*.jsonl"):
        data = tokenize_cwd(path.read_bytes(), Path(_RECORD_CWD))
        assert _RECORD_CWD.encode() not in data
        path.write_bytes(data)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "cut",
    [1, 5, len(_RECORD_CWD) // 2, len(_RECORD_CWD) - 1],
    ids=["after-first-slash", "early", "middle", "last-character"],
)
async def test_cwd_split_across_recorded_deltas_round_trips(
    tmp_path: Path, fixture_dir: Path, cut: int
) -> None:
    """A model streamed the run's cwd in two deltas (text and tool arguments): the
    recording holds {{cwd}} (``tokenize_cwd``) and replay hands another run its own cwd,
    whole, in the same number of deltas."""
    _record_split_cwd(tmp_path / "sessions", fixture_dir, cut)
    live = tmp_path / "live"
    provider = ReplayProvider(fixture_dir, live_cwd=live)

    streamed = await collect(provider.stream(options_for(None)))
    tool = await collect(provider.stream(options_for(None)))

    deltas = [c.text for c in streamed if isinstance(c, TextDelta)]
    assert len(deltas) == 2
    assert "".join(deltas) == f"Reading {live}/notes.txt"
    assert BlockEnd(index=0, block=TextPart(f"Reading {live}/notes.txt")) in streamed
    pieces = [c.arguments_delta for c in tool if isinstance(c, ToolCallDelta)]
    assert len(pieces) == 2
    assert json.loads("".join(pieces)) == {"filePath": f"{live}/notes.txt"}
    validate_stream(tool)


@pytest.mark.asyncio
async def test_cwd_with_json_special_characters_stays_valid_json(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    main = recorder.main()
    recorder.call(main, tool_call("c1", "read_file", ['{"path": "{{cwd}}/x"}']))
    recorder.save(fixture_dir)
    live = 'C:\\work\\"quoted"'
    chunks = await collect(ReplayProvider(fixture_dir, live_cwd=live).stream(options_for(None)))

    arguments = "".join(c.arguments_delta for c in chunks if isinstance(c, ToolCallDelta))
    assert json.loads(arguments) == {"path": f"{live}/x"}


def test_chunks_without_the_token_are_shared_not_copied(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    main = recorder.main()
    recorder.call(main, text_call("no token here"))
    recorder.save(fixture_dir)
    recording = load_recording(fixture_dir)

    assert recording.scripts[0].calls[0].cwd_chunks == ()


@pytest.mark.asyncio
async def test_throw_override_streams_a_prefix_then_raises(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _two_call_main(recorder, fixture_dir)
    _write_overrides(
        fixture_dir,
        [
            {
                "action": "throw",
                "session": 0,
                "call": 2,
                "chunks": 2,
                "code": "server_error",
                "status": 503,
                "message": "upstream went away",
            }
        ],
    )
    provider = ReplayProvider(fixture_dir)
    first = await collect(provider.stream(options_for(None)))
    received: list[Chunk] = []

    async def consume() -> None:
        async for chunk in provider.stream(options_for(None)):
            received.append(chunk)

    with pytest.raises(LlmError) as caught:
        await consume()

    assert len(first) == 6
    assert received == text_call("the second answer")[:2]
    assert (caught.value.code, caught.value.status) == ("server_error", 503)
    assert caught.value.message == "upstream went away"
    provider.assert_consumed()


@pytest.mark.asyncio
async def test_hang_override_streams_a_prefix_then_waits_for_cancellation(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _two_call_main(recorder, fixture_dir)
    _write_overrides(fixture_dir, [{"action": "hang", "session": 0, "call": 1, "chunks": 2}])
    provider = ReplayProvider(fixture_dir)
    received: list[Chunk] = []
    two_received = asyncio.Event()

    async def consume() -> None:
        async for chunk in provider.stream(options_for(None)):
            received.append(chunk)
            if len(received) == 2:
                two_received.set()

    task = asyncio.create_task(consume())
    await two_received.wait()
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert received == text_call("the first answer, long enough")[:2]


@pytest.mark.asyncio
async def test_cancelling_a_paced_stream_stops_it_at_once(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _two_call_main(recorder, fixture_dir)
    provider = ReplayProvider(fixture_dir, pacing_ms=5)
    received: list[Chunk] = []
    first_received = asyncio.Event()

    async def consume() -> None:
        async for chunk in provider.stream(options_for(None)):
            received.append(chunk)
            first_received.set()

    task = asyncio.create_task(consume())
    await first_received.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert received == text_call("the first answer, long enough")[:1]


@pytest.mark.asyncio
async def test_closing_a_stream_mid_way_stops_it(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _two_call_main(recorder, fixture_dir)
    provider = ReplayProvider(fixture_dir)
    stream = provider.stream(options_for(None))
    received = [await anext(stream), await anext(stream)]
    await stream.aclose()  # type: ignore[attr-defined]

    with pytest.raises(StopAsyncIteration):
        await anext(stream)
    assert len(received) == 2
    # The abandoned call still counts as made: the next call gets call 2.
    second = await collect(provider.stream(options_for(None)))
    assert "".join(c.text for c in second if isinstance(c, TextDelta)) == "the second answer"


@pytest.mark.asyncio
async def test_paced_stream_delivers_every_chunk(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _two_call_main(recorder, fixture_dir)
    provider = ReplayProvider(fixture_dir, pacing_ms=1)

    assert await collect(provider.stream(options_for(None))) == text_call(
        "the first answer, long enough"
    )


def test_override_with_unknown_key_names_file_and_key(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _two_call_main(recorder, fixture_dir)
    _write_overrides(fixture_dir, [{"action": "hang", "session": 0, "call": 1, "after": 2}])

    with pytest.raises(OverrideError) as caught:
        load_recording(fixture_dir)
    message = str(caught.value)
    assert "replay.override.json" in message
    assert "unknown field `after`" in message
    assert "$.overrides[0]" in message


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"action": "hang", "session": 3, "call": 1}, "session 3 does not exist"),
        ({"action": "throw", "session": 0, "call": 3}, "session 0 has no call 3"),
        ({"action": "throw", "session": 0, "call": 0}, "session 0 has no call 0"),
        ({"action": "explode", "session": 0, "call": 1}, "Invalid value 'explode'"),
        ({"action": "hang", "session": 0, "call": 1, "chunks": 6}, "must be fewer than"),
        ({"action": "hang", "session": 0, "call": 1, "chunks": -1}, "chunks must be >= 0"),
    ],
)
def test_invalid_override_is_rejected_with_its_reason(
    recorder: FixtureRecorder, fixture_dir: Path, override: dict[str, object], expected: str
) -> None:
    _two_call_main(recorder, fixture_dir)
    _write_overrides(fixture_dir, [override])

    with pytest.raises(OverrideError, match=r"replay\.override\.json") as caught:
        load_recording(fixture_dir)
    assert expected in str(caught.value)


def test_duplicate_override_is_rejected(recorder: FixtureRecorder, fixture_dir: Path) -> None:
    _two_call_main(recorder, fixture_dir)
    entry = {"action": "hang", "session": 0, "call": 1}
    _write_overrides(fixture_dir, [entry, entry])

    with pytest.raises(OverrideError, match="overridden twice"):
        load_recording(fixture_dir)


@pytest.mark.asyncio
async def test_override_can_target_a_child_session(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    main = recorder.main()
    recorder.call(main, text_call("parent"))
    recorder.call(recorder.spawn(main, 0), text_call("child"))
    recorder.save(fixture_dir)
    _write_overrides(fixture_dir, [{"action": "throw", "session": 1, "call": 1, "code": "x"}])
    provider = ReplayProvider(fixture_dir)
    parent = new_session_id()
    await collect(provider.stream(options_for(parent)))

    with pytest.raises(LlmError, match=r"failure injected by replay\.override\.json"):
        await collect(provider.stream(options_for("c", parent=parent, spawn_index=0)))


@pytest.mark.asyncio
async def test_from_the_environment_the_live_cwd_is_the_agents_unless_it_names_one(
    recorder: FixtureRecorder, fixture_dir: Path, tmp_path: Path
) -> None:
    main = recorder.main()
    recorder.call(main, text_call("I am in {{cwd}}"))
    recorder.save(fixture_dir)
    environ: dict[str, str] = {AgentEnv.PROVIDER: "replay", AgentEnv.REPLAY_DIR: str(fixture_dir)}

    # The kit's reader gives the agent's working directory to the replay factory, which
    # declares live_cwd; the replay variables need no replay-specific code in the agent.
    by_agent = provider_from_env(environ, cwd=str(tmp_path / "session"))
    texts = [
        c.text
        for c in await collect(by_agent.stream(options_for(None)))
        if isinstance(c, TextDelta)
    ]
    assert "".join(texts) == f"I am in {tmp_path / 'session'}"

    named = provider_from_env({**environ, AgentEnv.REPLAY_LIVE_CWD: "/named"}, cwd="/ignored")
    texts = [
        c.text for c in await collect(named.stream(options_for(None))) if isinstance(c, TextDelta)
    ]
    assert "".join(texts) == "I am in /named"
