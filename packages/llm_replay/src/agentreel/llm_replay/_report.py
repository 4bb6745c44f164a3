"""The consumption report: what a replay run used of its recording, as a JSON file.

The agent runs as a subprocess, so the harness cannot call ``assert_consumed()`` itself:
the provider writes this report (``report_path`` setting) and the harness reads it with
``read_report(path)`` and calls ``report.assert_consumed()`` / looks at ``report.errors``.

File format (UTF-8 JSON object, ``"format": "agentreel-replay-report"``, ``"version": 1``)::

    {"format": "agentreel-replay-report", "version": 1,
     "fixture_dir": "/abs/fixtures/subagent-spawn", "scenario": "subagent-spawn",
     "scripts": [{"session": 0, "file": "session.jsonl", "recorded_session_id": "...",
                  "parent_session": null, "spawn_index": null,
                  "calls": 2, "consumed": 2, "bound_to": "<live session id>",
                  "partial": false, "interrupted": []}, ...],
     "errors": [{"type": "UnrecordedSessionError", "message": "..."}],
     "drift_warnings": ["..."], "schedule_warnings": ["..."]}

``bound_to`` is the live session id bound to the script (``"<anonymous>"`` for a caller
without one; ``null`` if never bound). ``partial`` is true for a lane named by the run's
``partial_lanes`` (a side call that may be consumed partly or not at all: never counted as
unconsumed). ``interrupted`` lists the calls (1-based) a stop of the replaying process cut
while they streamed (the proxy's SIGTERM, SIGINT or end of input): consumed, but not all
of each reached the agent. ``errors`` lists every replay error raised to the
agent (it may have caught them) and every schedule divergence (``schedule = "recorded"``:
reported, not raised), ``drift_warnings`` every drift seen in ``warn`` mode,
``schedule_warnings`` every schedule divergence a scenario allows.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable
from pathlib import Path

import msgspec

from agentreel.llm_replay._fixture import script_label
from agentreel.llm_replay.exceptions import UnconsumedScriptError
from agentreel.session import rerecord_command

REPORT_FORMAT = "agentreel-replay-report"
REPORT_VERSION = 1


class ScriptReport(msgspec.Struct, frozen=True, kw_only=True):
    """How much of one recorded session's script the run consumed."""

    session: int
    file: str
    recorded_session_id: str
    parent_session: str | None
    spawn_index: int | None
    calls: int
    consumed: int
    bound_to: str | None
    partial: bool = False
    interrupted: list[int] = msgspec.field(default_factory=list)


class ReportedError(msgspec.Struct, frozen=True, kw_only=True):
    """A replay error raised to the agent during the run."""

    type: str
    message: str


class ConsumptionReport(msgspec.Struct, frozen=True, kw_only=True):
    """The whole report; ``assert_consumed()`` works on it as on the live provider."""

    format: str = REPORT_FORMAT
    version: int = REPORT_VERSION
    fixture_dir: str
    scenario: str
    scripts: list[ScriptReport]
    errors: list[ReportedError] = msgspec.field(default_factory=list)
    drift_warnings: list[str] = msgspec.field(default_factory=list)
    schedule_warnings: list[str] = msgspec.field(default_factory=list)

    def unconsumed(self) -> list[str]:
        """One readable line per script with calls never requested; empty when all were.
        Partial lanes are not listed (``partial_lines``)."""
        return unconsumed_lines(self.scripts)

    def partial_lines(self) -> list[str]:
        """One readable line per partial lane: how much of it the run consumed."""
        return [
            f"{_label(script)}: partial lane, made {script.consumed} of {script.calls} call(s)"
            for script in self.scripts
            if script.partial
        ]

    @property
    def ok(self) -> bool:
        """Every recorded call was requested and no replay error was raised."""
        return not self.errors and not self.unconsumed()

    def assert_consumed(self) -> None:
        """Raise ``UnconsumedScriptError`` listing every script or call never requested."""
        lines = self.unconsumed()
        if lines:
            raise unconsumed_error(self.scenario, self.fixture_dir, lines)

    def to_dict(self) -> dict[str, object]:
        result: dict[str, object] = msgspec.to_builtins(self)
        return result


def _label(script: ScriptReport) -> str:
    return script_label(script.file, script.session, script.parent_session, script.spawn_index)


def unconsumed_lines(scripts: list[ScriptReport]) -> list[str]:
    lines: list[str] = []
    for script in scripts:
        if script.consumed >= script.calls or script.partial:
            continue
        label = _label(script)
        if script.bound_to is None:
            lines.append(
                f"{label}: never bound to a live session; its {script.calls} call(s) were "
                "never requested"
            )
        else:
            first = script.consumed + 1
            span = f"call {first}" if first == script.calls else f"calls {first}..{script.calls}"
            lines.append(
                f"{label}: its live session made {script.consumed} of {script.calls} "
                f"call(s); {span} never requested"
            )
    return lines


def unconsumed_error(scenario: str, fixture_dir: str, lines: list[str]) -> UnconsumedScriptError:
    listing = "\n  ".join(lines)
    return UnconsumedScriptError(
        f"replay of {fixture_dir} ended with recorded model calls never made:\n  {listing}\n"
        "The live run did less than the recording (a session or step the agent no longer "
        f"runs). If that change is intended, re-record: {rerecord_command(scenario)}",
        unconsumed=lines,
    )


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(ConsumptionReport)


def write_report(report: ConsumptionReport, path: Path | str) -> None:
    """Write ``report`` to ``path`` atomically (temp file then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(_ENCODER.encode(report) + b"\n")
    os.replace(temporary, path)


def read_report(path: Path | str) -> ConsumptionReport:
    """Load a report written by ``write_report``; a bad file raises ``ValueError`` naming it."""
    path = Path(path)
    try:
        report = _DECODER.decode(path.read_bytes())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no replay report at {path}: the agent exited before its replay provider was "
            "closed, or it was not configured with report_path"
        ) from None
    except msgspec.DecodeError as exc:
        raise ValueError(f"{path}: not a replay consumption report: {exc}") from None
    if report.format != REPORT_FORMAT or report.version != REPORT_VERSION:
        raise ValueError(
            f"{path}: report format {report.format!r} version {report.version} is not "
            f"{REPORT_FORMAT!r} version {REPORT_VERSION}; upgrade agentreel"
        )
    return report


class ReportWriter:
    """Writes a live provider's report to ``path`` whenever a harness may need it.

    Right after every replay error (the agent may swallow the error, or die of it), at
    ``close()``, and at interpreter exit if ``close()`` never came. ``build`` makes the
    report from the provider's state at that moment. ``path=None`` writes nothing.
    """

    def __init__(self, path: Path | None, build: Callable[[], ConsumptionReport]) -> None:
        self.path = path
        self._build = build
        self._closed = False
        if path is not None:
            atexit.register(self._write_at_exit)

    def error_raised(self, error: BaseException) -> None:
        """Write the report now that it holds ``error``; a report that cannot be written
        must not replace the replay error the agent sees, so it travels along as a note."""
        if self.path is None:
            return
        try:
            write_report(self._build(), self.path)
        except OSError as exc:
            error.add_note(
                f"(the replay report could not be written to {self.path}: {exc}; "
                "check that its directory is writable)"
            )

    def write(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the report to ``path`` (default: the writer's own path)."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("write_report() needs a path: none given and no report_path set")
        write_report(self._build(), target)
        return target

    def close(self) -> None:
        """Write the report one last time. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.path is not None:
            atexit.unregister(self._write_at_exit)
            write_report(self._build(), self.path)

    def _write_at_exit(self) -> None:
        if not self._closed:
            self.close()
