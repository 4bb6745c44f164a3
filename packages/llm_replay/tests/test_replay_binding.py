"""The four binding rules, per-script cursors, and the errors binding can raise."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentreel.brand import new_session_id
from agentreel.llm import Chunk, Message, TextDelta
from agentreel.llm_replay import (
    ReplayProvider,
    RequestDriftError,
    ScriptExhaustedError,
    UnconsumedScriptError,
    UnrecordedSessionError,
    _binding,
    _lanes,
)
from agentreel.llm_replay.testing import (
    FixtureRecorder,
    collect,
    options_for,
    text_call,
    tool_call,
)
from agentreel.session import rerecord_command


def _text(chunks: list[Chunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


def _parent_with_two_children(
    recorder: FixtureRecorder, fixture_dir: Path, *, lineage: bool = True
) -> list[str]:
    main = recorder.main()
    recorder.call(main, text_call("parent delegates"))
    if lineage:
        first, second = recorder.spawn(main, 0), recorder.spawn(main, 1)
    else:
        first, second = recorder.child_without_index(main), recorder.child_without_index(main)
    recorder.call(first, text_call("child zero reads the docs"))
    recorder.call(second, text_call("child one writes the tests"))
    recorder.call(main, text_call("parent summarises"))
    return recorder.save(fixture_dir)


async def _replay_with_parent_bound(
    recorder: FixtureRecorder,
    fixture_dir: Path,
    *,
    lineage: bool = True,
    lineage_binding: bool = True,
) -> tuple[ReplayProvider, str, list[str]]:
    """Record a parent with two children, replay it, and let the parent make its first
    call (binding it). Returns the provider, the live parent id and the recorded ids."""
    ids = _parent_with_two_children(recorder, fixture_dir, lineage=lineage)
    provider = ReplayProvider(fixture_dir, lineage_binding=lineage_binding)
    parent = new_session_id()
    await collect(provider.stream(options_for(parent)))
    return provider, parent, ids


def _main_only(recorder: FixtureRecorder, fixture_dir: Path, *answers: str) -> list[str]:
    """Record a single session whose model calls answer ``answers`` in order."""
    main = recorder.main()
    for answer in answers:
        recorder.call(main, text_call(answer))
    return recorder.save(fixture_dir)


@pytest.mark.asyncio
async def test_anonymous_caller_gets_the_main_script_and_keeps_it(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _main_only(recorder, fixture_dir, "first answer", "second answer")
    provider = ReplayProvider(fixture_dir)

    assert _text(await collect(provider.stream(options_for(None)))) == "first answer"
    assert _text(await collect(provider.stream(options_for(None)))) == "second answer"
    provider.assert_consumed()


@pytest.mark.asyncio
async def test_a_caller_without_session_id_that_runs_out_is_told_to_pass_one(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _main_only(recorder, fixture_dir, "only answer")
    provider = ReplayProvider(fixture_dir)
    await collect(provider.stream(options_for(None)))
    with pytest.raises(ScriptExhaustedError) as anonymous:
        await collect(provider.stream(options_for(None)))
    assert "The agent sent no session_id: pass GenerateOptions.session_id" in str(anonymous.value)

    named = ReplayProvider(fixture_dir)
    caller = new_session_id()
    await collect(named.stream(options_for(caller)))
    with pytest.raises(ScriptExhaustedError) as caught:
        await collect(named.stream(options_for(caller)))
    assert "session_id" not in str(caught.value)  # a caller with an id is not told to pass one


@pytest.mark.asyncio
async def test_bound_caller_keeps_its_script_and_cursor(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _parent_with_two_children(recorder, fixture_dir, lineage=False)
    provider = ReplayProvider(fixture_dir)
    parent, child_a, child_b = new_session_id(), new_session_id(), new_session_id()

    assert _text(await collect(provider.stream(options_for(parent)))) == "parent delegates"
    assert _text(await collect(provider.stream(options_for(child_a, parent=parent)))) == (
        "child zero reads the docs"
    )
    assert _text(await collect(provider.stream(options_for(child_b, parent=parent)))) == (
        "child one writes the tests"
    )
    # Rule 2: the parent is bound, so it continues its own script at call 2.
    assert _text(await collect(provider.stream(options_for(parent)))) == "parent summarises"
    provider.assert_consumed()


@pytest.mark.asyncio
async def test_lineage_binds_children_started_in_the_opposite_order(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    provider, parent, _ = await _replay_with_parent_bound(recorder, fixture_dir)
    child_0, child_1 = new_session_id(), new_session_id()

    # Child 1 calls first this time; lineage still hands each its own recording.
    second = await collect(provider.stream(options_for(child_1, parent=parent, spawn_index=1)))
    first = await collect(provider.stream(options_for(child_0, parent=parent, spawn_index=0)))

    assert _text(first) == "child zero reads the docs"
    assert _text(second) == "child one writes the tests"
    await collect(provider.stream(options_for(parent)))
    provider.assert_consumed()


@pytest.mark.asyncio
async def test_without_lineage_first_call_order_misroutes_reversed_children(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    """The test hook proves rule 3 matters: first-call order alone swaps the children."""
    provider, parent, _ = await _replay_with_parent_bound(
        recorder, fixture_dir, lineage_binding=False
    )
    child_0, child_1 = new_session_id(), new_session_id()

    second = await collect(provider.stream(options_for(child_1, parent=parent, spawn_index=1)))
    first = await collect(provider.stream(options_for(child_0, parent=parent, spawn_index=0)))

    assert _text(second) == "child zero reads the docs"
    assert _text(first) == "child one writes the tests"


@pytest.mark.asyncio
async def test_first_call_order_binds_unindexed_children_by_first_call(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    provider, parent, _ = await _replay_with_parent_bound(recorder, fixture_dir, lineage=False)
    child_a, child_b = new_session_id(), new_session_id()

    # Streams are created (and bound) before any is read: the cursor moves at call time.
    stream_a = provider.stream(options_for(child_a, parent=parent))
    stream_b = provider.stream(options_for(child_b, parent=parent))
    assert _text(await collect(stream_b)) == "child one writes the tests"
    assert _text(await collect(stream_a)) == "child zero reads the docs"


@pytest.mark.asyncio
async def test_cursor_advances_when_the_call_is_made(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _main_only(recorder, fixture_dir, "one", "two")
    provider = ReplayProvider(fixture_dir)
    sid = new_session_id()

    first = provider.stream(options_for(sid))
    second = provider.stream(options_for(sid))

    assert _text(await collect(second)) == "two"
    assert _text(await collect(first)) == "one"


@pytest.mark.asyncio
async def test_extra_live_session_is_unrecorded(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _main_only(recorder, fixture_dir, "only one session")
    provider = ReplayProvider(fixture_dir, scenario="plain-turn")
    parent, stray = new_session_id(), new_session_id()
    await collect(provider.stream(options_for(parent)))

    with pytest.raises(UnrecordedSessionError) as caught:
        provider.stream(options_for(stray))

    message = str(caught.value)
    assert f"live session {stray}" in message
    assert "parent none, spawn index none" in message
    assert "holds 1 session script(s), 1 already bound" in message
    assert rerecord_command("plain-turn") in message
    assert caught.value.session_id == stray


@pytest.mark.asyncio
async def test_a_main_recording_cut_to_its_header_is_named_not_all_bound(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _main_only(recorder, fixture_dir, "an answer")
    main = fixture_dir / "session.jsonl"
    main.write_text(main.read_text().splitlines()[0] + "\n")
    provider = ReplayProvider(fixture_dir, scenario="plain-turn")

    with pytest.raises(UnrecordedSessionError) as caught:
        provider.stream(options_for(new_session_id()))

    message = str(caught.value)
    assert "session.jsonl ({{session:main}}) recorded no model call (the file was cut short" in (
        message
    )
    assert "already bound" not in message
    assert "none bound yet" in message


@pytest.mark.asyncio
async def test_child_with_unrecorded_spawn_index_is_unrecorded_not_misrouted(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    provider, parent, _ = await _replay_with_parent_bound(recorder, fixture_dir)
    child = new_session_id()

    with pytest.raises(UnrecordedSessionError) as caught:
        provider.stream(options_for(child, parent=parent, spawn_index=2))

    message = str(caught.value)
    assert (
        f"live session {child} (parent session.jsonl ({{{{session:main}}}}) (live {parent}), "
        "spawn index 2)" in message
    )
    assert "recorded no child with spawn index 2 (recorded spawn indexes: [0, 1])" in message
    assert "session.jsonl ({{session:main}})" in message
    assert rerecord_command("my-scenario") in message
    assert caught.value.spawn_index == 2


@pytest.mark.asyncio
async def test_unindexed_child_is_not_given_a_lineage_child_script(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    provider, parent, _ = await _replay_with_parent_bound(recorder, fixture_dir)

    with pytest.raises(UnrecordedSessionError, match="without a spawn index"):
        provider.stream(options_for(new_session_id(), parent=parent))


def _as_proxied(fixture_dir: Path) -> None:
    """Rewrite a recording as the proxy writes one: each request names its wire API."""
    for log in fixture_dir.glob("session*.jsonl"):
        events = [json.loads(line) for line in log.read_text().splitlines()]
        for event in events:
            if event["type"] == "request/header":
                event["data"]["api"] = "chat"
        log.write_text("".join(json.dumps(event) + "\n" for event in events))


@pytest.mark.asyncio
@pytest.mark.parametrize("proxied", [True, False])
async def test_a_proxied_parents_side_lane_is_never_served_to_a_child(
    recorder: FixtureRecorder, fixture_dir: Path, proxied: bool
) -> None:
    """The proxy records each child with its spawn index, and a side call racing a
    conversation (a title, Qwen Code's security classifier) as a script under it without
    one. With the only child's recording gone, a caller naming the parent and spawn index 0
    is unrecorded — it was served the classifier's answer. A recording made in process
    without spawn indexes (no wire API on its requests) still binds such a caller by first
    call."""
    main = recorder.main()
    recorder.call(main, text_call("parent delegates"), options=options_for("p"))
    lane = recorder.child_without_index(main)
    recorder.call(lane, text_call('{"shouldBlock": false}'), options=options_for("p"))
    recorder.save(fixture_dir)
    if proxied:
        _as_proxied(fixture_dir)
    provider = ReplayProvider(fixture_dir)
    parent, child = new_session_id(), new_session_id()
    await collect(provider.stream(options_for(parent)))

    if not proxied:
        served = await collect(provider.stream(options_for(child, parent=parent, spawn_index=0)))
        assert _text(served) == '{"shouldBlock": false}'
        return
    with pytest.raises(UnrecordedSessionError) as caught:
        provider.stream(options_for(child, parent=parent, spawn_index=0))
    first = str(caught.value).splitlines()[0]
    assert first.startswith(
        f"live session {child} (parent session.jsonl ({{{{session:main}}}}) (live {parent}), "
        "spawn index 0)"
    ), first
    assert "no unclaimed script recorded as a child of session.jsonl" in first


# Claude Code 0.101's shape (interop/fixtures/claude-code-101-async): one identity sends a
# title call and its conversation, racing; the proxy records the conversation as the
# session and the title as a side lane under it (no spawn index), whatever came first.
_CODING, _NAMING, _HELPING = "You are a coding agent.", "Name this session.", "You help."
_ASK = "Delegate: read notes.txt."


@pytest.mark.asyncio
@pytest.mark.parametrize("order", ["title-first", "conversation-first"])
async def test_a_callers_conversation_is_never_bound_to_its_side_lane_that_came_first(
    recorder: FixtureRecorder, fixture_dir: Path, order: str
) -> None:
    """The title arrives first and the conversation's first request is not the recorded one
    (another system prompt): it is the recorded conversation, changed — a RequestDriftError
    on session.jsonl, as when it comes first. It was bound to the title lane, the caller's
    first, and asked for the title's second call (ScriptExhaustedError naming the side
    lane; the conversation's and its child's recordings never used). The caller's child,
    named by its parent and spawn index, is the parent's recorded child (rule 3), changed
    too — it was unrecorded: its parent was taken to be the title lane."""
    main = recorder.main()
    recorder.call(
        main, text_call("A helper reads it."), options=options_for("p", system=_CODING, prompt=_ASK)
    )
    title = recorder.child_without_index(main)
    naming = options_for("p", system=_NAMING, prompt=f"<session>{_ASK}</session>")
    recorder.call(title, text_call('{"title": "Delegated read"}'), options=naming)
    child = recorder.spawn(main, 0)
    helping = options_for("c", parent="p", spawn_index=0, system=_HELPING, prompt="Read notes.txt.")
    recorder.call(child, text_call("alpha beta"), options=helping)
    recorder.save(fixture_dir)
    _as_proxied(fixture_dir)
    provider = ReplayProvider(fixture_dir, content_binding=True)
    live, live_child = new_session_id(), new_session_id()
    title_request = options_for(live, system=_NAMING, prompt=f"<session>{_ASK}</session>")

    if order == "title-first":
        assert _text(await collect(provider.stream(title_request))) == '{"title": "Delegated read"}'
    with pytest.raises(RequestDriftError) as drifted:
        provider.stream(options_for(live, system=f"{_CODING} Today is Tuesday.", prompt=_ASK))
    assert "call 1 of session.jsonl" in str(drifted.value).splitlines()[0], drifted.value
    if order == "conversation-first":
        assert _text(await collect(provider.stream(title_request))) == '{"title": "Delegated read"}'
    changed_child = options_for(
        live_child, parent=live, spawn_index=0, system=_HELPING, prompt="Read notes.txt, please."
    )
    with pytest.raises(RequestDriftError) as child_drifted:
        provider.stream(changed_child)
    assert "call 1 of session.1.jsonl" in str(child_drifted.value).splitlines()[0]


@pytest.mark.asyncio
async def test_call_beyond_the_script_is_exhausted(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    ids = _main_only(recorder, fixture_dir, "one", "two")
    provider = ReplayProvider(fixture_dir)
    sid = new_session_id()
    await collect(provider.stream(options_for(sid)))
    await collect(provider.stream(options_for(sid)))

    with pytest.raises(ScriptExhaustedError) as caught:
        provider.stream(options_for(sid))

    message = str(caught.value)
    assert f"live session {sid}, bound to session.jsonl ({{{{session:main}}}})" in message
    assert ids[0] not in message
    assert "asked for model call 3 but the recording holds only 2 call(s)" in message
    assert rerecord_command("my-scenario") in message
    assert (caught.value.call, caught.value.recorded_calls) == (3, 2)


@pytest.mark.asyncio
async def test_assert_consumed_lists_scripts_and_calls_never_requested(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    provider, parent, ids = await _replay_with_parent_bound(recorder, fixture_dir)
    await collect(provider.stream(options_for(new_session_id(), parent=parent, spawn_index=0)))

    with pytest.raises(UnconsumedScriptError) as caught:
        provider.assert_consumed()

    message = str(caught.value)
    # Named as the goldens name them, the same for every recording of the scenario: no
    # recorded or live session id (those change with every record and every run).
    assert (
        "session.jsonl ({{session:main}}): its live session made 1 of 2 call(s); call 2 never "
        "requested"
    ) in message
    assert (
        "session.2.jsonl ({{session:2}}): never bound to a live session; its 1 call(s) were "
        "never requested"
    ) in message
    assert not any(session_id in message for session_id in (*ids, parent))
    assert "session.1.jsonl" not in message
    assert rerecord_command("my-scenario") in message
    assert len(caught.value.unconsumed) == 2


async def _run_children_concurrently_reversed(provider: ReplayProvider) -> dict[int, str]:
    """The parent calls, then children 1 and 0 run as concurrent tasks — child 1 first,
    the opposite of the recording — interleaving their chunks."""
    parent = new_session_id()
    await collect(provider.stream(options_for(parent)))
    texts: dict[int, str] = {}
    child_1_started = asyncio.Event()

    async def child(spawn_index: int) -> None:
        if spawn_index == 0:
            await child_1_started.wait()
        stream = provider.stream(
            options_for(new_session_id(), parent=parent, spawn_index=spawn_index)
        )
        child_1_started.set()
        parts: list[str] = []
        async for chunk in stream:
            if isinstance(chunk, TextDelta):
                parts.append(chunk.text)
            await asyncio.sleep(0)
        texts[spawn_index] = "".join(parts)

    await asyncio.gather(child(0), child(1))
    await collect(provider.stream(options_for(parent)))
    return texts


@pytest.mark.asyncio
async def test_concurrent_children_in_reverse_order_get_their_own_scripts(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _parent_with_two_children(recorder, fixture_dir)
    provider = ReplayProvider(fixture_dir)

    texts = await _run_children_concurrently_reversed(provider)

    assert texts == {0: "child zero reads the docs", 1: "child one writes the tests"}
    provider.assert_consumed()


@pytest.mark.asyncio
async def test_concurrent_children_in_reverse_order_are_swapped_without_lineage(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    _parent_with_two_children(recorder, fixture_dir)
    provider = ReplayProvider(fixture_dir, lineage_binding=False)

    texts = await _run_children_concurrently_reversed(provider)

    assert texts == {0: "child one writes the tests", 1: "child zero reads the docs"}


@pytest.mark.asyncio
async def test_recording_without_spawn_indexes_binds_lineage_callers_by_first_call(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    """An old recording (no spawn_index anywhere) replayed by an agent that passes one."""
    provider, parent, _ = await _replay_with_parent_bound(recorder, fixture_dir, lineage=False)

    first = await collect(provider.stream(options_for("a", parent=parent, spawn_index=0)))
    second = await collect(provider.stream(options_for("b", parent=parent, spawn_index=1)))

    assert _text(first) == "child zero reads the docs"
    assert _text(second) == "child one writes the tests"


@pytest.mark.asyncio
async def test_child_whose_log_is_missing_is_named_by_the_parents_subagent_start(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    ids = _parent_with_two_children(recorder, fixture_dir)
    (fixture_dir / "session.2.jsonl").unlink()
    provider = ReplayProvider(fixture_dir)
    parent = new_session_id()
    await collect(provider.stream(options_for(parent)))

    with pytest.raises(UnrecordedSessionError) as caught:
        provider.stream(options_for("late", parent=parent, spawn_index=1))

    assert (
        f"which spawned child {ids[2]} with spawn index 1, but the fixture holds no log for "
        "that child"
    ) in str(caught.value)


@pytest.mark.asyncio
async def test_a_headerless_request_reads_no_reply_that_did_not_hand_on_its_message(
    recorder: FixtureRecorder, fixture_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A headerless request asks which bound conversation handed on its first message (its
    parent, if any). That was answered by reading the served replies of every conversation
    bound so far, for every request: n headerless conversations cost n²/2 reads, and a
    proxy replaying 1,000 of them spent 2 ms a call on it (``bench/proxy.py``). Served
    replies are indexed by what they hand on: a request none of them handed on reads none,
    and each conversation still gets its own answer."""
    conversations = 40
    main = recorder.main()
    for number in range(conversations):
        lane = main if number == 0 else recorder.child_without_index(main)
        asked = options_for(None, prompt=f"question {number}")
        recorder.call(lane, text_call(f"answer {number}"), options=asked)
    recorder.save(fixture_dir)
    _as_proxied(fixture_dir)
    provider = ReplayProvider(fixture_dir, content_binding=True)
    reads: list[int] = []
    read = _lanes.delegated_by

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return read(*args, **kwargs)

    monkeypatch.setattr(_binding, "delegated_by", counted)
    for number in range(conversations):
        served = await collect(provider.stream(options_for(None, prompt=f"question {number}")))
        assert _text(served) == f"answer {number}"
    assert len(reads) == 0


