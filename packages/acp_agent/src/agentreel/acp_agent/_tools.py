"""The file tools a step runs (``read_file``, ``list_files``, ``write_file``) and how a
tool call is shown to the editor. Writes ask the editor's permission first; every
failure is an error tool result the model sees, never a crash."""

from __future__ import annotations

from collections.abc import Sequence

from agentreel.acp_agent._channel import ClientChannel, ToolKindName
from agentreel.acp_agent._workspace import (
    LIST_FILES,
    READ_FILE,
    SUBAGENT,
    WRITE_FILE,
    Workspace,
    parse_arguments,
    string_argument,
)
from agentreel.acp_agent.exceptions import ToolError
from agentreel.llm import ToolCallPart, ToolSpec


async def run_file_tool(
    call: ToolCallPart, workspace: Workspace, channel: ClientChannel, tools: Sequence[ToolSpec]
) -> tuple[str, bool]:
    """Carry out one file tool call: ``(content, is_error)`` for its ``tool/result``."""
    try:
        arguments = parse_arguments(call.name, call.arguments)
        if call.name == READ_FILE.name:
            return workspace.read_file(string_argument(call.name, arguments, "path")), False
        if call.name == LIST_FILES.name:
            path = string_argument(call.name, arguments, "path", ".")
            return workspace.list_files(path), False
        if call.name == WRITE_FILE.name:
            path = string_argument(call.name, arguments, "path")
            content = string_argument(call.name, arguments, "content")
            target = workspace.check_writable(path)
            shown = workspace.display(target)
            allowed = await channel.request_permission(call, f"Write {shown}", str(target))
            if not allowed:
                return (
                    f"write_file: the user rejected writing {shown}; the file was not "
                    "changed. Do not retry the same write unless the user asks.",
                    True,
                )
            return workspace.write_file(target, content), False
        known = ", ".join(tool.name for tool in tools)
        return f"unknown tool {call.name!r}; the tools are: {known}", True
    except ToolError as exc:
        return str(exc), True
    except OSError as exc:
        return f"{call.name}: {exc.strerror or exc} ({exc.filename or 'no file'})", True


def describe_call(call: ToolCallPart) -> tuple[str, ToolKindName, str | None]:
    """Title, ACP tool kind and path of a tool call, for the editor."""
    try:
        arguments = parse_arguments(call.name, call.arguments)
    except ToolError:
        arguments = {}
    path = arguments.get("path")
    path = path if isinstance(path, str) else None
    if call.name == READ_FILE.name:
        return f"Read {path or '?'}", "read", path
    if call.name == LIST_FILES.name:
        return f"List {path or '.'}", "search", path or "."
    if call.name == WRITE_FILE.name:
        return f"Write {path or '?'}", "edit", path
    if call.name == SUBAGENT.name:
        description = arguments.get("description")
        mode = arguments.get("mode", "spawn")
        label = description if isinstance(description, str) and description else "task"
        return f"Subagent ({mode}): {label}", "think", None
    return call.name, "other", None
