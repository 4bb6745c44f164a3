"""Live values a recorded answer must carry: captured from the request, served back.

Some agents hand the model a value that is new on every run and expect it back in a later
tool call: Codex 2.6's ``spawn_agent`` result holds the child's agent id (a fresh UUID),
and its ``wait_agent`` call must name that id, or Codex answers ``not_found``. A recorded
answer holds the record run's value; replay must serve the live one, as ``{{cwd}}`` is.

A ``Capture`` declares such a value: a regular expression found in a request's text (its
system prompt and every message's text, tool calls and tool results: ``request_strings``)
and a token name. Within one request, each distinct value it finds is numbered by first
appearance: ``{{<token>:1}}``, ``{{<token>:2}}``, ... A conversation resends its history,
so a value keeps its number in every later request of the same lane.

- Recording (the proxy): the values the call's request holds are written as their tokens
  in the call's recorded chunks (``tokenized_chunks``, also where a value is split across
  deltas). The client still gets the answer as the upstream sent it.
- Replay (``ReplayProvider``, in process and behind the proxy): the tokens in a served
  call's chunks become the values the live request holds under the same numbers
  (``substitute_chunk``); a token the live request has no value for stays as it is (the
  request then differs from the recorded one, and the drift check says how).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from agentreel.llm import (
    BlockEnd,
    Chunk,
    Finish,
    GenerateOptions,
    ReasoningDelta,
    ReasoningPart,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    ToolResultPart,
)
from agentreel.llm_replay._deltas import delta_streams, delta_text, regrouped, with_delta_text
from agentreel.session import Mask

__all__ = [
    "Capture",
    "captured_values",
    "has_capture_token",
    "request_strings",
    "substitute_chunk",
    "tokenized_chunks",
]


@dataclass(frozen=True, slots=True)
class Capture:
    """A live value to carry into served answers: ``regex`` (Python ``re``; its first group
    if it has one, else the whole match) found in requests, written ``{{<token>:N}}``."""

    regex: str
    token: str
    pattern: re.Pattern[str] = field(compare=False, repr=False)

    @classmethod
    def checked(cls, regex: str, token: str) -> Capture:
        """A capture, or ``ValueError`` saying what is wrong (the token follows the golden
        masks' rule: ``agent-id`` becomes ``{{agent-id:1}}``)."""
        Mask.checked(regex, token)  # a valid regex matching no empty text, a token name
        pattern = re.compile(regex)
        if pattern.groups > 1:
            raise ValueError(
                f"regex {regex!r} has {pattern.groups} groups; a capture takes one value: "
                'use one group, e.g. "agent_id":"([0-9a-f-]{36})", or (?:...) for the others'
            )
        return cls(regex, token, pattern)

    def placeholder(self, number: int) -> str:
        return f"{{{{{self.token}:{number}}}}}"


def request_strings(options: GenerateOptions) -> Iterable[str]:
    """Every text of a request a capture looks in: the system prompt, then each message's
    text, tool-call arguments and tool results, in order."""
    if options.system:
        yield options.system
    for message in options.messages:
        for part in message.content:
            if isinstance(part, TextPart | ReasoningPart):
                yield part.text
            elif isinstance(part, ToolCallPart):
                yield part.arguments
            elif isinstance(part, ToolResultPart):
                yield part.content


def captured_values(captures: Sequence[Capture], texts: Iterable[str]) -> dict[str, str]:
    """``{placeholder: value}`` for every value the captures find in ``texts``, numbered per
    token by first appearance."""
    if not captures:
        return {}
    found: dict[str, str] = {}
    seen: dict[tuple[str, str], str] = {}
    counts: dict[str, int] = {}
    for text in texts:
        for capture in captures:
            for match in capture.pattern.finditer(text):
                value = match.group(1) if capture.pattern.groups else match.group(0)
                if not value or (capture.token, value) in seen:
                    continue
                counts[capture.token] = number = counts.get(capture.token, 0) + 1
                placeholder = capture.placeholder(number)
                seen[(capture.token, value)] = placeholder
                found[placeholder] = value
    return found


_TOKEN = re.compile(r"\{\{[a-z][a-z0-9]*(?:-[a-z0-9]+)*:[0-9]+\}\}")


def has_capture_token(chunk: Chunk, tokens: frozenset[str]) -> bool:
    """Whether ``chunk`` holds a ``{{<token>:N}}`` of one of ``tokens`` (token names)."""
    return any(
        found.group()[2:].split(":", 1)[0] in tokens for found in _TOKEN.finditer(_texts(chunk))
    )


def substitute_chunk(chunk: Chunk, values: Mapping[str, str]) -> Chunk:
    """``chunk`` with each placeholder of ``values`` made its live value (JSON-escaped
    inside tool-call arguments, which are JSON text)."""

    def text(value: str) -> str:
        for placeholder, live in values.items():
            if placeholder in value:
                value = value.replace(placeholder, live)
        return value

    def arguments(value: str) -> str:
        for placeholder, live in values.items():
            if placeholder in value:
                value = value.replace(placeholder, json.dumps(live)[1:-1])
        return value

    return _mapped(chunk, text, arguments)


def tokenized_chunks(chunks: Sequence[Chunk], values: Mapping[str, str]) -> list[Chunk]:
    """``chunks`` with each value of ``values`` (``{placeholder: value}``) written as its
    placeholder, also where a value is split across the deltas of one block: the whole
    placeholder goes into the delta where the value starts (the chunk count is kept)."""
    if not values:
        return list(chunks)
    by_value = sorted(((v, p) for p, v in values.items()), key=lambda pair: -len(pair[0]))
    spellings = [(json.dumps(v)[1:-1], p) for v, p in by_value]

    def text(value: str) -> str:
        for live, placeholder in by_value:
            value = value.replace(live, placeholder)
        return value

    def arguments(value: str) -> str:
        for live, placeholder in spellings:
            value = value.replace(live, placeholder)
        return value

    result = [_mapped(chunk, text, arguments) for chunk in chunks]
    for positions in delta_streams(chunks):
        pieces = [delta_text(chunks[p]) or "" for p in positions]
        full = "".join(pieces)
        is_json = isinstance(chunks[positions[0]], ToolCallDelta)
        pairs = spellings if is_json else by_value
        spans = sorted(
            found.span() for live, _ in pairs for found in re.finditer(re.escape(live), full)
        )
        if not spans or all(_inside_one(pieces, span) for span in spans):
            continue  # every value lies inside one delta: replaced there already
        for position, piece in zip(positions, regrouped(pieces, spans), strict=True):
            tokenized = arguments(piece) if is_json else text(piece)
            result[position] = with_delta_text(chunks[position], tokenized)
    return result


def _inside_one(pieces: list[str], span: tuple[int, int]) -> bool:
    offset = 0
    for piece in pieces:
        if offset <= span[0] and span[1] <= offset + len(piece):
            return True
        offset += len(piece)
    return False


def _texts(chunk: Chunk) -> str:
    text = delta_text(chunk)
    if text is not None:
        return text
    if isinstance(chunk, BlockEnd):
        block = chunk.block
        return block.arguments if isinstance(block, ToolCallPart) else block.text
    if isinstance(chunk, Finish):
        return chunk.message or ""
    return ""


def _mapped(chunk: Chunk, text: Callable[[str], str], arguments: Callable[[str], str]) -> Chunk:
    """``chunk`` with ``text`` applied to its text and ``arguments`` to tool arguments."""
    if isinstance(chunk, TextDelta | ReasoningDelta):
        return with_delta_text(chunk, text(chunk.text))
    if isinstance(chunk, ToolCallDelta):
        return with_delta_text(chunk, arguments(chunk.arguments_delta))
    if isinstance(chunk, BlockEnd):
        block = chunk.block
        if isinstance(block, ToolCallPart):
            part: TextPart | ReasoningPart | ToolCallPart = msgspec.structs.replace(
                block, arguments=arguments(block.arguments)
            )
        else:
            part = msgspec.structs.replace(block, text=text(block.text))
        return msgspec.structs.replace(chunk, block=part)
    if isinstance(chunk, Finish) and chunk.message is not None:
        return msgspec.structs.replace(chunk, message=text(chunk.message))
    return chunk
