"""The fixture layout of a scenario directory, its inventory check, and golden rendering.

Layout (``fixtures/<name>/``)::

    scenario.toml             the scenario (required)
    README.md                 optional notes
    workspace/                optional: copied into the run's cwd
    stub-rules.toml           the stub server's rules (``[record] provider = "stub"``)
    replay.override.json      optional replay overrides (throw / hang)
    session.jsonl             recording of the main session   } what the replay provider
    session.<n>.jsonl         recordings of children, n = 1..k } reads (raw ids and times,
                                                                 cwd as ``{{cwd}}``)
    golden/transcript.jsonl   normalized agent stdout          } what a replay is
    golden/session.jsonl      normalized main session log      } compared with
    golden/session.<n>.jsonl  normalized child logs            }
    golden/<file>.pending     a failing local replay's live golden, for ``agentreel
                              review`` (never committed: ``.gitignore`` holds
                              ``*.pending``; the inventory ignores them)

Recordings and goldens are separate on purpose: a recording keeps real session ids,
parent links and times so the replay provider can bind and order scripts, while a golden is
the normalized, review-friendly text a run is diffed against. ``refresh`` rewrites only
``golden/``; ``record`` rewrites both.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from agentreel.session import Normalizer, SessionLogError, load_session_log
from agentreel.snapshot_harness._runner import RunResult
from agentreel.snapshot_harness._scenario import SCENARIO_FILE, WORKSPACE_DIR, Mode, Scenario
from agentreel.snapshot_harness.exceptions import FixtureError, FixtureInventoryError

GOLDEN_DIR = "golden"
TRANSCRIPT_FILE = "transcript.jsonl"
OVERRIDE_FILE = "replay.override.json"
README_FILE = "README.md"
CWD_TOKEN = "{{cwd}}"
_SESSION_FILE = re.compile(r"session(?:\.([1-9][0-9]*))?\.jsonl")
DIFF_MAX_LINES = 120
PENDING_SUFFIX = ".pending"


def pending_name(golden_name: str) -> str:
    """``transcript.jsonl`` → ``transcript.jsonl.pending``: the pending file beside a golden."""
    return golden_name + PENDING_SUFFIX


def is_pending_name(name: str) -> bool:
    """Whether a file name in ``golden/`` is a pending golden (see ``_pending``)."""
    return name.endswith(PENDING_SUFFIX)


def session_file_name(number: int) -> str:
    """``session.jsonl`` for 0 (the main session), ``session.<n>.jsonl`` otherwise."""
    return "session.jsonl" if number == 0 else f"session.{number}.jsonl"


def recording_names(directory: Path) -> list[str]:
    """The recording files present: ``session.jsonl`` then ``session.<n>.jsonl`` by n."""
    found: list[tuple[int, str]] = []
    for path in directory.glob("session*.jsonl"):
        match = _SESSION_FILE.fullmatch(path.name)
        if match is not None and path.is_file():
            found.append((int(match.group(1) or 0), path.name))
    return [name for _, name in sorted(found)]


def _contiguous(count: int) -> list[str]:
    return [session_file_name(n) for n in range(count)]


@dataclass(frozen=True, slots=True)
class Inventory:
    """What a scenario directory holds, split into inputs, recordings and goldens."""

    recordings: list[str]
    goldens: list[str]
    orphans: list[str]


def take_inventory(scenario: Scenario) -> Inventory:
    """Classify every file of the scenario directory; unknown ones are orphans."""
    directory = scenario.directory
    allowed_inputs = {SCENARIO_FILE, README_FILE, OVERRIDE_FILE}
    if scenario.record.rules is not None:
        allowed_inputs.add(scenario.record.rules.name)
    recordings: list[str] = []
    goldens: list[str] = []
    orphans: list[str] = []
    for path in sorted(directory.iterdir()):
        name = path.name
        if name == WORKSPACE_DIR and path.is_dir() and not path.is_symlink():
            continue
        if name == GOLDEN_DIR and path.is_dir() and not path.is_symlink():
            for golden in sorted(path.iterdir()):
                if is_pending_name(golden.name):
                    continue  # a local review's business, never a fixture file
                if golden.is_file() and (
                    golden.name == TRANSCRIPT_FILE or _SESSION_FILE.fullmatch(golden.name)
                ):
                    goldens.append(golden.name)
                else:
                    orphans.append(f"{GOLDEN_DIR}/{golden.name}")
            continue
        if path.is_file() and name in allowed_inputs:
            continue
        if path.is_file() and _SESSION_FILE.fullmatch(name):
            recordings.append(name)
            continue
        orphans.append(name + ("/" if path.is_dir() else ""))
    order = {name: i for i, name in enumerate(recording_names(directory))}
    recordings.sort(key=lambda n: order.get(n, 1 << 30))
    return Inventory(recordings=recordings, goldens=goldens, orphans=orphans)


def check_inventory(scenario: Scenario, mode: Mode) -> Inventory:
    """The directory must hold exactly what ``mode`` needs: gaps and orphans fail, named.

    ``replay``: contiguous recordings, ``golden/transcript.jsonl`` and one golden log per
    recording. ``refresh``: contiguous recordings (goldens are rewritten). ``record``: the
    stub rules file when recording through the stub (outputs are rewritten). Orphans fail
    in every mode.
    """
    inventory = take_inventory(scenario)
    missing: list[str] = []
    orphans = list(inventory.orphans)
    rerecord = f"nox -s record -- {scenario.name}"
    if mode == "record":
        rules = scenario.record.rules
        if rules is not None and not rules.is_file():
            missing.append(rules.name)
    else:
        count = len(inventory.recordings)
        if scenario.creates_sessions:
            expected = _contiguous(max(count, 1))
            missing += [n for n in expected if n not in inventory.recordings]
            orphans += [n for n in inventory.recordings if n not in expected]
        else:
            orphans += inventory.recordings
            expected = []
        if mode == "replay":
            golden_expected = [TRANSCRIPT_FILE, *expected]
            missing += [f"{GOLDEN_DIR}/{n}" for n in golden_expected if n not in inventory.goldens]
            orphans += [f"{GOLDEN_DIR}/{n}" for n in inventory.goldens if n not in golden_expected]
    if mode != "record" and not missing:
        for name in inventory.recordings:
            _check_recording(scenario.directory / name, rerecord)
    if missing or orphans:
        lines = [f"{scenario.directory}: the fixture files do not fit {mode} mode"]
        if missing:
            lines.append(f"  missing: {', '.join(missing)}")
        if orphans:
            lines.append(
                f"  orphans (no scenario needs them; delete them): {', '.join(sorted(orphans))}"
            )
        if mode == "record":
            lines.append(f"Then record again: {rerecord}")
        else:
            lines.append(
                "Restore the missing files from version control, or re-record: " + rerecord
            )
        raise FixtureInventoryError("\n".join(lines), missing=missing, orphans=sorted(orphans))
    return inventory


def _check_recording(path: Path, rerecord: str) -> None:
    """A recording must load completely: corrupt lines and torn tails fail here, named."""
    try:
        log = load_session_log(path)
    except SessionLogError as exc:
        # The session package cannot know the scenario; its advice says `<scenario>`.
        advice = str(exc).replace("nox -s record -- <scenario>", rerecord)
        if rerecord not in advice:
            advice += f" Re-record: {rerecord}"
        raise FixtureError(f"corrupt recording: {advice}") from None
    if log.torn_tail is not None:
        raise FixtureError(
            f"{path}:{log.torn_tail.line}: the recording's last line is cut short "
            f"({log.torn_tail.problem}); restore it from version control or re-record: "
            f"{rerecord}"
        )


@dataclass(frozen=True, slots=True)
class Rendered:
    """A run turned into fixture files: ``goldens`` and ``recordings``, name → bytes."""

    goldens: dict[str, bytes]
    recordings: dict[str, bytes]


def render_run(result: RunResult) -> Rendered:
    """Normalize a run into golden texts and tokenize its logs into recordings.

    ``render_goldens`` and ``render_recordings`` together (so the run must have kept its
    raw logs: see ``render_recordings``); a caller needing one side only calls that one (a
    replay never needs recordings: no raw or cwd-tokenized copy of each log).
    """
    return Rendered(goldens=render_goldens(result), recordings=render_recordings(result))


def render_goldens(result: RunResult) -> dict[str, bytes]:
    """A run's goldens, file name → normalized bytes.

    The normalizer is the shared one (``agentreel.session.Normalizer``): transcript first,
    then the logs in session order, so numbering is the same on every run. Its bytes
    outputs are used so the normalized text never exists twice (SPEC 9, peak memory).
    """
    # Besides the cwd, the run's other private paths become tokens too, in case an agent
    # mentions its sessions root, HOME or TMPDIR: they differ on every run.
    extra = {
        str(result.run_dir / "sessions"): "{{sessions}}",
        str(result.run_dir / "home"): "{{home}}",
        str(result.run_dir / "tmp"): "{{tmp}}",
    }
    normalizer = Normalizer.for_logs(result.cwd, result.session_logs, extra_paths=extra)
    goldens: dict[str, bytes] = {
        TRANSCRIPT_FILE: normalizer.transcript_bytes(
            result.transcript, source=f"agent stdout of {result.scenario.name}"
        )
    }
    for number, log in enumerate(result.session_logs):
        goldens[session_file_name(number)] = normalizer.session_log_bytes(log)
    return goldens


def render_recordings(result: RunResult) -> dict[str, bytes]:
    """A run's recordings, file name → raw log bytes with the cwd as ``{{cwd}}``.

    Needs the raw logs: a record run keeps them, another only with ``keep_raw_logs=True``.
    """
    if len(result.session_log_bytes) != len(result.session_logs):
        raise ValueError(
            f"{result.scenario.name}: the run has {len(result.session_logs)} session logs but "
            f"{len(result.session_log_bytes)} raw contents, so no recordings can be made; "
            f"a {result.mode} run keeps raw logs only when asked: "
            "run_scenario(..., keep_raw_logs=True)"
        )
    return {
        session_file_name(number): tokenize_cwd(raw, result.cwd)
        for number, raw in enumerate(result.session_log_bytes)
    }


def tokenize_cwd(data: bytes, cwd: Path) -> bytes:
    """``data`` with the run's cwd written as ``{{cwd}}`` (ids and times kept as they are).

    The cwd is a fresh temp path the harness made (``<run dir>/cwd``), so it has no
    characters JSON escapes and nothing else in the run starts with it: a plain
    replacement of its spellings is exact. The replay provider turns the token back into
    the live cwd.
    """
    for spelling in sorted({str(cwd), str(cwd.resolve())}, key=len, reverse=True):
        for form in (spelling, spelling.replace("/", "\\/")):
            data = data.replace(form.encode(), CWD_TOKEN.encode())
    return data


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
        else:
            diffs[name] = unified_diff_file(name, path, actual)
    return diffs


def golden_sort_key(name: str) -> tuple[int, int]:
    """Goldens in the order diffs show them: the transcript, then the sessions by number."""
    if name == TRANSCRIPT_FILE:
        return (0, 0)
    match = _SESSION_FILE.fullmatch(name)
    return (1, int(match.group(1) or 0)) if match else (2, 0)


def write_files(directory: Path, files: dict[str, bytes], *, keep_pattern: re.Pattern[str]) -> None:
    """Write ``files`` into ``directory`` and delete stale files matching ``keep_pattern``.

    Stale means: matches the pattern (e.g. ``session.<n>.jsonl``) but is not being written
    now — the numbered children of an earlier recording that had more sessions.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.iterdir():
        if path.is_file() and keep_pattern.fullmatch(path.name) and path.name not in files:
            path.unlink()
    for name, data in files.items():
        target = directory / name
        temporary = target.with_name(f".{name}.tmp")
        temporary.write_bytes(data)
        temporary.replace(target)


SESSION_FILE_PATTERN = _SESSION_FILE
GOLDEN_FILE_PATTERN = re.compile(rf"{re.escape(TRANSCRIPT_FILE)}|{_SESSION_FILE.pattern}")
