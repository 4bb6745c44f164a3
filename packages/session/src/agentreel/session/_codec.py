"""Line codec for session logs: fast, strict, one msgspec decoder per record kind."""

from __future__ import annotations

import msgspec

from agentreel.session._events import Event, SessionHeader

_ENCODER = msgspec.json.Encoder()
HEADER_DECODER = msgspec.json.Decoder(SessionHeader)
EVENT_DECODER = msgspec.json.Decoder(Event)
# Many event lines decoded in one call (the loader joins them into one JSON array).
EVENTS_DECODER = msgspec.json.Decoder(list[Event])


def encode_record(record: SessionHeader | Event) -> bytes:
    """One log line, newline included."""
    return _ENCODER.encode(record) + b"\n"
