"""Build replay fixtures in tests: real session logs, harvested like the harness does.

``FixtureRecorder`` writes sessions through ``agentreel.session.SessionStore`` (main,
spawned, forked, or children without a spawn index as older agents wrote them), with a
deterministic clock; ``save(dir)`` harvests them in session order and copies them to
``session.jsonl`` / ``session.<n>.jsonl``. ``text_call`` / ``tool_call`` make the chunks of
one recorded call, ``options_for`` a matching live request, ``collect`` drains a stream.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from agentreel.brand import SessionId, new_session_id
from agentreel.llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    GenerateOptions,
    Message,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    Usage,
)
from agentreel.session import (
    AssistantChunkData,
    Session,
    SessionHeader,
    SessionStore,
    SubagentStartData,
    TurnEndData,
    TurnStartData,
    build_request_header,
    harvest_session_logs,
    session_file_name,
)

__all__ = [
    "RECORD_CWD",
    "FixtureRecorder",
    "collect",
    "options_for",
    "text_call",
    "tool_call",
]

RECORD_CWD = "/record/cwd"


def text_call(text: str) -> list[Chunk]:
    """The chunks of a model call answering ``text``, split into two deltas."""
    half = len(text) // 2
    return [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text=text[:half]),
        TextDelta(index=0, text=text[half:]),
        BlockEnd(index=0, block=TextPart(text)),
        Usage(input_tokens=3, output_tokens=2),
        Finish(reason="stop"),
    ]


def tool_call(call_id: str, name: str, argument_pieces: Sequence[str]) -> list[Chunk]:
    """The chunks of a model call that calls one tool, arguments streamed in pieces."""
    chunks: list[Chunk] = [BlockStart(index=0, block_type="tool-call")]
    for position, piece in enumerate(argument_pieces):
        chunks.append(
            ToolCallDelta(
                index=0, id=call_id, name=name if position == 0 else None, arguments_delta=piece
            )
        )
    arguments = "".join(argument_pieces)
    chunks += [
        BlockEnd(index=0, block=ToolCallPart(id=call_id, name=name, arguments=arguments)),
        Usage(input_tokens=3, output_tokens=2),
        Finish(reason="tool-calls"),
    ]
    return chunks


def options_for(
    session_id: str | None,
    *,
    parent: str | None = None,
    spawn_index: int | None = None,
    system: str = "You are a test agent.",
    prompt: str = "hello",
) -> GenerateOptions:
    return GenerateOptions(
        model="test-model",
        system=system,
        messages=(Message.user(prompt),),
        session_id=SessionId(session_id) if session_id is not None else None,
        parent_session_id=SessionId(parent) if parent is not None else None,
        spawn_index=spawn_index,
    )


async def collect(stream: AsyncIterator[Chunk]) -> list[Chunk]:
    return [chunk async for chunk in stream]


class FixtureRecorder:
    """Writes real session logs under ``root`` with a deterministic clock."""

    def __init__(self, root: Path, cwd: str = RECORD_CWD) -> None:
        self.root = root
        self.cwd = cwd
        self._ticks = itertools.count(1_700_000_000_000)
        self.store = SessionStore(root, clock=lambda: next(self._ticks))
        self._turn: dict[str, int] = {}
        self._step: dict[str, int] = {}
        self._unindexed: list[Session] = []

    def main(self) -> Session:
        return self.store.create(self.cwd)

    def spawn(self, parent: Session, spawn_index: int) -> Session:
        """A spawned child; the parent logs ``subagent/start`` as the agent does."""
        child = self.store.spawn(parent, spawn_index)
        parent.append(
            SubagentStartData(child_session=child.header.id, spawn_index=spawn_index, mode="spawn")
        )
        return child

    def fork(self, parent: Session, spawn_index: int) -> Session:
        """A forked child (seeded up to the parent's last ``turn/end``)."""
        child = self.store.fork(parent, spawn_index)
        parent.append(
            SubagentStartData(child_session=child.header.id, spawn_index=spawn_index, mode="fork")
        )
        return child

    def child_without_index(self, parent: Session) -> Session:
        """A child recorded by an agent that does not pass spawn_index (older recordings)."""
        header = SessionHeader(
            id=new_session_id(),
            created_at=next(self._ticks),
            cwd=parent.header.cwd,
            parent_session=parent.header.id,
            origin="spawn",
        )
        session = Session(self.store.path_for(header), header, [], lambda: next(self._ticks))
        self._unindexed.append(session)
        return session

    def turn(self, session: Session) -> int:
        turn = self._turn.get(session.header.id, 0) + 1
        self._turn[session.header.id] = turn
        self._step[session.header.id] = 0
        session.append(TurnStartData(turn=turn))
        return turn

    def end_turn(self, session: Session) -> None:
        session.append(TurnEndData(turn=self._turn[session.header.id], reason="completed"))

    def call(
        self,
        session: Session,
        chunks: Sequence[Chunk],
        *,
        options: GenerateOptions | None = None,
    ) -> None:
        """One model call in the current turn (a turn is started if none is): an optional
        ``request/header`` built from ``options``, then every chunk."""
        sid = session.header.id
        if sid not in self._turn:
            self.turn(session)
        turn = self._turn[sid]
        step = self._step[sid] + 1
        self._step[sid] = step
        session.step_start(turn, step)
        if options is not None:
            session.append(build_request_header(options, turn=turn, step=step, cwd=self.cwd))
        for chunk in chunks:
            session.append(AssistantChunkData(turn=turn, step=step, chunk=chunk))
        session.step_end(turn, step)

    def save(self, fixture_dir: Path) -> list[str]:
        """Close everything, harvest in session order and write the fixture files.

        Returns the recorded session ids in fixture file order.
        """
        self.store.close_all()
        for session in self._unindexed:
            session.close()
        fixture_dir.mkdir(parents=True, exist_ok=True)
        ids: list[str] = []
        for number, log in enumerate(harvest_session_logs(self.root)):
            shutil.copyfile(log.path, fixture_dir / session_file_name(number))
            ids.append(log.header.id)
        return ids
