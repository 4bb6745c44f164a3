"""The messages of MCP replay failures: session, server, tool, a readable argument diff and
the re-record command, in at most 20 lines (SPEC 19)."""

from __future__ import annotations

import json
from typing import Any

from agentreel.mcp_replay._layout import shown_path
from agentreel.mcp_replay._recording import (
    Message,
    RecordedConnection,
    arguments_of,
    describe_call,
)
from agentreel.session import rerecord_command

MAX_DIFF_LINES = 8
_VALUE_WIDTH = 60
_ABSENT = object()


def session_label(session: str | None) -> str:
    if session is None:
        return "a session without identity (bound by call order and content)"
    return f"session {session!r}"


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key in sorted(value):
            out.update(_flat(value[key], f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, item in enumerate(value):
            out.update(_flat(item, f"{prefix}[{i}]"))
        return out
    return {prefix or "(value)": value}


def _shown(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 1] + "…"


def argument_diff(recorded: Any, live: Any) -> list[str]:
    """One line per argument that differs: ``name: recorded → live``."""
    left, right = _flat(recorded), _flat(live)
    lines = [
        f"    {key}: {_shown(left.get(key, _ABSENT))} → {_shown(right.get(key, _ABSENT))}"
        for key in sorted(left.keys() | right.keys())
        if left.get(key, _ABSENT) != right.get(key, _ABSENT)
    ]
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"    … and {len(lines) - MAX_DIFF_LINES} more"]
    return lines


def _arguments(message: Message) -> list[str]:
    arguments = arguments_of(message)
    if arguments in ({}, None):
        return ["    (none)"]
    flat = _flat(arguments)
    lines = [f"    {key}: {_shown(value)}" for key, value in flat.items()]
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"    … and {len(lines) - MAX_DIFF_LINES} more"]
    return lines


def _head(server: str, session: str | None, recording: RecordedConnection | None) -> str:
    where = f" (recording {shown_path(recording.path)})" if recording else ""
    return f"MCP replay of server {server!r}, {session_label(session)}{where}:"


def _tail(scenario: str | None) -> str:
    return f"Re-record: {rerecord_command(scenario or '<scenario>')}"


def differs(
    server: str,
    session: str | None,
    recording: RecordedConnection,
    position: int,
    live: Message,
    scenario: str | None,
) -> str:
    recorded = recording.steps[position].message
    lines = [_head(server, session, recording)]
    if recorded.get("method") != live.get("method") or describe_call(recorded) != describe_call(
        live
    ):
        lines += [
            f"  message {position + 1} is {describe_call(live)}; the recording has "
            f"{describe_call(recorded)} there",
            "  arguments (recorded → live):",
        ]
    else:
        lines += [
            f"  message {position + 1}, {describe_call(live)}: its arguments differ from the "
            "recording (recorded → live):"
        ]
    lines += argument_diff(arguments_of(recorded), arguments_of(live))
    lines.append(_tail(scenario))
    return "\n".join(lines)


def unrecorded(
    server: str,
    session: str | None,
    recording: RecordedConnection | None,
    position: int,
    live: Message,
    scenario: str | None,
) -> str:
    lines = [_head(server, session, recording)]
    if recording is None:
        lines.append(
            f"  {describe_call(live)}: no recording of {server!r} for this session holds it "
            "(each recorded connection is taken, or none matches this connection's calls)"
        )
    else:
        lines.append(
            f"  message {position + 1}, {describe_call(live)}, is not in the recording "
            f"(it ends after {len(recording.steps)} messages)"
        )
    lines.append("  arguments:")
    lines += _arguments(live)
    lines.append(_tail(scenario))
    return "\n".join(lines)


def never_made(recording: RecordedConnection, consumed: int, scenario: str | None) -> str:
    missing = recording.steps[consumed:]
    first = missing[0].message
    lines = [
        _head(recording.server, recording.session, recording),
        f"  recorded message {consumed + 1}, {describe_call(first)}, was never made"
        + (f" ({len(missing)} left unanswered in all)" if len(missing) > 1 else ""),
        "  arguments:",
        *_arguments(first),
        _tail(scenario),
    ]
    return "\n".join(lines)
