"""``agentreel replay|record|refresh [SCENARIO...]``: the command line over ``check_scenario``;
``agentreel proxy ...`` hands over to the model proxy's command line.

Commands with their own options (``agentreel review``: ``_review``; ``agentreel report``:
``_report_cli``; ``agentreel check-secrets``: ``_check_secrets``; ``agentreel upgrade``:
``_upgrade``) are dispatched by their
first word to their module. ``agentreel --help`` (or no arguments) lists every command with
one line each — the modes, each module of ``_COMMANDS`` (its ``SUMMARY``) and ``proxy`` —
and every command's own ``--help`` ends with examples.

One progress line per scenario (status, name, sessions, time), the failures in full, what
a recording had to guess (a child numbered by arrival: written all the same, with what to
do), then a summary. Exit status 0 when every scenario passed (a recording with a guess
passed), 1 when any failed, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import shlex
import shutil
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from agentreel.session import (
    MAIN_SESSION_FILE,
    MASKS_VERSION,
    RECORDING_FORMAT,
    REFRESH_COMMAND_ENV,
    RERECORD_COMMAND_ENV,
    SessionLogError,
    load_session_log,
    rerecord_command,
)
from agentreel.snapshot_harness._check import check_scenario
from agentreel.snapshot_harness._drifted import record_drifted
from agentreel.snapshot_harness._html_report import write_report
from agentreel.snapshot_harness._kept_tools import stale_tools
from agentreel.snapshot_harness._pending import is_default_fixtures, pending_allowed
from agentreel.snapshot_harness._record_proof import add_proof_options, proof_options
from agentreel.snapshot_harness._report_data import ScenarioResult, scenario_result
from agentreel.snapshot_harness._scenario import (
    DEFAULT_STUB_MODEL,
    DEFAULT_STUB_RULES,
    MODES,
    Mode,
    RecordConfig,
    Scenario,
)
from agentreel.snapshot_harness._scenario_reader import (
    discover_scenarios,
    load_scenario,
    resolve_scenario,
)
from agentreel.snapshot_harness.exceptions import HarnessError

FIXTURES_ENV = "AGENTREEL_FIXTURES"


def command_parser(prog: str, description: str, examples: str) -> argparse.ArgumentParser:
    """The parser of an ``agentreel`` command, its ``--help`` ending with ``examples`` as
    written."""
    return argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_targets(
    parser: argparse.ArgumentParser,
    help: str,
    *,
    name: str = "scenarios",
    metavar: str = "SCENARIO",
) -> None:
    """What the command works on (any number of ``name``; none: everything under the
    fixtures directory) and ``--fixtures DIR``."""
    parser.add_argument(name, nargs="*", metavar=metavar, help=help)
    add_fixtures_option(parser)


def add_fixtures_option(parser: argparse.ArgumentParser) -> None:
    """``--fixtures DIR``, the same for every command."""
    parser.add_argument(
        "--fixtures",
        default=None,
        help=f"the fixtures directory (default: ${FIXTURES_ENV} or ./fixtures)",
    )


def fixtures_directory(option: str | None) -> Path:
    """The fixtures directory: ``--fixtures``, else ``$AGENTREEL_FIXTURES``, else ./fixtures."""
    return Path(option or os.environ.get(FIXTURES_ENV) or "fixtures")


def scenario_directories(fixtures: Path, names: Sequence[str]) -> list[Path]:
    """The named scenarios (names or paths), or every scenario under ``fixtures``."""
    if names:
        return [resolve_scenario(fixtures, name) for name in names]
    return discover_scenarios(fixtures)


def chosen_scenarios(
    command: str, fixtures: Path, names: Sequence[str], *, needed: bool = True
) -> list[Path] | None:
    """``scenario_directories``, or ``None`` once the usage error is printed on stderr
    (``command: ...``): a name that is no scenario, or (``needed``) none found at all."""
    try:
        directories = scenario_directories(fixtures, names)
    except HarnessError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return None
    if needed and not directories:
        print(f"{command}: no scenarios (no */scenario.toml) under {fixtures}", file=sys.stderr)
        return None
    return directories


# One line each in `agentreel --help`: the modes this module runs, and `proxy`.
MODE_SUMMARIES = {
    "replay": "replay scenarios keylessly (no key, no network); diff with their goldens",
    "record": "record scenarios via the stub model or a real one: recordings and goldens",
    "refresh": "replay scenarios and rewrite their goldens from the same recordings",
}
PROXY_SUMMARY = "a model endpoint for agents in any process: record via an upstream, or replay"
_MODE_EXAMPLES = """\
examples:
  agentreel replay                           # every scenario under ./fixtures
  agentreel replay plain-turn --fixtures path/to/fixtures
  agentreel record hello                     # through the stub model ([record] in scenario.toml)
  agentreel record hello --provider openai --model gpt-4o-mini   # a real model, key from env
  agentreel refresh hello                    # rewrite hello's goldens from its recording
