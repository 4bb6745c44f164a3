"""7. HTML report at scale: a synthetic 100-session, 10,000-call run (SPEC 12).

The fixture is a session tree written as recordings (a main session, 99 children spawned
three levels deep, their calls overlapping in time), 100 model calls per session, each a
``request/header``, a few streamed chunks, usage and ``finish``, plus a transcript. It
measures what a person waits for:

- building the page in Python (``report_data`` + ``render_html``) and its size, against
  the recordings it shows (target: the page is smaller than its recordings);
- loading it in headless Chromium (Debian's ``chromium`` + ``chromium-driver``): wall
  time until the page says it is drawn, and, inside that one load, the script's time to
  draw the tree and the 10,000 timeline bars against its own floor — ``JSON.parse`` of the
  embedded data, which no page showing that data can skip (target: drawing ≤ 25× parsing);
- opening the biggest session's detail (its 100 calls) with a click.

Without a browser the browser rows are left out and a note says why.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from agentreel.snapshot_harness._html_report import render_html
from agentreel.snapshot_harness._report_data import ScenarioResult, report_data
from bench._common import BenchResult, Settings, timed

SESSIONS = 100
CALLS_PER_SESSION = 100
_BROWSER_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1600",
)


def _session_id(number: int) -> str:
    return f"{number:08x}-0000-4000-8000-000000000000"


class _Log:
    """One session log being written: its lines, the next seq and the clock."""

    def __init__(self, header: Mapping[str, object], *, at: int) -> None:
        self.lines = [json.dumps(header)]
        self.at = at

    def event(self, kind: str, data: Mapping[str, object]) -> None:
        seq = len(self.lines) - 1
        self.lines.append(json.dumps({"type": kind, "seq": seq, "time": self.at, "data": data}))


def write_fixture(directory: Path, sessions: int, calls: int) -> int:
    """Recordings of ``sessions`` sessions with ``calls`` calls each; returns their bytes."""
    directory.mkdir(parents=True)
    (directory / "scenario.toml").write_text('description = "synthetic report bench"\n')
    total = 0
    base = 1_800_000_000_000
    for number in range(sessions):
        parent = None if number == 0 else (number - 1) // 3
        header = {
            "type": "session",
            "version": 1,
            "id": _session_id(number),
            "created_at": base + number * 7,
            "cwd": "{{cwd}}",
            "parent_session": None if parent is None else _session_id(parent),
            "spawn_index": None if parent is None else (number - 1) % 3,
            "origin": "main" if parent is None else "spawn",
            "seed_length": 0,
        }
        log = _Log(header, at=base + number * 7)
        log.event("turn/start", {"turn": 0})
        log.event("user/message", {"turn": 0, "text": f"task {number}"})
        for step in range(calls):
            where = {"turn": 0, "step": step}
            log.event("step/start", where)
            header_data = {"model": "m", "system": "s", "tools_digest": "d", "message_count": step}
            log.event("request/header", {**where, **header_data})
            log.at += 3
            for part in ("Reading ", "the file ", f"number {step}."):
                text = {"type": "text-delta", "index": 0, "text": part}
                log.event("assistant/chunk", {**where, "chunk": text})
                log.at += 1
            usage = {"type": "usage", "input_tokens": 100 + step, "output_tokens": 9}
            log.event("assistant/chunk", {**where, "chunk": usage})
            log.event("assistant/chunk", {**where, "chunk": {"type": "finish", "reason": "stop"}})
            log.event("step/end", where)
            log.at += 2
        log.event("turn/end", {"turn": 0, "reason": "completed"})
        name = "session.jsonl" if number == 0 else f"session.{number}.jsonl"
        data = "\n".join(log.lines) + "\n"
        (directory / name).write_text(data)
        total += len(data.encode())
    golden = directory / "golden"
    golden.mkdir()
    frame = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "chunk "},
            }
        },
    }
    (golden / "transcript.jsonl").write_text((json.dumps(frame) + "\n") * 2000)
    return total


def run(settings: Settings) -> BenchResult:
    result = BenchResult("report", "7. HTML report: 100 sessions, 10k calls")
    sessions = settings.scaled(SESSIONS, 30)
    calls = settings.scaled(CALLS_PER_SESSION, 30)
    repeats = settings.repeats or settings.scaled(3, 1)
    with tempfile.TemporaryDirectory(prefix="agentreel-bench-report-") as tmp_text:
        tmp = Path(tmp_text)
        scenario = tmp / "synthetic"
        recorded = write_fixture(scenario, sessions, calls)
        page = tmp / "report.html"

        def build() -> None:
            html = render_html(report_data([ScenarioResult(scenario, "passed", 1.0)]))
            page.write_text(html, encoding="utf-8")

        build_seconds = result.median("build_s", [timed(build) for _ in range(repeats)])
        size = page.stat().st_size
        result.figure("sessions x calls", sessions * calls, "calls", f"{sessions} sessions")
        result.figure("build page (python)", build_seconds, "s")
        result.figure("page size", size / 1e6, "MB", f"recordings {recorded / 1e6:.1f} MB")
        result.target("page size / recordings", size / recorded, 1.0)
        _browser_rows(result, page, repeats, tmp)
    return result


def _browser_rows(result: BenchResult, page: Path, repeats: int, tmp: Path) -> None:
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        result.notes.append(
            "no chromium/chromedriver: browser rows skipped (apt-get install -y chromium "
            "chromium-driver)"
        )
        return
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    options = Options()
    options.binary_location = chromium
    for flag in _BROWSER_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp / 'profile'}")
    browser = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        loads, draws, parses, opens = [], [], [], []
        for _ in range(repeats):
            browser.get("about:blank")
            started = time.perf_counter()
            browser.get(page.as_uri())
            WebDriverWait(browser, 120).until(
                lambda b: b.execute_script("return document.body.dataset.ready") == "1"
            )
            # One layout of everything drawn, so the wall time includes it.
            browser.execute_script("return document.body.getBoundingClientRect().height")
            loads.append(time.perf_counter() - started)
            draws.append(float(browser.execute_script("return document.body.dataset.drawMs")))
            parses.append(float(browser.execute_script("return document.body.dataset.parseMs")))
            rows = browser.find_elements(By.CSS_SELECTOR, ".timeline .row .who")
            started = time.perf_counter()
            rows[-1].click()
            browser.execute_script("return document.querySelector('.story').offsetHeight")
            opens.append(time.perf_counter() - started)
        bars = browser.execute_script("return document.querySelectorAll('.bar').length")
        load = result.median("load_s", loads)
        draw = result.median("draw_ms", draws)
        parse = result.median("parse_ms", parses)
        result.figure("load until drawn (chromium)", load, "s", f"{bars} bars drawn")
        result.figure("script: draw", draw / 1000, "s")
        result.figure("script: JSON.parse floor", parse / 1000, "s")
        result.figure("open a session (click)", result.median("open_s", opens), "s")
        result.target("draw / JSON.parse", draw / max(parse, 0.1), 25.0)
    finally:
        browser.quit()
