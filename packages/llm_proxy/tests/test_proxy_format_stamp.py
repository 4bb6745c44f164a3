"""wire.ndjson's format stamp (SPEC 15): a fixture's answers as sent start with the recording
format and mask set that wrote them; a newer stamp is refused naming both versions, an
unstamped file (format 1) replays."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentreel.llm_proxy import ProxyConfigError, start_proxy
from agentreel.session import MASKS_VERSION, RECORDING_FORMAT, VERBATIM_FILE

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "fixtures" / "example-openai-sdk"


def _copy(tmp_path: Path) -> Path:
    """The fixture with its answers as an agentreel before the stamp wrote them: no stamp."""
    fixture = tmp_path / "fixture"
    shutil.copytree(FIXTURE, fixture, ignore=shutil.ignore_patterns("golden"))
    wire = fixture / VERBATIM_FILE
    lines = wire.read_text().splitlines(keepends=True)
    if "format" in json.loads(lines[0]):
        wire.write_text("".join(lines[1:]))
    return fixture


def test_the_committed_fixture_is_stamped_by_the_recorder(tmp_path: Path) -> None:
    # Recorded through the proxy by this agentreel: the stamp line, then the answers.
    stamp, answer, *_ = (FIXTURE / VERBATIM_FILE).read_text().splitlines()
    assert json.loads(stamp) == {"format": RECORDING_FORMAT, "masks": MASKS_VERSION}
    assert "format" not in json.loads(answer)
    unstamped = _copy(tmp_path) / VERBATIM_FILE
    assert "format" not in json.loads(unstamped.read_text().splitlines()[0])


@pytest.mark.asyncio
async def test_an_unstamped_wire_file_is_format_1_and_replays(tmp_path: Path) -> None:
    async with start_proxy("replay", fixture=_copy(tmp_path)):
        pass


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "stamp",
    [
        {"format": RECORDING_FORMAT + 1, "masks": MASKS_VERSION},
        {"format": RECORDING_FORMAT, "masks": MASKS_VERSION + 1},
    ],
)
async def test_a_newer_wire_file_is_refused_naming_both_versions(
    tmp_path: Path, stamp: dict[str, int]
) -> None:
    fixture = _copy(tmp_path)
    wire = fixture / VERBATIM_FILE
    wire.write_text(json.dumps(stamp) + "\n" + wire.read_text())
    with pytest.raises(ProxyConfigError) as caught:
        async with start_proxy("replay", fixture=fixture):
            pass
    message = str(caught.value)
    assert str(wire) in message
    assert "newer agentreel" in message
    assert f"1 to {RECORDING_FORMAT}" in message or f"1 to {MASKS_VERSION}" in message


@pytest.mark.asyncio
async def test_a_current_stamp_is_read_and_not_taken_for_an_answer(tmp_path: Path) -> None:
    fixture = _copy(tmp_path)
    wire = fixture / VERBATIM_FILE
    stamp = {"format": RECORDING_FORMAT, "masks": MASKS_VERSION}
    wire.write_text(json.dumps(stamp, separators=(",", ":")) + "\n" + wire.read_text())
    async with start_proxy("replay", fixture=fixture):
        pass
