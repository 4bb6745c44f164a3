"""MCP recordings that last (SPEC 15, 19): every committed recording — format 1, written
before the built-in masks reached ``mcp/`` — replays through today's masks, and a
recording of a newer format or mask set is refused naming both versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentreel.mcp_replay import MCP_RECORDINGS_DIR, McpRecordingError
from agentreel.mcp_replay._recording import Masking, compare_key, encode, load_recordings
from agentreel.session import MASKS_VERSION

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = sorted(
    {
        path.parent
        for pattern in ("fixtures/*/mcp", "interop/fixtures/*/mcp")
        for path in ROOT.glob(f"{pattern}/*.jsonl")
    }
)


def test_the_committed_recordings_are_found() -> None:
    names = {folder.parent.name for folder in COMMITTED}
    assert {"mcp-tools", "claude-code-mcp-task", "gemini-cli-mcp-subagent"} <= names


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: p.parent.name)
def test_a_committed_recording_compares_equal_through_todays_masks(folder: Path) -> None:
    # The agent sends each recorded client message again, on another machine: masked as
    # replay masks a live one, it gives the key of the recorded one read through the same.
    masking = Masking(cwd="/work/somewhere/else")
    for path in sorted(folder.glob("*.jsonl")):
        server = path.name.split(".")[0]
        raw = [json.loads(line) for line in path.read_text().splitlines()]
        sent = [r["message"] for r in raw[1:] if r["from"] == "client"]
        (recording,) = [
            r for r in load_recordings(folder.parent, server, masking) if r.path == path
        ]
        live = [compare_key(json.loads(masking.apply(encode(m)))) for m in sent]
        assert live == list(recording.keys), path


def test_a_newer_format_or_mask_set_is_refused_naming_both(tmp_path: Path) -> None:
    (tmp_path / MCP_RECORDINGS_DIR).mkdir()
    path = tmp_path / MCP_RECORDINGS_DIR / "time.0.jsonl"
    for header in (
        {"mcp_recording": 3, "masks": MASKS_VERSION},
        {"mcp_recording": 2, "masks": MASKS_VERSION + 1},
    ):
        path.write_text(json.dumps({**header, "server": "time", "session": None}) + "\n")
        with pytest.raises(McpRecordingError) as caught:
            load_recordings(tmp_path, "time")
        message = str(caught.value)
        assert message.startswith("mcp/time.0.jsonl:1: made by a newer agentreel")
        assert f"MCP recording format {header['mcp_recording']}" in message
        assert f"mask sets up to {MASKS_VERSION}" in message
