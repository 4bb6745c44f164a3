"""The common request view of every wire API: a request body parsed into the
``GenerateOptions`` the in-process path uses (each API's parser lives in its module).

The proxy builds the same ``request/header`` from them that an agentreel agent records
(``agentreel.session.build_request_header``), so drift detection and its readable diff are
the in-process ones. Parsing is lenient where real clients differ (SPEC 11): system
messages in the middle of ``messages`` stay where they are, input items with ids, content
as a string or as parts, namespaced tools, unknown fields ignored (they are forwarded
upstream untouched; only the header is built from what is parsed here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from agentreel.brand import SessionId
from agentreel.llm._messages import (
    Message,
    ToolSpec,
)
from agentreel.llm._options import GenerateOptions

if TYPE_CHECKING:
    from agentreel.llm.wire._registry import WireApiName


@dataclass(frozen=True, slots=True)
class WireRequest:
    """What the proxy needs of one model request besides its identity."""

    api: WireApiName
    model: str
    system: str | None
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    stream: bool
    include_usage: bool
    namespaced: bool

    def options(
        self,
        session_id: str | None = None,
        parent_session_id: str | None = None,
        spawn_index: int | None = None,
    ) -> GenerateOptions:
        return GenerateOptions(
            model=self.model,
            messages=self.messages,
            system=self.system,
            tools=self.tools,
            session_id=SessionId(session_id) if session_id is not None else None,
            parent_session_id=SessionId(parent_session_id)
            if parent_session_id is not None
            else None,
            spawn_index=spawn_index,
        )


def canonical(value: Any) -> str:
    return msgspec.json.encode(value, order="sorted").decode()


def text_of(content: Any) -> str:
    """A content value (string, list of parts, anything) as one text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces: list[str] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            elif isinstance(part, str):
                pieces.append(part)
            else:
                pieces.append(canonical(part))
        return "".join(pieces)
    return canonical(content)


def flag(body: dict[str, Any], key: str) -> bool:
    return body.get(key) is True


def body_model(body: dict[str, Any]) -> str:
    model = body.get("model")
    return model if isinstance(model, str) else ""


def tool_spec(name: Any, description: Any, parameters: Any) -> ToolSpec:
    return ToolSpec(
        name=str(name or ""),
        description=description if isinstance(description, str) else "",
        parameters=parameters if isinstance(parameters, dict) else {},
    )
