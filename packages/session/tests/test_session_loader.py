"""Loading logs: torn tails (including a real SIGKILL), and file:line errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentreel.session import (
    CorruptLineError,
    EndSeed,
    Event,
    SeedLengthError,
    SessionHeader,
    SessionLogError,
    TurnEndData,
    TurnStart,
    TurnStartData,
    UnsupportedVersionError,
    UserMessage,
    UserMessageData,
    encode_record,
    load_session_log,
    open_session_log,
)

SESSION_ID = "2b1e3a4c-0000-4000-8000-000000000001"
HEADER = SessionHeader(id=SESSION_ID, created_at=1, cwd="/w")


def _event(seq: int) -> bytes:
    return encode_record(
        UserMessage(seq=seq, time=seq, data=UserMessageData(turn=0, text=f"m{seq}"))
    )


def _log(tmp_path: Path, *lines: bytes, header: SessionHeader = HEADER) -> Path:
    path = tmp_path / f"{SESSION_ID}.jsonl"
    path.write_bytes(encode_record(header) + b"".join(lines))
    return path


def test_torn_last_line_is_reported_and_earlier_events_kept(tmp_path: Path) -> None:
    whole = _event(2)
    path = _log(tmp_path, _event(0), _event(1), whole[:17])
    log = load_session_log(path)
    assert [e.seq for e in log.events] == [0, 1]
    assert log.torn_tail is not None
    assert log.torn_tail.line == 4
    assert log.torn_tail.text == whole[:17]
    assert log.torn_tail.problem


def test_complete_last_line_without_newline_is_not_torn(tmp_path: Path) -> None:
    path = _log(tmp_path, _event(0), _event(1)[:-1])
    log = load_session_log(path)
    assert [e.seq for e in log.events] == [0, 1]
    assert log.torn_tail is None


def test_header_only_log_without_newline_loads(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(encode_record(HEADER)[:-1])
    log = load_session_log(path)
    assert log.events == []
    assert log.torn_tail is None


def test_torn_header_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(encode_record(HEADER)[:20])
    with pytest.raises(CorruptLineError, match=rf"{path}:1: torn session header"):
        load_session_log(path)


@pytest.mark.parametrize("content", [b"", b"\n", b"  \n"])
def test_empty_file_is_an_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "e.jsonl"
    path.write_bytes(content)
    with pytest.raises(CorruptLineError, match=rf"{path}:1:"):
        load_session_log(path)


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        (b"not json at all\n", "invalid event"),
        (b"\n", "blank line"),
        (b'{"type":"turn/start","seq":1,"time":1,"data":{"turn":"zero"}}\n', "invalid event"),
        (_event(1)[:-1] + b"," + _event(2), "invalid event"),  # two records on one line
        (_event(1)[:30] + b"\n" + _event(1)[30:], "invalid event"),  # one record on two lines
        # A raw newline inside a string: as one array the two halves decode to one event
        # (the newline becomes a comma in the text); only the line count tells.
        (_event(1).replace(b'"m1"', b'"m\n1"'), "invalid event"),
        (_event(5), "seq 5 out of order (expected 1)"),
    ],
)
def test_corrupt_line_in_the_middle_names_file_and_line(
    tmp_path: Path, bad: bytes, fragment: str
) -> None:
    path = _log(tmp_path, _event(0), bad, _event(2), _event(3))
    with pytest.raises(CorruptLineError) as caught:
        load_session_log(path)
    error = caught.value
    assert error.path == path
    assert error.line == 3
    assert f"{path}:3: " in str(error)
    assert fragment in str(error)
    assert "re-record the scenario" in str(error)
    assert "nox" not in str(error)  # how the user re-records is known to the layers above
    assert error.advice in str(error)


@pytest.mark.parametrize(
    ("lines", "line"),
    [
        ((b"\n", b"EVENT0"), 2),  # right after the header
        ((b"EVENT0", b"\n", b"EVENT1"), 3),  # between two events
        ((b"EVENT0", b"EVENT1", b"  \n"), 4),  # whitespace only, at the end
        ((b"EVENT0", b"\r\n", b"EVENT1"), 3),  # a blank CRLF line
    ],
)
def test_blank_line_is_named_as_blank_with_its_line(
    tmp_path: Path, lines: tuple[bytes, ...], line: int
) -> None:
    events = iter([_event(0), _event(1)])
    path = _log(tmp_path, *(next(events) if part.startswith(b"EVENT") else part for part in lines))
    with pytest.raises(CorruptLineError) as caught:
        load_session_log(path)
    assert caught.value.line == line
    assert f"{path}:{line}: blank line" in str(caught.value)
    assert "truncated" not in str(caught.value)  # msgspec's word for an empty input


def test_blank_first_line_is_named_where_the_header_belongs(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n" + encode_record(HEADER) + _event(0))
    with pytest.raises(CorruptLineError, match=rf"{path}:1: blank line .* session header"):
        load_session_log(path)


def test_byte_order_mark_is_named(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + encode_record(HEADER) + _event(0))
    with pytest.raises(CorruptLineError) as caught:
        load_session_log(path)
    assert caught.value.line == 1
    assert "byte-order mark (BOM)" in str(caught.value)
    assert "without the BOM" in str(caught.value)


def test_corrupt_line_is_found_deep_in_a_large_log(tmp_path: Path) -> None:
    lines = [_event(i) for i in range(5000)]
    lines[4321] = lines[4321].replace(b'"text"', b'"txet"')
    path = _log(tmp_path, *lines)
    with pytest.raises(CorruptLineError, match=rf"{path}:4323: invalid event"):
        load_session_log(path)


def test_unterminated_bad_last_line_after_good_lines_is_torn_not_corrupt(tmp_path: Path) -> None:
    path = _log(tmp_path, _event(0), b"garbage")
    assert load_session_log(path).torn_tail is not None


def test_terminated_bad_last_line_is_corrupt(tmp_path: Path) -> None:
    path = _log(tmp_path, _event(0), b"garbage\n")
    with pytest.raises(CorruptLineError, match=rf"{path}:3:"):
        load_session_log(path)


def test_last_line_seq_is_checked_too(tmp_path: Path) -> None:
    path = _log(tmp_path, _event(0), _event(7)[:-1])
    with pytest.raises(CorruptLineError, match=rf"{path}:3: event seq 7 out of order"):
        load_session_log(path)


@pytest.mark.parametrize("version", [0, 2, 99])
def test_unknown_header_version(tmp_path: Path, version: int) -> None:
    path = tmp_path / "v.jsonl"
    path.write_bytes(
        b'{"type":"session","version":%d,"id":"x","created_at":1,"cwd":"/w"}\n' % version
        + _event(0)
    )
    with pytest.raises(UnsupportedVersionError) as caught:
        load_session_log(path)
    assert caught.value.line == 1
    assert f"{path}:1: header version {version}" in str(caught.value)
    assert "Upgrade agentreel" in str(caught.value)


def test_future_version_with_new_fields_is_reported_as_version(tmp_path: Path) -> None:
    path = tmp_path / "v.jsonl"
    path.write_bytes(b'{"type":"session","version":2,"id":"x","created_at":1,"cwd":"/w","new":1}\n')
    with pytest.raises(UnsupportedVersionError, match="header version 2"):
        load_session_log(path)


def test_header_that_is_an_event_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(_event(0) + _event(1))
    with pytest.raises(CorruptLineError, match=rf"{path}:1: invalid session header"):
        load_session_log(path)


def _fork_header(seed_length: int) -> SessionHeader:
    return SessionHeader(
        id=SESSION_ID,
        created_at=1,
        cwd="/w",
        parent_session="2b1e3a4c-0000-4000-8000-000000000000",
        spawn_index=0,
        origin="fork",
        seed_length=seed_length,
    )


def _seed_events(count: int) -> list[bytes]:
    return [
        encode_record(TurnStart(seq=i, time=i, data=TurnStartData(turn=i))) for i in range(count)
    ]


def test_seed_length_beyond_the_log(tmp_path: Path) -> None:
    path = _log(tmp_path, *_seed_events(2), header=_fork_header(5))
    with pytest.raises(SeedLengthError) as caught:
        load_session_log(path)
    assert f"{path}:1: seed_length 5 is beyond the log's 2 events" in str(caught.value)


def test_seed_length_on_a_non_fork_session(tmp_path: Path) -> None:
    header = SessionHeader(id=SESSION_ID, created_at=1, cwd="/w", seed_length=1)
    path = _log(tmp_path, _event(0), header=header)
    with pytest.raises(SeedLengthError, match="only a fork child has a seed"):
        load_session_log(path)


def test_seed_length_not_pointing_at_end_seed(tmp_path: Path) -> None:
    end_seed = encode_record(EndSeed(seq=3, time=3))
    path = _log(tmp_path, *_seed_events(3), end_seed, header=_fork_header(2))
    with pytest.raises(SeedLengthError) as caught:
        load_session_log(path)
    assert caught.value.line == 4
    assert "expected session/end-seed" in str(caught.value)


def test_fork_without_end_seed(tmp_path: Path) -> None:
    path = _log(tmp_path, *_seed_events(2), header=_fork_header(2))
    with pytest.raises(SeedLengthError, match="not followed by session/end-seed"):
        load_session_log(path)


def test_fork_with_right_seed_loads(tmp_path: Path) -> None:
    end_seed = encode_record(EndSeed(seq=2, time=2))
    path = _log(tmp_path, *_seed_events(2), end_seed, _event(3), header=_fork_header(2))
    log = load_session_log(path)
    assert len(log.seed) == 2
    assert isinstance(log.own_events[0], EndSeed)
    assert log.own_events[1].seq == 3


def test_errors_share_one_base(tmp_path: Path) -> None:
    path = _log(tmp_path, b"x\n")
    with pytest.raises(SessionLogError):
        load_session_log(path)


# -- a real SIGKILL ---------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from agentreel.llm import TextDelta
    from agentreel.session import (
        AssistantChunkData, SessionStore, TurnEndData, TurnStartData,
    )

    root, mode = Path(sys.argv[1]), sys.argv[2]
    store = SessionStore(root)
    session = store.create("/w")
    print(session.path, flush=True)
    if mode == "torn":
        # Complete, flushed events, then half a line written straight to the file.
        session.append(TurnStartData(turn=0))
        session.append(TurnEndData(turn=0, reason="completed"))
        session.append(TurnStartData(turn=1))
        session.flush()
        fd = os.open(session.path, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b'{"type":"assistant/chunk","seq":3,"time":1,"data":{"tu')
        print("ready", flush=True)
    else:
        # Stream forever with big events; buffered writes hit the disk at arbitrary bytes.
        turn = 0
        while True:
            session.append(TurnStartData(turn=turn))
            for position in range(50):
                chunk = TextDelta(index=0, text=f"{turn}.{position} " + "y" * 700)
                session.append(AssistantChunkData(turn=turn, step=0, chunk=chunk))
            session.append(TurnEndData(turn=turn, reason="completed"))
            if turn == 3:
                print("ready", flush=True)
            turn += 1
    import time
    time.sleep(60)
    """
)


