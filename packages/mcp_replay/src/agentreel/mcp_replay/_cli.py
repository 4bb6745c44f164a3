"""``python -m agentreel.mcp_replay stdio ... -- <server command>`` (the shim) and
``... check`` (the end-of-run check: failures and recorded calls never made)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from agentreel.mcp_replay._replay import RunState, check_replayed
from agentreel.mcp_replay._settings import McpSettings, check_server_name
from agentreel.mcp_replay._stdio import record_stdio, replay_stdio
from agentreel.mcp_replay.exceptions import McpConfigError, McpReplayError
from agentreel.session import KeyMask, Mask, RecordSettings, RecordSettingsError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentreel-mcp")
    commands = parser.add_subparsers(dest="command", required=True)
    stdio = commands.add_parser("stdio", help="stand where an agent starts a stdio MCP server")
    stdio.add_argument("--server", required=True)
    stdio.add_argument("--mode", required=True, choices=("record", "replay"))
    stdio.add_argument("--recordings", required=True, type=Path)
    stdio.add_argument("--state", required=True, type=Path)
    stdio.add_argument("--scenario")
    stdio.add_argument("--cwd")
    stdio.add_argument("--mask", action="append", default=[], metavar="TOKEN=REGEX")
    stdio.add_argument("--key-mask", action="append", default=[], metavar="TOKEN=KEY")
    RecordSettings.add_flags(stdio)
    stdio.add_argument("server_command", nargs=argparse.REMAINDER)
    check = commands.add_parser("check", help="fail on drift or recorded calls never made")
    check.add_argument("--recordings", required=True, type=Path)
    check.add_argument("--state", required=True, type=Path)
    check.add_argument("--scenario")
    return parser


def _masks(values: list[str], keys: list[str]) -> tuple[Mask | KeyMask, ...]:
    masks: list[Mask | KeyMask] = []
    for option, given, form in (("--mask", values, "REGEX"), ("--key-mask", keys, "KEY")):
        for value in given:
            token, sep, rest = value.partition("=")
            if not sep:
                raise McpConfigError(f"{option} {value!r}: give it as TOKEN={form}")
            try:
                masks.append(
                    Mask.checked(rest, token) if form == "REGEX" else KeyMask.checked(rest, token)
                )
            except ValueError as exc:
                raise McpConfigError(f"{option} {value!r}: {exc}") from None
    return tuple(masks)


def _record_settings(args: argparse.Namespace) -> RecordSettings:
    """The record flags given as one ``RecordSettings`` (a bad one: argparse's usage error)."""
    try:
        return RecordSettings.from_args(args)
    except RecordSettingsError as error:
        _parser().error(f"argument {RecordSettings.specs()[error.setting].flag}: {error.problem}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "check":
            check_replayed(args.recordings, args.state, args.scenario)
            return 0
        settings = McpSettings(
            mode=args.mode,
            recordings=args.recordings,
            state=args.state,
            scenario=args.scenario,
            cwd=args.cwd,
            masks=_masks(args.mask, args.key_mask),
            record=_record_settings(args),
        )
        server = check_server_name(args.server)
        command = list(args.server_command)
        if command[:1] == ["--"]:
            command = command[1:]
        if settings.mode == "replay":
            return replay_stdio(settings, server, sys.stdin.buffer, sys.stdout.buffer)
        return asyncio.run(record_stdio(settings, server, command))
    except McpReplayError as exc:
        if args.command == "stdio":
            RunState(args.state).fail(args.server, str(exc))
        print(f"agentreel-mcp: {exc}", file=sys.stderr)
        return 1
