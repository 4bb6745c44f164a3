"""What the wire APIs' encoders and decoders share: the recorded response metadata of a
call, its usage and finish, and the decoders' protocol and helpers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import msgspec

from agentreel.llm._chunks import (
    BlockEnd,
    BlockStart,
    BlockType,
    Chunk,
    Finish,
    FinishReason,
    ReasoningDelta,
    ResponseMeta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from agentreel.llm._label import ProviderLabel
from agentreel.llm._messages import ReasoningPart, TextPart, ToolCallPart, ToolSpec
from agentreel.llm.exceptions import AgentreelLlmError, StreamInterruptedError
from agentreel.llm.wire._request import tool_spec
from agentreel.llm.wire._sse import SseEvent

CREATED = 1_700_000_000


def stream_cut(where: str, count: int, units: str, missing: str) -> StreamInterruptedError:
    """The error of a stream that ended before its API's end (a decoder's ``finish``): from
    ``where``, after ``count`` ``units``, ``missing`` (what should have ended it)."""
    return StreamInterruptedError(
        "stream_cut",
        None,
        f"the stream from {where} ended after {count} {units} {missing}. The call did not "
        "finish; retry it.",
    )


def usage_in(chunks: Sequence[Chunk]) -> Usage | None:
    for chunk in chunks:
        if isinstance(chunk, Usage):
            return chunk
    return None


def finish_in(chunks: Sequence[Chunk]) -> Finish:
    for chunk in reversed(chunks):
        if isinstance(chunk, Finish):
            return chunk
    return Finish(reason="stop")


_NO_META = ResponseMeta()


def meta_in(chunks: Sequence[Chunk], given: ResponseMeta | None = None) -> ResponseMeta:
    """The recorded response metadata of a call: ``given`` (a call replayed before its
    finish arrived), else its finish's, else empty (a recording without it)."""
    if given is not None:
        return given
    for chunk in reversed(chunks):
        if isinstance(chunk, Finish):
            return chunk.response or _NO_META
    return _NO_META


def wire_reason(finish: Finish, table: dict[str, str]) -> str:
    """The wire's finish/stop reason: the recorded raw one, else an ``error`` finish's code
    (which carries the wire reason), else the table's name for the agentreel reason."""
    if finish.response is not None and finish.response.stop_reason:
        return finish.response.stop_reason
    if finish.reason == "error" and finish.code:
        return finish.code
    return table.get(finish.reason, "stop")


def function_tools(body: dict[str, Any]) -> tuple[ToolSpec, ...]:
    """The tools of an OpenAI-shaped body (Chat Completions, Ollama): each ``function``'s
    name, description and parameters; a tool of another type kept whole under its type."""
    tools: list[ToolSpec] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        if isinstance(function, dict):
            tools.append(
                tool_spec(
                    function.get("name"), function.get("description"), function.get("parameters")
                )
            )
        else:
            tools.append(tool_spec(tool.get("type"), "", tool))
    return tuple(tools)


def stopped_with(field: str, reason: str) -> Finish:
    """The ``error`` finish of a call the model stopped for a reason agentreel has no name
    for: the wire's reason (named by its ``field``) is its code."""
    return Finish(reason="error", code=reason, message=f"the model stopped with {field} {reason!r}")


def finish_for(reason: str, table: Mapping[str, FinishReason], field: str) -> Finish:
    """The finish for the wire's stop reason: the table's name for it, else ``stopped_with``."""
    known = table.get(reason)
    return stopped_with(field, reason) if known is None else Finish(reason=known)


class OpenBlock:
    """A content block a wire streams in pieces (Anthropic Messages, Bedrock Converse): its
    agentreel index and kind, the text or arguments so far, a tool call's id and name, a
    reasoning block's signature."""

    __slots__ = ("call_id", "index", "kind", "name", "parts", "signature")

    def __init__(self, index: int, kind: BlockType, call_id: str = "", name: str = "") -> None:
        self.index = index
        self.kind = kind
        self.call_id = call_id
        self.name = name
        self.parts: list[str] = []
        self.signature = ""

    def end(self) -> list[Chunk]:
        """The block's end; a tool call that streamed no arguments gets ``{}``, sent as its
        delta first."""
        text = "".join(self.parts)
        if self.kind == "text":
            return [BlockEnd(index=self.index, block=TextPart(text))]
        if self.kind == "reasoning":
            signed = ReasoningPart(text, signature=self.signature or None)
            return [BlockEnd(index=self.index, block=signed)]
        out: list[Chunk] = []
        if not text:
            text = "{}"
            out.append(ToolCallDelta(index=self.index, id=self.call_id, arguments_delta="{}"))
        call = ToolCallPart(id=self.call_id, name=self.name, arguments=text)
        return [*out, BlockEnd(index=self.index, block=call)]


