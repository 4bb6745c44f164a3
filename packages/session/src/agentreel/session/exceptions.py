"""Exceptions raised by ``agentreel.session``.

Hierarchy::

    AgentreelError (agentreel.brand)  base of every agentreel error
    └── SessionError                    base of everything this package raises
        ├── SessionLogError             a log file is unreadable: names file and line
        │   ├── CorruptLineError        a line (not the last) is not a valid record
        │   ├── UnsupportedVersionError the header's version is not one we read
        │   └── SeedLengthError         seed_length does not fit the log (see the class)
        ├── DuplicateSessionError       two logs under one root claim the same session id
        ├── ForkError                   a fork was asked for that cannot be made
        ├── SessionClosedError          an append to a closed session
        ├── NotJsonLineError            normalizer input has a line that is not a JSON object
        ├── RecordSettingsError (ValueError) a record setting's value (``RecordSettings``)
        └── SecretFoundError            what a writer would write holds a credential (the scan)

``SecretFoundError.hits`` are ``SecretHit`` records, defined here beside the error that
carries them: the scan (``_secret_scan``) imports this module, never the other way round.
This module imports nothing from the rest of the package.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentreel.brand.exceptions import AgentreelError

__all__ = [
    "AgentreelError",
    "CorruptLineError",
    "DuplicateSessionError",
    "ForkError",
    "NotJsonLineError",
    "RecordSettingsError",
    "SecretFoundError",
    "SecretHit",
    "SeedLengthError",
    "SessionClosedError",
    "SessionError",
    "SessionLogError",
    "UnsupportedVersionError",
]


class SessionError(AgentreelError):
    """Base class of every error raised by ``agentreel.session``."""


class SessionLogError(SessionError):
    """A session log could not be read; ``path`` and ``line`` (1-based) say where.

    ``problem`` is what is wrong, ``advice`` what to do; a layer that knows more (the
    scenario, how the user re-records it) rebuilds the message from them.
    """

    def __init__(self, path: Path | str, line: int, problem: str, advice: str) -> None:
        self.path = Path(path)
        self.line = line
        self.problem = problem
        self.advice = advice
        super().__init__(f"{self.path}:{line}: {problem}. {advice}")


class CorruptLineError(SessionLogError):
    """A line other than the last is not a valid header or event."""


class UnsupportedVersionError(SessionLogError):
    """The header carries a version this release cannot read."""


class SeedLengthError(SessionLogError):
    """The header's ``seed_length`` does not fit the log: beyond its events, non-zero on a
    session that is not a fork, or not followed by ``session/end-seed``."""


class DuplicateSessionError(SessionError):
    """Two log files under one sessions root carry the same session id."""

    def __init__(self, session_id: str, first: Path, second: Path) -> None:
        self.session_id = session_id
        self.paths = (first, second)
        super().__init__(
            f"session {session_id} has two logs: {first} and {second}. A session id is "
            "written once; remove the stray copy (or use a fresh sessions root per run)"
        )


class ForkError(SessionError):
    """A fork child cannot be created as asked."""


class SessionClosedError(SessionError):
    """An event was appended to a session after it was closed."""


class NotJsonLineError(SessionError):
    """A line handed to the normalizer (agent stdout, a session log) is not a JSON object.

    ``source`` names the stream or file, ``line`` is 1-based, ``text`` is the line itself.
    On agent stdout this means something other than a protocol frame was printed there.
    """

    def __init__(self, source: str, line: int, text: bytes, problem: str, advice: str) -> None:
        self.source = source
        self.line = line
        self.text = text
        shown = text[:200].decode("utf-8", "replace")
        more = f" ... ({len(text)} bytes)" if len(text) > 200 else ""
        super().__init__(f"{source}:{line}: {problem}: {shown!r}{more}. {advice}")


@dataclass(frozen=True, slots=True)
class SecretHit:
    """One refused value, as ``SecretFoundError.hits`` lists it (the scan,
    ``agentreel.session._secret_scan``, makes them): where it is and which rule found it —
    never the value itself.

    ``sha256`` is the value's digest for a known shape or an auth header (what an allowlist
    names), ``None`` for the run's own credential (never allowed).
    """

    file: str
    line: int
    rule: str
    event: str = ""
    sha256: str | None = None

    def describe(self) -> str:
        event = f" ({self.event})" if self.event else ""
        digest = f" [sha256 {self.sha256}]" if self.sha256 else ""
        return f"{self.file}:{self.line}{event}: {self.rule}{digest}"


class SecretFoundError(SessionError):
    """What a writer was about to write holds a credential (``SecretScan.check``).

    ``hits`` name each file, line, event and rule — never the value. Nothing was written;
    a layer that knows how the user runs agentreel adds what to do (the re-record command).
    """

    def __init__(self, hits: tuple[SecretHit, ...]) -> None:
        self.hits = hits
        listing = "\n  ".join(hit.describe() for hit in hits)
        super().__init__(f"refusing to write a credential ({len(hits)} found):\n  {listing}")


class RecordSettingsError(SessionError, ValueError):
    """A record setting with a value that cannot be used (``RecordSettings``): ``setting``
    the field's name, ``problem`` what is wrong, in words a located message puts after the
    file and key."""

    def __init__(self, setting: str, problem: str) -> None:
        self.setting = setting
        self.problem = problem
        super().__init__(f"{setting}: {problem}")
