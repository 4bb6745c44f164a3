"""AWS event streams (``application/vnd.amazon.eventstream``, Bedrock's streaming framing),
both ways: binary messages of a prelude (total length, headers length, the prelude's
CRC32), headers, a payload and the message's CRC32. Decoding checks both CRCs."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping

from agentreel.llm.wire._sse import SseEvent

_PRELUDE = struct.Struct(">II")
_STRING = 7
EXCEPTION_PREFIX = "exception:"
"""The name of a decoded event that is an exception (``:message-type`` ``exception``)."""


class EventStreamError(ValueError):
    """A malformed event-stream message (a CRC that does not match, a bad length)."""


def _crc(data: bytes, start: int = 0) -> int:
    return zlib.crc32(data, start) & 0xFFFFFFFF


def encode_event_message(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message: string ``headers``, ``payload``, both CRCs."""
    encoded = b"".join(
        bytes([len(name.encode())])
        + name.encode()
        + bytes([_STRING])
        + struct.pack(">H", len(value.encode()))
        + value.encode()
        for name, value in headers.items()
    )
    total = _PRELUDE.size + 4 + len(encoded) + len(payload) + 4
    prelude = _PRELUDE.pack(total, len(encoded))
    message = prelude + struct.pack(">I", _crc(prelude)) + encoded + payload
    return message + struct.pack(">I", _crc(message))


def event_frame(event_type: str, payload: bytes) -> bytes:
    """A Bedrock stream event (``:event-type``) with a JSON payload."""
    return _json_message("event", event_type, payload)


def exception_frame(exception_type: str, payload: bytes) -> bytes:
    """A Bedrock stream exception (``:exception-type``) with a JSON payload."""
    return _json_message("exception", exception_type, payload)


def _json_message(kind: str, type_name: str, payload: bytes) -> bytes:
    """A message of ``kind`` (``event``, ``exception``) named ``type_name`` in its
    ``:<kind>-type`` header, with a JSON payload."""
    return encode_event_message(
        {
            f":{kind}-type": type_name,
            ":content-type": "application/json",
            ":message-type": kind,
        },
        payload,
    )


def _headers(data: bytes) -> dict[str, str]:
    headers: dict[str, str] = {}
    at = 0
    while at < len(data):
        size = data[at]
        name = data[at + 1 : at + 1 + size].decode()
        at += 1 + size
        kind = data[at]
        at += 1
        if kind == _STRING or kind == 6:  # string or bytes
            (length,) = struct.unpack_from(">H", data, at)
            headers[name] = data[at + 2 : at + 2 + length].decode("utf-8", "replace")
            at += 2 + length
        elif kind in (0, 1):  # true, false
            headers[name] = "true" if kind == 0 else "false"
        elif kind == 2:
            headers[name] = str(data[at])
            at += 1
        elif kind == 3:
            headers[name] = str(struct.unpack_from(">h", data, at)[0])
            at += 2
        elif kind == 4:
            headers[name] = str(struct.unpack_from(">i", data, at)[0])
            at += 4
        elif kind in (5, 8):  # int64, timestamp
            headers[name] = str(struct.unpack_from(">q", data, at)[0])
            at += 8
        elif kind == 9:  # uuid
            headers[name] = data[at : at + 16].hex()
            at += 16
        else:
            raise EventStreamError(f"unknown event-stream header type {kind}")
    return headers


class EventStreamSplitter:
    """Feed bytes in any pieces; get back every message completed by them, as an event
    named by its ``:event-type`` (an exception: ``exception:<:exception-type>``) whose
    data is its payload's text."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[SseEvent]:
        self._buffer += data
        events: list[SseEvent] = []
        while len(self._buffer) >= _PRELUDE.size + 4:
            total, headers_length = _PRELUDE.unpack_from(self._buffer)
            if len(self._buffer) < total:
                break
            message, self._buffer = self._buffer[:total], self._buffer[total:]
            events.append(decode_event_message(message, headers_length))
        return events

    def flush(self) -> list[SseEvent]:
        """Nothing: a message cut short is no message (the stream counts as cut)."""
        self._buffer = b""
        return []


def decode_event_message(message: bytes, headers_length: int | None = None) -> SseEvent:
    """One whole message as an event, both CRCs checked."""
    total, length = _PRELUDE.unpack_from(message)
    if headers_length is None:
        headers_length = length
    if total != len(message) or total < 16:
        raise EventStreamError(f"an event-stream message of {len(message)} bytes says {total}")
    (prelude_crc,) = struct.unpack_from(">I", message, 8)
    if prelude_crc != _crc(message[:8]):
        raise EventStreamError("an event-stream message's prelude CRC does not match")
    (message_crc,) = struct.unpack_from(">I", message, total - 4)
    if message_crc != _crc(message[: total - 4]):
        raise EventStreamError("an event-stream message's CRC does not match")
    headers = _headers(message[12 : 12 + headers_length])
    payload = message[12 + headers_length : total - 4]
    if headers.get(":message-type") == "exception":
        name = EXCEPTION_PREFIX + headers.get(":exception-type", "")
    elif headers.get(":message-type") == "error":
        name = EXCEPTION_PREFIX + headers.get(":error-code", "")
    else:
        name = headers.get(":event-type", "")
    return SseEvent(name=name, data=payload.decode("utf-8", "replace"))


def split_messages(data: bytes) -> list[bytes]:
    """``data`` cut into its messages (a trailing partial one kept): joined, ``data``."""
    frames: list[bytes] = []
    at = 0
    while len(data) - at >= _PRELUDE.size:
        (total,) = struct.unpack_from(">I", data, at)
        if total < 16 or at + total > len(data):
            break
        frames.append(data[at : at + total])
        at += total
    if at < len(data):
        frames.append(data[at:])
    return frames
