"""AWS Bedrock's Converse API, both ways: ``POST /model/<modelId>/converse-stream`` (an AWS
event stream, ``_eventstream``) and ``POST /model/<modelId>/converse`` (one JSON body).

A stream's events (``:event-type``): ``messageStart`` (role), ``contentBlockStart`` (a
``toolUse`` block's id and name), ``contentBlockDelta`` (``text``, ``toolUse.input``
pieces, ``reasoningContent.text`` / ``.signature``), ``contentBlockStop``, ``messageStop``
(``stopReason``), ``metadata`` (``usage``: ``inputTokens``, ``outputTokens``, cache
counts). An exception message (``throttlingException``, …) is an in-stream error.

Wire → chunks: one block per ``contentBlockIndex`` (text, reasoning with its signature,
tool call), ``usage``, ``finish``: ``end_turn``/``stop_sequence`` → stop, ``tool_use`` →
tool-calls, ``max_tokens`` → max-tokens, anything else → error with the wire reason as
code; the raw ``stopReason`` kept as the call's ``ResponseMeta``. The request's SigV4
``authorization`` and ``x-amz-*`` headers are forwarded upstream and never written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

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
from agentreel.llm._messages import (
    ContentPart,
    Message,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from agentreel.llm.wire._api import BEDROCK_MODEL, WireApiSpec, WirePath
from agentreel.llm.wire._common import (
    MetaWatch,
    OpenBlock,
    UpstreamStreamError,
    finish_for,
    finish_in,
    meta_in,
    provider_label,
    stream_cut,
    usage_in,
)
from agentreel.llm.wire._eventstream import (
    EXCEPTION_PREFIX,
    event_frame,
    exception_frame,
)
from agentreel.llm.wire._request import (
    RuleText,
    WireRequest,
    canonical,
    chat_rule_text,
    rule_text_of,
    text_of,
    tool_spec,
)
from agentreel.llm.wire._sse import SseEvent, json_bytes

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "max-tokens",
    "model_context_window_exceeded": "max-tokens",
}
_WIRE_REASON = {"stop": "end_turn", "tool-calls": "tool_use", "max-tokens": "max_tokens"}
_ERROR_TYPES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    503: "ServiceUnavailableException",
}


def bedrock_error_type(status: int) -> str:
    """The exception name Bedrock answers ``status`` with (botocore's error code)."""
    return _ERROR_TYPES.get(
        status, "InternalServerException" if status >= 500 else "ValidationException"
    )


BEDROCK_AUTH_HEADERS = ("authorization", "x-amz-security-token")
"""Where an AWS client sends its SigV4 signature and session token, for each Bedrock API."""


def bedrock_error_body(status: int, message: str, code: str | None = None) -> bytes:
    """Bedrock's error body: ``{"__type": "<Exception>", "message": "…"}`` (botocore reads
    the code from ``__type`` when no ``x-amzn-errortype`` header names it)."""
    del code
    return json_bytes({"__type": bedrock_error_type(status), "message": message})


def bedrock_stream_error_frame(message: str, status: int = 500) -> bytes:
    """An exception message inside an event stream."""
    kind = bedrock_error_type(status)
    return exception_frame(kind[0].lower() + kind[1:], json_bytes({"message": message}))


def bedrock_models_body(models: Sequence[str]) -> bytes:
    """A ``ListFoundationModels``-shaped listing naming ``models``."""
    return json_bytes({"modelSummaries": [{"modelId": m, "modelName": m} for m in models]})


def bedrock_profiles_body(models: Sequence[str]) -> bytes:
    """A ``ListInferenceProfiles``-shaped listing (``GET /inference-profiles``) naming
    ``models``, each a system-defined profile of itself."""
    return json_bytes(
        {
            "inferenceProfileSummaries": [
                {
                    "inferenceProfileId": m,
                    "inferenceProfileName": m,
                    "inferenceProfileArn": f"arn:aws:bedrock:us-east-1::inference-profile/{m}",
                    "models": [{"modelArn": f"arn:aws:bedrock:us-east-1::foundation-model/{m}"}],
                    "status": "ACTIVE",
                    "type": "SYSTEM_DEFINED",
                }
                for m in models
            ]
        }
    )


BEDROCK_LISTING_PATHS = (
    WirePath("/foundation-models", "GET /foundation-models", "GET", kind="models"),
    WirePath(
        "/inference-profiles",
        "GET /inference-profiles",
        "GET",
        kind="models",
        listing="inference-profiles",
        listing_body=bedrock_profiles_body,
    ),
)
"""Bedrock's control-plane model listings (``ListFoundationModels``,
``ListInferenceProfiles``), served as the Converse API's (the first Bedrock API listed)."""


# -- request ---------------------------------------------------------------------------------


def _block(block: Any) -> ContentPart:
    if not isinstance(block, dict):
        return TextPart(text_of(block))
    if isinstance(block.get("text"), str):
        return TextPart(block["text"])
    use = block.get("toolUse")
    if isinstance(use, dict):
        return ToolCallPart(
            id=str(use.get("toolUseId") or ""),
            name=str(use.get("name") or ""),
            arguments=canonical(use.get("input") or {}),
        )
    result = block.get("toolResult")
    if isinstance(result, dict):
        content = [
            item.get("text") if isinstance(item, dict) and "text" in item else canonical(item)
            for item in result.get("content") or []
        ]
        return ToolResultPart(
            call_id=str(result.get("toolUseId") or ""),
            content="".join(str(piece) for piece in content),
            is_error=result.get("status") == "error",
        )
    reasoning = block.get("reasoningContent")
    if isinstance(reasoning, dict):
        text = reasoning.get("reasoningText")
        if isinstance(text, dict):
            return ReasoningPart(str(text.get("text") or ""))
    # Images, documents, cache points, guard content: compared by their JSON.
    return TextPart(canonical(block))


def parse_converse_request(
    body: dict[str, Any], model: str = "", stream: bool = False
) -> WireRequest:
    """A Converse body: ``system`` blocks, ``messages`` of content blocks (a user turn of
    ``toolResult`` blocks is the tools' answer), ``toolConfig.tools[].toolSpec``; the model
    and whether it streams are the path's."""
    system_blocks = body.get("system")
    system = (
        "\n\n".join(
            str(block.get("text"))
            for block in system_blocks
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        )
        if isinstance(system_blocks, list)
        else None
    )
    messages: list[Message] = []
    for raw in body.get("messages") or []:
        if not isinstance(raw, dict):
            continue
        parts = tuple(_block(block) for block in raw.get("content") or [])
        role: Role = "assistant" if raw.get("role") == "assistant" else "user"
        if parts and all(isinstance(part, ToolResultPart) for part in parts):
            role = "tool"
        messages.append(Message(role=role, content=parts or (TextPart(""),)))
    tools: list[ToolSpec] = []
    config = body.get("toolConfig")
    for tool in (config.get("tools") or []) if isinstance(config, dict) else []:
        spec = tool.get("toolSpec") if isinstance(tool, dict) else None
        if isinstance(spec, dict):
            schema = spec.get("inputSchema")
            parameters = schema.get("json") if isinstance(schema, dict) else None
            tools.append(tool_spec(spec.get("name"), spec.get("description"), parameters))
        elif isinstance(tool, dict):
            tools.append(tool_spec(next(iter(tool), ""), "", tool))
    return WireRequest(
        api="bedrock-converse",
        model=model,
        system=system or None,
        messages=tuple(messages),
        tools=tuple(tools),
        stream=stream,
        include_usage=True,
        namespaced=False,
        rules=_rule_text(body, model),
    )


def _rule_text(body: dict[str, Any], model: str) -> RuleText:
    """A Converse body as rules read it, its turns spelled as Chat's: ``system`` blocks are
    system messages, a user turn of ``toolResult`` blocks is ``tool`` messages,
    ``toolConfig.tools[].toolSpec`` (``inputSchema.json``) the tools."""
    turns: list[dict[str, Any]] = [
        {"role": "system", "content": block["text"]}
        for block in body.get("system") or []
        if isinstance(block, dict) and isinstance(block.get("text"), str)
    ]
    for raw in body.get("messages") or []:
        if not isinstance(raw, dict):
            continue
        blocks = [b for b in raw.get("content") or [] if isinstance(b, dict)]
        if blocks and all("toolResult" in b for b in blocks):
            turns += [{"role": "tool", "content": _rule_block_text(b)} for b in blocks]
        else:
            turns.append(
                {
                    "role": "assistant" if raw.get("role") == "assistant" else "user",
                    "content": "".join(_rule_block_text(b) for b in blocks),
                }
            )
    config = body.get("toolConfig")
    tools = [
        {
            "type": "function",
            "function": {
                "name": spec.get("name"),
                "description": spec.get("description") or "",
                "parameters": (spec.get("inputSchema") or {}).get("json") or {},
            },
        }
        for tool in ((config.get("tools") or []) if isinstance(config, dict) else [])
        if isinstance(tool, dict)
        for spec in [tool.get("toolSpec")]
        if isinstance(spec, dict)
    ]
    return chat_rule_text(model, turns, tools)


def _rule_block_text(block: Any) -> str:
    """A Converse content block's text as rules read it (a ``toolResult``'s content's)."""
    if not isinstance(block, dict):
        return rule_text_of(block)
    if isinstance(block.get("text"), str):
        return str(block["text"])
    result = block.get("toolResult")
    if isinstance(result, dict):
        return "".join(_rule_block_text(item) for item in result.get("content") or [])
    if "json" in block:
        return json.dumps(block["json"], sort_keys=True, ensure_ascii=False)
    return ""


# -- wire → chunks ---------------------------------------------------------------------------


class ConverseDecoder:
    """One Converse answer, event by event (or its whole body)."""

    def __init__(self, upstream: str) -> None:
        self._label = provider_label(upstream)
        self._blocks: dict[int, OpenBlock] = {}
        self._next = 0
        self._stop: str | None = None
        self._usage: Usage | None = None
        self._meta = MetaWatch()
        self._events = 0

    @property
    def ended(self) -> bool:
        return False  # the client reads to the body's end

    def event(self, event: SseEvent) -> list[Chunk]:
        self._events += 1
        if event.name.startswith(EXCEPTION_PREFIX):
            # Kept as ``<exception type>\n<payload>``: replay sends the same exception.
            raw = event.name.removeprefix(EXCEPTION_PREFIX) + "\n" + event.data
            raise UpstreamStreamError(raw, [self._usage] if self._usage else [])
        data = json.loads(event.data) if event.data else {}
        if not isinstance(data, dict):
            raise ValueError("a Converse stream event is not a JSON object")
        if event.name == "contentBlockStart":
            return self._start(data)
        if event.name == "contentBlockDelta":
            return self._delta(data)
        if event.name == "contentBlockStop":
            return self._end(int(data.get("contentBlockIndex") or 0))
        if event.name == "messageStop":
            self._stop = str(data.get("stopReason") or "end_turn")
            self._meta.take(data, stop_reason="stopReason")
        elif event.name == "metadata":
            self._take_usage(data.get("usage"))
        return []

    def _take_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self._usage = Usage(
                input_tokens=int(usage.get("inputTokens") or 0),
                output_tokens=int(usage.get("outputTokens") or 0),
                cache_read_tokens=int(usage["cacheReadInputTokens"])
                if usage.get("cacheReadInputTokens")
                else None,
                cache_write_tokens=int(usage["cacheWriteInputTokens"])
                if usage.get("cacheWriteInputTokens")
                else None,
            )

    def _open(self, wire: int, kind: BlockType, call_id: str = "", name: str = "") -> list[Chunk]:
        block = OpenBlock(self._next, kind, call_id, name)
        self._next += 1
        self._blocks[wire] = block
        out: list[Chunk] = [BlockStart(index=block.index, block_type=kind)]
        if kind == "tool-call":
            out.append(ToolCallDelta(index=block.index, id=call_id, name=name, arguments_delta=""))
        return out

    def _start(self, data: dict[str, Any]) -> list[Chunk]:
        wire = int(data.get("contentBlockIndex") or 0)
        start = data.get("start")
        use = start.get("toolUse") if isinstance(start, dict) else None
        if isinstance(use, dict):
            return self._open(
                wire, "tool-call", str(use.get("toolUseId") or ""), str(use.get("name") or "")
            )
        return []

    def _delta(self, data: dict[str, Any]) -> list[Chunk]:
        wire = int(data.get("contentBlockIndex") or 0)
        delta = data.get("delta")
        if not isinstance(delta, dict):
            return []
        out: list[Chunk] = []
        text = delta.get("text")
        if isinstance(text, str):
            if wire not in self._blocks:
                out += self._open(wire, "text")
            block = self._blocks[wire]
            if text:
                block.parts.append(text)
                out.append(TextDelta(index=block.index, text=text))
        reasoning = delta.get("reasoningContent")
        if isinstance(reasoning, dict):
            if wire not in self._blocks:
                out += self._open(wire, "reasoning")
            block = self._blocks[wire]
            if isinstance(reasoning.get("text"), str) and reasoning["text"]:
                block.parts.append(reasoning["text"])
                out.append(ReasoningDelta(index=block.index, text=reasoning["text"]))
            if isinstance(reasoning.get("signature"), str):
                block.signature += reasoning["signature"]
        use = delta.get("toolUse")
        if isinstance(use, dict) and wire in self._blocks:
            block = self._blocks[wire]
            piece = use.get("input")
            if isinstance(piece, str) and piece:
                block.parts.append(piece)
                out.append(
                    ToolCallDelta(index=block.index, id=block.call_id, arguments_delta=piece)
                )
        return out

    def _end(self, wire: int) -> list[Chunk]:
        block = self._blocks.pop(wire, None)
        return [] if block is None else block.end()

    def finish(self) -> list[Chunk]:
        if self._stop is None:
            raise stream_cut(self._label.where(), self._events, "events", "without messageStop")
        out: list[Chunk] = []
        for wire in sorted(self._blocks, key=lambda key: self._blocks[key].index):
            out += self._end(wire)
        if self._usage is not None:
            out.append(self._usage)
        out.append(finish_for(self._stop, _FINISH, "stopReason"))
        return self._meta.onto(out)

    def body(self, data: dict[str, Any]) -> list[Chunk]:
        output = data.get("output")
        message = output.get("message") if isinstance(output, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        out: list[Chunk] = []
        for wire, block in enumerate(content or []):
            if not isinstance(block, dict):
                continue
            if isinstance(block.get("text"), str):
                out += self._delta({"contentBlockIndex": wire, "delta": {"text": block["text"]}})
            elif isinstance(block.get("toolUse"), dict):
                use = block["toolUse"]
                out += self._start({"contentBlockIndex": wire, "start": {"toolUse": use}})
                arguments = json.dumps(
                    use.get("input") or {}, separators=(",", ":"), ensure_ascii=False
                )
                out += self._delta(
                    {"contentBlockIndex": wire, "delta": {"toolUse": {"input": arguments}}}
                )
            elif isinstance(block.get("reasoningContent"), dict):
                text = block["reasoningContent"].get("reasoningText") or {}
                out += self._delta({"contentBlockIndex": wire, "delta": {"reasoningContent": text}})
            out += self._end(wire)
        self._take_usage(data.get("usage"))
        self._stop = str(data.get("stopReason") or "end_turn")
        self._meta.take(data, stop_reason="stopReason")
        return out + self.finish()


# -- chunks → wire ---------------------------------------------------------------------------


def _stop_reason(finish: Finish, meta: ResponseMeta) -> str:
    if meta.stop_reason:
        return meta.stop_reason
    if finish.reason == "error" and finish.code:
        return finish.code
    return _WIRE_REASON.get(finish.reason, "end_turn")


def _usage_body(usage: Usage | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "inputTokens": usage.input_tokens if usage else 0,
        "outputTokens": usage.output_tokens if usage else 0,
        "totalTokens": (usage.input_tokens + usage.output_tokens) if usage else 0,
    }
    if usage is not None and usage.cache_read_tokens:
        body["cacheReadInputTokens"] = usage.cache_read_tokens
    if usage is not None and usage.cache_write_tokens:
        body["cacheWriteInputTokens"] = usage.cache_write_tokens
    return body


def converse_chunk_frames(
    chunks: Sequence[Chunk], *, meta: ResponseMeta | None = None
) -> list[bytes]:
    """The event-stream messages of a ConverseStream answer."""
    meta = meta_in(chunks, meta)
    frames = [event_frame("messageStart", json_bytes({"role": "assistant"}))]
    for chunk in chunks:
        if isinstance(chunk, BlockStart) and chunk.block_type == "tool-call":
            continue  # its start names the tool, which its first delta carries
        if isinstance(chunk, ToolCallDelta):
            if chunk.name is not None:
                start = {"toolUse": {"toolUseId": chunk.id, "name": chunk.name}}
                frames.append(
                    event_frame(
                        "contentBlockStart",
                        json_bytes({"contentBlockIndex": chunk.index, "start": start}),
                    )
                )
            if chunk.arguments_delta:
                delta = {"toolUse": {"input": chunk.arguments_delta}}
                frames.append(_delta_frame(chunk.index, delta))
        elif isinstance(chunk, TextDelta) and chunk.text:
            frames.append(_delta_frame(chunk.index, {"text": chunk.text}))
        elif isinstance(chunk, ReasoningDelta) and chunk.text:
            frames.append(_delta_frame(chunk.index, {"reasoningContent": {"text": chunk.text}}))
        elif isinstance(chunk, BlockEnd):
            block = chunk.block
            if isinstance(block, ReasoningPart) and block.signature:
                frames.append(
                    _delta_frame(chunk.index, {"reasoningContent": {"signature": block.signature}})
                )
            frames.append(
                event_frame("contentBlockStop", json_bytes({"contentBlockIndex": chunk.index}))
            )
    if any(isinstance(chunk, Finish) for chunk in chunks):
        reason = _stop_reason(finish_in(chunks), meta)
        frames.append(event_frame("messageStop", json_bytes({"stopReason": reason})))
        metadata = {"usage": _usage_body(usage_in(chunks)), "metrics": {"latencyMs": 0}}
        frames.append(event_frame("metadata", json_bytes(metadata)))
    return frames


def _delta_frame(index: int, delta: dict[str, Any]) -> bytes:
    return event_frame(
        "contentBlockDelta", json_bytes({"contentBlockIndex": index, "delta": delta})
    )


def converse_chunk_body(chunks: Sequence[Chunk], *, meta: ResponseMeta | None = None) -> bytes:
    """A Converse answer as one JSON body."""
    meta = meta_in(chunks, meta)
    content: list[dict[str, Any]] = []
    for chunk in chunks:
        if not isinstance(chunk, BlockEnd):
            continue
        block = chunk.block
        if isinstance(block, TextPart):
            content.append({"text": block.text})
        elif isinstance(block, ReasoningPart):
            text: dict[str, Any] = {"text": block.text}
            if block.signature:
                text["signature"] = block.signature
            content.append({"reasoningContent": {"reasoningText": text}})
        elif isinstance(block, ToolCallPart):
            try:
                arguments = json.loads(block.arguments or "{}")
            except ValueError:
                arguments = {}
            content.append(
                {"toolUse": {"toolUseId": block.id, "name": block.name, "input": arguments}}
            )
    return json_bytes(
        {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": _stop_reason(finish_in(chunks), meta),
            "usage": _usage_body(usage_in(chunks)),
            "metrics": {"latencyMs": 0},
        }
    )


_ENDING_EVENTS = (b":event-type\x07\x00\x0bmessageStop", b":event-type\x07\x00\x08metadata")


def ends_converse_stream(frame: bytes) -> bool:
    """A message that ends a ConverseStream (``messageStop``, ``metadata``)."""
    return any(marker in frame for marker in _ENDING_EVENTS)


def _stream(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> list[bytes]:
    del request, wire_id  # the path names the model; Converse answers carry no id
    return converse_chunk_frames(chunks, meta=meta)


def _body(
    request: WireRequest, chunks: Sequence[Chunk], wire_id: str, meta: ResponseMeta | None
) -> bytes:
    del request, wire_id
    return converse_chunk_body(chunks, meta=meta)


def bedrock_error_frame(raw: str) -> bytes:
    """A recorded in-stream exception (``<type>\n<payload>``) sent again."""
    kind, _, payload = raw.partition("\n")
    return exception_frame(kind or "internalServerException", payload.encode())


BEDROCK_CONVERSE_API = WireApiSpec(
    name="bedrock-converse",
    title="AWS Bedrock Converse",
    framing="eventstream",
    parse=parse_converse_request,
    decoder=ConverseDecoder,
    encode_stream=_stream,
    encode_body=_body,
    error_body=bedrock_error_body,
    models_body=bedrock_models_body,
    rule_api="bedrock",
    auth_headers=BEDROCK_AUTH_HEADERS,
    error_frame=bedrock_error_frame,
    ends_stream=ends_converse_stream,
    paths=(
        WirePath(
            BEDROCK_MODEL + "/(?P<method>converse-stream|converse)",
            "POST /model/<modelId>/converse-stream|converse",
            streaming_methods=("converse-stream",),
            quoted_model=True,
        ),
        *BEDROCK_LISTING_PATHS,
    ),
)
"""AWS Bedrock ``POST /model/<modelId>/converse-stream`` and ``/converse``."""
