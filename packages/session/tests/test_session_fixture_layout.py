"""The fixture layout: one owner for recording names, numbering, the override file, {{cwd}}."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentreel.llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
)
from agentreel.session import (
    CWD_TOKEN,
    MAIN_SESSION_FILE,
    OVERRIDE_FILE,
    REFRESH_COMMAND_ENV,
    RERECORD_COMMAND_ENV,
    AssistantChunkData,
    SessionStore,
    TurnStartData,
    recording_names,
    refresh_command,
    rerecord_command,
    session_file_name,
    session_file_number,
    tokenize_cwd,
)


def test_names_and_numbers_round_trip() -> None:
    assert session_file_name(0) == MAIN_SESSION_FILE == "session.jsonl"
    assert session_file_name(12) == "session.12.jsonl"
    for number in (0, 1, 9, 10, 123):
        assert session_file_number(session_file_name(number)) == number
    with pytest.raises(ValueError, match="0 \\(main\\) or a positive n"):
        session_file_name(-1)


@pytest.mark.parametrize(
    "name",
    ["session.0.jsonl", "session.01.jsonl", "session.x.jsonl", "session.jsonl.bak", OVERRIDE_FILE],
)
def test_other_names_are_not_recordings(name: str) -> None:
    assert session_file_number(name) is None


def test_recording_names_orders_by_number_not_text(tmp_path: Path) -> None:
    for name in ("session.10.jsonl", "session.2.jsonl", "session.jsonl", "session.02.jsonl"):
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "session.3.jsonl").mkdir()  # a directory is not a recording
    assert recording_names(tmp_path) == ["session.jsonl", "session.2.jsonl", "session.10.jsonl"]


def test_tokens_and_commands() -> None:
    assert CWD_TOKEN == "{{cwd}}"


def test_hints_name_the_agentreel_cli_unless_the_caller_says_how_it_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(RERECORD_COMMAND_ENV, raising=False)
    monkeypatch.delenv(REFRESH_COMMAND_ENV, raising=False)
    # A user's project has the `agentreel` command line, not this repository's nox sessions.
    assert rerecord_command("plain-turn") == "agentreel record plain-turn"
    assert refresh_command("plain-turn") == "agentreel refresh plain-turn"

    monkeypatch.setenv(RERECORD_COMMAND_ENV, "nox -s record -- {scenario}")
    monkeypatch.setenv(REFRESH_COMMAND_ENV, "make golden SCENARIO={scenario}")
    assert rerecord_command("plain-turn") == "nox -s record -- plain-turn"
    assert refresh_command("plain-turn") == "make golden SCENARIO=plain-turn"
    # A command without the placeholder gets the name appended.
    monkeypatch.setenv(RERECORD_COMMAND_ENV, "uv run agentreel record")
    assert rerecord_command("x") == "uv run agentreel record x"


# -- the cwd split across streamed deltas (tokenize_cwd) -----------------------------------

_SPLIT_CWD = "/tmp/agentreel-run-x7/cwd"


def _streamed_log(
    root: Path, cwd: str, text_pieces: list[str], argument_pieces: list[str]
) -> bytes:
    """A real session log: one call streaming text, then one streaming tool arguments."""
    store = SessionStore(root, clock=lambda: 1)
    session = store.create(cwd)
    session.append(TurnStartData(turn=1))
    text: list[Chunk] = [
        BlockStart(index=0, block_type="text"),
        *(TextDelta(index=0, text=piece) for piece in text_pieces),
        BlockEnd(index=0, block=TextPart("".join(text_pieces))),
        Finish(reason="stop"),
    ]
    arguments = "".join(argument_pieces)
    tool: list[Chunk] = [
        BlockStart(index=0, block_type="tool-call"),
        *(
            ToolCallDelta(index=0, id="c1", name="read", arguments_delta=piece)
            for piece in argument_pieces
        ),
        BlockEnd(index=0, block=ToolCallPart(id="c1", name="read", arguments=arguments)),
        Finish(reason="tool-calls"),
    ]
    streams = [(1, text), (2, tool)]
    for step, chunks in streams:
        for chunk in chunks:
            session.append(AssistantChunkData(turn=1, step=step, chunk=chunk))
    store.close_all()
    return session.path.read_bytes()


def _deltas(data: bytes) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for line in data.splitlines()[1:]:
        event = json.loads(line)
        chunk = event["data"].get("chunk", {})
        if chunk.get("type") == "text-delta":
            out.append((event["data"]["step"], chunk["text"]))
        elif chunk.get("type") == "tool-call-delta":
            out.append((event["data"]["step"], chunk["arguments_delta"]))
    return out


def _cut(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted(cuts), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def _check_split_cwd_is_tokenized(
    tmp_path: Path, text_cuts: list[int], arg_cuts: list[int]
) -> None:
    text = f"I read {_SPLIT_CWD}/notes.txt; see {_SPLIT_CWD}."
    arguments = json.dumps({"filePath": f"{_SPLIT_CWD}/notes.txt"})
    raw = _streamed_log(tmp_path, _SPLIT_CWD, _cut(text, text_cuts), _cut(arguments, arg_cuts))

    tokenized = tokenize_cwd(raw, Path(_SPLIT_CWD))

    assert _SPLIT_CWD.encode() not in tokenized
    # No piece of the path is left behind in any delta: each occurrence went whole into
    # the delta where it started, and was replaced there.
    before, after = _deltas(raw), _deltas(tokenized)
    assert len(after) == len(before)
    for step, original in ((1, text), (2, arguments)):
        pieces = [piece for s, piece in after if s == step]
        assert "".join(pieces) == original.replace(_SPLIT_CWD, CWD_TOKEN)
        assert sum(piece.count(CWD_TOKEN) for piece in pieces) == original.count(_SPLIT_CWD)
        assert not any("agentreel-run" in piece or "x7/cwd" in piece for piece in pieces)
    # Lines other than re-cut deltas keep their bytes (ids, times), cwd aside.
    raw_lines, new_lines = raw.splitlines(), tokenized.splitlines()
    assert len(raw_lines) == len(new_lines)
    for old, new in zip(raw_lines, new_lines, strict=True):
        if b"-delta" not in old:
            assert new == old.replace(_SPLIT_CWD.encode(), CWD_TOKEN.encode())


@pytest.mark.parametrize(
    ("text_cuts", "arg_cuts"),
    [
        ([8], [14]),  # right after the first "/", in text and in the arguments
        ([10, 12, 20], [15, 16, 17]),  # one path over four deltas
        ([7 + len(_SPLIT_CWD) - 1], [13 + len(_SPLIT_CWD)]),  # one character left over
        ([9, 7 + len(_SPLIT_CWD) + 14], [30]),  # both occurrences split
        ([], []),  # whole: replaced as before
    ],
)
def test_tokenize_cwd_joins_a_cwd_split_across_deltas(
    tmp_path: Path, text_cuts: list[int], arg_cuts: list[int]
) -> None:
    _check_split_cwd_is_tokenized(tmp_path, text_cuts, arg_cuts)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text_cuts=st.lists(st.integers(min_value=1, max_value=70), max_size=6, unique=True),
    arg_cuts=st.lists(st.integers(min_value=1, max_value=45), max_size=6, unique=True),
)
def test_tokenize_cwd_property_any_cuts(
    tmp_path_factory: pytest.TempPathFactory, text_cuts: list[int], arg_cuts: list[int]
) -> None:
    _check_split_cwd_is_tokenized(tmp_path_factory.mktemp("log"), text_cuts, arg_cuts)


def test_tokenize_cwd_joins_deltas_of_one_stream_only(tmp_path: Path) -> None:
    # The end of one call's text and the start of the next call's arguments spell the cwd
    # together: they are different streams, so nothing is moved between them.
    half = len(_SPLIT_CWD) // 2
    raw = _streamed_log(tmp_path, _SPLIT_CWD, ["see ", _SPLIT_CWD[:half]], [_SPLIT_CWD[half:]])
    tokenized = tokenize_cwd(raw, Path(_SPLIT_CWD))
    assert _deltas(tokenized) == _deltas(raw)
