"""``agentreel proxy record --fixture DIR -- COMMAND``: record what ``COMMAND`` asks, then
prove the fixture before it is kept (issue 39, SPEC 16).

The command runs once with the proxy's environment, recording into a scratch folder beside
``DIR``. Then the fixture is replayed ``--trials`` times through the same command (a
replay proxy on the same port), each trial under its own perturbation; a trial whose
command fails, or whose replay meets an error (a drift: its readable diff) or leaves
recorded calls unmade, keeps nothing — ``DIR`` stays as it was — and is printed. Only when
every trial passes is the scratch fixture moved into ``DIR``.

How many trials and what each perturbs are the harness's record settings (``[record]
trials``, ``AGENTREEL_RECORD_TRIALS``, the perturbations of ``_record_proof``): the proxy
sits below the harness, so ``agentreel proxy`` hands them down as ``RecordTrials``;
``python -m agentreel.llm_proxy`` has none (``NO_TRIALS``: ``--trials N`` replays
unperturbed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from agentreel.llm_proxy._server import start_proxy
from agentreel.llm_replay import ReplaySettings
from agentreel.session import RecordSettings


@dataclass(frozen=True, slots=True)
class Trial:
    """One trial replay: the environment it adds to the command's, and what it is said as.
    A trial that moves the date also gives ``today`` (libfaketime on today's date: when
    that fails too, the program does not run under libfaketime, not on another day) and
    ``plain`` (the trial without it, run instead, with ``note`` said)."""

    env: Mapping[str, str]
    said: str
    today: Mapping[str, str] | None = None
    plain: Mapping[str, str] | None = None
    note: str | None = None
    """A line said with the recording (the date could not move: why)."""


@dataclass(frozen=True, slots=True)
class RecordTrials:
    """How many trials (``wanted(--trials or None)``) and trial ``n``'s (from 0) ``Trial``."""

    wanted: Callable[[int | None], int]
    trial: Callable[[int], Trial]


NO_TRIALS = RecordTrials(lambda given: given or 0, lambda number: Trial({}, "unperturbed"))
"""Without the harness: ``--trials N`` replays, none perturbed."""


async def _run_command(
    command: Sequence[str], env: Mapping[str, str], stop: asyncio.Event, cwd: str | None
) -> int | None:
    """``command``'s exit status; ``None`` when stopped first (it is terminated)."""
    process = await asyncio.create_subprocess_exec(*command, env=dict(env), cwd=cwd)
    waiting = asyncio.ensure_future(process.wait())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if waiting.done():
        return waiting.result()
    process.terminate()
    try:
        await asyncio.wait_for(waiting, 10)
    except TimeoutError:
        process.kill()
        await waiting
    return None


def _said(command: Sequence[str]) -> str:
    return shlex.join(command)


async def _replay_trial(
    args: argparse.Namespace,
    options: Mapping[str, Any],
    fixture: Path,
    env: Mapping[str, str],
    stop: asyncio.Event,
) -> str | None:
    """Replay ``fixture`` through the command under ``env``; what failed, or ``None``."""
    report = fixture.parent / "trial-report.json"
    async with start_proxy("replay", fixture=fixture, report=report, **options) as proxy:
        status = await _run_command(
            args.command, {**os.environ, **env, **proxy.environment()}, stop, args.cwd
        )
    assert proxy.provider is not None
    consumption = proxy.provider.consumption_report()
    problems = [f"{error.type}: {error.message}" for error in consumption.errors]
    problems += [f"recorded but never asked: {line}" for line in consumption.unconsumed()]
    if status is None:
        problems.append(f"stopped before {_said(args.command)} ended")
    elif status != 0:
        problems.append(f"{_said(args.command)} exited with status {status}")
    return "\n".join(problems) or None


def _install(new: Path, fixture: Path) -> None:
    """``new`` becomes ``fixture`` (whose old files go)."""
    if fixture.exists():
        old = new.parent / "replaced"
        fixture.rename(old)
    new.rename(fixture)


async def record_proved(
    args: argparse.Namespace,
    settings: ReplaySettings,
    record: RecordSettings,
    out: TextIO,
    stop: asyncio.Event,
    trials: RecordTrials,
) -> int:
    """Record ``args.command``'s calls into ``args.fixture`` and prove them (module doc);
    the exit status."""
    fixture: Path = args.fixture
    fixture.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".agentreel-proxy-record-", dir=fixture.parent))
    options: dict[str, Any] = {
        "port": args.port,
        "cwd": args.cwd,
        "max_body_bytes": args.max_body_bytes,
        "replay": settings,
    }
    command = _said(args.command)
    try:
        new = scratch / fixture.name
        async with start_proxy(
            "record",
            upstream=args.upstream,
            fixture=new,
            record=record,
            **options,
        ) as proxy:
            print(f"agentreel proxy (record) listening on {proxy.base_url}: {command}", file=out)
            out.flush()
            status = await _run_command(
                args.command, {**os.environ, **proxy.environment()}, stop, args.cwd
            )
        errors = list(proxy.errors)
        if status is None:
            errors.append(f"record: stopped before {command} ended")
        elif status != 0:
            errors.append(f"record: {command} exited with status {status}")
        if not errors and not new.is_dir():
            errors.append(f"record: {command} made no model call through the proxy")
        if errors:
            for error in errors:
                print(f"agentreel proxy: {error}", file=sys.stderr)
            print(f"agentreel proxy: nothing was written to {fixture}", file=sys.stderr)
            return 1
        notes: list[str] = []
        wanted = trials.wanted(args.trials)
        for number in range(wanted):
            trial = trials.trial(number)
            if trial.note is not None:
                notes.append(trial.note)
            failure = await _replay_trial(args, options, new, trial.env, stop)
            if (
                failure is not None
                and trial.today is not None
                and trial.plain is not None
                and await _replay_trial(args, options, new, trial.today, stop) is not None
            ):
                first = failure.splitlines()[0][:200]
                notes.append(
                    f"{command} does not run under libfaketime (it fails under it on "
                    f"today's date too: {first}), so trial replay {number + 1} ran on "
                    "today's date and no trial moved the date"
                )
                failure = await _replay_trial(args, options, new, trial.plain, stop)
            if failure is not None:
                print(
                    f"agentreel proxy: recorded, but trial replay {number + 1} of {wanted} "
                    f"({trial.said}) of {command} failed, so nothing was written to "
                    f"{fixture}:\n{failure}\nThe recording replays in one environment and not "
                    "in another: what the program sends depends on the date, time zone, user "
                    "or host (mask it with --mask, or set it in the program's environment)",
                    file=sys.stderr,
                )
                return 1
        for warning in proxy.warnings:
            print(f"agentreel proxy: warning: {warning}", file=sys.stderr)
        for note in notes:
            print(f"agentreel proxy: {note}", file=sys.stderr)
        _install(new, fixture)
        print(
            f"agentreel proxy: wrote {fixture}, proved by {wanted} trial replay(s) of {command}",
            file=out,
        )
        return 0
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(scratch)
