"""An HTTP request body of each wire API → the ``GenerateOptions`` the in-process path uses.

The proxy builds the same ``request/header`` from them that an agentreel agent records
(``agentreel.session.build_request_header``), so drift detection and its readable diff are
the in-process ones. Parsing is lenient where real clients differ (SPEC 11): system
messages in the middle of ``messages`` stay where they are, input items with ids, content
as a string or as parts, namespaced tools, unknown fields ignored (they are forwarded
upstream untouched; only the header is built from what is parsed here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from agentreel.brand import SessionId
from agentreel.llm import (
    ContentPart,
    GenerateOptions,
    Message,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from agentreel.llm.wire import NAMESPACE_SEPARATOR
from agentreel.llm_proxy._routes import Api


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """What the proxy needs of one model request besides its identity."""

    api: Api
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


def _canonical(value: Any) -> str:
    return msgspec.json.encode(value, order="sorted").decode()


def _text_of(content: Any) -> str:
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
                pieces.append(_canonical(part))
        return "".join(pieces)
    return _canonical(content)


def parse_request(
    api: Api, body: dict[str, Any], *, model: str = "", stream: bool = False
) -> ParsedRequest:
    """Parse a request body of ``api`` (already a JSON object) leniently; ``model`` and
    ``stream`` are the Gemini route's (its path names them, not its body)."""
    if api == "chat":
        return _chat(body)
    if api == "messages":
        return _messages(body)
    if api == "gemini":
        return _gemini(body, model, stream)
    return _responses(body)


def _flag(body: dict[str, Any], key: str) -> bool:
    return body.get(key) is True


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    return model if isinstance(model, str) else ""


# -- Chat Completions ----------------------------------------------------------------------


def _chat(body: dict[str, Any]) -> ParsedRequest:
    system: list[str] = []
    messages: list[Message] = []
    for raw in body.get("messages") or []:
        if not isinstance(raw, dict):
            continue
        role = raw.get("role")
        if role in ("system", "developer"):
            text = _text_of(raw.get("content"))
            if messages:
                messages.append(Message(role="system", content=(TextPart(text),)))
            else:
                system.append(text)
        elif role == "assistant":
            messages.append(_chat_assistant(raw))
        elif role in ("tool", "function"):
            call_id = str(raw.get("tool_call_id") or raw.get("name") or "")
            result = ToolResultPart(call_id=call_id, content=_text_of(raw.get("content")))
            messages.append(Message(role="tool", content=(result,)))
        else:
            messages.append(Message(role="user", content=_chat_parts(raw.get("content"))))
    tools: list[ToolSpec] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        if isinstance(function, dict):
            tools.append(
                _tool(function.get("name"), function.get("description"), function.get("parameters"))
            )
        else:
            tools.append(_tool(tool.get("type"), "", tool))
    options = body.get("stream_options")
    return ParsedRequest(
        api="chat",
        model=_model(body),
        system="\n\n".join(system) if system else None,
        messages=tuple(messages),
        tools=tuple(tools),
        stream=_flag(body, "stream"),
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
        namespaced=False,
    )


def _chat_parts(content: Any) -> tuple[ContentPart, ...]:
    if isinstance(content, list):
        parts: list[ContentPart] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(TextPart(part["text"]))
            else:
                parts.append(TextPart(_canonical(part)))
        return tuple(parts)
    return (TextPart(_text_of(content)),)


def _chat_assistant(raw: dict[str, Any]) -> Message:
    parts: list[ContentPart] = []
    reasoning = raw.get("reasoning_content") or raw.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append(ReasoningPart(reasoning))
    text = _text_of(raw.get("content"))
    if text:
        parts.append(TextPart(text))
    for call in raw.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        raw_function = call.get("function")
        function: dict[str, Any] = raw_function if isinstance(raw_function, dict) else {}
        arguments = function.get("arguments")
        parts.append(
            ToolCallPart(
                id=str(call.get("id") or ""),
                name=str(function.get("name") or ""),
                arguments=arguments if isinstance(arguments, str) else _canonical(arguments),
            )
        )
    return Message(role="assistant", content=tuple(parts) or (TextPart(""),))


