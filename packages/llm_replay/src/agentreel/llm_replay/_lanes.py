"""Lanes: the conversations one caller identity holds, told apart by what a request is.

A real agent sends, under one session identity, its main conversation and side calls
(title generation, safety classifiers, prompt suggestions) — concurrently, in any order.
Each is its own recorded script, a *lane*. Requests of one lane share their model, system
prompt, tool set and first message (a conversation only ever appends), so that tuple —
the lane signature, taken from the normalized ``request/header`` — binds a request to its
lane by what it is, never by when it arrived (SPEC 11).

Two conversations may share a signature (two headerless subagents with one system prompt
and the same first message). **Chaining**, among the lanes of one signature, tells them
apart (SPEC 11, identity rule 4): a request continues a lane when its messages start with
that lane's previous request's messages followed by the lane's recorded reply (``chain``:
the reply's text and tool-call ids, both seen through the request masks) — or, after a
failed call, is that request again (a retry). A request with another signature (a handoff
to another agent's system prompt) is a lane of its own.

Side calls that vary with timing (a title request that an agent makes or skips depending on
how fast the main conversation answered) may be named **partial lanes**: a regular
expression found (``re.search``) in a lane's model, system prompt or first message preview
— the readable parts of its signature, as recorded (normalized and masked) — names that
lane. A partial lane may be consumed partly or not at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from enum import IntEnum
from typing import NamedTuple

import msgspec

from agentreel.llm import BlockEnd, Chunk, Finish, Message, TextPart, ToolCallPart
from agentreel.llm_replay._fixture import Script
from agentreel.llm_replay._settings import checked_regexes
from agentreel.session import RequestHeaderData


class LaneSignature(NamedTuple):
    """What stays the same across the requests of one conversation."""

    model: str
    system: str | None
    tools_digest: str
    first_message: str

    def describe(self) -> str:
        system = self.system or ""
        preview = system if len(system) <= 40 else system[:39] + "…"
        return (
            f"model {self.model!r}, system prompt {preview!r}, tools {self.tools_digest}, "
            f"first message {self.first_message or 'none'}"
        )


def lane_signature(header: RequestHeaderData) -> LaneSignature:
    """The lane signature of a (normalized) request header."""
    first = header.messages[0].digest if header.messages else ""
    return LaneSignature(header.model, header.system, header.tools_digest, first)


class PartialLanes:
    """The ``partial_lanes`` patterns of a replay, and which lanes they name (module doc)."""

    def __init__(self, patterns: Sequence[str] = ()) -> None:
        # Checked as the setting is (``ReplaySettings``: a ``ReplaySettingsError``).
        self.patterns = checked_regexes("partial_lanes", patterns)
        self._compiled = tuple(re.compile(pattern) for pattern in self.patterns)

    def __bool__(self) -> bool:
        return bool(self._compiled)

    def naming(self, header: RequestHeaderData) -> str | None:
        """The first pattern naming the lane of ``header`` (any request of it), or None."""
        if not self._compiled:
            return None
        texts = [header.model, header.system or ""]
        if header.messages:
            texts.append(header.messages[0].preview)
        for pattern, compiled in zip(self.patterns, self._compiled, strict=True):
            if any(compiled.search(text) for text in texts):
                return pattern
        return None


class LaneIndex:
    """Recorded scripts by the lane signature of their first recorded request.

    Content binding (the proxy's rule for callers without identity, and for a caller's side
    lanes) looks a live request's signature up here. Scripts without a recorded request
    header cannot be bound by content.
    """

    def __init__(self, scripts: Sequence[Script]) -> None:
        self._scripts = scripts
        self._by_signature: dict[LaneSignature, list[int]] = {}
        self._signatures: dict[int, LaneSignature] = {}
        for script in scripts:
            first = script.calls[0].request if script.calls else None
            if first is None:
                continue
            signature = lane_signature(first)
            self._signatures[script.number] = signature
            self._by_signature.setdefault(signature, []).append(script.number)
        self._contents: dict[tuple[int, int], bytes] = {}

    def signature_of(self, number: int) -> LaneSignature | None:
        return self._signatures.get(number)

    def candidates(self, signature: LaneSignature) -> list[int]:
        """Every script (in session order) whose first request has ``signature``."""
        return self._by_signature.get(signature, [])

    def interchangeable(self, numbers: Sequence[int], start: int = 0) -> bool:
        """True when these scripts hold the same calls from call ``start`` (0-based) on:
        any of them may serve the caller from there."""
        return len({self._content(n, start) for n in numbers}) <= 1

    def first_calls_alike(self, numbers: Sequence[int]) -> bool:
        """True when these scripts' first calls are the same request and the same reply:
        which one serves a first request changes nothing the caller sees yet."""
        return len({self._call(n, 0) for n in numbers}) <= 1

    def first_request(self, number: int) -> tuple[str, ...] | None:
        """The message digests of a script's first recorded request."""
        calls = self._scripts[number].calls
        first = calls[0].request if calls else None
        return message_digests(first) if first is not None else None

    def _call(self, number: int, position: int) -> bytes:
        call = self._scripts[number].calls[position]
        return msgspec.json.encode([call.chunks, call.request])

    def _content(self, number: int, start: int = 0) -> bytes:
        content = self._contents.get((number, start))
        if content is None:
            calls = self._scripts[number].calls[start:]
            content = msgspec.json.encode([[call.chunks, call.request] for call in calls])
            self._contents[(number, start)] = content
        return content


