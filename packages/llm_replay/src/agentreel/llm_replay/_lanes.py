"""Lanes: the conversations one caller identity holds, told apart by what a request is.

A real agent sends, under one session identity, its main conversation and side calls
(title generation, safety classifiers, prompt suggestions) — concurrently, in any order.
Each is its own recorded script, a *lane*. Requests of one lane share their model, system
prompt, tool set and first message (a conversation only ever appends), so that tuple —
the lane signature, taken from the normalized ``request/header`` — binds a request to its
lane by what it is, never by when it arrived (SPEC 11).
"""

from __future__ import annotations

from typing import NamedTuple

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
