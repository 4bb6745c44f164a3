"""Recording a model call into a session log: ``request/header``, then every chunk.

What replay needs from a recording is exactly this (see the log contract in the
package README): one ``request/header`` before each model call and each streamed chunk
as an ``assistant/chunk`` of that turn and step, appended *before* the agent does anything
with it, the call ending with ``finish``. ``CallRecorder`` does it for any chunk stream —
a ``Provider``'s, or one parsed from an HTTP response (the proxy's record mode builds
the header from the HTTP request and hands it over ready-made). ``record_stream`` is the
one-call form for an agent loop.

A call that ends without ``finish`` (the provider raised, the turn was cancelled) is
sealed with one — ``finish{aborted}`` for a cancel, ``finish{error}`` with the failure's
message and code otherwise — so the recording stays replayable and replays the same
outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from typing import Any

from agentreel.llm import (
    AgentreelLlmError,
    Chunk,
    Finish,
    GenerateOptions,
    LlmError,
    Provider,
)
from agentreel.session._events import AssistantChunkData, RequestHeaderData
from agentreel.session._request import build_request_header
from agentreel.session._store import Session

INTERRUPTED = "interrupted"


class CallRecorder:
    """One model call of ``session`` at ``turn`` / ``step``; writes ``request/header`` now.

    ``request`` is the call's ``GenerateOptions`` (the header is built from it, with the
    session's cwd) or an already-built ``RequestHeaderData``. ``append`` is where each
    record goes (``session.append`` by default): a writer that must see every record
    first — the proxy refuses one holding a live key — passes its own.
    """

    def __init__(
        self,
        session: Session,
        *,
        turn: int,
        step: int,
        request: GenerateOptions | RequestHeaderData,
        append: Callable[[Any], object] | None = None,
    ) -> None:
        self.session = session
        self._append = append if append is not None else session.append
        self.turn = turn
        self.step = step
        self.finished = False
        """Whether a ``finish`` chunk has been recorded (streamed or sealed)."""
        if isinstance(request, GenerateOptions):
            request = build_request_header(request, turn=turn, step=step, cwd=session.cwd)
        self._append(request)

    def chunk(self, chunk: Chunk) -> None:
        """Record one streamed chunk (call it before using the chunk)."""
        self._append(AssistantChunkData(turn=self.turn, step=self.step, chunk=chunk))
        if isinstance(chunk, Finish):
            self.finished = True

    async def record(
        self, chunks: AsyncIterable[Chunk], *, aborted: Callable[[], str] | str = INTERRUPTED
    ) -> AsyncGenerator[Chunk, None]:
        """``chunks``, each recorded before it is yielded.

        A failure or cancel raised by ``chunks`` seals the call (``aborted``: the cancel's
        message, or a function giving it) and is re-raised. A failure in the code that
        reads this stream is not visible here: seal it with ``seal_for``. Closing this
        stream closes ``chunks``.
        """
        try:
            async for chunk in chunks:
                self.chunk(chunk)
                yield chunk
        except GeneratorExit:
            raise  # the reader stopped early: sealing is its business, its reason unknown
        except BaseException as failure:
            self.seal_for(failure, aborted=aborted() if callable(aborted) else aborted)
            raise
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()

    def seal(self, finish: Finish) -> None:
        """Record ``finish`` unless the call already has one."""
        if not self.finished:
            self.chunk(finish)

    def seal_for(self, failure: BaseException, *, aborted: str = INTERRUPTED) -> None:
        """Seal the call with the ``finish`` that ``failure`` means (no-op if finished).

        A cancellation is ``finish{aborted, aborted}``; an ``LlmError`` is
        ``finish{error}`` with its message and code; a chunk stream that broke the
        contract is code ``invalid-stream``; anything else ``agent-error``.
        """
        if isinstance(failure, asyncio.CancelledError | GeneratorExit):
            self.seal(Finish(reason="aborted", message=aborted))
        elif isinstance(failure, LlmError):
            self.seal(Finish(reason="error", message=failure.message, code=failure.code))
        elif isinstance(failure, AgentreelLlmError):
            self.seal(Finish(reason="error", message=str(failure), code="invalid-stream"))
        else:
            failed = f"{type(failure).__name__}: {failure}"
            self.seal(Finish(reason="error", message=failed, code="agent-error"))


def record_stream(
    session: Session,
    provider: Provider,
    options: GenerateOptions,
    *,
    turn: int,
    step: int,
    aborted: Callable[[], str] | str = INTERRUPTED,
) -> AsyncGenerator[Chunk, None]:
    """``provider.stream(options)``, recorded into ``session`` as turn ``turn``, step ``step``.

    The header is written and the provider called at once (a replaying provider binds
    the caller right then); every chunk is recorded before it is yielded; a failure or a
    cancel from the provider seals the call (``aborted`` is the cancel's message, or a
    function giving it) and is re-raised. Close the returned stream (``aclose``) when you
    stop reading early. To seal failures of your own reading code too, use
    ``CallRecorder`` directly (``record`` plus ``seal_for``), as the reference agent does.
    """
    recorder = CallRecorder(session, turn=turn, step=step, request=options)
    try:
        chunks = provider.stream(options)
    except BaseException as failure:
        recorder.seal_for(failure, aborted=aborted() if callable(aborted) else aborted)
        raise
    return recorder.record(chunks, aborted=aborted)