# -- conversation chaining (SPEC 11, identity rule 4) ------------------------------------


class Reply(NamedTuple):
    """What a client sends back of a recorded reply when it continues the conversation:
    the reply's text and its tool calls' ids (masked as the request is), and whether the
    call failed (then the same request again is a retry, not a new conversation)."""

    text: str
    tool_ids: tuple[str, ...]
    failed: bool


def _collapse(text: str) -> str:
    return " ".join(text.split())


def recorded_reply(chunks: Sequence[Chunk], mask: Callable[[str], str] | None = None) -> Reply:
    """The ``Reply`` of one call's chunks; ``mask`` is the request masking (the proxy's)."""
    texts: list[str] = []
    ids: list[str] = []
    failed = False
    for chunk in chunks:
        if isinstance(chunk, BlockEnd):
            if isinstance(chunk.block, TextPart):
                texts.append(chunk.block.text)
            elif isinstance(chunk.block, ToolCallPart):
                ids.append(chunk.block.id)
        elif isinstance(chunk, Finish):
            failed = chunk.reason == "error"
    text = "".join(texts)
    if mask is not None:
        text = mask(text)
        ids = [mask(i) for i in ids]
    return Reply(_collapse(text), tuple(ids), failed)


def _echoes(reply: Reply, messages: Sequence[Message], start: int) -> bool:
    """Whether the assistant message(s) at ``start`` are ``reply`` sent back: the same text
    (whitespace aside) and the same tool-call ids."""
    texts: list[str] = []
    ids: list[str] = []
    position = start
    while position < len(messages) and messages[position].role == "assistant":
        for part in messages[position].content:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, ToolCallPart):
                ids.append(part.id)
        position += 1
    if position == start:
        return False
    text = _collapse("".join(texts))
    if reply.tool_ids:
        # Masks may turn every id into the same token, so the text counts too — unless
        # the client dropped it, as some do beside tool calls.
        return tuple(ids) == reply.tool_ids and text in ("", reply.text)
    return text == reply.text


class Chain(IntEnum):
    """How a live request relates to a lane's previous request and recorded reply."""

    NONE = 0
    """It does not start with the lane's previous request."""
    EXTENDS = 1
    """It starts with the previous request and goes on, but not with the recorded reply
    (the client rewrote it, or the conversation drifted: the drift check says what)."""
    CONTINUES = 2
    """The previous request, then the recorded reply (or, after a failed call, the same
    request again: a retry): the lane's next call."""


def chain(
    previous: Sequence[str],
    reply: Reply | None,
    live: RequestHeaderData,
    messages: Sequence[Message],
) -> Chain:
    """How ``live`` (its header's message digests; ``messages``, the masked messages it was
    built from) continues a lane whose previous request had the message digests ``previous``
    and whose last call answered ``reply``."""
    digests = tuple(message.digest for message in live.messages)
    count = len(previous)
    if len(digests) < count or digests[:count] != tuple(previous):
        return Chain.NONE
    if len(digests) == count:
        return Chain.CONTINUES if reply is not None and reply.failed else Chain.NONE
    if reply is not None and _echoes(reply, messages, count):
        return Chain.CONTINUES
    return Chain.EXTENDS


def message_digests(header: RequestHeaderData) -> tuple[str, ...]:
    return tuple(message.digest for message in header.messages)


# A quoted string literal in code: "..." (JSON / JavaScript) or '...' (JavaScript).
_CODE_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"|\'((?:[^\'\\\n]|\\.)*)\'')


def _code_literals(text: str) -> Iterator[str]:
    """The string literals quoted inside ``text``, decoded and stripped: a delegating call
    whose argument is code — mistral-vibe's ``run_typescript`` spawning its child with
    ``tools.agents.spawn({"name": ..., "message": "<prompt>"})`` — hands its child a
    literal of that code, not a whole argument."""
    for match in _CODE_LITERAL.finditer(text):
        double, single = match.groups()
        body = double if double is not None else single.replace("\\'", "'").replace('"', '\\"')
        try:
            value = json.loads(f'"{body}"')
        except ValueError:
            continue
        if isinstance(value, str) and value.strip():
            yield value.strip()


# -- delegation: who a headerless caller's first message comes from (SPEC 11, 13) --------


