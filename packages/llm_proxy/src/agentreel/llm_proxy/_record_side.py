"""Record mode's half of a run: a model call forwarded to the upstream and relayed back
to the client as its bytes arrive, while the decoder of its wire API turns them into the
call's recorded chunks; ``GET /v1/models`` and ``count_tokens`` passed through as they came
(a models listing kept for replay)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from types import ModuleType
from typing import Any

import aiohttp
import msgspec
import yarl
from aiohttp import web

from agentreel.llm.exceptions import StreamInterruptedError
from agentreel.llm.stub import no_rule_answer
from agentreel.llm.wire import UpstreamStreamError, WireDecoder, wire_api
from agentreel.llm_proxy._http import HOP_BY_HOP, RESPONSE_DROP, abort, unreachable
from agentreel.llm_proxy._identity import Identity, identity_headers
from agentreel.llm_proxy._lane_logs import CallRecording, kept_headers
from agentreel.llm_proxy._models import (
    ModelsListing,
    listing_key,
    write_models,
)
from agentreel.llm_proxy._recorder import Recorder
from agentreel.llm_proxy._requests import ParsedRequest
from agentreel.llm_proxy._routes import Route, shown_url
from agentreel.llm_proxy._settings import ProxySettings
from agentreel.llm_proxy._verbatim import VerbatimCall
from agentreel.llm_proxy.exceptions import RequestError
from agentreel.session import MODELS_FILE, build_request_header

logger = logging.getLogger("agentreel.llm_proxy")


class RecordSide:
    """The record-mode methods of ``ProxyRun`` (``_run``), over the run's state below."""

    settings: ProxySettings
    recorder: Recorder | None
    errors: list[str]
    _client: aiohttp.ClientSession | None
    _wire: asyncio.Future[ModuleType] | None
    _listings: dict[str, ModelsListing]

    def _upstream_url(self, route: Route, query: str) -> str:
        assert self.settings.upstream is not None
        base = self.settings.upstream.rstrip("/")
        path = route.upstream_path
        if base.endswith("/v1") and path.startswith("/v1/"):
            path = path[3:]
        return base + path + (f"?{query}" if query else "")

    def _forwarded_headers(self, request: web.Request) -> dict[str, str]:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["accept-encoding"] = "identity"
        return headers

    async def _pass_through(
        self, request: web.Request, route: Route, raw: bytes
    ) -> web.StreamResponse:
        """Record mode's answer to a request that is no model call (``GET /v1/models``,
        ``count_tokens``): forwarded, and the upstream's status, headers and body returned
        as they came; a models listing is kept for replay (``_models``)."""
        recorder, client = self.recorder, self._client
        assert recorder is not None
        assert client is not None
        recorder.note_secrets(request.headers, request.query)
        url = self._upstream_url(route, request.query_string)
        try:
            async with client.request(
                request.method, url, data=raw or None, headers=self._forwarded_headers(request)
            ) as upstream:
                body = await upstream.read()
                status, headers = upstream.status, upstream.headers
        except aiohttp.ClientError as exc:
            raise RequestError(502, unreachable(url, exc)) from None
        if route.kind == "models":
            key = listing_key(route, request.headers, request.query)
            self._keep_listing(key, status, headers, body)
        out_headers = {k: v for k, v in headers.items() if k.lower() not in RESPONSE_DROP}
        return web.Response(status=status, body=body, headers=out_headers)

    def _keep_listing(
        self, query: str, status: int, headers: Mapping[str, str], body: bytes
    ) -> None:
        recorder = self.recorder
        assert recorder is not None
        text = body.decode("utf-8", "replace")
        if recorder.holds_secret(text):
            message = (
                f"refusing to write a live API key into {MODELS_FILE}: the upstream's GET "
                "/v1/models answer contains a key a client sent in its auth header. Nothing "
                "was written; find out why the listing holds the key before recording again"
            )
            logger.error("%s", message)
            self.errors.append(message)
            return
        content_type = headers.get("content-type", "application/json")
        self._listings[query] = ModelsListing(status=status, content_type=content_type, body=text)
        # Written as it arrives, beside the logs: a crash loses no listing either.
        write_models(recorder.sessions_root, self._listings)

    async def _record(
        self,
        request: web.Request,
        route: Route,
        raw: bytes,
        parsed: ParsedRequest,
        identity: Identity,
    ) -> web.StreamResponse:
        recorder, client = self.recorder, self._client
        assert recorder is not None
        assert client is not None
        recorder.note_secrets(request.headers, request.query)
        headers = self._forwarded_headers(request)
        header = build_request_header(
            parsed.options(), turn=0, step=0, cwd=recorder.cwd, api=parsed.api, full_text=True
        )
        call = recorder.begin(identity, header, parsed)
        if self.settings.forward_identity:
            headers.update(identity_headers(identity, call.lane.session.id))
        arrived = time.monotonic()  # the recorded pace counts from here (``VerbatimCall.times``)
        url = self._upstream_url(route, request.query_string)
        try:
            if self._wire is not None:
                # The decoders' SDK import (``start``); shielded: a cancelled call must not
                # cancel it for the others.
                await asyncio.shield(self._wire)
            # A path the route re-quoted (a Bedrock model id's ``%3A``) goes out as it is:
            # SigV4 signed it so.
            target = yarl.URL(url, encoded=True) if "%" in route.upstream_path else url
            upstream = await client.post(target, data=raw, headers=headers)
        except aiohttp.ClientError as exc:
            call.cut(f"could not reach the upstream {shown_url(url)}: {exc}")
            raise RequestError(502, unreachable(url, exc)) from None
        except asyncio.CancelledError:
            call.interrupt(identity.describe())
            raise
        try:
            return await self._relay(request, route, upstream, call, Arrivals(arrived))
        except asyncio.CancelledError:
            # The proxy is stopping (its grace for streams in flight is over).
            call.interrupt(identity.describe())
            raise
        finally:
            upstream.release()
            if not call.finished:
                call.abandon()

    def _keep_answer(
        self,
        call: CallRecording,
        route: Route,
        upstream: aiohttp.ClientResponse,
        arrivals: Arrivals,
        *,
        frames: bytes | None = None,
        body: bytes | None = None,
        cut: bool = False,
    ) -> None:
        recorder = self.recorder
        assert recorder is not None
        answer = _answer(call, route, upstream, frames, body, cut)
        if answer is not None:
            codec = "latin-1" if answer.binary else "utf-8"
            sizes = (
                [len(frame.encode(codec)) for frame in answer.frames]
                if answer.frames is not None
                else [len(body or b"")]
            )
            answer = msgspec.structs.replace(answer, times=arrivals.times(sizes))
            recorder.keep_verbatim(call, answer)

    async def _relay(
        self,
        request: web.Request,
        route: Route,
        upstream: aiohttp.ClientResponse,
        call: CallRecording,
        arrivals: Arrivals,
    ) -> web.StreamResponse:
        out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in RESPONSE_DROP}
        content_type = upstream.headers.get("content-type", "")
        if upstream.status != 200:
            body = await upstream.read()
            call.http_error(upstream.status, upstream.headers, body)
            unmatched = no_rule_answer(body)
            if unmatched is not None and self.recorder is not None:
                # No model answered: an agent that takes the error in would be recorded
                # answering a rules-file mistake (issue 39).
                self.recorder.errors.append(
                    f"the stub upstream answered a request no rule matches ({unmatched}); "
                    "the agent was given that error as the model's answer"
                )
            return web.Response(status=upstream.status, body=body, headers=out_headers)
        spec = wire_api(route.api)
        wire = spec.decoder(self.settings.upstream or "")
        if not spec.streams(content_type):
            body = await upstream.read()
            arrivals.arrived(len(body))
            try:
                call.chunks(wire.body(json.loads(body)))
            except (ValueError, StreamInterruptedError, AttributeError, TypeError) as exc:
                call.cut(f"the upstream's response body could not be read: {exc}")
            self._keep_answer(call, route, upstream, arrivals, body=body)
            return web.Response(status=200, body=body, headers=out_headers)
        response = web.StreamResponse(status=200, headers=out_headers)
        await response.prepare(request)
        splitter = spec.splitter()
        client_gone = False
        decoding = True
        cut: str | None = None  # why the stream counts as cut, once it is judged so
        done = False  # its ``data: [DONE]`` arrived and finished the call
        sent = bytearray()  # every byte forwarded, kept as the upstream sent it
        try:
            async for data in upstream.content.iter_any():
                sent += data
                arrivals.arrived(len(data))
                if not client_gone:
                    try:
                        await response.write(data)
                    except (ConnectionResetError, aiohttp.ClientConnectionResetError):
                        client_gone = True
                        logger.info(
                            "the client of session %s left mid-stream; recording the rest",
                            call.lane.session.id,
                        )
                if decoding:
                    decoding = _decode(splitter.feed(data), wire, call)
                    if decoding and wire.ended:
                        # The terminal event (``data: [DONE]``) went out with this write: the
                        # call ends here, not at the body's end. The openai SDK waits at most
                        # 0.1 s for that end, then sends its next request, which must find
                        # this call's lane idle with its reply (conversation chaining);
                        # between the write and this line nothing else ran on the loop.
                        decoding, done = False, True
                        cut = _finished(wire, call)
        except aiohttp.ClientPayloadError as exc:
            if not done or cut is not None:
                call.cut(f"the upstream cut the stream: {exc}")
                self._keep_answer(call, route, upstream, arrivals, frames=bytes(sent), cut=True)
                abort(request)
                return response
            # Cut after ``[DONE]``: the call was complete, and is kept and ended as such.
        if decoding:
            # A last frame without its closing blank line is still an event (the SDKs
            # read it): decoded before the stream is judged finished or cut.
            decoding = _decode(splitter.flush(), wire, call)
        if decoding:
            cut = _finished(wire, call)
        if cut is not None:
            self._keep_answer(call, route, upstream, arrivals, frames=bytes(sent), cut=True)
            abort(request)
            return response
        self._keep_answer(call, route, upstream, arrivals, frames=bytes(sent))
        if not client_gone:
            with suppress(ConnectionResetError):
                await response.write_eof()
        return response


