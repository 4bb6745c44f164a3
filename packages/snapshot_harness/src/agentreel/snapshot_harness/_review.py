"""``agentreel review [SCENARIO...] [--fixtures DIR] [--accept-all | --reject-all]``.

Walks the pending goldens a failing local replay left (``_pending``), one file at a time,
each scenario's recorded MCP calls first, per session in story order (SPEC 19): its
colored unified diff against the committed golden, then accept / reject / skip / quit
on a terminal (``rich`` draws the diff and asks). ``--accept-all`` / ``--reject-all`` decide
every file without asking, for scripts. Ends with a summary of what changed. Accepting
rewrites (or, for an empty pending file, deletes) a golden and nothing else: recordings
change only through ``record``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TextIO

from rich.console import Console
from rich.prompt import Prompt
from rich.text import Text

from agentreel.snapshot_harness._cli import (
    add_targets,
    chosen_scenarios,
    command_parser,
    fixtures_directory,
)
from agentreel.snapshot_harness._diff import unified_diff
from agentreel.snapshot_harness._pending import PendingGolden, accept, list_pending, reject
from agentreel.snapshot_harness._report_data import mcp_timelines

Choice = Literal["accept", "reject", "skip", "quit"]
_KEYS: dict[str, Choice] = {"a": "accept", "r": "reject", "s": "skip", "q": "quit"}
SUMMARY = "accept or reject, file by file, the pending goldens failing local replays wrote"
_EXAMPLES = """\
examples:
  agentreel review                                  # every pending golden, one at a time
  agentreel review plain-turn --fixtures path/to/fixtures
  agentreel review --accept-all                     # accept all without asking (scripts)
"""
# A review shows more of a diff than a failure message does, still bounded for huge logs.
REVIEW_DIFF_MAX_LINES = 2000


def _parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "agentreel review",
        "Review the pending goldens failing local replays wrote (golden/<file>.pending): "
        "for each, its diff and accept (it becomes the golden), reject (it is deleted) or "
        "skip (it stays pending). Recordings are never touched.",
        _EXAMPLES,
    )
    add_targets(
        parser,
        "scenario names under the fixtures directory, or paths to scenario directories "
        "(default: every scenario)",
    )
    decide = parser.add_mutually_exclusive_group()
    decide.add_argument(
        "--accept-all", action="store_true", help="accept every pending golden without asking"
    )
    decide.add_argument(
        "--reject-all", action="store_true", help="reject every pending golden without asking"
    )
    return parser


@dataclass(slots=True)
class _Summary:
    accepted: list[PendingGolden] = field(default_factory=list)
    rejected: list[PendingGolden] = field(default_factory=list)
    skipped: list[PendingGolden] = field(default_factory=list)


def main(argv: Sequence[str], out: TextIO) -> int:
    """Run ``agentreel review``; 0 when done (whatever was chosen), 2 on usage errors."""
    args = _parser().parse_intermixed_args(argv)
    fixtures = fixtures_directory(args.fixtures)
    directories = chosen_scenarios("agentreel review", fixtures, args.scenarios, needed=False)
    if directories is None:
        return 2
    pending = [item for directory in directories for item in list_pending(directory)]
    console = Console(file=out, highlight=False, soft_wrap=True)
    if not pending:
        console.print(f"No pending goldens under {fixtures}: nothing to review.", markup=False)
        return 0
    decided: Choice | None = "accept" if args.accept_all else "reject" if args.reject_all else None
    if decided is None and not (sys.stdin.isatty() and out.isatty()):
        names = ", ".join(f"{p.scenario}/{p.name}" for p in pending)
        print(
            f"agentreel review: {len(pending)} pending golden(s) ({names}) but this is not a "
            "terminal, so nothing can be asked: run it in a terminal, or decide every file "
            "with --accept-all or --reject-all",
            file=sys.stderr,
        )
        return 2

    summary = _Summary()
    shown: set[str] = set()
    for number, item in enumerate(pending, 1):
        if item.scenario not in shown:
            shown.add(item.scenario)
            _show_mcp(console, item)
        _show(console, item, number, len(pending))
        choice = decided or _ask(console)
        if choice == "quit":
            summary.skipped += pending[number - 1 :]
            break
        if choice == "accept":
            accept(item)
            summary.accepted.append(item)
        elif choice == "reject":
            reject(item)
            summary.rejected.append(item)
        else:
            summary.skipped.append(item)
    _print_summary(console, summary)
    return 0


def _show_mcp(console: Console, item: PendingGolden) -> None:
    """The scenario's recorded MCP calls on each session's timeline (SPEC 19): what the
    tools answered the sessions whose goldens follow."""
    timelines = mcp_timelines(item.golden.parent.parent)
    if not timelines:
        return
    console.rule(Text(f"{item.scenario}: MCP calls by session", style="bold"))
    for label, calls in timelines:
        console.print(Text(label, style="bold"))
        for call in calls:
            console.print(Text(f"  {call}", style="magenta"))


def _show(console: Console, item: PendingGolden, number: int, total: int) -> None:
    console.rule(Text(f"[{number}/{total}] {item.scenario}: {item.name}", style="bold"))
    golden = item.golden.read_bytes() if item.golden.is_file() else b""
    if item.removes_golden:
        console.print(
            Text(
                f"The live run no longer produces {item.name}: accepting deletes it.",
                style="yellow",
            )
        )
        return
    if not item.golden.is_file():
        console.print(Text(f"{item.name} does not exist yet: accepting creates it.", "yellow"))
    diff = unified_diff(
        item.golden.name, golden, item.pending.read_bytes(), max_lines=REVIEW_DIFF_MAX_LINES
    )
    for line in diff.splitlines():
        console.print(Text(line, style=_line_style(line)))


def _line_style(line: str) -> str:
    if line.startswith(("---", "+++")):
        return "bold"
    if line.startswith("@@"):
        return "cyan"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    return ""


def _ask(console: Console) -> Choice:
    try:
        key = Prompt.ask(
            "[bold]a[/]ccept, [bold]r[/]eject, [bold]s[/]kip or [bold]q[/]uit",
            console=console,
            choices=list(_KEYS),
            show_choices=False,
        )
    except (EOFError, KeyboardInterrupt):
        console.print()
        return "quit"
    return _KEYS[key]


def _print_summary(console: Console, summary: _Summary) -> None:
    console.rule(Text("summary", style="bold"))
    for item in summary.accepted:
        verb = "deleted" if not item.golden.exists() else "rewritten"
        console.print(Text(f"accepted  {item.scenario}/{item.name} ({verb})", style="green"))
    for item in summary.rejected:
        console.print(Text(f"rejected  {item.scenario}/{item.name} (golden kept)", style="red"))
    for item in summary.skipped:
        console.print(Text(f"skipped   {item.scenario}/{item.name} (still pending)"))
    console.print(
        f"{len(summary.accepted)} accepted, {len(summary.rejected)} rejected, "
        f"{len(summary.skipped)} skipped",
        markup=False,
    )
    if summary.accepted:
        console.print(
            "Goldens changed: see them with `git diff`, and replay to confirm "
            "(`nox -s replay`); recordings are unchanged.",
            markup=False,
        )
