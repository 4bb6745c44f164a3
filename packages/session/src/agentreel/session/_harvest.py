"""Collecting every session log under a sessions root, in session order."""

from __future__ import annotations

from pathlib import Path

from agentreel.session._loader import SessionLog, load_session_log
from agentreel.session._order import order_sessions
from agentreel.session.exceptions import DuplicateSessionError


def harvest_session_logs(root: Path | str) -> list[SessionLog]:
    """Every ``.jsonl`` in every bucket under ``root``, loaded, in session order.

    A missing ``root`` yields no logs (the agent wrote none). Two logs claiming the same
    session id raise ``DuplicateSessionError`` naming both files; a bad log raises its
    ``SessionLogError``. Torn tails are kept in each log's ``torn_tail`` for the caller.
    """
    logs = [load_session_log(path) for path in sorted(Path(root).glob("*/*.jsonl"))]
    first_path: dict[str, Path] = {}
    for log in logs:
        seen = first_path.setdefault(log.header.id, log.path)
        if seen != log.path:
            raise DuplicateSessionError(log.header.id, seen, log.path)
    return order_sessions(logs, lambda log: log.header)
