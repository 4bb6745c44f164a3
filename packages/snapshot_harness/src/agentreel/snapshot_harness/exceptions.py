"""Exceptions raised by ``agentreel.snapshot_harness``.

Hierarchy::

    AgentreelError (agentreel.brand)  base of every agentreel error
    └── HarnessError                    base of everything this package raises
        ├── ScenarioError               scenario.toml is invalid: names the file and the key
        ├── ScenarioFilesError          a scenario directory holds the wrong files
        │   ├── FixtureInventoryError   orphan or missing fixture files, named
        │   └── UnreadableFixtureError  a fixture file that cannot be read (permissions, a
        │                               directory in its place, a dangling symlink), named
        ├── RunError                    the agent run itself failed; carries the stderr tail
        │   ├── AgentCrashError         the agent exited non-zero or vanished mid-run
        │   ├── AgentTimeoutError       the run exceeded the scenario timeout (group killed)
        │   ├── AgentOutputError        agent stdout held a line that is not JSON (line named)
        │   ├── StepError               a step's outcome was not what the scenario expects
        │   ├── ReplayConsumptionError  the replay report says scripts or calls were unused
        │   │   └── NoReplayReportError the agent wrote no report: it never loaded the provider
        │   └── McpMismatchError        a replayed MCP call drifted, was not recorded, or a
        │                               recorded one was never made (SPEC 19)
        ├── GoldenMismatchError         normalized output differs from the goldens (diffs)
        ├── SecretLeakError             record mode found a live key in what it would write
        ├── RecordSetupError            record mode cannot start (provider, stub server, ...)
        ├── FaketimeError               a run on another day (faketime) cannot start:
        │                               libfaketime missing, or no date given
        └── RecordError                 record refused the new recording; nothing written
            └── VolatileValuesError     its trial replays differ in values; the masks found

Every message says what failed, where, and what to do next. This module imports nothing
from the rest of the package.

``FixtureError`` is a deprecated alias of ``ScenarioFilesError`` (importing it warns).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentreel.brand.exceptions import AgentreelError

if TYPE_CHECKING:
    from agentreel.session import SecretHit

import os
import stat
import warnings
from pathlib import Path

__all__ = [
    "AgentCrashError",
    "AgentOutputError",
    "AgentTimeoutError",
    "AgentreelError",
    "FaketimeError",
    "FixtureInventoryError",
    "GoldenMismatchError",
    "HarnessError",
    "McpMismatchError",
    "NoReplayReportError",
    "RecordError",
    "RecordSetupError",
    "ReplayConsumptionError",
    "RunError",
    "ScenarioError",
    "ScenarioFilesError",
    "SecretLeakError",
    "StepError",
    "UnreadableFixtureError",
    "VolatileValuesError",
]


class HarnessError(AgentreelError):
    """Base class of every error raised by ``agentreel.snapshot_harness``."""


class ScenarioError(HarnessError):
    """A ``scenario.toml`` is invalid or unsafe; the message names file and key."""


class ScenarioFilesError(HarnessError):
    """A scenario directory cannot be used as it stands: files missing or in the way, a
    recording that does not load, an override the scenario needs but lacks.

    Called ``FixtureError`` up to 0.1; that name is a deprecated alias now, because
    ``agentreel.llm_replay.FixtureError`` — a recording replay cannot use, which the harness
    reports as the cause of a failed run — is the other meaning of the word."""


class FixtureInventoryError(ScenarioFilesError):
    """Files the mode needs are missing, or files nobody needs are present."""

    def __init__(self, message: str, *, missing: list[str], orphans: list[str]) -> None:
        self.missing = missing
        self.orphans = orphans
        super().__init__(message)


class UnreadableFixtureError(ScenarioFilesError):
    """A fixture file is there by name but cannot be read; ``path`` names it and the message
    says why (permissions, a directory in its place, a dangling symlink) and what to do."""

    def __init__(self, scenario: str, path: Path, cause: OSError) -> None:
        self.path = path
        self.cause = cause
        problem, fix = _why_unreadable(path, cause)
        super().__init__(f"{scenario}: cannot read {path}: {problem}. {fix}")


def _why_unreadable(path: Path, cause: OSError) -> tuple[str, str]:
    if path.is_symlink() and not path.exists():
        target = os.readlink(path)
        return (
            f"it is a dangling symlink (it points to {target}, which does not exist)",
            "Restore the target, or replace the link with the file",
        )
    if path.is_dir():
        return (
            "a directory is where the file belongs",
            "Remove the directory and restore the file (version control has it)",
        )
    if isinstance(cause, PermissionError):
        try:
            info = path.stat()
            detail = f" (mode {stat.filemode(info.st_mode)}, owner uid {info.st_uid})"
        except OSError:
            detail = ""
        return f"permission denied{detail}", f"Make it readable: chmod a+r {path}"
    return cause.strerror or str(cause), "Check the file, or restore it from version control"


class RunError(HarnessError):
    """Running the agent failed. ``stderr_tail`` holds the last lines the agent wrote;
    ``message`` is the failure without it; ``where`` names the step running, if known."""

    def __init__(self, message: str, *, stderr_tail: str = "", where: str | None = None) -> None:
        self.stderr_tail = stderr_tail
        self.message = message
        self.where = where
        text = message
        if stderr_tail:
            text += "\n--- agent stderr (tail) ---\n" + stderr_tail
        super().__init__(text)


class AgentCrashError(RunError):
    """The agent process exited with a non-zero code or closed its stdout mid-run."""


class AgentTimeoutError(RunError):
    """The run took longer than the scenario's timeout; the process group was killed."""


