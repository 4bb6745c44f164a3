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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from agentreel.brand import SessionId
from agentreel.llm._messages import (
    Message,
    ToolSpec,
)
from agentreel.llm._options import GenerateOptions

# The names live here, below every API module, so the registry can import the modules that
# use them without an import cycle (one kept for the type checker is one too).
WireApiName = Literal[
    "chat",
    "messages",
    "responses",
    "gemini",
    "ollama-chat",
    "ollama-generate",
    "bedrock-converse",
    "bedrock-invoke",
    "embeddings",
    "gemini-embed",
    "ollama-embed",
    "vertex-embed",
    "bedrock-embed",
]
"""The wire APIs, as the session log names them (``request/header`` ``api``; SPEC 11)."""


NAMESPACE_SEPARATOR = "."
"""How a namespaced Responses tool (``responses-lite``) is named in agentreel chunks:
``<namespace>.<name>``; the Responses encoder splits it back into both fields."""

ToolSpecs = Mapping[str, Mapping[str, Any]]
"""Offered tools by name (``ns.name`` inside a namespace): each its ``description`` and
``parameters`` (its JSON schema)."""


@dataclass(frozen=True, slots=True)
class RuleText:
    """A request as the stub's rules read it (``agentreel.llm.stub.RequestView``), parsed
    by its API's parser beside the header's view: where the two differ (a system prompt's
    blocks joined with nothing, not a blank line; a Gemini tool result's ``error`` or
    ``content`` string, not its JSON; parts without text left out; a Messages body's own
    ``model`` even where the path names one) the rules keep the texts they always matched,
    so no rule answers differently (issue 42)."""

    model: str = ""
    system: str = ""
    texts: tuple[str, ...] = ()
    """Every message's text, in order (``any_message`` reads them joined by newlines)."""
    last_user: str | None = None
    """The user text the conversation ends with (trailing system messages looked past)."""
    last_tool_result: str | None = None
    """The tool results the conversation ends with, one a line."""
    tools: ToolSpecs = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WireRequest:
    """What the proxy needs of one model request besides its identity, and what the stub's
    rules read of it (``rules``, ``structured_output``, ``stop_sequences``)."""

    api: WireApiName
    model: str
    system: str | None
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    stream: bool
    include_usage: bool
    namespaced: bool
    structured_output: bool = False
    """It asks for JSON: a JSON schema or JSON mode, as its API spells it."""
    stop_sequences: tuple[str, ...] = ()
    rules: RuleText = RuleText()

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


# -- what rules read: the helpers each API's parser fills ``RuleText`` with ------------------

SYSTEM_ROLES = ("system", "developer")
JSON_FORMATS = ("json_schema", "json_object")


def rule_text_of(content: Any) -> str:
    """A ``content`` value's text as rules read it: a string, or a list's text blocks (and a
    ``tool_result`` block's content) joined; anything else is no text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") == "tool_result":
                    parts.append(rule_text_of(block.get("content", "")))
            elif isinstance(block, str):
                parts.append(block)
        return "".join(parts)
    return ""


def conversation_end(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` without the system / developer messages they end with."""
    end = len(messages)
    while end and messages[end - 1].get("role") in SYSTEM_ROLES:
        end -= 1
    return messages[:end]


def last_user_text(conversation: list[dict[str, Any]]) -> str | None:
    """The text of the user message the conversation ends with, if it ends with one."""
    if conversation and conversation[-1].get("role") == "user":
        return rule_text_of(conversation[-1].get("content"))
    return None


def trailing_results(
    conversation: list[dict[str, Any]], key: str, value: str, text_field: str
) -> str | None:
    """The texts (``text_field``) of the tool results (``key`` is ``value``) the
    conversation ends with, in order, one a line; ``None`` when it ends with none (Chat's
    ``tool`` messages' ``content``, Responses' ``function_call_output`` items' ``output``)."""
    trailing: list[str] = []
    for message in reversed(conversation):
        if message.get(key) != value:
            break
        trailing.append(rule_text_of(message.get(text_field)))
    return "\n".join(reversed(trailing)) if trailing else None


def stop_list(value: Any) -> tuple[str, ...]:
    """Stop sequences given as one string or a list of them."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, str))
    return ()


def format_type(value: Any) -> Any:
    """A format object's ``type`` (``json_schema``), else None."""
    return value.get("type") if isinstance(value, dict) else None


def rule_tools(tools: list[Any], prefix: str = "") -> dict[str, dict[str, Any]]:
    """Offered tools by name (``ns.name`` inside a namespace), each its description and
    JSON schema, whichever wire spelled them (Chat ``function``, Anthropic
    ``input_schema``, Responses flat ``parameters`` and ``namespace`` tools); a tool
    without a name is none."""
    specs: dict[str, dict[str, Any]] = {}
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
            inner = f"{prefix}{tool.get('name', '')}{NAMESPACE_SEPARATOR}"
            specs.update(rule_tools(tool["tools"], inner))
            continue
        nested = tool.get("function")
        function: dict[str, Any] = nested if isinstance(nested, dict) else tool
        name = function.get("name")
        if not isinstance(name, str) or not name:
            continue
        schema = function.get("parameters", function.get("input_schema"))
        specs[prefix + name] = {
            "description": function.get("description") or "",
            "parameters": schema if isinstance(schema, dict) else {},
        }
    return specs


def chat_rule_text(model: str, messages: list[Any], tools: list[Any]) -> RuleText:
    """Chat Completions ``messages`` and ``tools`` as rules read them (Ollama's and
    Bedrock Converse's too, their turns spelled as Chat's): every system / developer
    message is the system prompt, trailing ``tool`` messages the last tool result."""
    kept = [m for m in messages if isinstance(m, dict)]
    conversation = conversation_end(kept)
    return RuleText(
        model=model,
        system="\n".join(
            rule_text_of(m.get("content")) for m in kept if m.get("role") in SYSTEM_ROLES
        ),
        texts=tuple(rule_text_of(m.get("content")) for m in kept),
        last_user=last_user_text(conversation),
        last_tool_result=trailing_results(conversation, "role", "tool", "content"),
        tools=rule_tools(tools),
    )
