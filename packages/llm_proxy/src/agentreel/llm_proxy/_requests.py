"""An HTTP request body of each wire API → the common request view (``WireRequest``, here
``ParsedRequest``): each API's parser lives in its ``agentreel.llm.wire`` module and is found
through the wire registry.

The proxy builds the same ``request/header`` from it that an agentreel agent records
(``agentreel.session.build_request_header``), so drift detection and its readable diff are
the in-process ones. Parsing is lenient where real clients differ (SPEC 11); unknown fields
are forwarded upstream untouched, only the header is built from what is parsed.
"""

from __future__ import annotations

from typing import Any

from agentreel.llm.wire import WireRequest, wire_api
from agentreel.llm_proxy._routes import Api

ParsedRequest = WireRequest
"""What the proxy needs of one model request besides its identity."""


def parse_request(
    api: Api, body: dict[str, Any], *, model: str = "", stream: bool = False
) -> ParsedRequest:
    """Parse a request body of ``api`` (already a JSON object) leniently; ``model`` and
    ``stream`` are the Gemini route's (its path names them, not its body)."""
    return wire_api(api).parse(body, model, stream)
