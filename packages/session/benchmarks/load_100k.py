"""Load time of a 100k-event session log against the raw codec floor (not a test).

Run: .venv/bin/python packages/session/benchmarks/load_100k.py [events]
Prints best-of-5 seconds for: load_session_log, raw msgspec.json.decode per line
(untyped), one typed array decode of the same lines, and normalizing the loaded log.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from agentreel.llm import TextDelta
from agentreel.session import (
    AssistantChunkData,
    Event,
    Normalizer,
    SessionStore,
    TurnEndData,
    TurnStartData,
    load_session_log,
)


def best_of(runs: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(Path(tmp) / "sessions", clock=time.time_ns)
        session = store.create(Path(tmp) / "work")
        session.append(TurnStartData(turn=0))
        for position in range(count - 2):
            chunk = TextDelta(index=0, text=f"token {position} of a streamed answer ")
            session.append(AssistantChunkData(turn=0, step=0, chunk=chunk))
        session.append(TurnEndData(turn=0, reason="completed"))
        store.close_all()
        path = session.path
        raw = path.read_bytes()
        lines = raw.splitlines()[1:]
        typed = msgspec.json.Decoder(list[Event])

        load = best_of(5, lambda: load_session_log(path))
        floor_untyped = best_of(5, lambda: [msgspec.json.decode(line) for line in lines])
        floor_typed = best_of(5, lambda: typed.decode(b"[" + b",".join(lines) + b"]"))
        log = load_session_log(path)
        normalize = best_of(3, lambda: Normalizer(tmp, [log.header.id]).session_log(log))
        print(f"events: {len(log.events)}  file: {len(raw) / 1e6:.1f} MB")
        print(f"load_session_log:              {load:.3f} s")
        print(f"floor: json.decode per line:   {floor_untyped:.3f} s")
        print(f"floor: typed array decode:     {floor_typed:.3f} s")
        print(f"load / typed floor:            {load / floor_typed:.2f}x")
        print(f"load / per-line floor:         {load / floor_untyped:.2f}x")
        print(f"normalize (loaded log):        {normalize:.3f} s")


if __name__ == "__main__":
    main()
