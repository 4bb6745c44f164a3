"""Comparing a run's goldens with the committed ones: per-file unified diffs.

Goldens are compared and diffed from their files a block at a time, and only the
differing middle of two files is ever decoded and handed to ``difflib`` (SPEC 9: a
one-line change in a 100k-event log costs a byte comparison, not a split of every line).
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import BinaryIO

from agentreel.snapshot_harness._layout import GOLDEN_DIR, golden_sort_key, is_pending_name
from agentreel.snapshot_harness._scenario import Scenario

DIFF_MAX_LINES = 120


def unified_diff(name: str, expected: bytes, actual: bytes, max_lines: int = DIFF_MAX_LINES) -> str:
    """A unified diff of one file, golden vs live, cut at ``max_lines`` with a note.

    Only the line-aligned region between the files' common head and common tail (plus
    the context lines) is decoded and handed to ``difflib``; hunk line numbers are shifted
    back. A one-line change in a 100k-event log costs a byte comparison, not a split and
    match of every line (``nox -s bench``, scale).
    """
    skipped, expected_middle, actual_middle = _differing_middle(expected, actual, _DIFF_CONTEXT)
    return _render_diff(name, skipped, expected_middle, actual_middle, max_lines)


def unified_diff_file(
    name: str, golden: Path, actual: bytes, max_lines: int = DIFF_MAX_LINES
) -> str:
    """``unified_diff`` with the golden read from the file ``golden``, a block at a time:
    only its differing middle is ever held in memory (a replay compares a live golden
    with the committed one; SPEC 9 peak memory)."""
    skipped, expected_middle, actual_middle = _file_differing_middle(golden, actual, _DIFF_CONTEXT)
    return _render_diff(name, skipped, expected_middle, actual_middle, max_lines)


def file_equals(path: Path, data: bytes) -> bool:
    """Whether the file ``path`` holds exactly ``data`` (read a block at a time)."""
    with path.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        return size == len(data) and _file_common_prefix(file, data, size) == size


def _render_diff(
    name: str, skipped: int, expected_middle: bytes, actual_middle: bytes, max_lines: int
) -> str:
    lines = list(
        difflib.unified_diff(
            expected_middle.decode("utf-8", errors="replace").splitlines(keepends=True),
            actual_middle.decode("utf-8", errors="replace").splitlines(keepends=True),
            fromfile=f"golden/{name}",
            tofile=f"live/{name}",
            n=_DIFF_CONTEXT,
        )
    )
    if skipped:
        lines = [_shift_hunk(line, skipped) if line.startswith("@@") else line for line in lines]
    lines = [
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    ]
    lines = [_shorten(line) for line in lines]
    if len(lines) > max_lines:
        hidden = len(lines) - max_lines
        lines = [*lines[:max_lines], f"[... {hidden} more diff lines not shown ...]\n"]
    return "".join(lines)


_DIFF_CONTEXT = 2
_COMPARE_BLOCK = 1 << 16
_HUNK = re.compile(r"^@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the common prefix of ``a`` and ``b`` (compared a block at a time)."""
    limit = min(len(a), len(b))
    position = 0
    while position < limit:
        end = min(position + _COMPARE_BLOCK, limit)
        if a[position:end] != b[position:end]:
            while a[position] == b[position]:
                position += 1
            return position
        position = end
    return limit


def _common_suffix(a: bytes, b: bytes, limit: int) -> int:
    """Length of the common suffix of ``a`` and ``b``, at most ``limit`` bytes."""
    length = 0
    while length < limit:
        step = min(_COMPARE_BLOCK, limit - length)
        if (
            a[len(a) - length - step : len(a) - length]
            != b[len(b) - length - step : len(b) - length]
        ):
            while length < limit and a[len(a) - length - 1] == b[len(b) - length - 1]:
                length += 1
            return length
        length += step
    return limit


def _differing_middle(expected: bytes, actual: bytes, context: int) -> tuple[int, bytes, bytes]:
    """(lines skipped at the start, expected middle, actual middle): both files without
    their common whole-line head and tail, keeping ``context`` common lines each side."""
    prefix = _common_prefix(expected, actual)
    start = expected.rfind(b"\n", 0, prefix) + 1  # a line start inside the common head
    for _ in range(context):
        if start == 0:
            break
        start = expected.rfind(b"\n", 0, start - 1) + 1
    suffix = _common_suffix(expected, actual, min(len(expected), len(actual)) - start)
    # The tail starts right after a newline that lies inside the common tail, so it starts
    # a line in both files.
    newline = expected.find(b"\n", len(expected) - suffix)
    tail = len(expected) if newline < 0 else newline + 1
    for _ in range(context):
        if tail >= len(expected):
            break
        newline = expected.find(b"\n", tail)
        tail = len(expected) if newline < 0 else newline + 1
    tail_length = len(expected) - tail
    return (
        expected.count(b"\n", 0, start),
        expected[start:tail],
        actual[start : len(actual) - tail_length],
    )


