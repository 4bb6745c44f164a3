"""A replay compares live goldens with the committed files a block at a time
(``file_equals``, ``unified_diff_file``): the result must be exactly the whole-bytes
comparison and ``unified_diff``, whatever the edit and wherever the block edges fall."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from agentreel.snapshot_harness import _diff as diff_module
from agentreel.snapshot_harness import (
    compare_goldens,
    file_equals,
    load_scenario,
    unified_diff,
    unified_diff_file,
)

_LINES = st.lists(
    st.sampled_from([b"a\n", b"b\n", b'{"x":1}\n', b"\xc3\xa9\n", b"\n", b"long " * 9 + b"\n"]),
    max_size=40,
)


@st.composite
def _pairs(draw: st.DrawFn) -> tuple[bytes, bytes]:
    expected = draw(_LINES)
    actual = list(expected)
    for _ in range(draw(st.integers(0, 3))):
        position = draw(st.integers(0, len(actual)))
        kind = draw(st.sampled_from(["insert", "delete", "change"]))
        if kind == "insert" or not actual:
            actual.insert(position, draw(st.sampled_from([b"NEW\n", b"a\n", b"\n"])))
        elif kind == "delete":
            del actual[min(position, len(actual) - 1)]
        else:
            actual[min(position, len(actual) - 1)] = b"CHANGED\n"
    tail = draw(st.sampled_from([b"", b"x", b"a"]))  # sometimes no final newline
    return b"".join(expected) + draw(st.sampled_from([b"", b"x"])), b"".join(actual) + tail


@settings(max_examples=300, deadline=None)
@given(_pairs(), st.sampled_from([1, 2, 3, 7, 1 << 16]))
def test_file_comparison_equals_the_bytes_comparison(pair: tuple[bytes, bytes], block: int) -> None:
    expected, actual = pair
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "session.jsonl"
        path.write_bytes(expected)
        with mock.patch.object(diff_module, "_COMPARE_BLOCK", block):
            assert file_equals(path, actual) == (expected == actual)
            if expected != actual:
                from_file = unified_diff_file("session.jsonl", path, actual)
                assert from_file == unified_diff("session.jsonl", expected, actual)
                assert from_file.startswith("--- golden/session.jsonl\n")


def test_compare_goldens_reports_each_kind_of_difference(
    make_scenario: Callable[..., Path],
) -> None:
    scenario = load_scenario(make_scenario())
    golden = scenario.directory / "golden"
    golden.mkdir()
    lines = b"".join(f'{{"seq":{n}}}\n'.encode() for n in range(5000))
    (golden / "transcript.jsonl").write_bytes(b"same\n")
    (golden / "session.jsonl").write_bytes(lines)
    (golden / "session.2.jsonl").write_bytes(b"stale\n")
    live = {
        "transcript.jsonl": b"same\n",
        "session.jsonl": lines.replace(b'{"seq":2500}', b'{"seq":-1}'),
        "session.1.jsonl": b"new\n",
    }
    diffs = compare_goldens(scenario, live)
    assert sorted(diffs) == ["session.1.jsonl", "session.2.jsonl", "session.jsonl"]
    assert diffs["session.jsonl"] == unified_diff("session.jsonl", lines, live["session.jsonl"])
    assert '-{"seq":2500}\n+{"seq":-1}\n' in diffs["session.jsonl"]
    assert diffs["session.1.jsonl"].startswith("golden/session.1.jsonl does not exist")
    assert diffs["session.2.jsonl"] == "the live run did not produce golden/session.2.jsonl\n"
    assert compare_goldens(scenario, {**live, "session.jsonl": lines, "session.1.jsonl": b""}) == {
        "session.2.jsonl": "the live run did not produce golden/session.2.jsonl\n"
    }