@pytest.mark.asyncio
async def test_an_unrecorded_named_child_without_index_is_named_as_record_numbered_it(
    recorder: FixtureRecorder, fixture_dir: Path
) -> None:
    # Codex: a native header names the child's parent, no spawn index; its first user
    # message is its environment context, the delegated prompt comes second. The child's
    # recording is gone: the error names the parent's file, the spawn index record gave
    # the child (its delegation's order) and the delegating call — not "spawn index none".
    main = recorder.main()
    recorder.call(main, tool_call("c1", "spawn_agent", ['{"message": "Review the patch."}']))
    recorder.save(fixture_dir)
    provider = ReplayProvider(fixture_dir, scenario="codex", content_binding=True)
    parent, child = new_session_id(), new_session_id()
    await collect(provider.stream(options_for(parent, prompt="Fix the bug.")))
    live = msgspec.structs.replace(
        options_for(child, parent=parent),
        messages=(
            Message.user("<environment_context>cwd</environment_context>"),
            Message.user("Review the patch."),
        ),
    )

    with pytest.raises(UnrecordedSessionError) as caught:
        provider.stream(live)

    first = str(caught.value).splitlines()[0]
    assert f"(parent session.jsonl ({{{{session:main}}}}) (live {parent}), spawn index 0)" in first
    assert 'handed it on with tool spawn_agent(\'{"message": "Review the patch."}\')' in first
    assert caught.value.parent_session_id == parent
