"""The format stamp (SPEC 15): a session log says which recording format and which built-in
mask set made it; one without a stamp is the oldest format; a newer one is refused naming
both versions; a golden holds no stamp, so it stays what it was when the stamp changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentreel.session import (
    MASKS_VERSION,
    OLDEST_FORMAT,
    RECORDING_FORMAT,
    Mask,
    Normalizer,
    SessionHeader,
    UnsupportedVersionError,
    encode_record,
    load_session_log,
)

_ID = "4e9b11f6-4ab7-4bac-badc-a4d7c083af25"
_EVENT = b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":0}}\n'


def _header_line(**stamp: object) -> bytes:
    header = {
        "type": "session",
        "version": 1,
        "id": _ID,
        "created_at": 1,
        "cwd": "/w",
        "parent_session": None,
        "spawn_index": None,
        "origin": "main",
        "seed_length": 0,
        **stamp,
    }
    return json.dumps(header, separators=(",", ":")).encode() + b"\n"


def test_a_new_log_is_stamped_with_the_current_format_and_masks(tmp_path: Path) -> None:
    line = encode_record(SessionHeader(id=_ID, created_at=1, cwd="/w"))
    assert json.loads(line)["format"] == RECORDING_FORMAT
    assert json.loads(line)["masks"] == MASKS_VERSION
    path = tmp_path / "session.jsonl"
    path.write_bytes(line + _EVENT)
    header = load_session_log(path).header
    assert (header.format, header.masks) == (RECORDING_FORMAT, MASKS_VERSION)


def test_a_log_without_a_stamp_is_read_as_the_oldest_format(tmp_path: Path) -> None:
    # Never as the current format: a reader may treat format 1 differently (it keeps no
    # text of tool schemas), so it must know which one it holds.
    path = tmp_path / "session.jsonl"
    path.write_bytes(_header_line() + _EVENT)
    header = load_session_log(path).header
    assert (header.format, header.masks) == (OLDEST_FORMAT, OLDEST_FORMAT)
    assert RECORDING_FORMAT > OLDEST_FORMAT


@pytest.mark.parametrize(
    ("stamp", "named"),
    [
        ({"format": RECORDING_FORMAT + 1, "masks": MASKS_VERSION}, "recording format"),
        ({"format": RECORDING_FORMAT, "masks": MASKS_VERSION + 1}, "built-in mask set"),
        # A newer format may add header fields this one does not know: still the stamp's
        # refusal, not "invalid session header".
        ({"format": RECORDING_FORMAT + 1, "masks": MASKS_VERSION, "lanes": []}, "format"),
    ],
)
def test_a_newer_log_is_refused_naming_both_versions(
    tmp_path: Path, stamp: dict[str, object], named: str
) -> None:
    path = tmp_path / "session.jsonl"
    path.write_bytes(_header_line(**stamp) + _EVENT)
    with pytest.raises(UnsupportedVersionError) as caught:
        load_session_log(path)
    message = str(caught.value)
    assert "newer agentreel" in message
    assert named in message
    newer = stamp["format"] if stamp["format"] != RECORDING_FORMAT else stamp["masks"]
    current = RECORDING_FORMAT if stamp["format"] != RECORDING_FORMAT else MASKS_VERSION
    assert f"{newer!r}" in message
    assert f"1 to {current}" in message
    assert "Upgrade agentreel" in message


def test_a_golden_holds_no_stamp(tmp_path: Path) -> None:
    # Goldens stay byte for byte what they were when the stamp changes: every path of the
    # normalizer (typed, walked with a scenario's masks, raw bytes) leaves it out.
    path = tmp_path / "session.jsonl"
    path.write_bytes(encode_record(SessionHeader(id=_ID, created_at=1, cwd="/w")) + _EVENT)
    log = load_session_log(path)
    old = _header_line()
    expected = Normalizer("/w", [_ID]).session_log_bytes(old + _EVENT)
    for golden in (
        Normalizer("/w", [_ID]).session_log_bytes(log),
        Normalizer.for_logs("/w", [log]).session_log_bytes(path.read_bytes()),
    ):
        assert b'"format"' not in golden
        assert golden == expected
    walked = Normalizer("/w", [_ID], masks=[Mask.checked("never-there", "x")])
    assert walked.session_log_bytes(log) == expected
