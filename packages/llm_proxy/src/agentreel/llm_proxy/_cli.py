"""``agentreel proxy record|replay`` / ``python -m agentreel.llm_proxy`` (SPEC 11).

Prints the base URL and the environment to export, writes ``--port-file`` once listening,
and stops on SIGTERM, SIGINT or end of standard input (when stdin is a pipe or a
terminal), flushing every log, the fixture and the report before it exits. Replay also
exports a dummy key (``DUMMY_KEY``) in each SDK's key variable, so a client that insists on
a key starts keyless. Exit status 0; 1 when the run failed — record: a refused secret, a
fixture that could not be written (the logs are kept, and said where), or no model call
received (nothing is written, not even an empty fixture folder); replay: a replay
error (unrecorded session, exhausted script, drift, a schedule divergence under
``--schedule recorded``) or recorded calls never made outside
the partial lanes, with the report written all the same; 2 on usage errors. A record run
that had to guess (a child numbered by arrival: ``Recorder.warnings``) still succeeds —
the recording is valid — and ends by naming each guess and the header that fixes it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shlex
import signal
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from agentreel.llm_proxy._record_command import NO_TRIALS, RecordTrials, record_proved
from agentreel.llm_proxy.exceptions import ProxyError
from agentreel.llm_replay import (
    DEFAULT_PRICES_FILE,
    ReplayError,
    ReplaySettings,
    ReplaySettingsError,
    find_prices,
)
from agentreel.session import RERECORD_COMMAND_ENV, RecordSettings, RecordSettingsError

_RECORD_EXAMPLE = """\
example:
  agentreel proxy record --upstream https://api.openai.com/v1 --fixture fixtures/mine
  (then point the agent at the printed base URL; Ctrl-C or SIGTERM writes the fixture)
  agentreel proxy record --upstream URL --fixture fixtures/mine -- python agent.py
  (runs the program with the proxy's environment, then replays the fixture through it
  under perturbations before keeping it)
