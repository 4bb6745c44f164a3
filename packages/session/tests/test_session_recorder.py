"""The kit's recorder and conversation: what a model call leaves in the log, and when."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentreel.brand import SessionId
from agentreel.llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    GenerateOptions,
    LlmError,
    Message,
    TextDelta,
    TextPart,
    ToolResultPart,
)
from agentreel.session import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessageData,
    CallRecorder,
    Conversation,
    RequestHeader,
    SessionStore,
    ToolResultData,
    UserMessageData,
    build_request_header,
    call_options,
    load_session_log,
    record_stream,
)

CHUNKS: list[Chunk] = [
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text="hi"),
    BlockEnd(index=0, block=TextPart("hi")),
    Finish(reason="stop"),
]


class Scripted:
    """A provider that streams ``chunks``, then raises ``error`` (if any) or hangs."""

    def __init__(
        self, chunks: list[Chunk], error: BaseException | None = None, hang: bool = False
    ) -> None:
        self.chunks, self.error, self.hang = chunks, error, hang
        self.closed = False

    async def _stream(self) -> AsyncIterator[Chunk]:
        try:
            for chunk in self.chunks:
                await asyncio.sleep(0)
                yield chunk
            if self.error is not None:
                raise self.error
            if self.hang:
                await asyncio.Event().wait()
        finally:
            self.closed = True

    def stream(self, options: GenerateOptions) -> AsyncIterator[Chunk]:
        return self._stream()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    sessions = SessionStore(tmp_path / "sessions")
    yield sessions
    sessions.close_all()


def options_for(session_id: SessionId) -> GenerateOptions:
    return GenerateOptions(model="m", messages=(Message.user("q"),), session_id=session_id)


@pytest.mark.asyncio
async def test_header_first_and_every_chunk_logged_before_it_is_yielded(
    store: SessionStore, tmp_path: Path
) -> None:
    session = store.create(str(tmp_path))
    options = options_for(session.id)
    stream = record_stream(session, Scripted(CHUNKS), options, turn=0, step=0)
    # The header is written when the call is made, before anything is read.
    assert [type(e) for e in session.events] == [RequestHeader]
    seen: list[Chunk] = []
    async for chunk in stream:
        logged = [e.data.chunk for e in session.events if isinstance(e, AssistantChunk)]
        assert logged[-1] == chunk  # already in the log when the agent sees it
        seen.append(chunk)
    assert seen == CHUNKS
    store.close_all()
    log = load_session_log(session.path)
    header = log.events[0].data
    assert header == build_request_header(options, turn=0, step=0, cwd=str(tmp_path))


@pytest.mark.asyncio
async def test_a_provider_failure_seals_the_call_with_its_error(
    store: SessionStore, tmp_path: Path
) -> None:
    session = store.create(str(tmp_path))
    failing = Scripted(CHUNKS[:2], LlmError("rate_limited", 429, "slow down"))
    with pytest.raises(LlmError):
        async for _ in record_stream(session, failing, options_for(session.id), turn=1, step=2):
            pass
    last = session.events[-1]
    assert isinstance(last, AssistantChunk)
    assert (last.data.turn, last.data.step) == (1, 2)
    assert last.data.chunk == Finish(reason="error", message="slow down", code="rate_limited")
    assert failing.closed


@pytest.mark.asyncio
async def test_a_cancel_seals_the_call_aborted_with_the_callers_reason(
    store: SessionStore, tmp_path: Path
) -> None:
    session = store.create(str(tmp_path))
    hanging = Scripted(CHUNKS[:2], hang=True)
    started = asyncio.Event()

    async def read() -> None:
        stream = record_stream(
            session, hanging, options_for(session.id), turn=0, step=0, aborted=lambda: "user"
        )
        async for _ in stream:
            started.set()

    task = asyncio.create_task(read())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert session.events[-1].data.chunk == Finish(reason="aborted", message="user")  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_a_reader_that_stops_early_seals_with_its_own_reason(
    store: SessionStore, tmp_path: Path
) -> None:
    session = store.create(str(tmp_path))
    call = CallRecorder(session, turn=0, step=0, request=options_for(session.id))
    stream = call.record(Scripted(CHUNKS).stream(options_for(session.id)))
    async for _ in stream:
        break  # e.g. the reader found the stream broke its contract
    await stream.aclose()
    assert not call.finished  # nothing was guessed for the reader
    call.seal_for(ValueError("bad chunk"))
    call.seal(Finish(reason="stop"))  # a call is sealed once
    chunks = [e.data.chunk for e in session.events if isinstance(e, AssistantChunk)]
    assert chunks == [
        CHUNKS[0],
        Finish(reason="error", message="ValueError: bad chunk", code="agent-error"),
    ]


def test_a_prebuilt_header_is_written_as_given(store: SessionStore, tmp_path: Path) -> None:
    session = store.create(str(tmp_path))
    header = build_request_header(options_for(session.id), turn=3, step=1, cwd="/elsewhere")
    CallRecorder(session, turn=3, step=1, request=header)
    assert session.events[-1].data == header


def test_conversation_and_call_options_from_the_log(store: SessionStore, tmp_path: Path) -> None:
    parent = store.create(str(tmp_path))
    parent.append(UserMessageData(turn=0, text="q"))
    answer = Message(role="assistant", content=(TextPart("a"),))
    parent.append(AssistantMessageData(turn=0, step=0, message=answer))
    parent.append(ToolResultData(turn=0, step=0, call_id="c1", content="out", is_error=False))
    assert Conversation(parent.events).messages == (
        Message.user("q"),
        answer,
        Message(role="tool", content=(ToolResultPart(call_id="c1", content="out"),)),
    )
    child = store.spawn(parent, 4)
    options = call_options(child, model="m", system="s")
    assert (options.session_id, options.parent_session_id, options.spawn_index) == (
        child.id,
        parent.id,
        4,
    )
    assert options.messages == ()
    assert call_options(parent, model="m").messages == Conversation(parent.events).messages


def test_append_sees_every_record_first_and_can_refuse_one(
    store: SessionStore, tmp_path: Path
) -> None:
    """``append=`` is where each record goes (the proxy's key scan): the header and every
    chunk pass through it in order, and a record it refuses (raises) is not written."""
    session = store.create(str(tmp_path))
    seen: list[Any] = []

    def scanned(data: Any) -> None:
        seen.append(data)
        if isinstance(data, AssistantChunkData) and isinstance(data.chunk, TextDelta):
            raise ValueError("refused")
        session.append(data)

    call = CallRecorder(session, turn=0, step=0, request=options_for(session.id), append=scanned)
    call.chunk(CHUNKS[0])
    with pytest.raises(ValueError, match="refused"):
        call.chunk(CHUNKS[1])
    assert [type(data).__name__ for data in seen] == [
        "RequestHeaderData",
        "AssistantChunkData",
        "AssistantChunkData",
    ]
    assert [type(e) for e in session.events] == [RequestHeader, AssistantChunk]
    assert not call.finished
