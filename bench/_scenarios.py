"""Scenarios the end-to-end benchmarks replay: committed ones when present, else recorded.

``fixtures/subagent-multi`` (3 sessions: a parent and two children in sequence) and
``fixtures/plain-turn`` (one prompt, one model call) are used when they exist and replay
cleanly; otherwise equivalent scenarios are recorded into a temporary directory through
the harness's own record mode (the stub model server and the real ``openai`` adapter).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from agentreel.snapshot_harness import HarnessError, check_scenario
from bench._common import FIXTURES

_STEPS = """
[[steps]]
type = "initialize"

[[steps]]
type = "new_session"

[[steps]]
type = "prompt"
text = "{prompt}"

[record]
provider = "stub"
model = "stub-model"
"""

PLAIN_RULES = """
[[rule]]
name = "greeting"
match = { last_user = "Say hello" }
text = "Hello! I am the agentreel reference agent, ready to help."
"""

MULTI_RULES = """
[[rule]]
name = "parent delegates the first task"
match = { last_user = "Run the two helpers" }
[[rule.tool_calls]]
id = "call_first"
name = "subagent"
arguments = { description = "first", prompt = "first helper task", mode = "spawn" }

[[rule]]
name = "first child"
match = { last_user = "first helper task" }
text = "first helper result"

[[rule]]
name = "parent delegates the second task"
match = { last_tool_result = "first helper result" }
[[rule.tool_calls]]
id = "call_second"
name = "subagent"
arguments = { description = "second", prompt = "second helper task", mode = "spawn" }

[[rule]]
name = "second child"
match = { last_user = "second helper task" }
text = "second helper result"

[[rule]]
name = "parent concludes"
match = { last_tool_result = "second helper result" }
text = "Both helpers are done."
"""


def _why_not_committed(directory: Path) -> str | None:
    """Why a committed scenario cannot be used (absent or not replaying); ``None`` if usable."""
    if not (directory / "scenario.toml").is_file():
        return f"{directory.name} absent"
    try:
        check_scenario(directory, "replay")
    except HarnessError as exc:
        first_line = str(exc).split("\n", 1)[0]
        name = directory.name
        return f"{name} does not replay: {first_line}; see `nox -s replay -- {name}`"
    return None


def _record(root: Path, name: str, prompt: str, rules: str) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "scenario.toml").write_text(
        f'description = "bench scenario {name}"\n' + _STEPS.format(prompt=prompt)
    )
    (directory / "stub-rules.toml").write_text(rules)
    check_scenario(directory, "record")
    return directory


def scenario_pair(root: Path) -> tuple[Path, Path, list[str]]:
    """(3-session scenario, one-call floor scenario, notes on where they came from)."""
    notes: list[str] = []
    multi = FIXTURES / "subagent-multi"
    if (why := _why_not_committed(multi)) is not None:
        multi = _record(root, "bench-subagent-multi", "Run the two helpers", MULTI_RULES)
        notes.append(f"3-session scenario recorded into a temp dir (fixtures/{why})")
    else:
        notes.append("3-session scenario: fixtures/subagent-multi")
    plain = FIXTURES / "plain-turn"
    if (why := _why_not_committed(plain)) is not None:
        plain = _record(root, "bench-plain-turn", "Say hello", PLAIN_RULES)
        notes.append(f"floor scenario recorded into a temp dir (fixtures/{why})")
    else:
        notes.append("floor scenario: fixtures/plain-turn (one prompt, one model call)")
    return multi, plain, notes


def with_agent(source: Path, root: Path, name: str, agent: list[str]) -> Path:
    """A copy of scenario ``source`` named ``name`` whose agent command is ``agent``."""
    target = root / name
    shutil.copytree(source, target)
    toml = target / "scenario.toml"
    text = toml.read_text()
    lines = [
        line
        for line in text.splitlines()
        if not line.startswith(("name ", "name=", "agent ", "agent="))
    ]
    quoted = ", ".join(f'"{part}"' for part in agent)
    toml.write_text(f"agent = [{quoted}]\n" + "\n".join(lines) + "\n")
    return target