def _run_and_kill(tmp_path: Path, mode: str) -> Path:
    process = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path / "root"), mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        path = Path(process.stdout.readline().strip())
        assert process.stdout.readline().strip() == "ready"
        if mode == "stream":
            time.sleep(0.05)  # let it write more, mid-line somewhere
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()
    assert process.returncode == -signal.SIGKILL
    return path


@pytest.mark.slow
def test_sigkill_mid_line_leaves_a_loadable_log_with_a_torn_tail(tmp_path: Path) -> None:
    path = _run_and_kill(tmp_path, "torn")
    log = load_session_log(path)
    assert [type(e).__name__ for e in log.events] == ["TurnStart", "TurnEnd", "TurnStart"]
    assert log.torn_tail is not None
    assert log.torn_tail.line == 5
    assert log.torn_tail.text.startswith(b'{"type":"assistant/chunk"')


@pytest.mark.slow
def test_sigkill_while_streaming_keeps_every_complete_event(tmp_path: Path) -> None:
    path = _run_and_kill(tmp_path, "stream")
    raw = path.read_bytes()
    log = load_session_log(path)
    complete_lines = raw.count(b"\n")
    # Every complete line is an event (or the header); only an unterminated tail is lost.
    assert len(log.events) >= complete_lines - 1
    assert [e.seq for e in log.events] == list(range(len(log.events)))
    assert (log.torn_tail is None) == (raw.endswith(b"\n") or len(log.events) == complete_lines)
    # Turns 0..3 were flushed at their turn/end before "ready".
    turn_ends = [e for e in log.events if isinstance(e.data, TurnEndData)]
    assert len(turn_ends) >= 4


