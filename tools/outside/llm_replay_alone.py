"""Replay a committed parent + child recording through ``agentreel-llm-replay`` installed alone.

``nox -s build`` runs this in a fresh venv outside the repository that holds only the
``agentreel-llm-replay`` wheel and what its metadata pulls in: the ``replay`` provider must
be found through the entry point the wheel declares, route a child by its parent and spawn
index, stream exactly the chunks in the recording files (read here with plain ``json``),
and report every script consumed. Usage: ``python llm_replay_alone.py FIXTURE_DIR``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentreel.brand import new_session_id
from agentreel.llm import GenerateOptions, encode_chunk, load_provider
from agentreel.llm_replay import ReplayProvider, read_report


def recorded_calls(log: Path, live_cwd: str) -> list[list[dict[str, Any]]]:
    """The log's ``assistant/chunk`` chunks split into calls at each ``finish``."""
    calls: list[list[dict[str, Any]]] = [[]]
    for line in log.read_text(encoding="utf-8").splitlines():
        event = json.loads(line.replace("{{cwd}}", live_cwd))
        if event.get("type") != "assistant/chunk":
            continue
        calls[-1].append(event["data"]["chunk"])
        if event["data"]["chunk"]["type"] == "finish":
            calls.append([])
    return [call for call in calls if call]


async def replay(fixture: Path, work: Path) -> None:
    live_cwd = str(work)
    report_path = work / "replay-report.json"
    provider = load_provider(
        "replay",
        fixture_dir=str(fixture),
        live_cwd=live_cwd,
        report_path=str(report_path),
        drift="off",  # the requests here are not the agent's; routing and content are checked
    )
    if not isinstance(provider, ReplayProvider):
        sys.exit(f"the 'replay' entry point loaded {provider!r}, not agentreel's ReplayProvider")
    parent, child = new_session_id(), new_session_id()
    callers = [
        (fixture / "session.jsonl", GenerateOptions(model="any", messages=(), session_id=parent)),
        (
            fixture / "session.1.jsonl",
            GenerateOptions(
                model="any", messages=(), session_id=child, parent_session_id=parent, spawn_index=0
            ),
        ),
    ]
    for log, options in callers:
        for number, expected in enumerate(recorded_calls(log, live_cwd)):
            got = [json.loads(encode_chunk(chunk)) async for chunk in provider.stream(options)]
            if got != expected:
                sys.exit(f"{log.name} call {number}: replayed {got!r}\n  recorded {expected!r}")
            print(f"{log.name} call {number}: {len(got)} chunks as recorded")
    provider.close()
    report = read_report(report_path)
    if not report.ok:
        sys.exit(f"replay report {report_path} is not clean: {report.unconsumed()} {report.errors}")
    print(f"report: {len(report.scripts)} scripts, every call consumed")


def main() -> None:
    fixture = Path(sys.argv[1]).resolve()
    with tempfile.TemporaryDirectory() as work:
        asyncio.run(replay(fixture, Path(work)))


if __name__ == "__main__":
    main()
