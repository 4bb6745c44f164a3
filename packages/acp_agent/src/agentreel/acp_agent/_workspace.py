"""The file tools, confined to the session cwd.

Every path is resolved (symlinks followed) and must stay inside the resolved cwd; anything
else is a ``PathEscapeError`` that the model receives as an error tool result. The agent
never reads or writes outside the cwd through these tools.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentreel.acp_agent.exceptions import PathEscapeError, ToolError
from agentreel.llm import ToolSpec

MAX_READ_BYTES = 256 * 1024


def _parameters(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A tool's parameters: an object of ``properties`` (``required`` ones named), no other
    key allowed."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _subagent(description: str, modes: list[str]) -> ToolSpec:
    """The ``subagent`` tool, its modes as ``modes`` (``description`` says what each does)."""
    return ToolSpec(
        name="subagent",
        description=description,
        parameters=_parameters(
            {
                "description": {"type": "string", "description": "a short title for the task"},
                "prompt": {"type": "string", "description": "the complete task for the subagent"},
                "mode": {"type": "string", "enum": modes},
            },
            ["description", "prompt", "mode"],
        ),
    )


_PATH = {"type": "string", "description": "file path"}
READ_FILE = ToolSpec(
    name="read_file",
    description="Read a UTF-8 text file of the workspace. Paths are relative to the workspace.",
    parameters=_parameters({"path": _PATH}, ["path"]),
)
LIST_FILES = ToolSpec(
    name="list_files",
    description="List the entries of a workspace directory (directories end with '/').",
    parameters=_parameters(
        {"path": {"type": "string", "description": "directory path, default '.'"}}
    ),
)
WRITE_FILE = ToolSpec(
    name="write_file",
    description=(
        "Create or overwrite a UTF-8 text file of the workspace. The user is asked for "
        "permission first and may refuse."
    ),
    parameters=_parameters(
        {
            "path": _PATH,
            "content": {"type": "string", "description": "the complete new file content"},
        },
        ["path", "content"],
    ),
)
SUBAGENT = _subagent(
    "Delegate a task to a subagent and receive its final answer. mode 'spawn' starts it "
    "with a fresh conversation; 'fork' starts it from this conversation up to the last "
    "completed turn. Several subagent calls in one response run concurrently.",
    ["spawn", "fork"],
)
SUBAGENT_WITH_PROCESS = _subagent(
    "Delegate a task to a subagent and receive its final answer. mode 'process' (or "
    "'spawn') starts it as a separate agent process with a fresh conversation; 'fork' "
    "starts it from this conversation up to the last completed turn. Several subagent "
    "calls in one response run concurrently.",
    ["spawn", "fork", "process"],
)


def parse_arguments(tool: str, arguments: str) -> dict[str, Any]:
    """Decode a tool call's JSON arguments into an object, or raise ``ToolError``."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError as exc:
        raise ToolError(f"{tool}: arguments are not valid JSON ({exc}): {arguments!r}") from None
    if not isinstance(value, dict):
        raise ToolError(f"{tool}: arguments must be a JSON object, got {arguments!r}")
    return value


def string_argument(
    tool: str, arguments: dict[str, Any], name: str, default: str | None = None
) -> str:
    value = arguments.get(name, default)
    if not isinstance(value, str):
        raise ToolError(f"{tool}: argument {name!r} must be a string, got {value!r}")
    return value


class Workspace:
    """File operations on one session cwd; every path must resolve inside it."""

    def __init__(self, cwd: Path | str) -> None:
        self.cwd = Path(cwd)
        self._root = self.cwd.resolve()

    def resolve(self, tool: str, path: str) -> Path:
        """The real path of ``path`` (relative to the cwd), or ``PathEscapeError``."""
        if not path:
            raise ToolError(f"{tool}: empty path; give a path relative to the workspace")
        if "\x00" in path:
            raise ToolError(f"{tool}: path {path!r} contains a NUL byte")
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self._root / candidate
        real = candidate.resolve()
        if real != self._root and not real.is_relative_to(self._root):
            raise PathEscapeError(
                f"{tool}: path {path!r} resolves to {str(real)!r}, outside the workspace "
                f"{str(self._root)!r}; only files inside the workspace are reachable"
            )
        return real

    def display(self, real: Path) -> str:
        """A workspace-relative name for messages and ACP locations."""
        relative = real.relative_to(self._root).as_posix()
        return relative or "."

    def read_file(self, path: str) -> str:
        real = self.resolve("read_file", path)
        if not real.is_file():
            raise ToolError(f"read_file: {path!r} is not a file in the workspace")
        size = real.stat().st_size
        if size > MAX_READ_BYTES:
            raise ToolError(
                f"read_file: {path!r} is {size} bytes, over the {MAX_READ_BYTES}-byte limit"
            )
        try:
            return real.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"read_file: {path!r} is not UTF-8 text") from None

    def list_files(self, path: str = ".") -> str:
        real = self.resolve("list_files", path)
        if not real.is_dir():
            raise ToolError(f"list_files: {path!r} is not a directory in the workspace")
        names = sorted(
            entry.name + ("/" if entry.is_dir() and not entry.is_symlink() else "")
            for entry in real.iterdir()
        )
        return "\n".join(names) if names else "(empty directory)"

    def check_writable(self, path: str) -> Path:
        """Resolve a write target before permission is asked, so escapes fail first."""
        real = self.resolve("write_file", path)
        if real.is_dir():
            raise ToolError(f"write_file: {path!r} is a directory")
        return real

    def write_file(self, real: Path, content: str) -> str:
        real.parent.mkdir(parents=True, exist_ok=True)
        # Re-check after creating parents: a directory swapped for a symlink must not leak.
        real = self.resolve("write_file", str(real))
        real.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode('utf-8'))} bytes to {self.display(real)}"
