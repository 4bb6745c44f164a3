"""``nox -s bench``: agentreel's performance as ratios measured side by side in one run.

Run from the repository root: ``python -m bench.run [--only NAME[,NAME]] [--quick]``.
Prints a table and writes ``bench/results.json``. Benchmarks (SPEC section 9):

- ``replay``: replay throughput vs the json.loads floor and vcrpy;
- ``scenario``: a 3-session scenario end to end vs the bare agent floor; import time;
- ``scale``: load + derive + normalize + diff of 1k/10k/100k-event logs, time and memory;
- ``concurrency``: 64 concurrent child sessions through one provider vs one alone;
- ``suite``: the replay suite's wall time with -n 1 and -n 2;
- ``passthrough``: time to first chunk while recording vs live (and vcrpy);
- ``report``: the HTML report of a 100-session, 10k-call run: size, build, browser load;
- ``fork``: the suite's CPU and wall time with the fork server on and off, and each scenario
  forked against the floor of its own work (the agent already imported, in process);
- ``proxy``: the proxy's replay per call vs the stub server and vcrpy, record time to first
  chunk vs live, 64 concurrent HTTP sessions vs one;
- ``secrets``: record's write of a 100k-event log with the secret scan vs without it;
- ``schedule``: replay with ``[replay] schedule = "recorded"`` vs free, on the committed
  suite and on 64 concurrent sessions (SPEC 13);
- ``drifted``: ``record --drifted`` of one drifted grandchild of a 20-session tree vs a
  full re-record, in upstream calls (SPEC 20).
- ``wires``: proxy replay per call vs the stub server on AWS event-stream (boto3) and
  NDJSON (ollama), and replay at the recorded pace vs the recorded wall time (issue 42).
- ``record``: recording the committed suite with 3 trial replays vs ``--trials 0``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench._common import ROOT, BenchResult, Settings, table

BENCHMARKS: dict[str, str] = {
    "replay": "bench.replay_throughput",
    "scenario": "bench.scenario_latency",
    "scale": "bench.scale",
    "concurrency": "bench.concurrency",
    "suite": "bench.suite",
    "passthrough": "bench.passthrough",
    "report": "bench.report",
    "fork": "bench.fork_server",
    "proxy": "bench.proxy",
    "secrets": "bench.secret_scan",
    "schedule": "bench.schedule",
    "mcp": "bench.mcp",
    "drifted": "bench.drifted",
    "wires": "bench.wires",
    "record": "bench.record_trials",
}
RESULTS = ROOT / "bench" / "results.json"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME[,NAME]",
        help=f"run only these benchmarks (repeatable): {', '.join(BENCHMARKS)}",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller sizes and fewer repeats (development)"
    )
    parser.add_argument(
        "--repeats", type=int, default=0, help="repeats per measurement (default: per benchmark)"
    )
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help=f"results file (default: {RESULTS})"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    names = [n for item in args.only for n in item.split(",") if n] or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(
            f"bench: unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}",
            file=sys.stderr,
        )
        return 2
    settings = Settings(quick=args.quick, repeats=args.repeats)
    results: list[BenchResult] = []
    failures: list[str] = []
    for name in names:
        print(f"bench: running {name}{' (quick)' if settings.quick else ''} ...", flush=True)
        started = time.monotonic()
        try:
            module = importlib.import_module(BENCHMARKS[name])
            run: Callable[[Settings], BenchResult] = module.run
            result = run(settings)
        except Exception as exc:  # one broken benchmark must not hide the others' figures
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
            print(f"bench: {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        results.append(result)
        print(f"bench: {name} done in {time.monotonic() - started:.1f} s", flush=True)
        print(table([result]), flush=True)

    print("\n# agentreel bench" + (" (quick)" if settings.quick else ""))
    print(table(results))
    passed = sum(t.passed for r in results for t in r.targets)
    total = sum(len(r.targets) for r in results)
    print(f"\ntargets: {passed}/{total} pass")
    for failure in failures:
        print(f"benchmark error: {failure}")
    document = {
        "format": "agentreel-bench",
        "version": 1,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quick": settings.quick,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "benchmarks": {r.name: r.to_json() for r in results},
        "errors": failures,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"results: {args.out}")
    # Missed targets are findings reported in the table, not a crash; a benchmark that
    # could not run at all is an error.
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
