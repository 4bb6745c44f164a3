"""Conversation messages, content parts and tool specifications."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

Role = Literal["system", "user", "assistant", "tool"]


class TextPart(msgspec.Struct, frozen=True, tag="text", tag_field="type"):
    """Plain text content."""

    text: str


class ReasoningPart(
    msgspec.Struct, frozen=True, tag="reasoning", tag_field="type", omit_defaults=True
):
    """Model reasoning ("thinking") content; kept so a replayed stream is complete.

    ``signature``: the provider's opaque signature of the block (Anthropic
    ``signature_delta``), which a client must send back with the block; absent (and not
    written) when the provider sent none.
    """

    text: str
    signature: str | None = None


class ToolCallPart(msgspec.Struct, frozen=True, tag="tool-call", tag_field="type"):
    """A tool call the assistant made; ``arguments`` is the raw JSON text it streamed."""

    id: str
    name: str
    arguments: str


class ToolResultPart(msgspec.Struct, frozen=True, tag="tool-result", tag_field="type"):
    """The result of a tool call, sent back to the model."""

    call_id: str
    content: str
    is_error: bool = False


ContentPart = TextPart | ReasoningPart | ToolCallPart | ToolResultPart


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """One message of a conversation."""

    role: Role
    content: tuple[ContentPart, ...]

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=(TextPart(text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls(role="assistant", content=(TextPart(text),))

    @property
    def text(self) -> str:
        """The concatenated text parts (reasoning excluded)."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        return tuple(p for p in self.content if isinstance(p, ToolCallPart))


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool the model may call: its name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)
