import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentreel.brand import InvalidIdError, new_session_id, parse_session_id


def test_new_session_ids_are_unique_canonical_uuids() -> None:
    ids = {new_session_id() for _ in range(200)}
    assert len(ids) == 200
    for sid in ids:
        assert parse_session_id(sid) == sid
        assert uuid.UUID(sid).version == 4


@pytest.mark.parametrize(
    ("garbage", "reason"),
    [
        ("", "length 0"),
        ("not-a-uuid", "length 10"),
        ("123E4567-E89B-42D3-A456-426614174000", "canonical lowercase"),
        ("123e4567-e89b-42d3-a456-42661417400z", "not a UUID"),
        ("{23e4567-e89b-42d3-a456-426614174000", "not a UUID"),
        (42, "got int"),
        (None, "got NoneType"),
    ],
)
def test_parse_session_id_rejects_garbage_with_reason(garbage: object, reason: str) -> None:
    with pytest.raises(InvalidIdError) as excinfo:
        parse_session_id(garbage)
    assert reason in str(excinfo.value)
    assert isinstance(excinfo.value, ValueError)
    assert "new_session_id()" in str(excinfo.value)


@given(st.text(max_size=40))
def test_parse_accepts_only_what_uuid_round_trips(text: str) -> None:
    try:
        ok = str(uuid.UUID(text)) == text
    except ValueError:
        ok = False
    if ok:
        assert parse_session_id(text) == text
    else:
        with pytest.raises(InvalidIdError):
            parse_session_id(text)
