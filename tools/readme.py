"""The README's "Use it in your project" example, read as files and commands so it can be run.

``nox -s build`` writes the files into an empty folder outside the repository and runs the
commands there, in a venv holding the built wheels: the example is tested as written. A
```` ```toml ```` block is the file named by the last backticked ``*.toml`` path in the text
before it; a ```` ```sh ```` block holds commands, one a line (``#`` starts a comment).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

SECTION = "## Use it in your project"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)
_TOML_PATH = re.compile(r"`([\w./-]+\.toml)`")


class ReadmeExampleError(Exception):
    """The README's example section is missing or cannot be read as files and commands."""


@dataclass
class Example:
    files: dict[PurePosixPath, str] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)


def user_example(readme: Path) -> Example:
    """The files and commands of ``readme``'s "Use it in your project" section, in order."""
    text = "\n" + readme.read_text(encoding="utf-8")
    start = text.find(f"\n{SECTION}\n")
    if start < 0:
        raise ReadmeExampleError(f"{readme}: no {SECTION!r} section")
    body = text[start + len(SECTION) + 2 :]
    following = re.search(r"^## ", body, re.MULTILINE)
    body = body[: following.start()] if following else body
    example = Example()
    prose_start = 0
    for block in _FENCE.finditer(body):
        language, content = block.group(1), block.group(2)
        prose = body[prose_start : block.start()]
        prose_start = block.end()
        if language == "toml":
            paths = _TOML_PATH.findall(prose)
            if not paths:
                raise ReadmeExampleError(
                    f"{readme}: a toml block in {SECTION!r} follows no `path/to/file.toml`"
                )
            path = PurePosixPath(paths[-1])
            if path.is_absolute() or ".." in path.parts:
                raise ReadmeExampleError(f"{readme}: example file {path} must be a relative path")
            example.files[path] = content
        elif language == "sh":
            for line in content.splitlines():
                command = line.split("#", 1)[0].strip()
                if command:
                    example.commands.append(command)
    if not example.commands:
        raise ReadmeExampleError(f"{readme}: {SECTION!r} has no sh block of commands")
    return example
