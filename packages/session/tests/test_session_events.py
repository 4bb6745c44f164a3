"""Every record type round-trips through the codec byte for byte; the codec is strict."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from agentreel.llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    Message,
    ReasoningDelta,
    ReasoningPart,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from agentreel.session import (
    HEADER_VERSION,
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    EmptyData,
    EndSeed,
    Event,
    MessageHeader,
    RequestHeader,
    RequestHeaderData,
    SessionHeader,
    SessionStore,
    StepData,
    StepEnd,
    StepStart,
    SubagentEnd,
    SubagentEndData,
    SubagentStart,
    SubagentStartData,
    ToolCall,
    ToolCallData,
    ToolHeader,
    ToolResult,
    ToolResultData,
    TurnEnd,
    TurnEndData,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    encode_record,
    load_session_log,
)
from agentreel.session._codec import EVENT_DECODER, HEADER_DECODER

CHUNKS: list[Chunk] = [
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text='héllo "world"\n'),
    ReasoningDelta(index=1, text="thinking…"),
    ToolCallDelta(index=2, id="call_1", name="read_file", arguments_delta='{"path":'),
    ToolCallDelta(index=2, id="call_1", arguments_delta='"a.txt"}'),
    BlockEnd(index=0, block=TextPart("héllo")),
    BlockEnd(index=1, block=ReasoningPart("thinking…")),
    BlockEnd(index=2, block=ToolCallPart(id="call_1", name="read_file", arguments="{}")),
    Usage(input_tokens=10, output_tokens=5),
    Usage(input_tokens=10, output_tokens=5, cache_read_tokens=1, reasoning_tokens=2),
    Finish(reason="tool-calls"),
    Finish(reason="error", message="boom", code="server_error"),
]

PAYLOADS: list[object] = [
    TurnStartData(turn=0),
    *(
        TurnEndData(turn=1, reason=r)
        for r in ("completed", "aborted", "error", "max-turns", "interrupted")
    ),
    UserMessageData(turn=0, text="read a.txt, then \u2603"),
    RequestHeaderData(
        turn=0,
        step=1,
        model="gpt-test",
        system="You are {{cwd}}",
        tools=(ToolHeader(name="read_file", digest="abc"),),
        tools_digest="d1",
        messages=(MessageHeader(role="user", digest="e2", preview="read a.txt"),),
        message_count=1,
    ),
    RequestHeaderData(
        turn=0,
        step=0,
        model="m",
        system=None,
        tools=(),
        tools_digest="",
        messages=(),
        message_count=0,
    ),
    *(AssistantChunkData(turn=0, step=0, chunk=chunk) for chunk in CHUNKS),
    AssistantMessageData(
        turn=0,
        step=0,
        message=Message(
            role="assistant",
            content=(
                TextPart("ok"),
                ReasoningPart("r"),
                ToolCallPart(id="c", name="write_file", arguments='{"a":1}'),
            ),
        ),
    ),
    AssistantMessageData(
        turn=0,
        step=1,
        message=Message(role="tool", content=(ToolResultPart(call_id="c", content="done"),)),
    ),
    ToolCallData(turn=0, step=0, call_id="c", name="write_file", arguments='{"a":1}'),
    ToolResultData(turn=0, step=0, call_id="c", content="permission denied", is_error=True),
    SubagentStartData(
        child_session="2b1e3a4c-0000-4000-8000-000000000001", spawn_index=0, mode="spawn"
    ),
    SubagentStartData(
        child_session="2b1e3a4c-0000-4000-8000-000000000002", spawn_index=1, mode="fork"
    ),
    *(SubagentEndData(child_session="x", outcome=o) for o in ("completed", "error", "cancelled")),
]

EVENT_CLASSES: list[type[Event]] = [
    TurnStart,
    TurnEnd,
    StepStart,
    StepEnd,
    UserMessage,
    RequestHeader,
    AssistantChunk,
    AssistantMessage,
    ToolCall,
    ToolResult,
    SubagentStart,
    SubagentEnd,
    EndSeed,
]


def _events() -> list[Event]:
    from agentreel.session._events import EVENT_FOR_DATA

    events: list[Event] = []
    for payload in PAYLOADS:
        cls = EVENT_FOR_DATA[type(payload)]  # type: ignore[index]
        events.append(cls(seq=len(events), time=1_700_000_000_000 + len(events), data=payload))  # type: ignore[arg-type]
    events.append(StepStart(seq=len(events), time=1, data=StepData(turn=0, step=0)))
    events.append(StepEnd(seq=len(events), time=2, data=StepData(turn=0, step=0)))
    events.append(EndSeed(seq=len(events), time=3, data=EmptyData()))
    return events


def test_every_event_class_is_covered() -> None:
    assert {type(event) for event in _events()} == set(EVENT_CLASSES)


@pytest.mark.parametrize("event", _events(), ids=lambda e: f"{type(e).__name__}-{e.seq}")
def test_event_round_trips_byte_for_byte(event: Event) -> None:
    line = encode_record(event)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    decoded = EVENT_DECODER.decode(line)
    assert decoded == event
    assert type(decoded) is type(event)
    assert encode_record(decoded) == line


def test_event_wire_shape() -> None:
    line = encode_record(TurnEnd(seq=3, time=9, data=TurnEndData(turn=1, reason="completed")))
    assert line == b'{"type":"turn/end","seq":3,"time":9,"data":{"turn":1,"reason":"completed"}}\n'
    seed = encode_record(EndSeed(seq=0, time=1))
    assert seed == b'{"type":"session/end-seed","seq":0,"time":1,"data":{}}\n'


def test_header_round_trip_and_shape() -> None:
    header = SessionHeader(
        id="2b1e3a4c-0000-4000-8000-000000000001",
        created_at=5,
        cwd="/tmp/wörk dir",
        parent_session="2b1e3a4c-0000-4000-8000-000000000000",
        spawn_index=2,
        origin="fork",
        seed_length=7,
    )
    line = encode_record(header)
    assert line.startswith(b'{"type":"session","version":1,"id":')
    assert HEADER_DECODER.decode(line) == header
    assert header.version == HEADER_VERSION == 1


def test_whole_log_of_every_event_type_round_trips_through_the_loader(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    header = SessionHeader(id="2b1e3a4c-0000-4000-8000-000000000009", created_at=1, cwd="/w")
    events = _events()
    path.write_bytes(b"".join(encode_record(r) for r in [header, *events]))
    log = load_session_log(path)
    assert log.header == header
    assert log.events == events
    assert log.torn_tail is None


def test_writer_output_round_trips(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, clock=lambda: 42)
    session = store.create("/w")
    written = []
    for payload in PAYLOADS:
        written.append(session.append(payload))  # type: ignore[arg-type]
    written.append(session.step_start(0, 1))
    written.append(session.step_end(0, 1))
    session.close()
    log = load_session_log(session.path)
    assert log.events == written == session.events
    assert [e.seq for e in log.events] == list(range(len(written)))


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":0},"extra":1}',
        b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":0,"extra":1}}',
        b'{"type":"turn/start","seq":"0","time":1,"data":{"turn":0}}',
        b'{"type":"turn/end","seq":0,"time":1,"data":{"turn":0,"reason":"done"}}',
        b'{"type":"no/such","seq":0,"time":1,"data":{}}',
        b'{"type":"turn/start","seq":0,"data":{"turn":0}}',
    ],
)
def test_codec_is_strict(line: bytes) -> None:
    with pytest.raises(msgspec.ValidationError):
        EVENT_DECODER.decode(line)


def test_header_rejects_unknown_fields() -> None:
    with pytest.raises(msgspec.ValidationError):
        HEADER_DECODER.decode(
            b'{"type":"session","version":1,"id":"x","created_at":1,"cwd":"/","surprise":true}'
        )
