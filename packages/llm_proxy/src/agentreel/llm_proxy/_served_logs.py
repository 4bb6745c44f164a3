"""Replay's served logs: the session logs of what a replay served, written as record
writes them (``LaneLogs``) — each replayed call in the log of the recorded script it was
bound to (SPEC 4, 11)."""

from __future__ import annotations

import msgspec

from agentreel.llm_proxy._lane_logs import CallRecording, Lane, LaneLogs
from agentreel.llm_replay import Script
from agentreel.llm_replay.lanes import lane_signature
from agentreel.session import RequestHeaderData, Session, now_ms


class ServedLogs(LaneLogs):
    """Replay's served logs: each replayed call is written into the log of the recorded
    script it was bound to, under that script's header (its id, time, parent, spawn index
    and origin; the live cwd), so the served logs have the recording's structure and
    session order whatever order the calls arrive in."""

    def begin_bound(self, script: Script, header: RequestHeaderData) -> CallRecording:
        key = str(script.number)
        lanes = self._lanes.get(key)
        if lanes is None:
            recorded = script.header
            mirrored = msgspec.structs.replace(recorded, cwd=self.cwd, seed_length=0)
            session = Session(self._store.path_for(mirrored), mirrored, [], now_ms)
            lanes = self._lanes[key] = [
                Lane(session=session, key=key, signature=lane_signature(header))
            ]
        (lane,) = lanes
        return self._start_call(lane, header)

    # Closing neither scans nor arranges (``LaneLogs``' defaults): served logs already have
    # the recording's structure, and are no recording — they replay one that was scanned
    # when written, and the goldens made from them are scanned by whoever writes those
    # (refresh, record).
