"""20. Re-recording one drifted grandchild of a 20-session tree vs re-recording it whole.

A tree of 20 sessions (main → 3 children at once → 16 grandchildren, 6/5/5, each child's
at once) with the reference agent through the stub: every grandchild reads its own notes
file and repeats it, each child sums its grandchildren up, the main session its children.
It is recorded whole once (the upstream calls of a full re-record: every recorded call),
then one grandchild's notes file changes and ``agentreel record --drifted`` runs: that
grandchild goes live from the call carrying the new file, its parent from the call
carrying its new answer, the main session from the call carrying that; the upstream calls
are counted by the replay-drifted provider. Target (SPEC 20): ≤ 1/10 of the full
re-record's upstream calls. Counts, not times: the same on any machine.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from agentreel.snapshot_harness import check_scenario, load_scenario
from agentreel.snapshot_harness._drifted import record_drifted
from bench._common import FIXTURES, BenchResult, Settings

TARGET = 0.1
FAMILIES = (6, 5, 5)  # grandchildren per child: 1 + 3 + 16 = 20 sessions
CHANGED = (0, 0)  # the grandchild whose notes change


def _rules() -> str:
    def subagents(prompts: list[str], prefix: str) -> str:
        calls = ", ".join(
            f'{{ id = "{prefix}_{n}", name = "subagent", arguments = {{ description = '
            f'"task {n}", prompt = "{prompt}", mode = "spawn" }} }}'
            for n, prompt in enumerate(prompts)
        )
        return f"tool_calls = [{calls}]\n"

    # A request's last user message is its task; later calls are told apart by their
    # tool results. The parents' rules come first: their requests hold their children's
    # tasks too.
    rules = [
        "[[rule]]\nmatch = { any_message_regex = 'Plan the[\\s\\S]*done NEW' }\n"
        'text = "Plan done (changed)."\n',
        '[[rule]]\nmatch = { any_message = "Plan the", last_tool_result = "done" }\n'
        'text = "Plan done."\n',
        '[[rule]]\nmatch = { last_user = "Plan the" }\n'
        + subagents([f"Child {i}: sum up your grandchildren." for i in range(3)], "child"),
    ]
    for i, family in enumerate(FAMILIES):
        rules += [
            f"[[rule]]\nmatch = {{ any_message_regex = 'Child {i}:[\\s\\S]*: NEW' }}\n"
            f'text = "child {i} done NEW"\n',
            f'[[rule]]\nmatch = {{ any_message = "Child {i}:", last_tool_result = "grandchild" }}\n'
            f'text = "child {i} done"\n',
            f'[[rule]]\nmatch = {{ last_user = "Child {i}:" }}\n'
            + subagents(
                [
                    f"Grandchild {i}.{j}: read notes-{i}-{j}.txt and repeat it."
                    for j in range(family)
                ],
                f"grandchild_{i}",
            ),
        ]
    for i, family in enumerate(FAMILIES):
        for j in range(family):
            task = f'any_message = "Grandchild {i}.{j}:"'
            rules += [
                f'[[rule]]\nmatch = {{ {task}, last_tool_result = "NEW" }}\n'
                f'text = "grandchild {i}.{j}: NEW"\n',
                f'[[rule]]\nmatch = {{ {task}, last_tool_result = "note" }}\n'
                f'text = "grandchild {i}.{j}: note"\n',
                f'[[rule]]\nmatch = {{ last_user = "Grandchild {i}.{j}:" }}\n'
                f'tool_calls = [{{ id = "read_{i}_{j}", name = "read_file", arguments = '
                f'{{ path = "notes-{i}-{j}.txt" }} }}]\n',
            ]
    return "\n".join(rules)


SCENARIO = """description = "bench: a 20-session tree"
timeout = 120

[[steps]]
type = "initialize"

[[steps]]
type = "new_session"

[[steps]]
type = "prompt"
text = "Plan the work: three children, each with its grandchildren."

[record]
provider = "stub"
model = "stub-model"
"""


def _calls(directory: Path) -> int:
    return sum(
        path.read_bytes().count(b'"type":"request/header"')
        for path in directory.glob("session*.jsonl")
    )


def run(settings: Settings) -> BenchResult:
    result = BenchResult("drifted", "20. record --drifted: one drifted grandchild of 20 sessions")
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-drifted-") as tmp_text:
        root = Path(tmp_text)
        shutil.copy2(FIXTURES / "agentreel.toml", root / "agentreel.toml")
        directory = root / "tree"
        workspace = directory / "workspace"
        workspace.mkdir(parents=True)
        (directory / "scenario.toml").write_text(SCENARIO)
        (directory / "stub-rules.toml").write_text(_rules())
        for i, family in enumerate(FAMILIES):
            for j in range(family):
                (workspace / f"notes-{i}-{j}.txt").write_text(f"note {i}.{j}\n")
        started = time.perf_counter()
        check_scenario(directory, "record")
        full_s = time.perf_counter() - started
        sessions = len(list(directory.glob("session*.jsonl")))
        full = _calls(directory)
        i, j = CHANGED
        (workspace / f"notes-{i}-{j}.txt").write_text("NEW\n")
        started = time.perf_counter()
        outcome = record_drifted(load_scenario(directory))
        drifted_s = time.perf_counter() - started
    live = outcome.summary.upstream_calls
    statuses = [fate.status for fate in outcome.summary.sessions]
    result.figure(f"full re-record: upstream calls ({sessions} sessions)", full, "calls")
    result.figure("--drifted: upstream calls", live, "calls")
    result.figure(
        "--drifted: sessions kept / re-recorded",
        statuses.count("kept"),
        "sessions",
        f"{statuses.count('re-recorded')} re-recorded",
    )
    result.figure("full re-record, wall time", full_s, "s")
    result.figure("--drifted, wall time", drifted_s, "s")
    result.target("--drifted upstream calls / full re-record's", live / full, TARGET)
    result.notes.append(
        "counts, not times: the full re-record's calls are the recording's request headers, "
        "--drifted's those the replay-drifted provider sent upstream; wall times include "
        "each command's trial replay"
    )
    return result
