"""The ``replay-drifted`` provider and the merge (SPEC 20), in process: a caller goes to the
upstream from its first call the recording cannot answer as recorded, every other caller
is served its recorded calls, and the run merges back by the one rule."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from agentreel.llm import Chunk, GenerateOptions, TextDelta, available_providers
from agentreel.llm_replay import (
    DriftedProvider,
    DriftedReport,
    DriftTolerantReplayProvider,
    LiveLog,
    RecordedLog,
    merge_drifted,
    read_drifted_report,
)
from agentreel.llm_replay.testing import FixtureRecorder, collect, options_for, text_call
from agentreel.session import SessionLog, load_session_log


class Upstream:
    """A provider that answers every call ``LIVE`` and counts them."""

    def __init__(self) -> None:
        self.calls: list[GenerateOptions] = []

    async def _answer(self) -> AsyncIterator[Chunk]:
        for chunk in text_call("LIVE"):
            yield chunk

    def stream(self, options: GenerateOptions) -> AsyncIterator[Chunk]:
        self.calls.append(options)
        return self._answer()


def record(fixture: Path, tmp_path: Path) -> list[str]:
    recorder = FixtureRecorder(tmp_path / "recorded")
    main = recorder.main()
    recorder.call(main, text_call("plan"), options=options_for("m", prompt="hello"))
    first = recorder.spawn(main, 0)
    recorder.call(
        first,
        text_call("one"),
        options=options_for("a", parent="m", spawn_index=0, prompt="task one"),
    )
    second = recorder.spawn(main, 1)
    recorder.call(
        second,
        text_call("two"),
        options=options_for("b", parent="m", spawn_index=1, prompt="task two"),
    )
    recorder.call(main, text_call("done"), options=options_for("m", prompt="sum up"))
    return recorder.save(fixture)


def text(chunks: list[Chunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


def test_only_the_drifted_and_unrecorded_callers_go_live(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    record(fixture, tmp_path)
    upstream = Upstream()
    replay = DriftTolerantReplayProvider(
        fixture, live_cwd=str(tmp_path), report_path=tmp_path / "r.json"
    )
    provider = DriftedProvider(replay, upstream, report_path=tmp_path / "drifted.json")

    async def run() -> list[str]:
        answers = [text(await collect(provider.stream(options_for("M", prompt="hello"))))]
        child = options_for("A", parent="M", spawn_index=0, prompt="task one, changed")
        answers.append(text(await collect(provider.stream(child))))
        sibling = options_for("B", parent="M", spawn_index=1, prompt="task two")
        answers.append(text(await collect(provider.stream(sibling))))
        new = options_for("C", parent="M", spawn_index=2, prompt="task three")
        answers.append(text(await collect(provider.stream(new))))
        answers.append(text(await collect(provider.stream(options_for("M", prompt="sum up")))))
        answers.append(text(await collect(provider.stream(options_for("M", prompt="more")))))
        return answers

    assert asyncio.run(run()) == ["plan", "LIVE", "two", "LIVE", "done", "LIVE"]
    assert len(upstream.calls) == provider.upstream_calls == 3
    provider.close()
    report = read_drifted_report(tmp_path / "drifted.json")
    assert [(c.caller, c.file, c.from_call, c.why) for c in report.live] == [
        ("A", "session.1.jsonl", 1, "drift"),
        ("C", None, 1, "unrecorded"),
        ("M", "session.jsonl", 3, "exhausted"),
    ]
    # The drifts sent callers live: the run's consumption report holds no replay error.
    assert replay.consumption_report().errors == []


def test_the_merge_keeps_what_was_replayed_and_drops_what_was_not_called(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    record(fixture, tmp_path)
    names = ["session.jsonl", "session.1.jsonl", "session.2.jsonl"]
    recorded = [
        RecordedLog(n, load_session_log(fixture / n).header, (fixture / n).read_bytes())
        for n in names
    ]
    replay = DriftTolerantReplayProvider(fixture, live_cwd=str(tmp_path))

    async def run() -> None:
        await collect(replay.stream(options_for("M", prompt="hello")))
        await collect(replay.stream(options_for("A", parent="M", spawn_index=0, prompt="task one")))
        await collect(replay.stream(options_for("M", prompt="sum up")))

    asyncio.run(run())
    # The live logs: the agent's own, here the recorded ones under the live ids.
    live_ids = {"session.jsonl": "M", "session.1.jsonl": "A"}
    live = []
    for log in recorded[:2]:
        data = log.data.replace(log.header.id.encode(), live_ids[log.name].encode())
        live.append(LiveLog(load_session_log_bytes(tmp_path, data).header, data))
    merged = merge_drifted(recorded, live, replay.consumption_report(), DriftedReport())
    assert [(f.status, f.file, f.recorded_file) for f in merged.fates] == [
        ("kept", "session.jsonl", "session.jsonl"),
        ("kept", "session.1.jsonl", "session.1.jsonl"),
        ("dropped", None, "session.2.jsonl"),
    ]
    assert merged.files == {n: (fixture / n).read_bytes() for n in names[:2]}
    assert merged.new_files == []


def load_session_log_bytes(tmp_path: Path, data: bytes) -> SessionLog:
    path = tmp_path / "live.jsonl"
    path.write_bytes(data)
    return load_session_log(path)


def test_the_provider_is_registered() -> None:
    assert "replay-drifted" in available_providers()