class Arrivals:
    """When the bytes of one upstream answer arrived: per read, how many bytes in all had
    come and when (``time.monotonic``), from the request's arrival at the proxy."""

    __slots__ = ("_reads", "_start")

    def __init__(self, start: float) -> None:
        self._start = start
        self._reads: list[tuple[int, float]] = []

    def arrived(self, size: int) -> None:
        total = self._reads[-1][0] if self._reads else 0
        self._reads.append((total + size, time.monotonic()))

    def times(self, sizes: Sequence[int]) -> list[int]:
        """When each of the frames of ``sizes`` bytes (in order) was whole: in whole
        milliseconds after the request arrived (the read that brought its last byte)."""
        times: list[int] = []
        end = 0
        read = 0
        for size in sizes:
            end += size
            while read < len(self._reads) - 1 and self._reads[read][0] < end:
                read += 1
            at = self._reads[read][1] if self._reads else self._start
            times.append(round((at - self._start) * 1000))
        return times


def _answer(
    call: CallRecording,
    route: Route,
    upstream: aiohttp.ClientResponse,
    frames: bytes | None,
    body: bytes | None,
    cut: bool,
) -> VerbatimCall | None:
    """One call's answer as the upstream sent it (None when it is not UTF-8 text, nor
    binary frames of a binary framing: replay then re-encodes it from its chunks)."""
    split = wire_api(route.api).split_frames(frames) if frames is not None else None
    binary = split is not None and wire_api(route.api).framing == "eventstream"
    # Binary frames keep each byte as one code point; text must be UTF-8.
    encoding = "latin-1" if binary else "utf-8"
    try:
        kept = [frame.decode(encoding) for frame in split] if split is not None else None
        text = body.decode() if body is not None and not binary else None
    except UnicodeDecodeError:
        return None
    return VerbatimCall(
        session=call.lane.session.id,
        turn=call.turn,
        api=route.api,
        status=upstream.status,
        headers=kept_headers(upstream.headers),
        frames=kept,
        body=text,
        cut=cut,
        binary=binary,
    )


def _finished(wire: WireDecoder, call: CallRecording) -> str | None:
    """Record the stream's closing chunks; the reason it counts as cut, if it does."""
    try:
        call.chunks(wire.finish())
    except StreamInterruptedError as exc:
        call.cut(exc.message)
        return exc.message
    return None


def _decode(events: Sequence[Any], wire: Any, call: CallRecording) -> bool:
    """Record the chunks of ``events``; False once the stream holds an error event."""
    for event in events:
        try:
            call.chunks(wire.event(event))
        except UpstreamStreamError as error:
            call.chunks(error.salvage)
            call.stream_error(error.raw)
            return False
        except (ValueError, AttributeError, TypeError, KeyError) as exc:
            call.cut(f"an upstream event could not be read ({exc}): {event.data[:200]!r}")
            return False
    return True