Growing = tuple[int, list[str]]
"""A text or reasoning block a wire streams as bare pieces: its index and the pieces so far."""


def grow(
    block: Growing | None, kind: BlockType, piece: str, new_block: Callable[[], int]
) -> tuple[Growing, list[Chunk]]:
    """Add a text or reasoning ``piece`` to ``block`` (started, at ``new_block()``'s index,
    by the first piece): the block and the chunks that say so."""
    out: list[Chunk] = []
    if block is None:
        block = (new_block(), [])
        out.append(BlockStart(index=block[0], block_type=kind))
    block[1].append(piece)
    delta = ReasoningDelta if kind == "reasoning" else TextDelta
    out.append(delta(index=block[0], text=piece))
    return block, out


def first_tool_delta(chunks: Sequence[Chunk], start: int, index: int) -> ToolCallDelta | None:
    for chunk in chunks[start:]:
        if isinstance(chunk, ToolCallDelta) and chunk.index == index:
            return chunk
    return None


class _Wire(dict[str, Any]):
    """Decoded JSON with attribute access, as the SDKs' models offer it (missing → None);
    still the dict it was, so ``json.dumps`` of a tool's initial ``input`` works."""

    def __getattr__(self, name: str) -> Any:
        return wrap(self.get(name))


def wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return _Wire(value)
    if isinstance(value, list):
        return [wrap(item) for item in value]
    return value


class WireDecoder(Protocol):
    """Turns one upstream call, event by event, into agentreel chunks."""

    def event(self, event: SseEvent) -> list[Chunk]:
        """Chunks completed by one SSE event; raises ``UpstreamStreamError`` on an error event."""
        ...

    def finish(self) -> list[Chunk]:
        """The closing chunks; raises ``StreamInterruptedError`` when the stream was cut."""
        ...

    @property
    def ended(self) -> bool:
        """The stream sent its terminal event (``data: [DONE]``), so a client may be done
        with the call before the body ends: the ``openai`` SDK stops reading there and waits
        at most 0.1 s for the rest. ``finish`` may be called at once. False for wire APIs
        whose clients read to the body's end."""
        ...

    def body(self, data: dict[str, Any]) -> list[Chunk]:
        """Every chunk of a non-streaming response body."""
        ...


class UpstreamStreamError(AgentreelLlmError):
    """The upstream sent an error event inside a stream; ``raw`` is its SSE data and
    ``salvage`` what the stream still told before it (the usage an error chunk carries)."""

    def __init__(self, raw: str, salvage: Sequence[Chunk] = ()) -> None:
        super().__init__(raw)
        self.raw = raw
        self.salvage = list(salvage)


class MetaWatch:
    """The response metadata seen so far in one call's wire objects (first value wins, as
    every Chat Completions chunk repeats them)."""

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}

    def take(self, data: Any, **names: str) -> None:
        """Keep ``data[wire_name]`` as field ``name`` for each ``name=wire_name`` given."""
        if not isinstance(data, dict):
            return
        for name, wire_name in names.items():
            value = data.get(wire_name)
            if value is not None and name not in self.fields:
                self.fields[name] = value

    def onto(self, chunks: list[Chunk], item_ids: Sequence[str] = ()) -> list[Chunk]:
        """``chunks`` with their closing ``Finish`` carrying the metadata seen."""
        if not chunks or not isinstance(chunks[-1], Finish):
            return chunks
        meta = ResponseMeta(
            id=_text_or_none(self.fields.get("id")),
            model=_text_or_none(self.fields.get("model")),
            created=_int_or_none(self.fields.get("created")),
            system_fingerprint=_text_or_none(self.fields.get("system_fingerprint")),
            stop_reason=_text_or_none(self.fields.get("stop_reason")),
            stop_sequence=_text_or_none(self.fields.get("stop_sequence")),
            item_ids=tuple(item_ids),
        )
        if meta == ResponseMeta():
            return chunks
        return [*chunks[:-1], msgspec.structs.replace(chunks[-1], response=meta)]


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def provider_label(upstream: str) -> ProviderLabel:
    return ProviderLabel("upstream", upstream, "the client's key")


def has_error(data: Any) -> bool:
    return isinstance(data, dict) and bool(data.get("error"))
