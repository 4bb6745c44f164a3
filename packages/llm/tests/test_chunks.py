import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentreel.llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    ChunkDecodeError,
    Finish,
    ReasoningDelta,
    ReasoningPart,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    Usage,
    decode_chunk,
    decode_chunks,
    encode_chunk,
)

EVERY_CHUNK_TYPE: list[Chunk] = [
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text='héllo \n"world"'),
    ReasoningDelta(index=1, text="thinking…"),
    ToolCallDelta(index=2, id="call_1", name="read_file", arguments_delta='{"pa'),
    ToolCallDelta(index=2, id="call_1", arguments_delta='th": "a"}'),
    BlockEnd(index=0, block=TextPart("héllo")),
    BlockEnd(index=1, block=ReasoningPart("thinking…")),
    BlockEnd(index=2, block=ToolCallPart(id="call_1", name="read_file", arguments='{"path": "a"}')),
    Usage(input_tokens=10, output_tokens=3),
    Usage(
        input_tokens=10,
        output_tokens=3,
        cache_read_tokens=4,
        cache_write_tokens=1,
        reasoning_tokens=2,
    ),
    Finish(reason="stop"),
    Finish(reason="error", message="boom", code="server_error"),
]


@pytest.mark.parametrize("chunk", EVERY_CHUNK_TYPE, ids=lambda c: type(c).__name__)
def test_every_chunk_type_round_trips_exactly(chunk: Chunk) -> None:
    encoded = encode_chunk(chunk)
    decoded = decode_chunk(encoded)
    assert decoded == chunk
    assert type(decoded) is type(chunk)
    assert encode_chunk(decoded) == encoded


def test_wire_form_is_tagged_and_omits_unset_optionals() -> None:
    assert encode_chunk(ToolCallDelta(index=2, id="c", arguments_delta="{")) == (
        b'{"type":"tool-call-delta","index":2,"id":"c","arguments_delta":"{"}'
    )
    assert msgspec.json.decode(encode_chunk(Finish(reason="stop"))) == {
        "type": "finish",
        "reason": "stop",
    }


def test_decode_many_matches_decode_one() -> None:
    blob = b"[" + b",".join(encode_chunk(c) for c in EVERY_CHUNK_TYPE) + b"]"
    assert decode_chunks(blob) == EVERY_CHUNK_TYPE


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"type":"nope","index":0}', "Invalid value 'nope'"),
        (b'{"type":"text-delta","index":"0","text":"x"}', "$.index"),
        (b'{"type":"finish","reason":"bored"}', "$.reason"),
        (b'{"type":"text-delta","index":0}', "missing required field `text`"),
        (b"not json", "malformed"),
    ],
)
def test_decode_errors_name_the_problem(raw: bytes, expected: str) -> None:
    with pytest.raises(ChunkDecodeError) as excinfo:
        decode_chunk(raw)
    assert expected in str(excinfo.value)


@given(st.text(), st.integers(min_value=0, max_value=2**31))
def test_text_delta_round_trips_any_text(text: str, index: int) -> None:
    chunk = TextDelta(index=index, text=text)
    assert decode_chunk(encode_chunk(chunk)) == chunk
