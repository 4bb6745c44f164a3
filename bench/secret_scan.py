"""10. The secret scan's cost: record writing a 100k-event log with and without it.

The write is what record does with one session log once the run is over: the recording
(the log with its cwd as ``{{cwd}}``, ``tokenize_cwd``) and its golden (loaded and
normalized, ``Normalizer.session_log_bytes``), both written to disk. With the scan, both
byte strings first go through ``agentreel.session.SecretScan.check`` (the run's credential
values, auth headers, every known key shape) — what ``agentreel record`` pays. Target: the
write with the scan ≤ 1.2× the write without it.

Figures beside it: the scan alone and its throughput; the same rules run the way a plain
detect-secrets scan runs them (each rule's Python regular expression over the text, one
pass per rule), which is why one RE2 pass finds the candidate lines; the detector's
one-time load (imports and compiling), paid by the first scan of a process and never by
``import agentreel.session``; and the scan of every committed fixture.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

from agentreel.session import (
    Normalizer,
    SecretScan,
    load_session_log,
    tokenize_cwd,
)
from agentreel.session._secret_scan import _detector
from bench._common import ROOT, BenchResult, Settings, cpu_timed
from bench.scale import _write_log

TARGET = 1.2


def _write(raw: Path, cwd: Path, out: Path, scan: SecretScan | None) -> int:
    recording = tokenize_cwd(raw.read_bytes(), cwd)
    log = load_session_log(raw)
    golden = Normalizer.for_logs(cwd, [log]).session_log_bytes(log)
    if scan is not None:
        scan.check({"session.jsonl": recording, "golden/session.jsonl": golden})
    (out / "session.jsonl").write_bytes(recording)
    (out / "golden.jsonl").write_bytes(golden)
    return len(recording) + len(golden)


def _python_rules(data: bytes) -> int:
    text = data.decode()
    return sum(1 for rule in _detector().rules for _ in rule.pattern.finditer(text))


def _load_in_a_fresh_process() -> float:
    code = (
        "import time, agentreel.session as s\n"
        "t = time.process_time(); s.SecretScan().scan('x', b'{}'); "
        "print(time.process_time() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def _committed(scan: SecretScan) -> int:
    hits = 0
    for root in (ROOT / "fixtures", ROOT / "interop" / "fixtures"):
        for path in root.rglob("*"):
            if path.is_file():
                hits += len(scan.scan(str(path), path.read_bytes()))
    if hits:
        raise AssertionError(f"{hits} credential(s) in the committed fixtures")
    return hits


def run(settings: Settings) -> BenchResult:
    result = BenchResult("secrets", "10. Secret scan: record's write of a 100k-event log")
    size = 10_000 if settings.quick else 100_000
    repeats = settings.scaled(7, 3)
    scan = SecretScan({"bench-live-key-0123456789": "$BENCH_API_KEY"})
    scan.scan("warm-up", b"{}")  # the one-time load is its own figure below
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-secrets-") as tmp_text:
        tmp = Path(tmp_text)
        log = _write_log(tmp / "log", size)
        raw = next((tmp / "log" / "sessions").rglob("*.jsonl"))
        out = tmp / "out"
        out.mkdir()
        without: list[float] = []
        with_scan: list[float] = []
        for _ in range(repeats):
            without.append(cpu_timed(partial(_write, raw, log.cwd, out, None)))
            with_scan.append(cpu_timed(partial(_write, raw, log.cwd, out, scan)))
        written = _write(raw, log.cwd, out, None)
        recording = (out / "session.jsonl").read_bytes()
        golden = (out / "golden.jsonl").read_bytes()
        files = {"session.jsonl": recording, "golden/session.jsonl": golden}
        alone = result.median(
            "scan_s", [cpu_timed(partial(scan.check, files)) for _ in range(repeats)]
        )
        plain = result.median(
            "python_rules_s",
            [cpu_timed(partial(_python_rules, recording + golden)) for _ in range(min(repeats, 3))],
        )
    base = result.median("write_s", without)
    scanned = result.median("write_scanned_s", with_scan)
    label = f"{size // 1000}k events"
    result.figure(f"{label}: bytes written (recording + golden)", written / 1e6, "MB")
    result.figure(f"{label}: write", base, "s")
    result.figure(f"{label}: write with the scan", scanned, "s")
    result.figure(f"{label}: the scan alone", alone, "s", f"{written / 1e6 / alone:.0f} MB/s")
    result.figure(
        f"{label}: the same rules as Python regexes, a pass each (detect-secrets' way)",
        plain,
        "s",
        f"{plain / alone:.1f}x the RE2 pass",
    )
    loads = [_load_in_a_fresh_process() for _ in range(min(repeats, 3))]
    result.figure("detector load, first scan of a process", result.median("load_s", loads), "s")
    result.figure(
        "every committed fixture scanned (loaded)",
        result.median("committed_s", [cpu_timed(partial(_committed, scan)) for _ in range(3)]),
        "s",
    )
    result.target(f"{label}: write with the scan / without", scanned / base, TARGET)
    result.notes.append(
        "CPU time, medians; the scan covers what record writes for the log (recording and "
        "golden), with one live credential value of the run; the detector's one-time load "
        "is measured apart (a fresh process), never paid at import agentreel.session"
    )
    return result
