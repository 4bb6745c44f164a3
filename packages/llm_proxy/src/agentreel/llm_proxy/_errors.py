"""Error answers in each wire API's own format, and how recorded errors are marked."""

from __future__ import annotations

from agentreel.llm.wire import wire_api
from agentreel.llm_proxy._routes import Api

HTTP_CODE_PREFIX = "http-"
"""A recorded call that the upstream answered with an error status: ``finish.code`` is
``http-<status>`` and ``finish.message`` the JSON of status, kept headers and raw body."""
CUT_CODE = "stream-cut"
"""A recorded stream the upstream cut before it finished: replay cuts it at the same place."""
STREAM_ERROR_CODE = "stream-error"
"""A recorded in-stream error event; ``finish.message`` is its raw SSE data."""


def error_body(api: Api, status: int, message: str, code: str | None = None) -> bytes:
    """The JSON error body ``api``'s SDK parses into its own error (message kept whole)."""
    return wire_api(api).error_body(status, message, code)
