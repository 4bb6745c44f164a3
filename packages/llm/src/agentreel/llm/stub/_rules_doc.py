"""Where a user reads the stub rules format: in the installed package, not a repository path.

The format is the "Rules file" section of the agentreel-llm README, which is the installed
distribution's description; ``python -m agentreel.llm.stub --rules-format`` prints it.
"""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "agentreel-llm"
RULES_SECTION = "### Rules file"
RULES_FORMAT_HINT = (
    "rules format: `python -m agentreel.llm.stub --rules-format`, the agentreel-llm "
    "README's 'Rules file' section"
)
"""The words every message that sends a user to the rules format uses."""


def rules_format() -> str:
    """The "Rules file" section of the installed agentreel-llm README (to the next
    heading of its level or above), or a line saying where it is when it is not there."""
    try:
        description = metadata.metadata(DISTRIBUTION).json.get("description")
    except metadata.PackageNotFoundError:
        description = None
    text = description if isinstance(description, str) else ""
    start = text.find(RULES_SECTION)
    if start < 0:
        return (
            f"the installed {DISTRIBUTION} carries no README section {RULES_SECTION!r}; "
            f"read the {DISTRIBUTION} README on the package index"
        )
    lines = text[start:].splitlines()
    section = [lines[0]]
    for line in lines[1:]:
        if line.startswith("## ") or line.startswith("### "):
            break
        section.append(line)
    return "\n".join(section).rstrip() + "\n"
