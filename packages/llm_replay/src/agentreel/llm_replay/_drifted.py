"""Replay that re-records only what drifted (SPEC 20): the ``replay-drifted`` provider.

Every call is first offered to the replay provider (binding, cursor, drift check as in
SPEC 5). The first call of a caller that the recording cannot answer as recorded — its
request differs after masks (``RequestDriftError``), the recording holds no session for it
(``UnrecordedSessionError``) or its script is used up (``ScriptExhaustedError``) — and
every later call of that caller go to the upstream provider instead, live. Callers that
never drift are served their recorded calls unchanged. A parent whose next request drifts
because a re-recorded child answered differently goes live from that call on, by the same
rule: the rule is per caller and per call, never per tree.

The agent writes every session's log as it always does; the drifted report
(``drifted_report``) says which recorded script each caller was bound to and from which
call it went live, so whoever merges the run into the recording (the harness's
``agentreel record --drifted``) keeps the recorded files of the callers that never did.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from agentreel.llm import (
    Chunk,
    GenerateOptions,
    Provider,
    ProviderNotFoundError,
    available_providers,
    load_provider,
)
from agentreel.llm_replay._failures import ANONYMOUS
from agentreel.llm_replay._fixture import Script
from agentreel.llm_replay._provider import ReplayProvider, create_replay_provider
from agentreel.llm_replay.exceptions import (
    ReplayError,
    RequestDriftError,
    ScriptExhaustedError,
    UnrecordedSessionError,
)
from agentreel.session import WireApi

DRIFTED_REPORT_FORMAT = "agentreel-drifted-report"
DRIFTED_REPORT_VERSION = 1

# What makes a caller go live: each is a call the recording cannot answer as recorded.
GOES_LIVE = (RequestDriftError, UnrecordedSessionError, ScriptExhaustedError)
_WHY = {
    RequestDriftError: "drift",
    UnrecordedSessionError: "unrecorded",
    ScriptExhaustedError: "exhausted",
}


class LiveCaller(msgspec.Struct, frozen=True, kw_only=True):
    """A caller that went live: its recorded script's file (``None``: a session the
    recording does not hold), the first live call (1-based, of the caller's calls) and why
    (``drift``, ``unrecorded`` or ``exhausted``)."""

    caller: str
    file: str | None
    from_call: int
    why: str


class DriftedReport(msgspec.Struct, frozen=True, kw_only=True):
    """The drifted report file: every caller that went live, and how many calls the
    upstream answered."""

    format: str = DRIFTED_REPORT_FORMAT
    version: int = DRIFTED_REPORT_VERSION
    live: list[LiveCaller] = msgspec.field(default_factory=list)
    upstream_calls: int = 0
    held: dict[str, str] = msgspec.field(default_factory=dict)
    """Recorded script file → the caller key of the conversation that held it, for
    callers the replay bound without identity (the drifted proxy names each headerless
    conversation by its record run's session: the consumption report says only
    ``<anonymous>`` for them)."""


def read_drifted_report(path: str | os.PathLike[str]) -> DriftedReport:
    """Load the file ``DriftedProvider`` writes (``drifted_report``)."""
    return msgspec.json.decode(Path(path).read_bytes(), type=DriftedReport)


class DriftTolerantReplayProvider(ReplayProvider):
    """The replay provider whose drifts are not errors of the run: each one sends its
    caller live (``LiveCallers``), so it is reported as that, not as a replay failure."""

    def _note_error(self, error: ReplayError) -> None:
        if isinstance(error, GOES_LIVE):
            return
        super()._note_error(error)


@dataclass(slots=True)
class _Live:
    file: str | None
    from_call: int
    why: str


class LiveCallers:
    """Which callers went live and from which call; the drifted report. Shared by the
    in-process provider and the proxy's replay (``agentreel proxy replay
    --record-drifted``)."""

    def __init__(
        self, replay: ReplayProvider, report_path: str | os.PathLike[str] | None = None
    ) -> None:
        self.replay = replay
        self._report_path = Path(report_path) if report_path is not None else None
        self._live: dict[str, _Live] = {}
        self._calls: dict[str, int] = {}  # calls made so far, per caller
        self._held: dict[str, str] = {}  # script file → the headerless caller holding it
        self.upstream_calls = 0

    def call(self, key: str) -> bool:
        """Count a call of ``key``; whether it goes to the upstream (``key`` is live)."""
        self._calls[key] = self._calls.get(key, 0) + 1
        if key in self._live:
            self.upstream_calls += 1
            return True
        return False

    def holds(self, key: str, script: Script) -> None:
        """Caller ``key``, bound without identity (a headerless conversation the drifted
        proxy names), was served from ``script``: the merge knows it by ``key``."""
        self._held.setdefault(script.file, key)

    def went_live(self, key: str, error: ReplayError, script: Script | None = None) -> None:
        """``key``'s current call met ``error`` (one of ``GOES_LIVE``): it and every later
        call of ``key`` go to the upstream. ``script``: the recorded script the call was
        bound to, for a caller without identity (``ReplayProvider.last_bound``); a named
        caller's is the one bound to its identity."""
        bound = self.replay.consumption_report().scripts
        if script is not None:
            self.holds(key, script)
            found = next((s for s in bound if s.file == script.file), None)
        else:
            found = next((s for s in bound if s.bound_to == key), None)
        script_report = found
        why = _WHY[type(error)]
        # The call's position in the recorded script where there is one (a drifted call
        # advanced the cursor; an exhausted script's next call is one past its end).
        if script_report is None:
            from_call = self._calls.get(key, 1)
        elif why == "exhausted":
            from_call = script_report.consumed + 1
        else:
            from_call = script_report.consumed
        file = script_report.file if script_report is not None else None
        self._live[key] = _Live(file, from_call, why)
        self.upstream_calls += 1
        self.write_report()

    def report(self) -> DriftedReport:
        return DriftedReport(
            live=[
                LiveCaller(caller=key, file=live.file, from_call=live.from_call, why=live.why)
                for key, live in self._live.items()
            ],
            upstream_calls=self.upstream_calls,
            held=dict(self._held),
        )

    def write_report(self) -> None:
        if self._report_path is None:
            return
        self._report_path.parent.mkdir(parents=True, exist_ok=True)
        self._report_path.write_bytes(msgspec.json.encode(self.report()))


