"""Collecting every session log under a sessions root, in session order."""

from __future__ import annotations

from pathlib import Path

from agentreel.session._loader import SessionLog, load_session_log
from agentreel.session._order import order_sessions


def harvest_session_logs(root: Path | str) -> list[SessionLog]:
    """Every ``.jsonl`` in every bucket under ``root``, loaded, in session order."""
    logs = [load_session_log(path) for path in sorted(Path(root).glob("*/*.jsonl"))]
    return order_sessions(logs, lambda log: log.header)
