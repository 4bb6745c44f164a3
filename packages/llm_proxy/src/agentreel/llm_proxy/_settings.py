"""What a proxy run is configured with (``ProxySettings``), its modes and limits, and how
calls are recorded (``RecordSettings``)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypedDict

from agentreel.llm_proxy.exceptions import ProxyConfigError, RecordSettingsError
from agentreel.llm_replay import ReplaySettings, ReplaySettingsKeywords
from agentreel.session import checked_allowlist

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


@dataclass(frozen=True, slots=True)
class RecordSetting:
    """What one record setting is: its flag of ``agentreel proxy record`` (given once per
    item: every record setting is a list), the flag's metavar and help, and its check (the
    value as the field holds it, or ``ValueError`` saying what is wrong)."""

    flag: str
    metavar: str
    help: str
    check: Callable[[object], Any]


def _record_setting(default: Any, **spec: Any) -> Any:
    return field(default=default, metadata={"setting": RecordSetting(**spec)})


@dataclass(frozen=True, slots=True)
class RecordSettings:
    """How calls are recorded, beyond what both modes share (``ReplaySettings``: masks,
    captures): one value, checked when made.

    Every way of recording takes this value and nothing else for these settings: the proxy
    (``ProxySettings.record``; ``start_proxy``'s and ``start_drifted_proxy``'s keywords of
    the same names; ``agentreel proxy record``'s flags, built from the fields below), a
    scenario's ``[record]`` table (``RecordConfig.proxy``) and the pytest fixture's
    ``agentreel_config``. **Adding a record setting** is one field here, ``name: type =
    _record_setting(default, flag=..., metavar=..., help=..., check=...)``, and the same
    name in ``RecordSettingsKeywords``; the code that acts on it reads
    ``settings.record.<name>``. A bad value is a ``RecordSettingsError`` naming it."""

    allow_secrets: tuple[str, ...] = _record_setting(
        (),
        flag="--allow-secret",
        metavar="SHA256",
        help="the sha256 of a value the secret scan lets through (a deliberate fake key of a "
        "test; a refusal prints each value's digest). Repeatable",
        check=checked_allowlist,
    )
    """sha256 digests of values the secret scan lets through (deliberate fake keys)."""

    def __post_init__(self) -> None:
        for name, spec in self.specs().items():
            try:
                object.__setattr__(self, name, spec.check(getattr(self, name)))
            except ValueError as error:
                raise RecordSettingsError(name, str(error)) from None

    @staticmethod
    def specs() -> dict[str, RecordSetting]:
        """Each setting's ``RecordSetting``, by field name."""
        return {f.name: f.metadata["setting"] for f in fields(RecordSettings)}

    @staticmethod
    def names() -> tuple[str, ...]:
        return tuple(RecordSettings.specs())

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> RecordSettings:
        """The settings ``values`` names (a scenario's ``[record]`` keys, the fixture's
        config), the others at their defaults; a name that is no record setting is a
        ``RecordSettingsError``."""
        unknown = sorted(set(values) - set(cls.names()))
        if unknown:
            raise RecordSettingsError(
                unknown[0], f"not a record setting; known: {', '.join(cls.names())}"
            )
        return cls(**values)  # type: ignore[arg-type]

    def keywords(self) -> dict[str, Any]:
        """The settings as keywords of the same names (``start_proxy(**...)``)."""
        return {name: getattr(self, name) for name in self.names()}

    @staticmethod
    def add_flags(parser: argparse.ArgumentParser, *, only: str = "") -> None:
        """A flag for each setting, from its ``RecordSetting`` (the CLI declares none);
        ``only`` starts each help text (when a mode takes them in one case only)."""
        for name, spec in RecordSettings.specs().items():
            parser.add_argument(
                spec.flag,
                dest=name,
                action="append",
                default=argparse.SUPPRESS,
                metavar=spec.metavar,
                help=only + spec.help,
            )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RecordSettings:
        """The flags ``add_flags`` added, as given."""
        return cls.from_mapping({name: getattr(args, name) for name in cls.names() if name in args})


class RecordSettingsKeywords(TypedDict, total=False):
    """``RecordSettings``' fields as keywords (``start_proxy``, ``start_drifted_proxy``)."""

    allow_secrets: tuple[str, ...]


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