def _tool(name: Any, description: Any, parameters: Any) -> ToolSpec:
    return ToolSpec(
        name=str(name or ""),
        description=description if isinstance(description, str) else "",
        parameters=parameters if isinstance(parameters, dict) else {},
    )


# -- Anthropic Messages ---------------------------------------------------------------------


def _messages(body: dict[str, Any]) -> ParsedRequest:
    raw_system = body.get("system")
    if isinstance(raw_system, list):
        system: str | None = "\n\n".join(_text_of([block]) for block in raw_system)
    elif isinstance(raw_system, str):
        system = raw_system
    else:
        system = None
    messages: list[Message] = []
    for raw in body.get("messages") or []:
        if not isinstance(raw, dict):
            continue
        role: Role = "assistant" if raw.get("role") == "assistant" else "user"
        if raw.get("role") == "system":
            role = "system"
        content = raw.get("content")
        if not isinstance(content, list):
            messages.append(Message(role=role, content=(TextPart(_text_of(content)),)))
            continue
        parts = tuple(_anthropic_block(block) for block in content)
        messages.append(Message(role=role, content=parts or (TextPart(""),)))
    tools = tuple(
        _tool(
            tool.get("name") or tool.get("type"),
            tool.get("description"),
            tool.get("input_schema") if "input_schema" in tool else tool,
        )
        for tool in body.get("tools") or []
        if isinstance(tool, dict)
    )
    return ParsedRequest(
        api="messages",
        model=_model(body),
        system=system,
        messages=tuple(messages),
        tools=tools,
        stream=_flag(body, "stream"),
        include_usage=True,
        namespaced=False,
    )


def _anthropic_block(block: Any) -> ContentPart:
    if not isinstance(block, dict):
        return TextPart(_text_of(block))
    kind = block.get("type")
    if kind == "text":
        return TextPart(str(block.get("text") or ""))
    if kind == "tool_use":
        return ToolCallPart(
            id=str(block.get("id") or ""),
            name=str(block.get("name") or ""),
            arguments=_canonical(block.get("input") or {}),
        )
    if kind == "tool_result":
        return ToolResultPart(
            call_id=str(block.get("tool_use_id") or ""),
            content=_text_of(block.get("content")),
            is_error=block.get("is_error") is True,
        )
    if kind == "thinking":
        return ReasoningPart(str(block.get("thinking") or ""))
    # Images, documents, redacted thinking, server tool blocks: compared by their JSON, minus
    # cache hints that clients move between turns.
    return TextPart(_canonical({k: v for k, v in block.items() if k != "cache_control"}))


# -- OpenAI Responses -----------------------------------------------------------------------


def _responses(body: dict[str, Any]) -> ParsedRequest:
    instructions = body.get("instructions")
    system = instructions if isinstance(instructions, str) else None
    tools: list[ToolSpec] = []
    namespaced = _add_response_tools(tools, body.get("tools") or [])
    messages: list[Message] = []
    raw_input = body.get("input")
    items = [{"role": "user", "content": raw_input}] if isinstance(raw_input, str) else raw_input
    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "additional_tools":
            namespaced = _add_response_tools(tools, item.get("tools") or []) or namespaced
        elif kind == "function_call":
            name = str(item.get("name") or "")
            if item.get("namespace"):
                name = f"{item['namespace']}{NAMESPACE_SEPARATOR}{name}"
            arguments = item.get("arguments")
            call = ToolCallPart(
                id=str(item.get("call_id") or ""),
                name=name,
                arguments=arguments if isinstance(arguments, str) else _canonical(arguments),
            )
            messages.append(Message(role="assistant", content=(call,)))
        elif kind == "function_call_output":
            result = ToolResultPart(
                call_id=str(item.get("call_id") or ""), content=_text_of(item.get("output"))
            )
            messages.append(Message(role="tool", content=(result,)))
        elif kind == "reasoning":
            summary = _text_of(item.get("summary"))
            messages.append(Message(role="assistant", content=(ReasoningPart(summary),)))
        elif kind in (None, "message"):
            role = item.get("role")
            wire_role: Role = (
                "system"
                if role in ("system", "developer")
                else "assistant"
                if role == "assistant"
                else "user"
            )
            messages.append(
                Message(role=wire_role, content=(TextPart(_text_of(item.get("content"))),))
            )
        else:
            without_id = {k: v for k, v in item.items() if k != "id"}
            messages.append(Message(role="user", content=(TextPart(_canonical(without_id)),)))
    return ParsedRequest(
        api="responses",
        model=_model(body),
        system=system,
        messages=tuple(messages),
        tools=tuple(tools),
        stream=_flag(body, "stream"),
        include_usage=True,
        namespaced=namespaced,
    )


