"""Lanes: the conversations one caller identity holds, told apart by what a request is.

A real agent sends, under one session identity, its main conversation and side calls
(title generation, safety classifiers, prompt suggestions) — concurrently, in any order.
Each is its own recorded script, a *lane*. Requests of one lane share their model, system
prompt, tool set and first message (a conversation only ever appends), so that tuple —
the lane signature, taken from the normalized ``request/header`` — binds a request to its
lane by what it is, never by when it arrived (SPEC 11).

Side calls that vary with timing (a title request that an agent makes or skips depending on
how fast the main conversation answered) may be named **partial lanes**: a regular
expression found (``re.search``) in a lane's model, system prompt or first message preview
— the readable parts of its signature, as recorded (normalized and masked) — names that
lane. A partial lane may be consumed partly or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from agentreel.llm_replay._fixture import Script
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
        compiled: list[re.Pattern[str]] = []
        for number, pattern in enumerate(patterns, 1):
            try:
                compiled.append(re.compile(pattern))
            except re.error as exc:
                raise ValueError(
                    f"partial lane {number} {pattern!r} is not a valid regular expression: "
                    f"{exc}. Fix the scenario's [model] partial_lanes (Python re syntax)"
                ) from None
        self.patterns = tuple(patterns)
        self._compiled = tuple(compiled)

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
        self._contents: dict[int, bytes] = {}

    def signature_of(self, number: int) -> LaneSignature | None:
        return self._signatures.get(number)

    def candidates(self, signature: LaneSignature) -> list[int]:
        """Every script (in session order) whose first request has ``signature``."""
        return self._by_signature.get(signature, [])

    def interchangeable(self, numbers: Sequence[int]) -> bool:
        """True when these scripts hold the same calls (any of them may serve the caller)."""
        return len({self._content(n) for n in numbers}) <= 1

    def _content(self, number: int) -> bytes:
        content = self._contents.get(number)
        if content is None:
            calls = self._scripts[number].calls
            content = msgspec.json.encode([[call.chunks, call.request] for call in calls])
            self._contents[number] = content
        return content