"""


def _parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "agentreel",
        "Run agentreel snapshot scenarios: replay (keyless, compare with the goldens), "
        "record (real or stub model; writes recordings and goldens) or refresh (replay and "
        "rewrite the goldens).",
        _MODE_EXAMPLES,
    )
    parser.add_argument("mode", choices=MODES, help="what to do with each scenario")
    add_targets(
        parser,
        "scenario names under the fixtures directory, or paths to scenario directories "
        "(default: every scenario; record needs at least one)",
    )
    parser.add_argument(
        "--keep-runs",
        metavar="DIR",
        help="keep each run's files (cwd, session logs, agent stderr, replay report) in "
        "DIR/<scenario> instead of a temp directory removed afterwards; for debugging",
    )
    parser.add_argument(
        "--provider",
        help="record only: the provider to record with, overriding [record] provider "
        "(stub, openai, anthropic, ...)",
    )
    parser.add_argument("--model", help="record only: the model, overriding [record] model")
    parser.add_argument(
        "--base-url", help="record only: an OpenAI-compatible base URL for the provider"
    )
    parser.add_argument(
        "--drifted",
        action="store_true",
        help="record only: replay each scenario and re-record only the sessions that drift "
        "(from their first drifted call on) and what depends on them; goldens written as "
        "pending for `agentreel review`",
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="record --drifted only: also write what each scenario kept and re-recorded "
        "into a self-contained HTML report (as `agentreel report --html`)",
    )
    add_proof_options(parser)
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Entry point of the ``agentreel`` console script.

    ``agentreel proxy record|replay ...`` is the model proxy's command line
    (``agentreel.llm_proxy.main``, SPEC 11); every other first word is a mode.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["proxy"]:
        from agentreel.llm_proxy import main as proxy_main
        from agentreel.snapshot_harness._record_trials import proxy_trials

        # `record ... -- COMMAND` proves its fixture with record's own trials (issue 39).
        return proxy_main(arguments[1:], out=out, trials=proxy_trials())
    try:
        return _main(argv, out or sys.stdout)
    except BrokenPipeError:  # `agentreel replay | head`: the reader left; not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


# Commands with their own parser; each module's ``main(argv, out) -> int`` and ``SUMMARY``
# (its one line in ``agentreel --help``).
_COMMANDS = {
    "review": "agentreel.snapshot_harness._review",
    "report": "agentreel.snapshot_harness._report_cli",
    "check-secrets": "agentreel.snapshot_harness._check_secrets",
    "upgrade": "agentreel.snapshot_harness._upgrade",
}


def command_summaries() -> dict[str, str]:
    """Every command of ``agentreel`` and its one line, in the order ``--help`` lists them."""
    summaries = dict(MODE_SUMMARIES)
    for name, module in _COMMANDS.items():
        command: Any = importlib.import_module(module)
        summaries[name] = (
            str(getattr(command, "SUMMARY", "")).strip()
            or (str(command.__doc__ or "").strip().splitlines() or [name])[0]
        )
    summaries["proxy"] = PROXY_SUMMARY
    return summaries


def usage() -> str:
    """``agentreel --help``: every command with one line, and where the details are."""
    summaries = command_summaries()
    width = max(len(name) for name in summaries)
    lines = [
        "usage: agentreel COMMAND [ARGS...]",
        "",
        "Deterministic, keyless snapshot tests of LLM agents: record a real run once, replay "
        "it with no key",
        "while the real agent runs over ACP, and diff its transcript and session logs.",
        "",
        "commands:",
        *(f"  {name:<{width}}  {line}" for name, line in summaries.items()),
        "",
        "`agentreel COMMAND --help` shows a command's options and examples.",
    ]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _hints_echoing(argv: Sequence[str]) -> Iterator[None]:
    """For the command's run: re-record and refresh hints that repeat the user's own
    ``--fixtures`` (as typed), unless the layer running agentreel has set its own (nox sets
    ``$AGENTREEL_RERECORD_COMMAND``). The hints are read in this process and, passed on
    by the harness, in the agent's."""
    fixtures = None
    for i, arg in enumerate(argv):
        if arg == "--fixtures" and i + 1 < len(argv):
            fixtures = argv[i + 1]
        elif arg.startswith("--fixtures="):
            fixtures = arg.split("=", 1)[1]
    commands = {RERECORD_COMMAND_ENV: "record", REFRESH_COMMAND_ENV: "refresh"}
    if fixtures is None or is_default_fixtures(Path(fixtures)):
        yield
        return
    saved = {name: os.environ.get(name) for name in commands}
    try:
        for name, command in commands.items():
            if not os.environ.get(name):
                os.environ[name] = (
                    f"agentreel {command} --fixtures {shlex.quote(fixtures)} {{scenario}}"
                )
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _main(argv: Sequence[str] | None, out: TextIO) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    with _hints_echoing(argv):
        return _dispatch(argv, out)