def _file_common_prefix(file: BinaryIO, data: bytes, limit: int) -> int:
    """``_common_prefix`` of the file's bytes and ``data``, at most ``limit`` bytes."""
    file.seek(0)
    position = 0
    while position < limit:
        block = file.read(min(_COMPARE_BLOCK, limit - position))
        if not block:
            return position
        other = data[position : position + len(block)]
        if block != other:
            index = 0
            while block[index] == other[index]:
                index += 1
            return position + index
        position += len(block)
    return limit


def _file_common_suffix(file: BinaryIO, size: int, data: bytes, limit: int) -> int:
    """``_common_suffix`` of the file's bytes (``size`` of them) and ``data``."""
    length = 0
    while length < limit:
        step = min(_COMPARE_BLOCK, limit - length)
        file.seek(size - length - step)
        block = file.read(step)
        other = data[len(data) - length - step : len(data) - length]
        if block != other:
            if len(block) != step:
                return length  # the file changed under us: nothing more is common
            index = step - 1
            while index >= 0 and block[index] == other[index]:
                length += 1
                index -= 1
            return length
        length += step
    return limit


def _file_differing_middle(path: Path, actual: bytes, context: int) -> tuple[int, bytes, bytes]:
    """``_differing_middle`` with ``expected`` the file at ``path``, read in blocks. Line
    ends inside the common head and tail are looked up in ``actual``: the same bytes."""
    with path.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        prefix = _file_common_prefix(file, actual, min(size, len(actual)))
        start = actual.rfind(b"\n", 0, prefix) + 1
        for _ in range(context):
            if start == 0:
                break
            start = actual.rfind(b"\n", 0, start - 1) + 1
        suffix = _file_common_suffix(file, size, actual, min(size, len(actual)) - start)
        shift = len(actual) - size  # a position in the common tail: actual = golden + shift
        newline = actual.find(b"\n", len(actual) - suffix)
        tail = size if newline < 0 else newline - shift + 1
        for _ in range(context):
            if tail >= size:
                break
            newline = actual.find(b"\n", tail + shift)
            tail = size if newline < 0 else newline - shift + 1
        tail_length = size - tail
        file.seek(start)
        expected_middle = file.read(tail - start)
    return (
        actual.count(b"\n", 0, start),
        expected_middle,
        actual[start : len(actual) - tail_length],
    )


def _shift_hunk(header: str, lines: int) -> str:
    """A ``@@ -a,b +c,d @@`` header with both start lines moved down by ``lines``."""

    def shifted(match: re.Match[str]) -> str:
        old, old_count, new, new_count = match.groups()
        return f"@@ -{int(old) + lines}{old_count} +{int(new) + lines}{new_count} @@"

    return _HUNK.sub(shifted, header, count=1)


def _shorten(line: str, limit: int = 400) -> str:
    if len(line) <= limit + 1:
        return line
    return f"{line[:limit]}[... {len(line) - limit - 1} more characters]\n"


def compare_goldens(scenario: Scenario, goldens: dict[str, bytes]) -> dict[str, str]:
    """Per-file diffs between ``golden/`` and a run's rendered goldens (empty: all equal)."""
    golden_dir = scenario.directory / GOLDEN_DIR
    diffs: dict[str, str] = {}
    names = sorted(
        set(goldens)
        | {p.name for p in golden_dir.glob("*") if p.is_file() and not is_pending_name(p.name)},
        key=golden_sort_key,
    )
    for name in names:
        path = golden_dir / name
        actual = goldens.get(name, b"")
        # The committed golden is compared (and diffed) from its file a block at a time,
        # never read whole next to the live one (SPEC 9 peak memory).
        if not path.is_file():
            if actual:
                diffs[name] = f"golden/{name} does not exist; the live run produced it\n"
                diffs[name] += unified_diff(name, b"", actual)
        elif file_equals(path, actual):
            continue
        elif name not in goldens:
            diffs[name] = f"the live run did not produce golden/{name}\n"
        elif _has_crlf(path):
            diffs[name] = _crlf_message(name, path, actual)
        else:
            diffs[name] = unified_diff_file(name, path, actual)
    return diffs


def _has_crlf(path: Path) -> bool:
    with path.open("rb") as file:
        return b"\r\n" in file.read(1 << 16)


def _crlf_message(name: str, path: Path, actual: bytes) -> str:
    """A CRLF golden, said as such: a diff of identical-looking lines helps nobody."""
    same = file_equals(path, actual.replace(b"\n", b"\r\n"))
    verdict = (
        "otherwise it is identical to the live run"
        if same
        else "it also differs in content (diff below, line endings ignored)"
    )
    text = (
        f"golden/{name} has CRLF (\\r\\n) line endings; goldens are LF. A checkout converted "
        "them (git's core.autocrlf, or no `eol=lf` in .gitattributes): restore LF line endings "
        f"(`* text eol=lf` in .gitattributes, then check the file out again); {verdict}\n"
    )
    if not same:
        text += unified_diff(name, path.read_bytes().replace(b"\r\n", b"\n"), actual)
    return text