def _add_response_tools(tools: list[ToolSpec], raw_tools: Any, namespace: str = "") -> bool:
    """Append Responses tools (``function`` or ``namespace`` groups); True if namespaced."""
    namespaced = False
    for tool in raw_tools if isinstance(raw_tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            inner = f"{namespace}{tool.get('name') or ''}{NAMESPACE_SEPARATOR}"
            _add_response_tools(tools, tool.get("tools") or [], inner)
            namespaced = True
        elif tool.get("type") == "function":
            tools.append(
                _tool(
                    f"{namespace}{tool.get('name') or ''}",
                    tool.get("description"),
                    tool.get("parameters"),
                )
            )
        else:
            tools.append(_tool(f"{namespace}{tool.get('type') or ''}", "", tool))
    return namespaced


# -- Gemini generateContent -----------------------------------------------------------------


def _gemini(body: dict[str, Any], model: str, stream: bool) -> ParsedRequest:
    """A Gemini ``generateContent`` body: ``systemInstruction``, ``contents`` (``role:
    model`` turns are the assistant's), ``tools[].functionDeclarations``."""
    raw_system = body.get("systemInstruction")
    system: str | None = None
    if isinstance(raw_system, dict):
        system = _text_of(raw_system.get("parts"))
    elif isinstance(raw_system, str):
        system = raw_system
    messages: list[Message] = []
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        role: Role = "assistant" if content.get("role") == "model" else "user"
        parts = tuple(
            _gemini_part(part) for part in content.get("parts") or [] if isinstance(part, dict)
        )
        if parts and all(isinstance(part, ToolResultPart) for part in parts):
            role = "tool"
        messages.append(Message(role=role, content=parts or (TextPart(""),)))
    tools: list[ToolSpec] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        for declaration in tool.get("functionDeclarations") or []:
            if isinstance(declaration, dict):
                schema = declaration.get(
                    "parametersJsonSchema",
                    declaration.get("parameters_json_schema", declaration.get("parameters")),
                )
                tools.append(_tool(declaration.get("name"), declaration.get("description"), schema))
        for kind, value in tool.items():
            if kind != "functionDeclarations":  # built-in tools: googleSearch, codeExecution, …
                tools.append(_tool(kind, "", value if isinstance(value, dict) else {}))
    return ParsedRequest(
        api="gemini",
        model=model,
        system=system,
        messages=tuple(messages),
        tools=tuple(tools),
        stream=stream,
        include_usage=True,
        namespaced=False,
    )


def _gemini_part(part: dict[str, Any]) -> ContentPart:
    call = part.get("functionCall")
    if isinstance(call, dict):
        return ToolCallPart(
            id=str(call.get("id") or ""),
            name=str(call.get("name") or ""),
            arguments=_canonical(call.get("args") or {}),
        )
    result = part.get("functionResponse")
    if isinstance(result, dict):
        response = result.get("response")
        output = response.get("output") if isinstance(response, dict) else None
        return ToolResultPart(
            call_id=str(result.get("id") or result.get("name") or ""),
            content=output if isinstance(output, str) else _canonical(response),
            is_error=isinstance(response, dict)
            and "error" in response
            and "output" not in response,
        )
    text = part.get("text")
    if isinstance(text, str):
        return ReasoningPart(text) if part.get("thought") is True else TextPart(text)
    # Inline data, files, executable code: compared by their JSON.
    return TextPart(_canonical(part))