class AgentOutputError(RunError):
    """The agent wrote something on stdout that is not a JSON-RPC frame."""


class StepError(RunError):
    """A scenario step did not end as the scenario says it should."""


class ReplayConsumptionError(RunError):
    """The replay provider reports recorded scripts or calls the live run never used."""


class McpMismatchError(RunError):
    """A replayed MCP connection met a call its recording does not answer, or left a
    recorded call unmade; names session, server, tool and the re-record command."""


class NoReplayReportError(ReplayConsumptionError):
    """The recording holds model calls, yet the agent wrote no consumption report: it never
    loaded agentreel's replay provider (nor went through the proxy)."""


class GoldenMismatchError(HarnessError):
    """The normalized run differs from the committed goldens.

    ``diffs`` maps each differing fixture file name to its (truncated) unified diff.
    """

    def __init__(self, message: str, *, diffs: dict[str, str]) -> None:
        self.diffs = diffs
        super().__init__(message)


class SecretLeakError(HarnessError):
    """Record or refresh found a credential in a file it was about to write; nothing was
    written. ``hits`` (``agentreel.session.SecretHit``) name file, line, event and rule."""

    def __init__(self, message: str, *, hits: tuple[SecretHit, ...] = ()) -> None:
        self.hits = hits
        super().__init__(message)


class RecordSetupError(HarnessError):
    """Record mode cannot start: unknown provider, missing rules file, no key, ..."""


class FaketimeError(HarnessError):
    """An agent cannot be run on another day: libfaketime is not installed (the message
    names how to install it), or what was given is no date."""


class RecordError(HarnessError):
    """A fresh recording was refused (it does not replay, a trial replay differs, a check
    of ``_record_proof`` failed); nothing was written."""


class VolatileValuesError(RecordError):
    """Trial replays of a fresh recording differ in values no mask covers; nothing was
    written. ``proposals`` are the masks found (``agentreel record --accept-masks`` adds
    them to scenario.toml and records again)."""

    def __init__(self, message: str, *, proposals: tuple[Any, ...] = ()) -> None:
        self.proposals = proposals
        super().__init__(message)


_DEPRECATED = {"FixtureError": "ScenarioFilesError"}


def _deprecated_name(module: str, name: str) -> type[HarnessError]:
    """The class a deprecated name of ``module`` stands for, with a ``DeprecationWarning``;
    ``AttributeError`` for any other name (a module's ``__getattr__``)."""
    new = _DEPRECATED.get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is renamed {new}: catch {new} (a scenario directory holding the "
        f"wrong files); agentreel.llm_replay.FixtureError is a recording replay cannot use",
        DeprecationWarning,
        stacklevel=3,
    )
    cls: type[HarnessError] = globals()[new]
    return cls


def __getattr__(name: str) -> type[HarnessError]:
    return _deprecated_name(__name__, name)
