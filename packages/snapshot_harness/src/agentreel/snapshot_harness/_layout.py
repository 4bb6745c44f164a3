"""The layout of a scenario directory, its inventory check, and writing fixture files.

Layout (``fixtures/<name>/``)::

    scenario.toml             the scenario (required)
    README.md                 optional notes
    workspace/                optional: copied into the run's cwd
    stub-rules.toml           the stub server's rules (``[record] provider = "stub"``)
    replay.override.json      optional replay overrides (throw / hang)
    session.jsonl             recording of the main session   } what the replay provider
    session.<n>.jsonl         recordings of children, n = 1..k } reads (raw ids and times,
                                                                 cwd as ``{{cwd}}``)
    wire.ndjson               a proxied scenario's answers as the upstream sent them, one
                              call a line (replay serves a call bound as recorded from it,
                              byte for byte); only if the record run kept any
    models.json               a proxied scenario's GET /v1/models answers, if it listed any
    golden/transcript.jsonl   normalized agent stdout          } what a replay is
    golden/session.jsonl      normalized main session log      } compared with
    golden/session.<n>.jsonl  normalized child logs            }
                              (one per recording, minus the recordings of lanes the
                              scenario names in ``[model] partial_lanes``: whether those
                              run is timing, so they are in no golden)
    golden/<file>.pending     a failing local replay's live golden, for ``agentreel
                              review`` (never committed: ``.gitignore`` holds
                              ``*.pending``; the inventory ignores them)

Recordings and goldens are separate on purpose: a recording keeps real session ids,
parent links and times so the replay provider can bind and order scripts, while a golden is
the normalized, review-friendly text a run is diffed against. ``refresh`` rewrites only
``golden/``; ``record`` rewrites both.

The recording names, their numbering rule, the override file and the ``{{cwd}}`` token are
the session package's fixture layout (``agentreel.session``), shared with the replay
provider that reads them; this module adds what only a scenario directory has.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from agentreel.llm import Finish
from agentreel.llm_replay import FixtureError, PartialLanes, load_recording
from agentreel.mcp_replay import MCP_RECORDING_PATTERN, MCP_RECORDINGS_DIR
from agentreel.session import (
    OVERRIDE_FILE,
    PROXY_RECORDING_FILES,
    SESSION_FILE_PATTERN,
    AssistantChunk,
    RequestHeader,
    SessionLog,
    SessionLogError,
    load_session_log,
    recording_names,
    refresh_command,
    rerecord_command,
    session_file_name,
    session_file_number,
)
from agentreel.snapshot_harness._scenario import (
    SCENARIO_FILE,
    WORKSPACE_DIR,
    Mode,
    Prompt,
    PromptAndCancel,
    Scenario,
)
from agentreel.snapshot_harness.exceptions import (
    FixtureInventoryError,
    ScenarioFilesError,
    UnreadableFixtureError,
)

GOLDEN_DIR = "golden"
TRANSCRIPT_FILE = "transcript.jsonl"
README_FILE = "README.md"
GOLDEN_FILE_PATTERN = re.compile(rf"{re.escape(TRANSCRIPT_FILE)}|{SESSION_FILE_PATTERN.pattern}")
# What a trial replay of a fresh recording needs besides its recordings and workspace.
REPLAY_INPUTS = (SCENARIO_FILE, OVERRIDE_FILE)
PENDING_SUFFIX = ".pending"


def pending_name(golden_name: str) -> str:
    """``transcript.jsonl`` → ``transcript.jsonl.pending``: the pending file beside a golden."""
    return golden_name + PENDING_SUFFIX


def is_pending_name(name: str) -> bool:
    """Whether a file name in ``golden/`` is a pending golden (see ``_pending``)."""
    return name.endswith(PENDING_SUFFIX)


def _contiguous(count: int) -> list[str]:
    return [session_file_name(n) for n in range(count)]


@dataclass(frozen=True, slots=True)
class Inventory:
    """What a scenario directory holds, split into inputs, recordings and goldens."""

    recordings: list[str]
    goldens: list[str]
    orphans: list[str]


def take_inventory(scenario: Scenario) -> Inventory:
    """Classify every file of the scenario directory; unknown ones are orphans.

    A file named as a fixture file (an input, a recording, a golden) must be a regular
    file this process can read: a directory in its place, a dangling symlink or missing
    permissions raise ``UnreadableFixtureError`` naming it.
    """
    directory = scenario.directory
    allowed_inputs = {SCENARIO_FILE, README_FILE, OVERRIDE_FILE, *scenario.own_files()}
    if scenario.model.proxied:
        allowed_inputs.update(PROXY_RECORDING_FILES)
    if scenario.record.rules is not None:
        allowed_inputs.add(scenario.record.rules.name)
    recordings: list[str] = []
    goldens: list[str] = []
    orphans: list[str] = []
    for path in _entries(scenario, directory):
        name = path.name
        if name == WORKSPACE_DIR and path.is_dir() and not path.is_symlink():
            continue
        if name == MCP_RECORDINGS_DIR and path.is_dir() and not path.is_symlink():
            declared = {server.name for server in scenario.mcp_servers}
            for recording in _entries(scenario, path):
                match = MCP_RECORDING_PATTERN.fullmatch(recording.name)
                if match is None or match["server"] not in declared:
                    orphans.append(f"{MCP_RECORDINGS_DIR}/{recording.name}")
                else:
                    _check_readable(scenario, recording)
            continue
        if name == GOLDEN_DIR and path.is_dir() and not path.is_symlink():
            for golden in _entries(scenario, path):
                if is_pending_name(golden.name):
                    continue  # a local review's business, never a fixture file
                if golden.name == TRANSCRIPT_FILE or SESSION_FILE_PATTERN.fullmatch(golden.name):
                    _check_readable(scenario, golden)
                    goldens.append(golden.name)
                else:
                    orphans.append(f"{GOLDEN_DIR}/{golden.name}")
            continue
        if name in allowed_inputs:
            if name not in scenario.own_files():  # the scenario's own files may be dirs
                _check_readable(scenario, path)
            continue
        if SESSION_FILE_PATTERN.fullmatch(name):
            _check_readable(scenario, path)
            recordings.append(name)
            continue
        orphans.append(name + ("/" if path.is_dir() else ""))
    order = {name: i for i, name in enumerate(recording_names(directory))}
    recordings.sort(key=lambda n: order.get(n, 1 << 30))
    return Inventory(recordings=recordings, goldens=goldens, orphans=orphans)


def _entries(scenario: Scenario, directory: Path) -> list[Path]:
    try:
        return sorted(directory.iterdir())
    except OSError as exc:
        raise UnreadableFixtureError(scenario.name, directory, exc) from None


def _check_readable(scenario: Scenario, path: Path) -> None:
    """``path`` opens for reading as a regular file, or ``UnreadableFixtureError`` says why."""
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise UnreadableFixtureError(scenario.name, path, exc) from None


def partial_recordings(scenario: Scenario, names: list[str]) -> list[str]:
    """The recordings (of ``names``) of lanes the scenario's ``[model] partial_lanes`` name.

    A lane is named by its first recorded request (``agentreel.llm_replay.PartialLanes``:
    its model, system prompt or first message), as the replay's report marks it partial.
    """
    partial = PartialLanes(scenario.replay.partial_lanes)
    if not partial:
        return []
    named: list[str] = []
    for name in names:
        try:
            log = load_session_log(scenario.directory / name)
        except SessionLogError:
            continue  # the recording check below names what is wrong with it
        first = next((e.data for e in log.own_events if isinstance(e, RequestHeader)), None)
        if first is not None and partial.naming(first) is not None:
            named.append(name)
    return named


def check_inventory(scenario: Scenario, mode: Mode) -> Inventory:
    """The directory must hold exactly what ``mode`` needs: gaps and orphans fail, named.

    ``replay``: contiguous recordings, ``golden/transcript.jsonl`` and one golden log per
    recording but those of partial lanes (``partial_recordings``). ``refresh``: contiguous
    recordings (goldens are rewritten). ``record``: the stub rules file when recording
    through the stub (outputs are rewritten). Orphans fail in every mode.
    """
    inventory = take_inventory(scenario)
    missing: list[str] = []
    extra: list[str] = []
    orphans = list(inventory.orphans)
    rerecord = rerecord_command(scenario.name)
    recorded_golden: list[str] = []  # missing recordings whose golden log is there
    missing += [name for name in scenario.inputs if not (scenario.directory / name).exists()]
    if mode == "record":
        rules = scenario.record.rules
        if rules is not None and not rules.is_file():
            missing.append(rules.name)
    else:
        count = len(inventory.recordings)
        if scenario.creates_sessions:
            # In replay each golden log has its recording: a deleted recording is named
            # missing (up to the highest-numbered golden log), not its golden an orphan.
            logged = [n for n in inventory.goldens if n != TRANSCRIPT_FILE]
            highest = max((session_file_number(n) or 0 for n in logged), default=0)
            expected = _contiguous(max(count, highest + 1 if mode == "replay" else 1, 1))
            lost = [n for n in expected if n not in inventory.recordings]
            missing += lost
            recorded_golden = [n for n in lost if n in inventory.goldens]
            orphans += [n for n in inventory.recordings if n not in expected]
        else:
            orphans += inventory.recordings
            expected = []
        if mode == "replay":
            present = [n for n in expected if n in inventory.recordings]
            unlogged = len(partial_recordings(scenario, present))
            golden_expected = [TRANSCRIPT_FILE, *expected[: len(expected) - unlogged]]
            absent = [n for n in golden_expected if n not in inventory.goldens]
            # A recording past the last golden log is the extra file, not the golden missing.
            golden_logs = sum(1 for n in inventory.goldens if n != TRANSCRIPT_FILE)
            extra = [
                n
                for n in absent
                if n != TRANSCRIPT_FILE
                and n in inventory.recordings
                and (session_file_number(n) or 0) >= max(golden_logs, 1)
            ]
            missing += [f"{GOLDEN_DIR}/{n}" for n in absent if n not in extra]
            orphans += [f"{GOLDEN_DIR}/{n}" for n in inventory.goldens if n not in golden_expected]
    if mode != "record" and not missing:
        for name in inventory.recordings:
            _check_recording(scenario.directory / name, rerecord)
        _check_cut_to_header(scenario, inventory.recordings, rerecord)
        _check_overrides(scenario)
        _check_cancelled_calls_hang(scenario, inventory.recordings)
    if missing or orphans or extra:
        lines = [f"{scenario.directory}: the fixture files do not fit {mode} mode"]
        if extra:
            golden_logs = len(inventory.recordings) - len(extra)  # the golden logs present
            lines.append(
                f"  extra recording(s): {', '.join(extra)} — the goldens hold {golden_logs} "
                f"session log(s), the recordings {len(inventory.recordings)}. Delete a "
                "recording left over from an earlier run, or rewrite the goldens from these "
                f"recordings: {refresh_command(scenario.name)}"
            )
        if recorded_golden:
            lines.append(
                f"  missing recording(s): {', '.join(recorded_golden)} — the golden log of "
                f"each is there ({', '.join(f'{GOLDEN_DIR}/{n}' for n in recorded_golden)}): "
                "deleted by mistake, or left out of a commit?"
            )
        other = [n for n in missing if n not in recorded_golden]
        if other:
            lines.append(f"  missing: {', '.join(other)}")
        mentioned = _mentioned(scenario, orphans)
        unmentioned = [n for n in orphans if n not in mentioned]
        if unmentioned:
            lines.append(
                f"  orphans (nothing in the scenario names them): {', '.join(sorted(unmentioned))}"
                " — delete them, or, if the agent uses them, list them in scenario.toml's "
                "[fixture] inputs"
            )
        if mentioned:
            lines.append(
                f"  not recognised as inputs: {', '.join(sorted(mentioned))} — scenario.toml "
                "mentions them but no key the inventory reads names them; if the agent uses "
                'them, list them in [fixture] inputs = ["..."]'
            )
        if mode == "record":
            lines.append(f"Then record again: {rerecord}")
        elif missing:
            lines.append(
                "Restore the missing files from version control, or re-record: " + rerecord
            )
        elif orphans:
            lines.append(f"Or re-record: {rerecord}")
        raise FixtureInventoryError(
            "\n".join(lines), missing=missing, orphans=sorted(orphans + extra)
        )
    return inventory


def _mentioned(scenario: Scenario, names: list[str]) -> list[str]:
    """The ``names`` that ``scenario.toml`` mentions anywhere (a comment, a step's text):
    never called orphans to delete — the scenario may well need them."""
    try:
        text = scenario.toml_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    return [
        name
        for name in names
        if re.search(rf"(?<![\w.-]){re.escape(name.rstrip('/'))}(?![\w-])", text)
    ]


def _check_recording(path: Path, rerecord: str) -> None:
    """A recording must load completely: corrupt lines and torn tails fail here, named."""
    try:
        log = load_session_log(path)
    except SessionLogError as exc:
        # The session package knows neither the scenario nor the command: rebuilt here.
        raise ScenarioFilesError(
            f"corrupt recording: {exc.path}:{exc.line}: {exc.problem}. {exc.advice}: {rerecord}"
        ) from None
    if log.torn_tail is not None:
        raise ScenarioFilesError(
            f"{path}:{log.torn_tail.line}: the recording's last line is cut short "
            f"({log.torn_tail.problem}); restore it from version control or re-record: "
            f"{rerecord}"
        )


def _check_cut_to_header(scenario: Scenario, recordings: list[str], rerecord: str) -> None:
    """A recording holding only its header line, where the run that wrote it must have
    logged more, was cut short: named here, before a replay binds the live session to
    another script and blames a drift (or an "unrecorded" session) instead.

    Must have logged more: a proxied scenario's recording (the proxy writes a lane only for
    a model call), a session other recordings name as their parent (it logged their
    ``subagent/start``), or the only recording of a scenario that prompts."""
    logs: dict[str, SessionLog] = {}
    for name in recordings:
        try:
            logs[name] = load_session_log(scenario.directory / name)
        except SessionLogError:
            return  # _check_recording named it
    parents = {log.header.parent_session for log in logs.values()}
    prompts = any(isinstance(step, Prompt | PromptAndCancel) for step in scenario.steps)
    for name, log in logs.items():
        if log.events:
            continue
        if not (scenario.model.proxied or log.header.id in parents or (prompts and len(logs) == 1)):
            continue
        raise ScenarioFilesError(
            f"{scenario.directory / name}: the recording holds only its header line, no "
            "events — cut short (an editor, a failed copy, a crash while recording?). "
            f"Restore it from version control or re-record: {rerecord}"
        )


def _check_overrides(scenario: Scenario) -> None:
    """A ``replay.override.json`` must be valid for the recording it patches before anything
    reads it: a malformed file, or one naming a call the recording lacks, is that file's
    error (named as the user typed the scenario's path), never a "missing override"."""
    if not (scenario.directory / OVERRIDE_FILE).exists():
        return
    try:
        load_recording(scenario.directory)
    except FixtureError as exc:
        raise ScenarioFilesError(f"{scenario.name}: {type(exc).__name__}: {exc}") from None


def _check_cancelled_calls_hang(scenario: Scenario, recordings: list[str]) -> None:
    """A scenario that cancels a prompt (``prompt_and_cancel``) replays each recorded call
    that ended ``aborted`` under a ``hang`` override: the replayed stream then waits for the
    live ``session/cancel``. Replayed as recorded, the abort ends the turn by itself, racing
    the cancel — the scenario would pass without cancelling anything."""
    if not any(isinstance(step, PromptAndCancel) for step in scenario.steps):
        return
    hung = hang_overrides(scenario.directory / OVERRIDE_FILE)
    for number, name in enumerate(recordings):
        try:
            log = load_session_log(scenario.directory / name)
        except SessionLogError:
            continue  # _check_recording named it
        call, chunks = 1, 0
        for event in log.own_events:
            if not isinstance(event, AssistantChunk):
                continue
            chunk = event.data.chunk
            if not isinstance(chunk, Finish):
                chunks += 1
                continue
            if chunk.reason == "aborted" and (number, call) not in hung:
                override = (
                    f'{{"action": "hang", "session": {number}, "call": {call}, "chunks": {chunks}}}'
                )
                raise ScenarioFilesError(
                    f"{scenario.name}: {name} call {call} ended aborted when recorded (the "
                    "client cancelled it), and the scenario cancels a prompt "
                    "(prompt_and_cancel) — replayed as recorded, the abort would end the turn "
                    "by itself, racing the live session/cancel, so nothing would test the "
                    "cancel. Hold the call open until the cancel: add "
                    f'{{"overrides": [{override}]}} to {scenario.directory / OVERRIDE_FILE}'
                )
            call, chunks = call + 1, 0


def hang_overrides(path: Path) -> set[tuple[int, int]]:
    """``(session, call)`` of each ``hang`` in an override file; the replay provider
    validates the file, so an unreadable or odd one yields nothing here."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {
            (int(o["session"]), int(o["call"]))
            for o in data.get("overrides", [])
            if isinstance(o, dict) and o.get("action") == "hang"
        }
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return set()


def golden_sort_key(name: str) -> tuple[int, int]:
    """Goldens in the order diffs show them: the transcript, then the sessions by number."""
    if name == TRANSCRIPT_FILE:
        return (0, 0)
    number = session_file_number(name)
    return (1, number) if number is not None else (2, 0)


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