"""
_REPLAY_EXAMPLE = """\
example:
  agentreel proxy replay --fixture fixtures/mine --report report.json
  (keyless: the agent gets the printed base URL and a dummy key)
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentreel proxy",
        description="A session-keyed model endpoint on 127.0.0.1: record through an upstream, "
        "or replay a fixture keylessly (OpenAI Chat Completions and Responses, Anthropic "
        "Messages).",
        epilog=_RECORD_EXAMPLE + _REPLAY_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    modes = parser.add_subparsers(dest="mode", required=True)
    record = modes.add_parser(
        "record",
        help="forward to --upstream and record every session",
        epilog=_RECORD_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    record.add_argument("--upstream", required=True, help="the real provider or stub server URL")
    target = record.add_mutually_exclusive_group(required=True)
    target.add_argument("--sessions-root", type=Path, help="write session logs under DIR")
    target.add_argument(
        "--fixture", type=Path, help="on exit, write the harvested logs as a fixture directory"
    )
    record.add_argument(
        "--trials",
        type=int,
        metavar="N",
        help="with a program after --: replay the fixture it wrote N times through it, each "
        "under another time zone, user, host and (one) date, before keeping it (default: "
        "[record] trials of agentreel's record settings, 3)",
    )
    replay = modes.add_parser(
        "replay",
        help="answer from --fixture, keyless and offline",
        epilog=_REPLAY_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replay.add_argument("--fixture", type=Path, required=True, help="holds session.jsonl")
    replay.add_argument("--report", type=Path, help="write the consumption report here")
    replay.add_argument(
        "--record-drifted",
        action="store_true",
        help="re-record only what drifted (SPEC 20): a session whose request differs from "
        "the recording, or that it does not hold, goes to --upstream from that call on and "
        "is recorded; the others keep their recorded files byte for byte. On exit the "
        "fixture is updated and a report printed. Sessions are told apart by identity "
        "headers",
    )
    replay.add_argument(
        "--upstream",
        help="with --record-drifted: the real provider or stub server URL (its key: the "
        "client's own auth header, never written)",
    )
    replay.add_argument(
        "--prices",
        type=Path,
        metavar="FILE",
        help="with --record-drifted: the price table the report counts the money not spent "
        f"with (default: {DEFAULT_PRICES_FILE} in the fixture's folder or the one above)",
    )
    replay.add_argument(
        "--sessions-root", type=Path, help="also write the session logs of what was served"
    )
    replay.add_argument(
        "--scenario",
        help="a harness scenario's name: re-record hints then name `agentreel record NAME` "
        "instead of this proxy's own record command",
    )
    # Record settings: record's, and a drifted replay's (what it re-records).
    RecordSettings.add_flags(record)
    RecordSettings.add_flags(replay, only="with --record-drifted: ")
    for sub in (record, replay):
        sub.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = a free one)")
        sub.add_argument("--port-file", type=Path, help="write the port here once listening")
        sub.add_argument("--cwd", help="the agents' working directory (paths → {{cwd}})")
        sub.add_argument("--max-body-bytes", type=int, default=32 * 1024 * 1024)
        sub.add_argument("-v", "--verbose", action="store_true", help="log every request")
    for mode, sub in (("record", record), ("replay", replay)):
        _add_replay_settings(sub, mode)
    return parser


def _add_replay_settings(parser: argparse.ArgumentParser, mode: str) -> None:
    """A flag for each ``ReplaySettings`` field that applies to ``mode``, from the field's
    own ``Setting`` (its flag, help, choices): the CLI declares none of them itself. A
    flag not given leaves its setting out (``ReplaySettings.from_mapping`` then checks
    what was given, as a scenario's keys are)."""
    for name, spec in ReplaySettings.specs().items():
        if mode not in spec.modes:
            continue
        default = getattr(ReplaySettings(), name)
        shown = f" (default: {default})" if default not in (None, ()) else ""
        parser.add_argument(
            ReplaySettings.flag(name),
            dest=name,
            action="append" if spec.kind.repeated() else "store",
            type=_flag_reader(name),
            default=argparse.SUPPRESS,
            metavar=spec.metavar or "|".join(spec.kind.choices()) or None,
            help=spec.help + ("; repeatable" if spec.kind.repeated() else shown),
        )


def _flag_reader(name: str) -> Callable[[str], object]:
    """Setting ``name``'s text reader as argparse's ``type`` (its problem as the usage
    error)."""
    parse = ReplaySettings.flag_reader(name)

    def read(text: str) -> object:
        try:
            return parse(text)
        except ReplaySettingsError as error:
            typed = "" if error.problem.startswith(repr(text)) else f"{text!r}: "
            raise argparse.ArgumentTypeError(typed + error.problem) from None

    return read


def _replay_settings(args: argparse.Namespace) -> ReplaySettings:
    """The flags given as one ``ReplaySettings`` (a bad one: argparse's usage error)."""
    given = {name: getattr(args, name) for name in ReplaySettings.names() if name in args}
    try:
        return ReplaySettings.from_mapping(given)
    except ReplaySettingsError as error:
        inside = f" ({error.key})" if error.key != error.setting else ""
        _parser().error(f"argument {ReplaySettings.flag(error.setting)}{inside}: {error.problem}")


def _record_settings(args: argparse.Namespace) -> RecordSettings:
    """The record flags given as one ``RecordSettings`` (a bad one: argparse's usage error)."""
    try:
        return RecordSettings.from_args(args)
    except RecordSettingsError as error:
        _parser().error(f"argument {RecordSettings.specs()[error.setting].flag}: {error.problem}")


def main(
    argv: Sequence[str] | None = None,
    *,
    out: TextIO | None = None,
    trials: RecordTrials = NO_TRIALS,
) -> int:
    """Run the proxy until a signal or stdin EOF — or, for ``record ... -- COMMAND``, until
    the command ends, proving the fixture by ``trials`` (``_record_command``); the exit
    status of the command line."""
    words = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in words:
        at = words.index("--")
        words, command = words[:at], words[at + 1 :]
    args = _parser().parse_args(words)
    args.command = command
    if command and (args.mode != "record" or args.fixture is None):
        _parser().error("a program after -- needs `record --fixture DIR` (it proves that fixture)")
    if args.mode == "record" and args.trials is not None and not command:
        _parser().error("--trials needs the program to replay after -- (record ... -- COMMAND)")
    args.record_trials = trials
    settings = _replay_settings(args)
    record = _record_settings(args)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="agentreel proxy: %(message)s",
        stream=sys.stderr,
    )
    try:
        with _rerecord_hint(args):
            return asyncio.run(_run(args, settings, record, out or sys.stdout))
    except (ProxyError, ReplayError) as error:
        print(f"agentreel proxy: {error}", file=sys.stderr)
        return 2


