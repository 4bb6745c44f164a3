"""Shared pieces of the benchmarks: repeated timing, medians, result records, the table.

Every figure is a median over repeated runs, and every target is a ratio of two things
measured side by side in the same run, so a noisy or slow machine shifts both sides alike.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@dataclass(frozen=True, slots=True)
class Settings:
    """How hard to measure: ``quick`` shrinks sizes and repeats for development."""

    quick: bool
    repeats: int

    def scaled(self, full: int, quick: int) -> int:
        """``full`` repeats normally, ``quick`` in quick mode (``--repeats`` overrides)."""
        if self.repeats > 0:
            return self.repeats
        return quick if self.quick else full


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured number (already a median) with its unit."""

    name: str
    value: float
    unit: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class Target:
    """A value measured in this run against a limit: ``value <= limit`` (or ``>=``).

    ``unit`` is ``x`` for a ratio of two sides measured together, or ``ms`` for a
    difference of two sides (time to first chunk: recording minus live).
    """

    name: str
    value: float
    limit: float
    op: Literal["<=", ">="] = "<="
    unit: str = "x"

    @property
    def passed(self) -> bool:
        return self.value <= self.limit if self.op == "<=" else self.value >= self.limit


@dataclass(slots=True)
class BenchResult:
    """What one benchmark reports: figures, targets, free-form notes and raw samples."""

    name: str
    title: str
    figures: list[Figure] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    samples: dict[str, list[float]] = field(default_factory=dict)

    def figure(self, name: str, value: float, unit: str, note: str = "") -> None:
        self.figures.append(Figure(name, value, unit, note))

    def target(
        self,
        name: str,
        value: float,
        limit: float,
        op: Literal["<=", ">="] = "<=",
        unit: str = "x",
    ) -> None:
        self.targets.append(Target(name, value, limit, op, unit))

    def median(self, name: str, samples: list[float]) -> float:
        """Keep ``samples`` under ``name`` and return their median."""
        self.samples[name] = samples
        return statistics.median(samples)

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "figures": [
                {"name": f.name, "value": f.value, "unit": f.unit, "note": f.note}
                for f in self.figures
            ],
            "targets": [
                {
                    "name": t.name,
                    "value": t.value,
                    "op": t.op,
                    "limit": t.limit,
                    "unit": t.unit,
                    "passed": t.passed,
                }
                for t in self.targets
            ],
            "notes": self.notes,
            "samples": self.samples,
        }


def timed(work: Callable[[], object]) -> float:
    """Wall-clock seconds ``work()`` takes: for work that waits on other processes (an
    agent subprocess, a server pacing its stream).

    Garbage is collected first, but the collector stays on while ``work`` runs: a real run
    pays for it.
    """
    gc.collect()
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def cpu_timed(work: Callable[[], object]) -> float:
    """CPU seconds this process spends in ``work()``: for in-process, CPU-bound work.

    On a shared machine wall time also counts other processes' turns on the CPU, and a
    long measurement is preempted more often than a short one, which skews exactly the
    ratios the targets are about (100k vs 10k events); CPU time does not. Collector on.
    """
    gc.collect()
    start = time.process_time()
    work()
    return time.process_time() - start


async def cpu_timed_async(work: Callable[[], Awaitable[object]]) -> float:
    """CPU seconds of ``await work()`` (in-process work that never waits on I/O)."""
    gc.collect()
    start = time.process_time()
    await work()
    return time.process_time() - start


def run_async(work: Callable[[], Awaitable[float]]) -> float:
    return asyncio.run(_call(work))


async def _call(work: Callable[[], Awaitable[float]]) -> float:
    return await work()


def human(value: float, unit: str) -> str:
    """A figure for the table: seconds scaled to s/ms/µs, the rest as given."""
    if unit == "s":
        if abs(value) >= 1:
            return f"{value:.3f} s"
        if abs(value) >= 1e-3:
            return f"{value * 1e3:.2f} ms"
        return f"{value * 1e6:.2f} µs"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "MB":
        return f"{value:.2f} MB"
    if unit == "count":
        return f"{value:.0f}"
    return f"{value:g} {unit}".rstrip()


def table(results: list[BenchResult]) -> str:
    """The printed report: per benchmark its figures, then its targets with PASS/FAIL."""
    lines: list[str] = []
    width = max(
        [len(f.name) for r in results for f in r.figures]
        + [len(t.name) for r in results for t in r.targets]
        + [20]
    )
    for result in results:
        lines.append("")
        lines.append(f"== {result.title} ==")
        for fig in result.figures:
            note = f"  ({fig.note})" if fig.note else ""
            lines.append(f"  {fig.name:<{width}}  {human(fig.value, fig.unit):>14}{note}")
        for tgt in result.targets:
            verdict = "PASS" if tgt.passed else "FAIL"
            lines.append(
                f"  {tgt.name:<{width}}  {tgt.value:>12.2f} {tgt.unit:<2}  "
                f"target {tgt.op} {tgt.limit:g} {tgt.unit}  {verdict}"
            )
        for note in result.notes:
            lines.append(f"  note: {note}")
    return "\n".join(lines)