def _dispatch(argv: list[str], out: TextIO) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), end="", file=out if argv else sys.stderr)
        return 0 if argv else 2
    if not argv[0].startswith("-") and argv[0] not in _COMMANDS and argv[0] not in MODES:
        print(usage(), end="", file=sys.stderr)
        print(f"\nagentreel: {argv[0]!r} is no command (see the list above)", file=sys.stderr)
        return 2
    if argv[0] in _COMMANDS:
        command: Any = importlib.import_module(_COMMANDS[argv[0]])
        return int(command.main(argv[1:], out))
    # Intermixed: nox runs `agentreel record --fixtures DIR <scenario>` (options first).
    args = _parser().parse_intermixed_args(argv)
    mode: Mode = args.mode
    fixtures = fixtures_directory(args.fixtures)
    if args.html and not args.drifted:
        print("agentreel: --html applies to record --drifted", file=sys.stderr)
        return 2
    args.drifted_results = []
    if mode != "record" and (args.provider or args.model or args.base_url or args.drifted):
        print(
            "agentreel: --provider/--model/--base-url/--drifted only apply to record",
            file=sys.stderr,
        )
        return 2
    if (mode == "replay" and args.trials is not None) or (
        mode != "record" and (args.accept_masks or args.twice)
    ):
        print(
            "agentreel: --trials applies to record and refresh, --twice and --accept-masks "
            "to record",
            file=sys.stderr,
        )
        return 2
    if mode == "record" and not args.scenarios:
        print(
            "agentreel: record needs the scenario(s) to record, e.g. "
            f"`{rerecord_command('plain-turn')}` (recording everything at once is never "
            "intended)",
            file=sys.stderr,
        )
        return 2
    directories = chosen_scenarios("agentreel", fixtures, args.scenarios)
    if directories is None:
        return 2

    started = time.monotonic()
    failures: list[tuple[str, str]] = []
    guessed: list[tuple[str, list[str]]] = []
    done = 0
    width = max(len(d.name) for d in directories)
    try:
        for directory in directories:
            failure = _run_one(directory, mode, args, width, out, guessed)
            done += 1
            if failure is not None:
                failures.append((directory.name, failure))
    finally:
        # Always the failures in full, the guesses and the summary line, even when
        # interrupted: what to act on, once, at the end.
        by_name = {directory.name: directory for directory in directories}
        for name, message in failures:
            print(f"\n=== {name} ===\n{message}", file=out)
            if mode != "record" and (hint := _upgrade_hint(by_name[name], args.fixtures)):
                print(hint, file=out)
        for name, warnings in guessed:
            print(_guesses_message(name, warnings), file=out)
        total = time.monotonic() - started
        passed = done - len(failures)
        verb = {"replay": "passed", "record": "recorded", "refresh": "refreshed"}[mode]
        summary = f"{passed} {verb}, {len(failures)} failed in {total:.2f}s ({mode})"
        if guessed:
            summary += f"; {len(guessed)} recorded with a guess or warning (named above)"
        if done < len(directories):
            summary += f"; interrupted, {len(directories) - done} not run"
        print(f"\n{summary}", file=out, flush=True)
        if args.html:
            page = write_report(Path(args.html), args.drifted_results)
            print(f"wrote {page} (open it in a browser)", file=out, flush=True)
    return 1 if failures else 0


