import pytest

from agentreel.llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    ReasoningDelta,
    StreamContractError,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    Usage,
    validate_stream,
)

GOOD_TEXT: list[Chunk] = [
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text="hi"),
    BlockEnd(index=0, block=TextPart("hi")),
    Usage(input_tokens=1, output_tokens=1),
    Finish(reason="stop"),
]

GOOD_TWO_TOOLS_INTERLEAVED: list[Chunk] = [
    BlockStart(index=0, block_type="tool-call"),
    BlockStart(index=1, block_type="tool-call"),
    ToolCallDelta(index=0, id="a", name="read_file", arguments_delta="{"),
    ToolCallDelta(index=1, id="b", name="list_files", arguments_delta="{"),
    ToolCallDelta(index=0, id="a", arguments_delta="}"),
    ToolCallDelta(index=1, id="b", arguments_delta="}"),
    BlockEnd(index=1, block=ToolCallPart(id="b", name="list_files", arguments="{}")),
    BlockEnd(index=0, block=ToolCallPart(id="a", name="read_file", arguments="{}")),
    Finish(reason="tool-calls"),
]


@pytest.mark.parametrize(
    "stream",
    [
        GOOD_TEXT,
        GOOD_TWO_TOOLS_INTERLEAVED,
        [Finish(reason="stop")],
        [
            BlockStart(index=0, block_type="text"),
            TextDelta(index=0, text="x"),
            Finish(reason="aborted"),
        ],
        [
            BlockStart(index=0, block_type="reasoning"),
            ReasoningDelta(index=0, text="x"),
            Usage(input_tokens=0, output_tokens=0),
            Finish(reason="error", code="stream_cut"),
        ],
    ],
)
def test_good_streams_pass(stream: list[Chunk]) -> None:
    validate_stream(stream)


@pytest.mark.parametrize(
    ("stream", "index", "reason"),
    [
        ([TextDelta(index=0, text="x"), Finish(reason="stop")], 0, "block 0 was never started"),
        (
            [*GOOD_TEXT[:3], TextDelta(index=0, text="late"), *GOOD_TEXT[3:]],
            3,
            "block 0 was already ended",
        ),
        (
            [BlockStart(index=0, block_type="text"), BlockStart(index=0, block_type="text")],
            1,
            "block 0 is already open",
        ),
        ([*GOOD_TEXT[:3], BlockStart(index=0, block_type="text")], 3, "block 0 was already ended"),
        (
            [
                BlockStart(index=0, block_type="text"),
                ToolCallDelta(index=0, id="a", arguments_delta="{"),
            ],
            1,
            "block 0 is a 'text' block, not 'tool-call'",
        ),
        (
            [
                BlockStart(index=0, block_type="text"),
                BlockEnd(index=0, block=ToolCallPart(id="a", name="n", arguments="{}")),
            ],
            1,
            "block 0 is a 'text' block, not 'tool-call'",
        ),
        ([*GOOD_TEXT, TextDelta(index=0, text="x")], 5, "chunk after finish"),
        ([*GOOD_TEXT, Finish(reason="stop")], 5, "chunk after finish"),
        (
            [Usage(input_tokens=1, output_tokens=1), Usage(input_tokens=1, output_tokens=1)],
            1,
            "second usage chunk",
        ),
        ([Finish(reason="stop"), Usage(input_tokens=1, output_tokens=1)], 1, "chunk after finish"),
        ([*GOOD_TEXT[:2], Finish(reason="stop")], 2, "finish 'stop' while block(s) 0 still open"),
        (GOOD_TEXT[:4], 4, "stream ended without a finish chunk"),
        ([], 0, "stream ended without a finish chunk"),
    ],
)
def test_bad_streams_name_the_offending_chunk(stream: list[Chunk], index: int, reason: str) -> None:
    with pytest.raises(StreamContractError) as excinfo:
        validate_stream(stream)
    assert excinfo.value.index == index
    assert excinfo.value.reason == reason
    assert f"chunk {index}" in str(excinfo.value)
    assert "produced this stream is at fault" in str(excinfo.value)
