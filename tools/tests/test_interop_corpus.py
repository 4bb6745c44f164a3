"""The compatibility corpus's real-agent recordings as ``nox -s interop`` replays them
(``tools.interop_corpus``): named ``<scenario>-<commit>`` beside ``interop/fixtures``'s own,
copied (never edited) into a scratch folder, each replayed from the moment it was recorded.
The replay itself (real agents) runs only in ``nox -s interop``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tools import interop_corpus

ROOT = Path(__file__).resolve().parents[2]


def test_every_real_agent_recording_of_the_corpus_is_named_with_its_commit() -> None:
    found = interop_corpus.scenarios(ROOT)
    # corpus/README.md's five real-agent entries, at 4758d65.
    assert list(found) == [
        f"{name}-4758d65"
        for name in (
            "claude-code-read",
            "claude-code-task",
            "codex-subagent",
            "mistral-vibe-subagent",
            "opencode-subagents",
        )
    ]
    # Not one of interop/fixtures' names: the two never collide in a selection.
    assert not {name for name in found} & {p.name for p in (ROOT / "interop/fixtures").iterdir()}
    assert found["claude-code-read-4758d65"] == ROOT / "corpus/interop/4758d65/claude-code-read"


@pytest.mark.parametrize(
    ("zone", "local"),
    [("UTC", "2026-12-02 01:42:35"), ("Etc/GMT+12", "2026-12-01 13:42:35")],
)
def test_a_recording_replays_from_the_local_moment_of_its_created_at(
    monkeypatch: pytest.MonkeyPatch, zone: str, local: str
) -> None:
    # The header's created_at, 1796175755875 ms (01:42:35 UTC), in the local zone
    # libfaketime reads its absolute start in: the agent's clock starts at that instant.
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        recorded = interop_corpus.recorded_at(ROOT / "corpus/interop/4758d65/claude-code-read")
    finally:
        monkeypatch.undo()
        time.tzset()
    assert recorded == local


def test_a_log_without_created_at_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "session.jsonl").write_text(json.dumps({"type": "session"}) + "\n")
    with pytest.raises(ValueError, match="no created_at") as raised:
        interop_corpus.recorded_at(tmp_path)
    assert str(tmp_path / "session.jsonl") in str(raised.value)


def test_the_copy_holds_each_chosen_recording_byte_for_byte_and_nothing_else(
    tmp_path: Path,
) -> None:
    found = interop_corpus.scenarios(ROOT)
    scratch = tmp_path / "corpus"
    (scratch / "stale").mkdir(parents=True)
    chosen = {"codex-subagent-4758d65": found["codex-subagent-4758d65"]}
    interop_corpus.copy_to(chosen, scratch)
    assert sorted(p.name for p in scratch.iterdir()) == ["codex-subagent-4758d65"]
    source = found["codex-subagent-4758d65"]
    for file in source.rglob("*"):
        if file.is_file():
            copied = scratch / "codex-subagent-4758d65" / file.relative_to(source)
            assert copied.read_bytes() == file.read_bytes()