def _upgrade_hint(directory: Path, fixtures: str | None) -> str | None:
    """For a scenario that failed: if an earlier agentreel recorded it (an older format
    stamp, or none), or a newer built-in mask set changes a tool's JSON it keeps, the
    command that brings it to the current format."""
    try:
        header = load_session_log(directory / MAIN_SESSION_FILE).header
    except (OSError, SessionLogError):
        return None
    option = f"--fixtures {shlex.quote(fixtures)} " if fixtures else ""
    command = f"`agentreel upgrade {option}{directory.name}`"
    if header.format < RECORDING_FORMAT:
        return (
            f"{directory.name} was recorded by an earlier agentreel (recording format "
            f"{header.format}; this one writes {RECORDING_FORMAT}): {command} rewrites it to "
            "the current format keylessly"
        )
    if header.masks < MASKS_VERSION and (stale := stale_tools(directory)):
        return (
            f"{directory.name} was recorded with built-in mask set {header.masks}, and this "
            f"agentreel's set {MASKS_VERSION} masks the JSON it keeps of {', '.join(stale)} "
            f"otherwise: {command} gives its logs and goldens their new digests keylessly"
        )
    return None


def _guesses_message(name: str, warnings: list[str]) -> str:
    """What a scenario recorded with a guess gets at the end of the output: that it was
    written, and each guess with what to do."""
    return (
        f"\n=== {name}: recorded with {len(warnings)} guess(es) or warning(s) ===\n"
        "The recording was written and is valid (it replays, its trials too), but read "
        "each of these (a guess: recording it again may not give the same files):\n"
        + "\n".join(f"- {warning}" for warning in warnings)
    )


def _run_one(
    directory: Path,
    mode: Mode,
    args: argparse.Namespace,
    width: int,
    out: TextIO,
    guessed: list[tuple[str, list[str]]],
) -> str | None:
    """Check one scenario and print its progress line; the failure message, if it failed.
    A recording made with a guess (``Outcome.warnings``) is added to ``guessed``.

    A scenario's failure never stops the run: a ``HarnessError`` is reported as it says;
    anything else is a bug in agentreel or the agent command, reported with its traceback.
    """
    begun = time.monotonic()
    name = directory.name
    try:
        scenario = load_scenario(directory)
        record = _record_override(scenario, args) if mode == "record" else None
        record = proof_options(record, scenario, args) if mode != "replay" else None
        keep = Path(args.keep_runs) / name if args.keep_runs else None
        if keep is not None and keep.exists():
            shutil.rmtree(keep)
        if args.drifted:
            drifted = record_drifted(scenario, record=record, work_dir=keep)
            args.drifted_results.append(
                ScenarioResult(
                    directory, "passed", drifted.duration, drifted=drifted.summary.text()
                )
            )
        else:
            outcome = check_scenario(
                scenario, mode, record=record, work_dir=keep, pending=pending_allowed()
            )
    except Exception as exc:
        elapsed = time.monotonic() - begun
        print(f"FAIL  {name:<{width}}  {'-':>10}  {elapsed:6.2f}s", file=out, flush=True)
        if args.drifted:
            args.drifted_results.append(scenario_result(directory, elapsed, exc))
        if isinstance(exc, HarnessError):
            return str(exc)
        trace = "".join(traceback.format_exception(exc)).rstrip()
        return (
            f"{name}: unexpected {type(exc).__name__} (a bug in agentreel; please report it "
            f"with this traceback): {exc}\n{trace}"
        )
    if args.drifted:
        print(drifted.progress(width), file=out, flush=True)
        return None
    status = {"replay": "PASS", "record": "REC ", "refresh": "REFR"}[mode]
    sessions = f"{outcome.sessions} session{'s' if outcome.sessions != 1 else ''}"
    print(
        f"{status}  {name:<{width}}  {sessions:>10}  {outcome.duration:6.2f}s",
        file=out,
        flush=True,
    )
    if outcome.written:
        # record and refresh say what they changed, so the user knows what to review.
        print(f"      wrote {', '.join(outcome.written)}", file=out, flush=True)
    if outcome.warnings:
        guessed.append((name, outcome.warnings))
    return None


def _record_override(scenario: Scenario, args: argparse.Namespace) -> RecordConfig | None:
    """``[record]`` with the command line's --provider/--model/--base-url applied."""
    config = scenario.record
    if not (args.provider or args.model or args.base_url):
        return None
    provider = args.provider or config.provider
    if provider == "stub":
        same = config.provider == "stub"
        return RecordConfig(
            provider="stub",
            model=args.model or (config.model if same else DEFAULT_STUB_MODEL),
            rules=config.rules or scenario.directory / DEFAULT_STUB_RULES,
            base_url=None,
        )
    model = args.model or (config.model if provider == config.provider else None)
    if not model:
        raise HarnessError(f"recording with provider {provider!r} needs a model: pass --model NAME")
    return RecordConfig(provider=provider, model=model, rules=None, base_url=args.base_url)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
