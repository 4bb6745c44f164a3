"""What a proxy run is configured with (``ProxySettings``), its modes and limits."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentreel.llm_proxy.exceptions import ProxyConfigError
from agentreel.llm_replay import ReplaySettings, ReplaySettingsKeywords
from agentreel.session import RecordSettings, RecordSettingsKeywords

Mode = Literal["record", "replay"]
MODES: tuple[Mode, ...] = ("record", "replay")
DEFAULT_MAX_BODY = 32 * 1024 * 1024
REPLAY_ERROR_STATUS = 400
"""Replay errors are 400s: no SDK retries them, and each SDK raises its bad-request error
carrying the message (which names the problem and the re-record command)."""

SHUTDOWN_GRACE = 0.5
"""Seconds a stream in flight may still take to end once the proxy is stopping (a signal,
end of stdin, ``close()``); then it is cut, and what it streamed so far is kept and sealed
as interrupted. Short: whoever stops the proxy may kill it soon after (aiohttp's own
default would wait a minute)."""


class ProxySettingsKeywords(ReplaySettingsKeywords, RecordSettingsKeywords, total=False):
    """``start_proxy``'s setting keywords: every replay and record setting by name."""


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """Everything a proxy run is configured with (see ``start_proxy``)."""

    mode: Mode
    upstream: str | None = None
    sessions_root: Path | None = None
    fixture: Path | None = None
    report: Path | None = None
    host: str = "127.0.0.1"
    port: int = 0
    cwd: str = field(default_factory=os.getcwd)
    scenario: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY
    record: RecordSettings = field(default_factory=RecordSettings)
    """How calls are recorded (``RecordSettings``, checked when made): the secret scan's
    allowlist."""
    replay: ReplaySettings = field(default_factory=ReplaySettings)
    """How calls are recorded and replayed (``agentreel.llm_replay.ReplaySettings``, checked
    when made): the masks and captures in both modes; drift, its files' folder, partial
    lanes and the recorded schedule in replay."""
    live_upstream: str | None = None
    """Replay (SPEC 20): where a caller's calls go from its first call the recording cannot
    answer as recorded (drift, an unrecorded session, a used-up script) — forwarded as
    they came, the answer relayed back; ``None``: such a call is a replay error. Set by
    ``start_drifted_proxy``, not a replay setting a user gives."""
    forward_identity: bool = False
    """Record: send each caller's resolved identity on as the explicit headers (the
    upstream is another agentreel proxy: ``--record-drifted``'s replay run); never to a
    provider."""
    drifted_report: Path | None = None
    """Replay with ``live_upstream``: where the drifted report is written
    (``agentreel.llm_replay.DriftedReport``: who went live from which call)."""

    def check(self) -> None:
        if self.mode not in MODES:
            raise ProxyConfigError(f"mode must be record or replay, got {self.mode!r}")
        if self.mode == "record":
            if not self.upstream:
                raise ProxyConfigError(
                    "record mode needs upstream=URL: the real provider or the stub server to "
                    "forward to (e.g. http://127.0.0.1:PORT from python -m agentreel.llm.stub)"
                )
            if not self.upstream.startswith(("http://", "https://")):
                raise ProxyConfigError(f"upstream {self.upstream!r} is not an http(s) URL")
            if self.sessions_root is None and self.fixture is None:
                raise ProxyConfigError(
                    "record mode needs sessions_root=DIR (session logs written there) or "
                    "fixture=DIR (harvested into a fixture directory on close)"
                )
        elif self.fixture is None:
            raise ProxyConfigError(
                "replay mode needs fixture=DIR: the directory holding session.jsonl"
            )
        if self.live_upstream is not None and (
            self.mode != "replay" or not self.live_upstream.startswith(("http://", "https://"))
        ):
            raise ProxyConfigError(
                f"live_upstream {self.live_upstream!r}: replay only, an http(s) URL (the "
                "provider the drifted sessions are recorded from)"
            )


DUMMY_KEY = "agentreel-proxy-not-a-secret"
"""What a client of the proxy may send as its key where none is needed (replay; the stub
ignores keys): it must not look like (or be scanned as) a credential."""
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY")
"""The key variables of the SDKs the proxy serves."""
