"""``agentreel proxy replay --record-drifted --upstream URL`` and the fixture's
``--agentreel-record=drifted``: re-record only the sessions that drift, through the proxy
(SPEC 20).

Two runs on one server. The *replay* run answers from the recording; a caller whose call
the recording cannot answer as recorded goes live there (``LiveCallers``): that call and
its later ones are forwarded to the upstream as they came (``live_upstream``). In front
of it the *record* run — the one clients point at — records everything the replay run
answers, replayed and live alike, exactly as a record run through the proxy records
(lanes, ``request/header``, chunks, the bytes in ``wire.ndjson``, the secret scan). On
close the record run's recording is merged into the replayed one by the one rule
(``agentreel.llm_replay.merge_drifted``): the sessions that never went live keep their
recorded files and answers byte for byte; the others are the new recording's, under the
recorded ids. Callers are matched by their identity (the ``x-agentreel-*`` headers, the
headers real agents send); a caller without one by the conversation the record run found
it is (by content, chaining and lineage, as it records headerless callers), which the
record run tells the replay run in ``LANE_HEADER``: one headerless conversation drifting
sends only it live.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Unpack

import msgspec

from agentreel.llm_proxy._run import ProxyRun
from agentreel.llm_proxy._server import ProxyServer
from agentreel.llm_proxy._settings import ProxySettings
from agentreel.llm_proxy._verbatim import read_verbatim, verbatim_file
from agentreel.llm_replay import (
    DriftedReport,
    DriftedSummary,
    LiveCaller,
    LiveLog,
    Merged,
    Prices,
    RecordedLog,
    ReplaySettings,
    SessionFate,
    gap_names,
    gapless_copy,
    merge_drifted,
    read_drifted_report,
    read_report,
    with_recorded_names,
    write_merged,
)
from agentreel.session import (
    MODELS_FILE,
    VERBATIM_FILE,
    RecordSettings,
    RecordSettingsKeywords,
    load_session_log,
)


@dataclass(slots=True)
class DriftedProxy:
    """The runs of a drifted recording: ``run`` is what clients point at (its
    ``base_url``, ``environment()``); after the block, ``merged`` and ``written``."""

    run: ProxyRun
    replay: ProxyRun
    fixture: Path
    merged: Merged | None = None
    upstream_calls: int = 0
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def summary(self, prices: Prices | None = None) -> DriftedSummary | None:
        """Per session kept / re-recorded from call k / new / dropped, and the totals (the
        money not spent with ``prices``); ``None`` before the merge."""
        if self.merged is None:
            return None
        return DriftedSummary(str(self.fixture), self.merged.fates, self.upstream_calls, prices)

    def report(self, prices: Prices | None = None) -> str:
        """``summary`` as the lines printed at the end."""
        summary = self.summary(prices)
        return summary.text() if summary is not None else "nothing merged"


@contextlib.asynccontextmanager
async def start_drifted_proxy(
    *,
    fixture: str | os.PathLike[str],
    upstream: str,
    cwd: str | os.PathLike[str] | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    replay: ReplaySettings | None = None,
    scenario: str | None = None,
    record: RecordSettings | None = None,
    server: ProxyServer | None = None,
    **settings: Unpack[RecordSettingsKeywords],
) -> AsyncIterator[DriftedProxy]:
    """Serve a drifted recording of ``fixture`` for the ``async with`` block (module
    docstring); on exit merge it into ``fixture`` (changed files only). ``record`` (with
    its keywords laid over, ``allow_secrets``) is how the drifted sessions are recorded.
    ``server``: an open server to serve the runs on (the fixture's per-worker proxy); else
    one is started for the block."""
    record_settings = replace(record or RecordSettings(), **settings)
    directory = Path(fixture)
    live_cwd = os.fspath(cwd) if cwd is not None else os.getcwd()
    own = server is None
    if server is None:
        server = await ProxyServer(host=host, port=port).start()
    with tempfile.TemporaryDirectory(prefix="agentreel-drifted-") as staging_text:
        staging = Path(staging_text)
        common: dict[str, Any] = {"cwd": live_cwd, "scenario": scenario, "replay": replay}
        replaying = await server.open_run(
            drifted_replay_settings(directory, upstream, staging, **common)
        )
        recording = await server.open_run(
            drifted_record_settings(replaying.base_url, staging, record=record_settings, **common)
        )
        drifted = DriftedProxy(recording, replaying, directory)
        try:
            yield drifted
        finally:
            await recording.close()
            await replaying.close()
            if own:
                await server.close()
            merge_drifted_run(drifted, staging, live_cwd)


def drifted_replay_settings(
    fixture: Path,
    upstream: str,
    staging: Path,
    *,
    replay: ReplaySettings | None = None,
    **common: Any,
) -> ProxySettings:
    """The replay run of a drifted recording: its report and drifted report in
    ``staging``, the drifted callers forwarded to ``upstream``. ``replay``'s drift is
    checked whatever it says: a drift is what sends a caller live. A fixture whose
    numbering has a gap (a deleted session's file) is replayed from a copy in ``staging``
    numbered without it (``gapless_copy``); the merge writes into ``fixture``."""
    given = replay or ReplaySettings()
    return ProxySettings(
        mode="replay",
        # Named as the fixture: what replay's messages call it.
        fixture=gapless_copy(fixture, staging / REPLAYED_DIR / fixture.name),
        report=staging / REPLAY_REPORT,
        replay=given.with_values({"drift": "error", "drift_dir": staging / "drift"}),
        live_upstream=upstream,
        drifted_report=staging / DRIFTED_REPORT,
        **common,
    )


def drifted_record_settings(
    replay_url: str, staging: Path, *, replay: ReplaySettings | None = None, **common: Any
) -> ProxySettings:
    """The record run in front of the replay run at ``replay_url``: what clients use; it
    records with ``replay``'s masks and captures."""
    given = replay or ReplaySettings()
    return ProxySettings(
        mode="record",
        upstream=replay_url,
        fixture=staging / RECORDED_DIR,
        forward_identity=True,
        replay=ReplaySettings().with_values({"masks": given.masks, "captures": given.captures}),
        **common,
    )


REPLAY_REPORT = "replay-report.json"
DRIFTED_REPORT = "drifted.json"
RECORDED_DIR = "recorded"
REPLAYED_DIR = "replayed"  # a fixture with a numbering gap, renumbered


def merge_drifted_run(
    drifted: DriftedProxy,
    staging: Path,
    cwd: str,
    check: Callable[[dict[str, bytes]], None] | None = None,
) -> None:
    """After both runs closed: their errors, else the merge written into the fixture
    (``drifted.merged``, ``written``, ``removed``). ``check`` sees the files that are new
    before anything is written (a caller's own secret scan: raising stops the write)."""
    drifted.errors = [*drifted.run.errors, *drifted.replay.errors]
    if not drifted.errors:
        _merge_into(drifted, staging, cwd, check)


def _merge_into(
    drifted: DriftedProxy,
    staging: Path,
    cwd: str,
    check: Callable[[dict[str, bytes]], None] | None,
) -> None:
    directory = drifted.fixture
    recorded_dir = staging / RECORDED_DIR
    assert drifted.run.recorder is not None
    callers = drifted.run.recorder.sessions_by_caller()
    consumption = read_report(staging / REPLAY_REPORT)
    live_report = (
        read_drifted_report(staging / DRIFTED_REPORT)
        if (staging / DRIFTED_REPORT).is_file()
        else DriftedReport()
    )
    drifted.upstream_calls = live_report.upstream_calls
    # The replay run knows callers by identity; the record run's logs by the session ids
    # it gave them: one name for both. A headerless conversation is named by the session
    # the record run recorded it as (``held``: the replay bound it without identity).
    consumption = msgspec.structs.replace(
        consumption,
        scripts=[
            msgspec.structs.replace(
                s,
                bound_to=live_report.held.get(s.file) or callers.get(s.bound_to or "", s.bound_to),
            )
            for s in consumption.scripts
        ],
    )
    live_report = msgspec.structs.replace(
        live_report,
        live=[
            LiveCaller(
                caller=callers.get(c.caller, c.caller),
                file=c.file,
                from_call=c.from_call,
                why=c.why,
            )
            for c in live_report.live
        ],
    )
    # The logs as the replay run read them: renumbered when the fixture has a gap.
    replayed = staging / REPLAYED_DIR / directory.name
    recorded = _logs(replayed if replayed.is_dir() else directory)
    live = [LiveLog(log.header, log.data) for log in _logs(recorded_dir)]
    merged = merge_drifted(recorded, live, consumption, live_report)
    merged = with_recorded_names(merged, gap_names(directory))
    drifted.merged = merged
    answers = _merged_answers(directory, recorded_dir, merged, cwd)
    files = dict(merged.files)
    files[VERBATIM_FILE] = answers
    if not (directory / MODELS_FILE).is_file() and (recorded_dir / MODELS_FILE).is_file():
        files[MODELS_FILE] = (recorded_dir / MODELS_FILE).read_bytes()
    if check is not None:
        check({name: files[name] for name in [*merged.new_files, VERBATIM_FILE]})
    drifted.written, drifted.removed = write_merged(directory, files)


def _logs(directory: Path) -> list[RecordedLog]:
    logs: list[RecordedLog] = []
    for path in sorted(directory.glob("session*.jsonl")):
        logs.append(RecordedLog(path.name, load_session_log(path).header, path.read_bytes()))
    return logs


def _merged_answers(directory: Path, recorded_dir: Path, merged: Merged, cwd: str) -> bytes:
    """``wire.ndjson`` of the merged recording: a kept session's answers as they were, the
    others' from the new recording under their merged ids."""
    kept_ids = {
        fate_id for fate, fate_id in _ids(merged) if fate.status == "kept" and fate_id is not None
    }
    old = read_verbatim(directory) if (directory / VERBATIM_FILE).is_file() else {}
    new = read_verbatim(recorded_dir) if (recorded_dir / VERBATIM_FILE).is_file() else {}
    calls = [call for (session, _), call in old.items() if session in kept_ids]
    for (session, _), call in new.items():
        final = merged.ids.get(session, session)
        if final not in kept_ids:
            calls.append(msgspec.structs.replace(call, session=final))
    calls.sort(key=lambda call: (call.session, call.turn))
    return verbatim_file(calls, cwd)


def _ids(merged: Merged) -> list[tuple[SessionFate, str | None]]:
    out: list[tuple[SessionFate, str | None]] = []
    for fate in merged.fates:
        data = merged.files.get(fate.file or "")
        out.append((fate, load_header_id(data) if data is not None else None))
    return out


def load_header_id(data: bytes) -> str:
    first = data.split(b"\n", 1)[0]
    header: dict[str, object] = msgspec.json.decode(first)
    return str(header["id"])