def test_large_log_spanning_many_blocks_loads_exactly(tmp_path: Path) -> None:
    lines = [_event(i) for i in range(40_000)]  # ~3 MB: many blocks of lines
    path = _log(tmp_path, *lines, b'{"type":"user/mess')
    assert path.stat().st_size > 2 * (1 << 20)
    log = load_session_log(path)
    assert [e.seq for e in log.events] == list(range(40_000))
    assert log.events[-1].data == UserMessageData(turn=0, text="m39999")
    assert log.torn_tail is not None
    assert log.torn_tail.line == 40_002


def test_reader_yields_every_event_in_blocks_with_header_and_tail_up_front(
    tmp_path: Path,
) -> None:
    path = _log(tmp_path, *(_event(i) for i in range(40_000)), b'{"type":"user/mess')
    reader = open_session_log(path)
    assert reader.header == HEADER
    assert reader.torn_tail is not None  # known before any event is read
    assert reader.torn_tail.line == 40_002
    blocks = list(reader)
    assert len(blocks) > 2
    assert [event for block in blocks for event in block] == load_session_log(path).events


def _read_blocks(path: Path, read: list[Event]) -> None:
    """Every event of the log, each block added to ``read`` as it arrives."""
    for block in open_session_log(path):
        read.extend(block)


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        (_event(7), "seq 7 out of order (expected 30000)"),
        (_event(30_000)[:-1] + b"," + _event(30_001), "invalid event"),  # two on one line
        (_event(30_000).replace(b'"m30000"', b'"m\n30000"'), "invalid event"),
        (b"\n", "blank line"),
    ],
)
def test_bad_line_in_a_later_block_is_named_after_the_earlier_blocks(
    tmp_path: Path, bad: bytes, fragment: str
) -> None:
    lines = [_event(i) for i in range(40_000)]
    lines[30_000] = bad
    path = _log(tmp_path, *lines)
    read: list[Event] = []
    with pytest.raises(CorruptLineError) as caught:
        _read_blocks(path, read)
    assert caught.value.line == 30_002
    assert f"{path}:30002: " in str(caught.value)
    assert fragment in str(caught.value)
    assert read  # the blocks before it were read, each event once
    assert [event.seq for event in read] == list(range(len(read)))
    with pytest.raises(CorruptLineError, match=f"{path}:30002: "):
        load_session_log(path)


def test_fork_seed_boundary_in_a_later_block_is_checked(tmp_path: Path) -> None:
    seed = _seed_events(20_000)
    end_seed = encode_record(EndSeed(seq=20_000, time=1))
    path = _log(tmp_path, *seed, end_seed, _event(20_001), header=_fork_header(20_000))
    log = load_session_log(path)
    assert isinstance(log.own_events[0], EndSeed)
    late_end = encode_record(EndSeed(seq=20_001, time=1))
    path = _log(tmp_path, *seed, _event(20_000), late_end, header=_fork_header(20_000))
    with pytest.raises(SeedLengthError) as caught:
        load_session_log(path)
    assert caught.value.line == 20_002
    assert "expected session/end-seed" in str(caught.value)