def _record_command(args: argparse.Namespace) -> str:
    """The ``agentreel proxy record`` command that records a replay run's fixture again,
    in the user's own arguments (``--fixture`` as typed, ``--cwd``, each replay setting
    that applies to record — ``--mask``, ``--capture`` —, ``--port``), ``{scenario}``
    where the fixture folder's name goes — the template of ``$AGENTREEL_RERECORD_COMMAND``
    (``agentreel.session.rerecord_command``, which every re-record hint comes from, names a
    fixture by its folder's name). Only the upstream is
    not known to replay: ``URL``."""
    typed = str(args.fixture).rstrip("/") or "/"
    name = args.fixture.name
    if name in ("", ".", ".."):
        # "." or "..": the folder's real name is what the hints are given.
        typed = str(args.fixture.resolve())
        name = args.fixture.resolve().name
    prefix = typed[: len(typed) - len(name)]
    words = ["agentreel", "proxy", "record", "--upstream", "URL"]
    words += ["--fixture", (shlex.quote(prefix) if prefix else "") + "{scenario}"]
    if args.cwd is not None:
        words += ["--cwd", shlex.quote(args.cwd)]
    for name, spec in ReplaySettings.specs().items():
        if "record" in spec.modes and name in args:  # as typed: --mask, --capture, ...
            given = getattr(args, name)
            for value in given if spec.kind.repeated() else [given]:
                words += [ReplaySettings.flag(name), shlex.quote(str(value))]
    if args.port:
        words += ["--port", str(args.port)]
    return " ".join(words)


@contextmanager
def _rerecord_hint(args: argparse.Namespace) -> Iterator[None]:
    """A standalone replay's re-record hints name the proxy's own record command (SPEC 11):
    ``agentreel record <fixture>`` is a harness command this user may not have. Kept when
    ``$AGENTREEL_RERECORD_COMMAND`` says how agentreel is run, or ``--scenario`` names a
    harness scenario; restored on exit (``main`` may run inside another program)."""
    if args.mode != "replay" or args.scenario is not None or os.environ.get(RERECORD_COMMAND_ENV):
        yield
        return
    os.environ[RERECORD_COMMAND_ENV] = _record_command(args)
    try:
        yield
    finally:
        os.environ.pop(RERECORD_COMMAND_ENV, None)


