"""Captured live values (``Capture``): numbered in requests, tokenized in recorded chunks
(also split across deltas), and served in process as the live request's values."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from agentreel.brand import SessionId
from agentreel.llm import (
    BlockEnd,
    GenerateOptions,
    Message,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    ToolResultPart,
)
from agentreel.llm_replay import Capture, ReplayProvider
from agentreel.llm_replay.lanes import captured_values, tokenized_chunks
from agentreel.llm_replay.testing import FixtureRecorder, collect, tool_call

AGENT_ID = Capture.checked(r'"agent_id":"([0-9a-f-]{36})"', "agent-id")


def _spawned(agent_id: str) -> GenerateOptions:
    """The parent's request after its spawn_agent call: the result names the child."""
    return GenerateOptions(
        model="m",
        messages=(
            Message.user("delegate"),
            Message(role="assistant", content=(ToolCallPart("call_spawn", "spawn_agent", "{}"),)),
            Message(
                role="tool",
                content=(
                    ToolResultPart(
                        "call_spawn", json.dumps({"agent_id": agent_id}, separators=(",", ":"))
                    ),
                ),
            ),
        ),
        session_id=SessionId("11111111-1111-4111-8111-111111111111"),
    )


def test_values_are_numbered_per_token_by_first_appearance() -> None:
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    nickname = Capture.checked(r'"nickname":"[A-Z][a-z]+"', "nickname")
    texts = [
        f'{{"agent_id":"{first}","nickname":"Boole"}}',
        f'{{"agent_id":"{second}"}} then {{"agent_id":"{first}"}}',
    ]
    assert captured_values([AGENT_ID, nickname], texts) == {
        "{{agent-id:1}}": first,
        "{{nickname:1}}": '"nickname":"Boole"',  # no group: the whole match
        "{{agent-id:2}}": second,
    }
    assert captured_values([], texts) == {}


def test_a_value_split_across_deltas_becomes_one_placeholder_where_it_starts() -> None:
    agent_id = str(uuid.uuid4())
    arguments = json.dumps({"targets": [agent_id]}, separators=(",", ":"))
    pieces = [arguments[i : i + 5] for i in range(0, len(arguments), 5)]
    chunks = tool_call("call_wait", "wait_agent", pieces)
    tokenized = tokenized_chunks(chunks, {"{{agent-id:1}}": agent_id})
    assert len(tokenized) == len(chunks)
    deltas = [c.arguments_delta for c in tokenized if isinstance(c, ToolCallDelta)]
    assert "".join(deltas) == '{"targets":["{{agent-id:1}}"]}'
    assert "{{agent-id:1}}" in next(d for d in deltas if "{{" in d)  # whole, in one delta
    (end,) = [c for c in tokenized if isinstance(c, BlockEnd)]
    assert isinstance(end.block, ToolCallPart)
    assert end.block.arguments == '{"targets":["{{agent-id:1}}"]}'
    # A value inside one text delta is replaced there; nothing else changes.
    text = [BlockEnd(index=0, block=TextPart(f"waiting for {agent_id}"))]
    assert tokenized_chunks(text, {"{{agent-id:1}}": agent_id}) == [
        BlockEnd(index=0, block=TextPart("waiting for {{agent-id:1}}"))
    ]


@pytest.mark.parametrize(
    ("regex", "token", "problem"),
    [
        (r'"(a)(b)"', "agent-id", "2 groups"),
        (r"x", "Agent Id", "token name"),
        (r"x", "uuid", "built-in"),
        (r"x?", "agent-id", "empty"),
        (r"(x", "agent-id", "not a valid"),
    ],
)
def test_a_bad_capture_says_what_is_wrong(regex: str, token: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Capture.checked(regex, token)


@pytest.mark.asyncio
async def test_in_process_replay_serves_the_live_value(tmp_path: Path) -> None:
    # The recording holds the placeholder (as the proxy records it); each replay serves
    # the id its own live request holds.
    recorder = FixtureRecorder(tmp_path / "sessions")
    main = recorder.main()
    recorded_id = str(uuid.uuid4())
    waiting = ['{"targets":["', "{{agent-id:1}}", '"]}']
    recorder.call(
        main, tool_call("call_wait", "wait_agent", waiting), options=_spawned(recorded_id)
    )
    recorder.save(tmp_path / "fixture")

    live_id = str(uuid.uuid4())
    options = _spawned(live_id)
    provider = ReplayProvider(tmp_path / "fixture", captures=[AGENT_ID])
    chunks = await collect(provider.stream(options))
    (end,) = [c for c in chunks if isinstance(c, BlockEnd)]
    assert isinstance(end.block, ToolCallPart)
    assert json.loads(end.block.arguments) == {"targets": [live_id]}
    # Without the capture the placeholder is served as recorded: no live id.
    plain = await collect(ReplayProvider(tmp_path / "fixture").stream(options))
    assert "{{agent-id:1}}" in next(
        c.block.arguments
        for c in plain
        if isinstance(c, BlockEnd) and isinstance(c.block, ToolCallPart)
    )
