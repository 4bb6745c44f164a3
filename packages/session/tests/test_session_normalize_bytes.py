"""The bytes outputs of the normalizer (``session_log_bytes``, ``transcript_bytes``,
``session_log_file_bytes``): the very text of the str methods, encoded, whatever the
content, however a loaded log is sliced, with the same numbering left behind."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentreel.session import (
    Event,
    Mask,
    Normalizer,
    NotJsonLineError,
    SessionHeader,
    SessionLog,
    ToolCall,
    ToolCallData,
    UserMessage,
    UserMessageData,
    encode_record,
)
from agentreel.session import _normalize as normalize_module

MAIN = "11111111-1111-4111-8111-111111111111"
CHILD = "22222222-2222-4222-8222-222222222222"
OTHER_A = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
OTHER_B = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
FRESH = "cccccccc-cccc-4ccc-8ccc-cccccccccccc"
_CWD = '/tmp/wörk dir/"q"\\x'

_FRAGMENTS = [
    _CWD,
    _CWD + "/a.txt",
    json.dumps(_CWD)[1:-1],
    msgspec.json.encode(_CWD).decode()[1:-1],
    "/var",
    "é",
    "-",
    ".",
    "/",
    "\n",
    "\\",
    '"',
    "\\n",
    "\x01",
    "\u2028",
    "→",
    "🙂",
    MAIN,
    CHILD,
    OTHER_A,
    OTHER_A.upper(),
    uuid.UUID(OTHER_B).hex,
    "0123456789abcdef0123456789abcdef",
    "deadbeef",
    # Install paths (read in decoded text: a slice holding one is walked, not scanned).
    "/usr/lib/node_modules",
    "/node_modules/p",
    "C:\\npm\\node_modules\\",
    "/v/.venv/bin/x",
    "/lib/python3.12/site-packages",
    "<location>",
    "</location>",
]
_TEXTS = st.lists(
    st.builds(
        lambda parts, noise: "".join(parts) + noise,
        st.lists(st.sampled_from(_FRAGMENTS), max_size=6),
        st.text(max_size=6),
    ),
    min_size=0,
    max_size=9,
)


@contextmanager
def _slices_of(records: int) -> Iterator[None]:
    """Normalize loaded logs ``records`` events at a time (the default is thousands, so
    small logs would never cross a slice boundary)."""
    with mock.patch.object(normalize_module, "_RECORDS_PER_SLICE", records):
        yield


def _log(texts: list[str]) -> SessionLog:
    header = SessionHeader(id=MAIN, created_at=5, cwd=_CWD)
    events: list[Event] = []
    for text in texts:
        events.append(UserMessage(seq=len(events), time=7, data=UserMessageData(turn=1, text=text)))
        events.append(
            ToolCall(
                seq=len(events),
                time=8,
                data=ToolCallData(
                    turn=1, step=1, call_id=text[:40], name="x", arguments=json.dumps({"p": text})
                ),
            )
        )
    return SessionLog(path=Path("mem.jsonl"), header=header, events=events)


def _raw(log: SessionLog) -> bytes:
    return b"".join(encode_record(record) for record in [log.header, *log.events])


def _reference(normalizer: Normalizer, raw: bytes) -> bytes:
    """The rules applied the slow, obvious way: stdlib-decode every line, walk, encode (the
    header without its format stamp, which no golden holds)."""
    lines = [json.loads(line) for line in raw.splitlines()]
    for key in ("format", "masks"):
        lines[0].pop(key, None)
    return b"".join(msgspec.json.encode(normalizer.value(line)) + b"\n" for line in lines)


@settings(max_examples=200, deadline=None)
@given(_TEXTS, st.integers(min_value=1, max_value=4))
def test_loaded_log_bytes_equal_the_text_encoded_across_slices(
    texts: list[str], records_per_slice: int
) -> None:
    log = _log(texts)
    as_bytes, as_text, walked = (Normalizer(_CWD, [MAIN, CHILD]) for _ in range(3))
    with _slices_of(records_per_slice):
        out = as_bytes.session_log_bytes(log)
        text = as_text.session_log(log)
    assert type(out) is bytes
    assert out == text.encode()
    assert out == _reference(walked, _raw(log))
    # UUIDs were numbered in the same order whatever the slicing: the next one agrees.
    assert as_bytes.text(FRESH) == walked.text(FRESH)


def test_default_slicing_numbers_uuids_like_one_slice() -> None:
    """A log longer than one slice: every slice boundary keeps first-appearance order."""
    texts = [str(uuid.UUID(int=n % 2000, version=4)) for n in range(3 * 1024 + 7)]
    log = _log(texts)
    with _slices_of(len(log.events) + 1):
        whole = Normalizer(None, [MAIN]).session_log_bytes(log)
    assert Normalizer(None, [MAIN]).session_log_bytes(log) == whole
    assert b"{{uuid:2000}}" in whole
    assert b"{{uuid:2001}}" not in whole


def test_empty_log_is_the_header_line() -> None:
    out = Normalizer(_CWD, [MAIN]).session_log_bytes(_log([]))
    assert out.count(b"\n") == 1
    assert json.loads(out)["id"] == "{{session:main}}"
    assert json.loads(out)["created_at"] == 0


@settings(max_examples=100, deadline=None)
@given(_TEXTS)
def test_raw_log_bytes_equal_the_text_encoded(texts: list[str]) -> None:
    raw = _raw(_log(texts))
    as_bytes, as_text, walked = (Normalizer(_CWD, [MAIN, CHILD]) for _ in range(3))
    out = as_bytes.session_log_bytes(raw)
    assert out == as_text.session_log(raw).encode()
    assert out == _reference(walked, raw)
    assert as_bytes.text(FRESH) == walked.text(FRESH)


def test_raw_log_with_a_bad_line_leaves_the_numbering_untouched() -> None:
    normalizer = Normalizer(None, [])
    raw = (
        json.dumps({"id": 1, "a": OTHER_A}).encode()
        + b"\n"
        + json.dumps({"b": OTHER_B}).encode()
        + b"\n[1]\n"
    )
    with pytest.raises(NotJsonLineError, match=r"log\.jsonl:3: JSON list, not an object"):
        normalizer.session_log_bytes(raw, source="log.jsonl")
    assert normalizer.text(FRESH) == "{{uuid:1}}"


def test_session_log_file_bytes_equal_the_file_text(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_raw(_log([f"in {_CWD}/a", OTHER_A, "\u2028🙂"])))
    out = Normalizer(_CWD, [MAIN]).session_log_file_bytes(path)
    assert out == Normalizer(_CWD, [MAIN]).session_log_file(path).encode()
    assert b"{{cwd}}/a" in out
    path.write_bytes(b'{"type":"session"}\nnot json\n')
    with pytest.raises(NotJsonLineError, match=rf"{path}:2: not JSON"):
        Normalizer(None, []).session_log_file_bytes(path)


_MESSAGES = st.lists(
    st.fixed_dictionaries(
        {
            "jsonrpc": st.just("2.0"),
            "id": st.one_of(st.none(), st.integers(0, 3), st.sampled_from(["1", OTHER_A])),
            "params": st.fixed_dictionaries(
                {"text": st.sampled_from(_FRAGMENTS), "updatedAt": st.integers(1, 9)}
            ),
        }
    ),
    max_size=6,
)


@settings(max_examples=100, deadline=None)
@given(_MESSAGES, st.booleans())
def test_transcript_bytes_equal_the_text_encoded(
    messages: list[dict[str, object]], final_newline: bool
) -> None:
    stdout = b"\n".join(json.dumps(message).encode() for message in messages)
    if final_newline and stdout:
        stdout += b"\n"
    as_bytes, as_text = Normalizer(_CWD, [MAIN]), Normalizer(_CWD, [MAIN])
    out = as_bytes.transcript_bytes(stdout)
    assert type(out) is bytes
    assert out == as_text.transcript(stdout).encode()
    assert out.count(b"\n") == len(messages)
    assert as_bytes.jsonrpc_line({"id": "new"}) == as_text.jsonrpc_line({"id": "new"})


def test_transcript_bytes_garbage_names_source_and_line() -> None:
    with pytest.raises(NotJsonLineError, match=r"agent stdout of x:2: not JSON"):
        Normalizer(None, []).transcript_bytes(b'{"a":1}\nhello\n', source="agent stdout of x")


# -- a scenario's own masks (Mask) ----------------------------------------------------------

_SES = st.sampled_from(["ses_dce834576ffeLDDYQ71S6FLlUX", "ses_23122111c001GfpsM1tv405xAU"])


@settings(max_examples=100, deadline=None)
@given(_TEXTS, st.lists(_SES, max_size=3), st.integers(min_value=1, max_value=4))
def test_a_masked_loaded_log_is_the_walked_raw_log(
    texts: list[str], ids: list[str], records_per_slice: int
) -> None:
    """With masks the loaded log is walked, not scanned: the same bytes as the raw log
    and as the obvious decode-walk-encode, the masks' numbering included."""
    masks = [Mask.checked(r"\bses_[0-9A-Za-z]{26,}\b", "opencode-session")]
    log = _log([*texts, *(f"id {i}" for i in ids)])
    loaded, raw, walked = (Normalizer(_CWD, [MAIN, CHILD], masks=masks) for _ in range(3))
    with _slices_of(records_per_slice):
        out = loaded.session_log_bytes(log)
    assert out == raw.session_log_bytes(_raw(log))
    assert out == _reference(walked, _raw(log))
    assert b"ses_" not in out
    # In the message text, the tool call id and its arguments.
    assert out.count(b"{{opencode-session:") == 3 * len(ids)


def test_a_mask_that_matches_nothing_changes_nothing() -> None:
    log = _log([f"in {_CWD}/a", OTHER_A, "\u2028🙂", '"q"\\x'])
    plain = Normalizer(_CWD, [MAIN]).session_log_bytes(log)
    masked = Normalizer(_CWD, [MAIN], masks=[Mask.checked("never-here", "x")])
    assert masked.session_log_bytes(log) == plain
