"""``unified_diff`` diffs only the region between the common head and tail of two files.

The result must be a correct unified diff with the true line numbers: checked against
plain ``difflib`` on a large log with one changed line, at both ends of a file, and by
applying the diff of many random edits back onto the golden.
"""

from __future__ import annotations

import difflib
import random
import re

import pytest

from agentreel.snapshot_harness import unified_diff

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _plain(expected: bytes, actual: bytes) -> str:
    lines = difflib.unified_diff(
        expected.decode().splitlines(keepends=True),
        actual.decode().splitlines(keepends=True),
        fromfile="golden/f",
        tofile="live/f",
        n=2,
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def _apply(expected: bytes, diff: str) -> bytes:
    """Apply a unified diff to ``expected``, checking every context and removed line."""
    old = expected.decode().splitlines(keepends=True)
    lines = diff.splitlines(keepends=True)[2:]
    out: list[str] = []
    position = 0
    index = 0
    while index < len(lines):
        match = _HUNK.match(lines[index])
        assert match is not None, lines[index]
        start, count = int(match.group(1)), int(match.group(2) or 1)
        start = start - 1 if count else start
        out += old[position:start]
        position = start
        index += 1
        while index < len(lines) and not lines[index].startswith("@@"):
            line = lines[index]
            text = line[1:]
            if index + 1 < len(lines) and lines[index + 1].startswith("\\ No newline"):
                text = text[:-1]
                index += 1
            if line[0] in " -":
                assert old[position] == text, (position, old[position], text)
                position += 1
            if line[0] in " +":
                out.append(text)
            index += 1
    out += old[position:]
    return "".join(out).encode()


def test_one_changed_line_in_a_large_log_matches_plain_difflib() -> None:
    expected = b"".join(b'{"seq":%d,"text":"token %d"}\n' % (n, n) for n in range(20_000))
    actual = expected.replace(b'"token 12345"', b'"TOKEN 12345"')
    diff = unified_diff("f", expected, actual, max_lines=1000)
    assert diff == _plain(expected, actual)
    assert "@@ -12344,5 +12344,5 @@" in diff


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        (b"a\nb\nc\nd\ne\n", b"A\nb\nc\nd\ne\n"),
        (b"a\nb\nc\nd\ne\n", b"a\nb\nc\nd\nE\n"),
        (b"a\nb\nc\nd\ne", b"a\nb\nc\nd\ne\n"),
        (b"a\nb\nc\nd\ne\n", b"a\nb\nc\nd\ne\nf\n"),
        (b"", b"a\n"),
        (b"a\n", b""),
        (b"x\ny\nz\n", b"p\nq\n"),
    ],
)
def test_edges_match_plain_difflib(expected: bytes, actual: bytes) -> None:
    assert unified_diff("f", expected, actual, max_lines=1000) == _plain(expected, actual)


def test_random_edits_give_diffs_that_apply() -> None:
    rng = random.Random(9)
    for _ in range(3000):
        base = [rng.choice(["a", "b", "dd", "é"]) + "\n" for _ in range(rng.randint(0, 14))]
        new = list(base)
        for _ in range(rng.randint(0, 4)):
            position = rng.randint(0, len(new))
            operation = rng.choice("ird")
            if operation == "i":
                new.insert(position, rng.choice(["a", "x", "é"]) + "\n")
            elif position < len(new):
                if operation == "r":
                    new[position] = rng.choice(["a", "z"]) + "\n"
                else:
                    del new[position]
        expected, actual = "".join(base).encode(), "".join(new).encode()
        if expected and rng.random() < 0.2:
            expected = expected[:-1]
        if actual and rng.random() < 0.2:
            actual = actual[:-1]
        diff = unified_diff("f", expected, actual, max_lines=10**6)
        if expected == actual:
            assert diff == ""
        else:
            assert _apply(expected, diff) == actual, (expected, actual, diff)