class DriftedProvider:
    """Replay, with the callers that drift answered by ``upstream`` from their first
    drifted call on (module docstring). ``replay`` is the replay provider (a
    ``DriftTolerantReplayProvider``: its consumption report lists no drift as an error);
    ``report_path`` is where the drifted report is written (after each caller goes live
    and at close)."""

    def __init__(
        self,
        replay: ReplayProvider,
        upstream: Provider | Callable[[], Provider],
        *,
        report_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.replay = replay
        # Made on the first drifted call: a run where nothing drifts never builds (nor
        # closes) a provider SDK's client.
        self._upstream: Provider | None = None if callable(upstream) else upstream
        self._make_upstream = upstream if callable(upstream) else None
        self.live = LiveCallers(replay, report_path)

    @property
    def upstream_calls(self) -> int:
        return self.live.upstream_calls

    def stream(
        self, options: GenerateOptions, *, api: WireApi | None = None
    ) -> AsyncIterator[Chunk]:
        key = options.session_id if options.session_id is not None else ANONYMOUS
        if not self.live.call(key):
            try:
                return self.replay.stream(options, api=api)
            except GOES_LIVE as error:
                self.live.went_live(key, error)
        return self.upstream.stream(options)

    @property
    def upstream(self) -> Provider:
        """The provider answering drifted calls (made when first needed)."""
        if self._upstream is None:
            assert self._make_upstream is not None
            self._upstream = self._make_upstream()
        return self._upstream

    def report(self) -> DriftedReport:
        return self.live.report()

    def write_report(self) -> None:
        self.live.write_report()

    def close(self) -> None:
        self.write_report()
        self.replay.close()
        close = getattr(self._upstream, "close", None)
        if callable(close):
            close()

    async def aclose(self) -> None:
        aclose = getattr(self._upstream, "aclose", None)
        if callable(aclose):
            await aclose()


def create_drifted_provider(*, live_cwd: str | None = None, **settings: Any) -> DriftedProvider:
    """The ``replay-drifted`` registry factory: the ``replay`` provider's settings, plus
    ``upstream_provider`` (a registered provider's name: ``stub``, ``openai``, …),
    ``upstream_settings`` (its keyword settings, a mapping or JSON text; a key comes from
    the environment as that provider reads it, never from here) and ``drifted_report``
    (where the drifted report is written)."""
    upstream_name = settings.pop("upstream_provider", None)
    if not upstream_name:
        raise TypeError(
            "the replay-drifted provider needs upstream_provider: the provider that answers "
            "the drifted calls (e.g. 'stub' with upstream_settings {'base_url': ...})"
        )
    upstream_settings = settings.pop("upstream_settings", None) or {}
    if isinstance(upstream_settings, str):
        upstream_settings = json.loads(upstream_settings)
    if not isinstance(upstream_settings, Mapping):
        raise TypeError("replay-drifted setting upstream_settings must be a JSON object")
    report_path = settings.pop("drifted_report", None) or None
    replay = create_replay_provider(live_cwd=live_cwd, **settings)
    # The same provider, its drifts not errors (a subclass adding no state: the factory's
    # parsing of settings is the replay provider's, kept in one place).
    replay.__class__ = DriftTolerantReplayProvider
    tolerant = replay
    name, keywords = str(upstream_name), dict(upstream_settings)
    if name not in available_providers():  # an unknown name fails now, nothing imported
        raise ProviderNotFoundError(name, available_providers())
    return DriftedProvider(
        tolerant, lambda: load_provider(name, **keywords), report_path=report_path
    )
