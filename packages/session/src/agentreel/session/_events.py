"""The session log's records: one header line, then one event a line.

Header: ``{"type":"session","version":1,"id",...}``. Event:
``{"type":"<event name>","seq":n,"time":epoch_ms,"data":{...}}``; ``seq`` counts from 0.
``time`` is epoch milliseconds with a microsecond fraction (``now_ms``; older logs hold
whole milliseconds, read alike): a call's ``request/header`` and ``finish`` times are the
recorded schedule replay keeps (SPEC 13).
Every record is a msgspec Struct in one tagged union on ``type`` so a line decodes in a
single pass with a precise error; unknown fields are rejected (strict codec). Event and
payload structs are declared ``gc=False``: they are immutable trees that can never form a
reference cycle, and leaving them out of the garbage collector's bookkeeping makes loading
a large log about twice as fast.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from agentreel.llm import Chunk, Message
from agentreel.llm.wire import WireApiName
from agentreel.session._format import MASKS_VERSION, RECORDING_FORMAT

HEADER_VERSION = 1

Origin = Literal["main", "spawn", "fork"]
TurnEndReason = Literal["completed", "aborted", "error", "max-turns", "interrupted"]
SubagentMode = Literal["spawn", "fork"]
SubagentOutcome = Literal["completed", "error", "cancelled"]
WireApi = WireApiName
"""The HTTP wire API a model call was made in (``request/header`` ``api``; SPEC 11); the
wire registry (``agentreel.llm.wire``) owns the names, and ``WIRE_API_PATHS`` (each API's
path and title, as messages name it)."""


class SessionHeader(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag="session",
    tag_field="type",
    forbid_unknown_fields=True,
):
    """First line of every log.

    ``spawn_index``: the child's ordinal among its parent's children (None at top level).
    ``seed_length``: events copied from the parent into a fork child, 0 otherwise; written,
    never inferred. ``format``, ``masks``: the format stamp (``_format``; last, so a golden
    drops them as one suffix); a log without them is read as format 1, mask set 1.
    """

    version: int = HEADER_VERSION
    id: str
    created_at: int
    cwd: str
    parent_session: str | None = None
    spawn_index: int | None = None
    origin: Origin = "main"
    seed_length: int = 0
    format: int = RECORDING_FORMAT
    masks: int = MASKS_VERSION


class _Data(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    pass


class TurnStartData(_Data, frozen=True, gc=False):
    turn: int


class TurnEndData(_Data, frozen=True, gc=False):
    turn: int
    reason: TurnEndReason


class StepData(_Data, frozen=True, gc=False):
    turn: int
    step: int


class UserMessageData(_Data, frozen=True, gc=False):
    turn: int
    text: str


class ToolHeader(_Data, frozen=True, gc=False, omit_defaults=True):
    """One tool of a request: its name, the digest of its canonical JSON and — where the
    recorder keeps it (the proxy: the first time the tool appears in a lane's log) — that
    JSON whole (``text``), so replay can mask it again with today's masks (a new mask never
    breaks a recording) and a drift shows what changed. Absent in process and in older
    recordings."""

    name: str
    digest: str
    text: str | None = None


class MessageHeader(_Data, frozen=True, gc=False, omit_defaults=True):
    """One message of a request: role, digest of its canonical JSON, a short preview, and —
    where the recorder keeps it (the proxy: the first time the message appears in a lane's
    log, when the preview does not already hold it all) — its whole normalized ``text``, so
    a drift past the preview shows the text on both sides. Absent in process and in older
    recordings (the line reads and writes as before)."""

    role: str
    digest: str
    preview: str
    text: str | None = None
    json: str | None = None
    """Format 3 (the proxy, once per lane log like ``text``): the message's canonical
    JSON as digested — normalized and masked — so replay can mask it again with today's
    masks and digest it again (SPEC 15): a new mask never breaks it."""


class RequestHeaderData(_Data, frozen=True, gc=False, omit_defaults=True):
    """Enough of a model request to compare a live call with the recorded one.

    Texts are normalized (cwd and ids tokenized) before they are stored or digested.
    ``api``: the wire API of a call made over HTTP (the proxy's); ``None`` — and absent
    from the line, so in-process logs and older recordings read and write as before — for
    a call made in process through a provider.
    """

    turn: int
    step: int
    model: str
    system: str | None
    tools: tuple[ToolHeader, ...]
    tools_digest: str
    messages: tuple[MessageHeader, ...]
    message_count: int
    api: WireApi | None = None


class AssistantChunkData(_Data, frozen=True, gc=False):
    turn: int
    step: int
    chunk: Chunk


class AssistantMessageData(_Data, frozen=True, gc=False):
    turn: int
    step: int
    message: Message


class ToolCallData(_Data, frozen=True, gc=False):
    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


class ToolResultData(_Data, frozen=True, gc=False):
    turn: int
    step: int
    call_id: str
    content: str
    is_error: bool


class SubagentStartData(_Data, frozen=True, gc=False):
    child_session: str
    spawn_index: int
    mode: SubagentMode


class SubagentEndData(_Data, frozen=True, gc=False):
    child_session: str
    outcome: SubagentOutcome


class EmptyData(_Data, frozen=True, gc=False):
    pass


class _Event(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag_field="type",
    forbid_unknown_fields=True,
    gc=False,
):
    seq: int
    time: int | float  # a whole-millisecond time (older logs) reads and writes back as one


# Subclasses are kw_only too so ``data`` stays after ``seq`` and ``time`` on the wire:
# ``{"type","seq","time","data"}`` (SPEC section 4).


class TurnStart(_Event, frozen=True, kw_only=True, gc=False, tag="turn/start"):
    data: TurnStartData


class TurnEnd(_Event, frozen=True, kw_only=True, gc=False, tag="turn/end"):
    data: TurnEndData


class StepStart(_Event, frozen=True, kw_only=True, gc=False, tag="step/start"):
    data: StepData


class StepEnd(_Event, frozen=True, kw_only=True, gc=False, tag="step/end"):
    data: StepData


class UserMessage(_Event, frozen=True, kw_only=True, gc=False, tag="user/message"):
    data: UserMessageData


class RequestHeader(_Event, frozen=True, kw_only=True, gc=False, tag="request/header"):
    data: RequestHeaderData


class AssistantChunk(_Event, frozen=True, kw_only=True, gc=False, tag="assistant/chunk"):
    data: AssistantChunkData


class AssistantMessage(_Event, frozen=True, kw_only=True, gc=False, tag="assistant/message"):
    data: AssistantMessageData


class ToolCall(_Event, frozen=True, kw_only=True, gc=False, tag="tool/call"):
    data: ToolCallData


class ToolResult(_Event, frozen=True, kw_only=True, gc=False, tag="tool/result"):
    data: ToolResultData


class SubagentStart(_Event, frozen=True, kw_only=True, gc=False, tag="subagent/start"):
    data: SubagentStartData


class SubagentEnd(_Event, frozen=True, kw_only=True, gc=False, tag="subagent/end"):
    data: SubagentEndData


class EndSeed(_Event, frozen=True, kw_only=True, gc=False, tag="session/end-seed"):
    data: EmptyData = EmptyData()


Event = (
    TurnStart
    | TurnEnd
    | StepStart
    | StepEnd
    | UserMessage
    | RequestHeader
    | AssistantChunk
    | AssistantMessage
    | ToolCall
    | ToolResult
    | SubagentStart
    | SubagentEnd
    | EndSeed
)

EventData = (
    TurnStartData
    | TurnEndData
    | StepData
    | UserMessageData
    | RequestHeaderData
    | AssistantChunkData
    | AssistantMessageData
    | ToolCallData
    | ToolResultData
    | SubagentStartData
    | SubagentEndData
    | EmptyData
)

# The event class for each data payload, so writers can append payloads directly.
# StepData is shared by step/start and step/end; callers pick the class explicitly there.
EVENT_FOR_DATA: dict[type[EventData], type[Event]] = {
    TurnStartData: TurnStart,
    TurnEndData: TurnEnd,
    UserMessageData: UserMessage,
    RequestHeaderData: RequestHeader,
    AssistantChunkData: AssistantChunk,
    AssistantMessageData: AssistantMessage,
    ToolCallData: ToolCall,
    ToolResultData: ToolResult,
    SubagentStartData: SubagentStart,
    SubagentEndData: SubagentEnd,
    EmptyData: EndSeed,
}