class Delegation(NamedTuple):
    """One place where a reply hands work to another conversation: a tool call (its
    argument strings: a ``prompt``, ``task`` or ``description`` that becomes the child's first
    user message) or a piece of the reply's text (a LangGraph supervisor's ``Send``
    payloads: a line, or a string of the JSON it answered with). ``ordinal`` numbers a
    conversation's delegations in the order it issued them, across its calls."""

    ordinal: int
    texts: frozenset[str]
    in_text: bool
    """Found in the reply's text, not a tool call: only a caller with no identity at all
    is bound by it (a named caller's conversation says who its parent is by header)."""
    said: str = ""
    """How the reply said it, for messages: ``tool task('<first 80 characters of its
    arguments>')`` or ``text '<first 80 characters>'``."""


def argument_strings(arguments: str) -> frozenset[str]:
    """The string values inside a tool call's JSON arguments (a delegating call's prompt)
    and the string literals quoted inside them (a prompt inside code), stripped; arguments
    that are no JSON are one string."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return frozenset({arguments.strip()} - {""})
    found: set[str] = set()

    def walk(item: object) -> None:
        if isinstance(item, str):
            if item.strip():
                found.add(item.strip())
                found.update(_code_literals(item))
        elif isinstance(item, dict):
            for inner in item.values():
                walk(inner)
        elif isinstance(item, list):
            for inner in item:
                walk(inner)

    walk(value)
    return frozenset(found)


def _text_payloads(text: str) -> list[str]:
    """The pieces of a reply's text another conversation may start with: the whole text,
    each non-empty line, and — when the text is JSON (fenced or not) — its strings."""
    pieces = [text.strip()]
    pieces.extend(line.strip() for line in text.splitlines())
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    if body[:1] in ("{", "["):
        pieces.extend(sorted(argument_strings(body)))
    return [piece for piece in dict.fromkeys(pieces) if piece]


def delegations(
    chunks: Iterable[Chunk], start: int = 0, mask: Callable[[str], str] | None = None
) -> list[Delegation]:
    """The delegations in one reply's chunks, numbered from ``start`` in the order the
    reply issued them (each text block's payloads, each tool call); ``mask`` is the request
    masking (replay compares masked requests with masked replies)."""
    found: list[Delegation] = []

    def add(texts: Iterable[str], in_text: bool, said: str) -> None:
        masked = frozenset(mask(t).strip() if mask is not None else t for t in texts)
        found.append(Delegation(start + len(found), masked, in_text, said))

    for chunk in chunks:
        if not isinstance(chunk, BlockEnd):
            continue
        if isinstance(chunk.block, ToolCallPart):
            call = chunk.block
            add(
                argument_strings(call.arguments),
                False,
                f"tool {call.name}({_short(call.arguments)})",
            )
        elif isinstance(chunk.block, TextPart):
            for piece in _text_payloads(chunk.block.text):
                add((piece,), True, f"text {_short(piece)}")
    return found


def _short(text: str) -> str:
    """``text`` on one line, its first 80 characters, quoted (how messages cite a call)."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= 80 else flat[:80] + "…")


def first_user_text(messages: Sequence[Message]) -> str | None:
    """The whole text of the first user message, stripped, or None when there is none."""
    first = next((m for m in messages if m.role == "user"), None)
    text = first.text.strip() if first is not None else ""
    return text or None


def first_user_texts(messages: Sequence[Message]) -> frozenset[str]:
    """What a child's first user message may hold of its delegating call's prompt: the
    message's whole text and each of its text parts, stripped (Claude Code puts a
    ``<system-reminder>`` part before a Task child's prompt)."""
    first = next((m for m in messages if m.role == "user"), None)
    if first is None:
        return frozenset()
    said = {first.text.strip()}
    said.update(part.text.strip() for part in first.content if isinstance(part, TextPart))
    said.discard("")
    return frozenset(said)


def restates(messages: Sequence[Message], delegator_first: str | None) -> bool:
    """Whether a request is a side call *about* the conversation that would delegate to it
    (Qwen Code's auto-mode classifier: the conversation's own user messages, then the action
    it judges): its first user message is that conversation's first user message and more
    user messages follow. Such a request is a lane of that conversation, never its child —
    even when the conversation delegated its own first message verbatim."""
    if delegator_first is None or first_user_text(messages) != delegator_first:
        return False
    return sum(1 for m in messages if m.role == "user") > 1


def delegated_by(
    said: frozenset[str], issued: Sequence[Delegation], claimed: set[int], *, anonymous: bool
) -> Delegation | None:
    """The first of ``issued`` not yet ``claimed`` whose texts hold one of ``said`` (a new
    conversation's first user message, ``first_user_texts``); text payloads only for an
    ``anonymous`` caller."""
    for delegation in issued:
        if delegation.ordinal in claimed or (delegation.in_text and not anonymous):
            continue
        if not said.isdisjoint(delegation.texts):
            return delegation
    return None
