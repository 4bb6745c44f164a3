"""The aiohttp side of answering a request: which headers are forwarded and kept, the
JSON and SSE responses the proxy makes itself, a recorded HTTP error, a cut."""

from __future__ import annotations

import json

from aiohttp import web

from agentreel.llm import Finish
from agentreel.llm_proxy._errors import error_body
from agentreel.llm_proxy._identity import IDENTITY_HEADERS
from agentreel.llm_proxy._routes import SUPPORTED_PATHS, api_for_path, shown_url, unspoken_guess

HOP_BY_HOP = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "accept-encoding",
        *IDENTITY_HEADERS,
    }
)
RESPONSE_DROP = frozenset(
    {"content-length", "transfer-encoding", "connection", "content-encoding", "date", "server"}
)


def unreachable(url: str, exc: Exception) -> str:
    return (
        f"agentreel proxy: could not reach the upstream {shown_url(url)}: {exc}. Check --upstream"
    )


async def prepare_sse(
    request: web.Request, content_type: str = "text/event-stream"
) -> web.StreamResponse:
    """A started stream response of ``content_type`` (the request's wire API's framing)."""
    response = web.StreamResponse(
        status=200,
        headers={"content-type": f"{content_type}; charset=utf-8", "cache-control": "no-cache"},
    )
    await response.prepare(request)
    return response


def recorded_http_error(finish: Finish) -> web.StreamResponse:
    payload = json.loads(finish.message or "{}")
    headers = dict(payload.get("headers") or {})
    headers.setdefault("content-type", "application/json")
    return web.Response(
        status=int(payload.get("status") or 500),
        body=str(payload.get("body") or "").encode(),
        headers=headers,
    )


def abort(request: web.Request) -> None:
    """Drop the client's connection without ending the body: a cut stream, as recorded."""
    transport = request.transport
    if transport is not None:
        transport.abort()


def not_found(request: web.Request) -> web.StreamResponse:
    upgrade = request.headers.get("upgrade", "")
    what = f"{request.method} {request.path}"
    if upgrade:
        what += f" (Upgrade: {upgrade}; the proxy speaks HTTP only, POST instead)"
    guess = unspoken_guess(request.path)
    if guess is not None:
        what += f" (looks like {guess}, which agentreel does not speak)"
    message = f"agentreel proxy: no endpoint {what}. Supported: " + "; ".join(SUPPORTED_PATHS)
    return json_response(404, error_body(api_for_path(request.path), 404, message))


def json_response(status: int, body: bytes) -> web.Response:
    return web.Response(status=status, body=body, content_type="application/json")