def _watch_stdin() -> bool:
    """True when stdin's end means 'stop' (a pipe, a socket or a terminal, not /dev/null)."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or sys.stdin.isatty()


async def _run(
    args: argparse.Namespace, settings: ReplaySettings, record: RecordSettings, out: TextIO
) -> int:
    from agentreel.llm_proxy._routes import unspoken_summary
    from agentreel.llm_proxy._run import NO_CALLS_RECORDED
    from agentreel.llm_proxy._server import start_proxy

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if args.command:
        return await record_proved(args, settings, record, out, stop, args.record_trials)
    if _watch_stdin():
        # The event loop watches fd 0 itself: a thread blocked in read() would hold the
        # stdin buffer's lock when a signal ends the process (a fatal error at shutdown).
        fd = sys.stdin.fileno()

        def readable() -> None:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(fd)
                stop.set()

        loop.add_reader(fd, readable)
    options: dict[str, Any] = {
        "port": args.port,
        "cwd": args.cwd,
        "max_body_bytes": args.max_body_bytes,
        "replay": settings,
    }
    if args.mode == "replay" and args.record_drifted:
        return await _run_drifted(args, out, stop, settings, record)
    if args.mode == "replay":
        drifted_only = [("--upstream", args.upstream), ("--prices", args.prices)]
        drifted_only += [(spec.flag, name in args) for name, spec in RecordSettings.specs().items()]
        given = next((flag for flag, value in drifted_only if value), None)
        if given is not None:
            print(f"agentreel proxy: {given} in replay needs --record-drifted", file=sys.stderr)
            return 2
    if args.mode == "record":
        context = start_proxy(
            "record",
            upstream=args.upstream,
            sessions_root=args.sessions_root,
            fixture=args.fixture,
            record=record,
            **options,
        )
    else:
        context = start_proxy(
            "replay",
            fixture=args.fixture,
            report=args.report,
            sessions_root=args.sessions_root,
            scenario=args.scenario,
            **options,
        )
    async with context as proxy:
        if args.port_file is not None:
            tmp = args.port_file.with_name(args.port_file.name + ".tmp")
            tmp.write_text(f"{proxy.port}\n")
            os.replace(tmp, args.port_file)
        print(f"agentreel proxy ({args.mode}) listening on {proxy.base_url}", file=out)
        for name, value in proxy.environment().items():
            print(f"export {name}={value}", file=out)
        out.flush()
        await stop.wait()
    errors = list(proxy.errors)
    recorder = proxy.recorder
    if recorder is not None and not recorder.recorded_any and not errors:
        # --sessions-root: nothing to refuse writing, but a record run nobody called failed
        # (or one whose calls were all on paths the proxy does not speak: said instead).
        where = f"--sessions-root {args.sessions_root}"
        errors.append(
            f"record: {unspoken_summary(proxy.unspoken)}, and no other call ({where})"
            if proxy.unspoken
            else NO_CALLS_RECORDED.format(where=where)
        )
    for error in errors:
        print(f"agentreel proxy: {error}", file=sys.stderr)
    failed = bool(errors)
    for warning in proxy.warnings:
        print(f"agentreel proxy: warning: {warning}", file=sys.stderr)
    if proxy.warnings and not failed:
        print(
            f"agentreel proxy: recorded, with {len(proxy.warnings)} guess(es) named above: "
            "the recording is written and valid (exit status 0), but not reproducible when "
            "children start at the same time until each is fixed",
            file=sys.stderr,
        )
    if proxy.provider is not None:
        consumption = proxy.provider.consumption_report()
        if not consumption.ok:
            failed = True
            report = f"; the report is {args.report}" if args.report is not None else ""
            print(
                f"agentreel proxy: replay of {args.fixture} failed: "
                f"{len(consumption.errors)} replay error(s), "
                f"{len(consumption.unconsumed())} script(s) with recorded calls never made "
                f"(each named above){report}",
                file=sys.stderr,
            )
    return 1 if failed else 0


async def _run_drifted(
    args: argparse.Namespace,
    out: TextIO,
    stop: asyncio.Event,
    settings: ReplaySettings,
    record: RecordSettings,
) -> int:
    """``replay --record-drifted --upstream URL``: serve until stopped, then merge what
    drifted into the fixture and print what was kept, re-recorded, new and dropped."""
    from agentreel.llm_proxy._drifted_proxy import start_drifted_proxy

    if not args.upstream:
        print(
            "agentreel proxy: --record-drifted needs --upstream URL (the provider or stub "
            "server the drifted sessions are recorded from)",
            file=sys.stderr,
        )
        return 2
    # Read before serving: a price table that cannot be read stops the run at once.
    prices = find_prices(args.prices, [args.fixture, args.fixture.parent])
    context = start_drifted_proxy(
        fixture=args.fixture,
        upstream=args.upstream,
        cwd=args.cwd,
        port=args.port,
        replay=settings,
        scenario=args.scenario,
        record=record,
    )
    async with context as drifted:
        run = drifted.run
        if args.port_file is not None:
            tmp = args.port_file.with_name(args.port_file.name + ".tmp")
            tmp.write_text(f"{run.port}\n")
            os.replace(tmp, args.port_file)
        print(
            f"agentreel proxy (replay, recording what drifts) listening on {run.base_url}", file=out
        )
        for name, value in run.environment().items():
            print(f"export {name}={value}", file=out)
        out.flush()
        await stop.wait()
    for error in drifted.errors:
        print(f"agentreel proxy: {error}", file=sys.stderr)
    if drifted.errors:
        print(f"agentreel proxy: nothing was written to {args.fixture}", file=sys.stderr)
        return 1
    print(drifted.report(prices), file=out)
    changed = [*drifted.written, *(f"removed {name}" for name in drifted.removed)]
    print(f"wrote {', '.join(changed) if changed else 'nothing (nothing drifted)'}", file=out)
    return 0
