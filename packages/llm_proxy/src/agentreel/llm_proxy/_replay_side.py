"""Replay mode's half of a run: a request bound to its recorded call and answered in the
request's wire API — at once when the call is recorded whole, chunk by chunk
(``_paced``) when an override or pacing makes it take time — with the served session logs
written beside it, and ``GET /v1/models`` answered as recorded."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import msgspec
from aiohttp import web

from agentreel.llm import Chunk, Finish, LlmError, ResponseMeta
from agentreel.llm.wire import wire_api
from agentreel.llm_proxy._codecs import (
    encode_body,
    encode_stream,
    response_id,
    without_ending,
)
from agentreel.llm_proxy._errors import CUT_CODE, HTTP_CODE_PREFIX, STREAM_ERROR_CODE, error_body
from agentreel.llm_proxy._http import (
    HOP_BY_HOP,
    RESPONSE_DROP,
    abort,
    json_response,
    prepare_sse,
    recorded_http_error,
    unreachable,
)
from agentreel.llm_proxy._identity import LANE_HEADER, Identity
from agentreel.llm_proxy._lane_logs import CallRecording
from agentreel.llm_proxy._models import (
    ModelsListing,
    listing_for,
)
from agentreel.llm_proxy._paced import stream_as_it_comes
from agentreel.llm_proxy._requests import ParsedRequest
from agentreel.llm_proxy._routes import (
    Route,
)
from agentreel.llm_proxy._served_logs import ServedLogs
from agentreel.llm_proxy._settings import REPLAY_ERROR_STATUS, ProxySettings
from agentreel.llm_proxy._verbatim import VerbatimCall, served_frames, with_cwd
from agentreel.llm_proxy.exceptions import RequestError
from agentreel.llm_replay import (
    ANONYMOUS,
    GOES_LIVE,
    BoundCall,
    LiveCallers,
    PartialLanes,
    RecordedStream,
    ReplayError,
    ReplayProvider,
    Script,
)

logger = logging.getLogger("agentreel.llm_proxy")


class ReplaySide:
    """The replay-mode methods of ``ProxyRun`` (``_run``), over the run's state below."""

    provider: ReplayProvider | None
    live: LiveCallers | None
    _client: aiohttp.ClientSession | None
    served: ServedLogs | None
    _recorded_apis: bool
    _partial: PartialLanes
    _listings: dict[str, ModelsListing]
    _verbatim: dict[tuple[str, int], VerbatimCall]
    settings: ProxySettings

    def _recorded_models(self, key: str) -> web.StreamResponse:
        assert self.provider is not None
        listing = listing_for(self._listings, key, self.provider.recording)
        return web.Response(
            status=listing.status,
            body=listing.body.encode(),
            headers={"content-type": listing.content_type},
        )

    def _served_call(
        self, parsed: ParsedRequest, script: Script, older: ParsedRequest | None = None
    ) -> CallRecording | None:
        """Begin one served call in the replay's own session logs (``served``), if kept:
        in the log of the recorded script it was bound to."""
        served = self.served
        if served is None:
            return None
        # Written in the recording's own format: a recording from before the wire API was
        # logged gets served logs without it, so its goldens stay byte-identical.
        api = parsed.api if self._recorded_apis else None
        assert self.provider is not None
        header = self.provider.live_header(
            parsed.options(),
            api=api,
            older=older.options() if older is not None else None,
            cwd=served.cwd,
            script=script,
        )
        if self._partial.naming(header) is not None:
            return None
        return served.begin_bound(script, header)

    async def _replay(
        self,
        request: web.Request,
        route: Route,
        parsed: ParsedRequest,
        identity: Identity,
        older: ParsedRequest | None = None,
    ) -> web.StreamResponse:
        provider = self.provider
        assert provider is not None
        arrived = asyncio.get_running_loop().time()  # the recorded pace counts from here
        options = parsed.options(identity.session, identity.parent, identity.spawn_index)
        then = (
            older.options(identity.session, identity.parent, identity.spawn_index)
            if older is not None
            else None
        )
        key = self._live_key(request, identity)
        if self.live is not None and self.live.call(key):
            return await self._forward_live(request, route)
        try:
            bound = provider.stream_bound(options, api=parsed.api, older=then)
        except ReplayError as error:
            if self.live is not None and isinstance(error, GOES_LIVE):
                # SPEC 20: this caller and its later calls are recorded from the upstream.
                logger.info("%s goes live: %s", identity.describe(), type(error).__name__)
                headerless = identity.session is None
                self.live.went_live(key, error, provider.last_bound if headerless else None)
                return await self._forward_live(request, route)
            message = f"agentreel proxy replay ({identity.describe()}): {error}"
            logger.error("%s", message)
            return json_response(
                REPLAY_ERROR_STATUS,
                error_body(route.api, REPLAY_ERROR_STATUS, message, type(error).__name__),
            )
        if self.live is not None and identity.session is None:
            self.live.holds(key, bound.script)
        stream = bound.chunks
        served = self._served_call(parsed, bound.script, older)
        try:
            if isinstance(stream, RecordedStream):
                chunks = list(stream.chunks)
                if served is not None:
                    served.chunks(chunks)
                answer = self._answer_as_sent(bound, parsed)
                gates = stream.gates
                # The recorded schedule (SPEC 13): held before the first frame and before
                # the final ones, whether the answer goes out as sent or re-encoded.
                try:
                    if gates is not None:
                        await gates.first()
                    final = gates.final if gates is not None else None
                    if answer is not None:
                        return await _send_verbatim(
                            request,
                            answer,
                            self.settings.cwd,
                            identity,
                            before_final=final,
                            paced_from=arrived if self.settings.replay.pace == "recorded" else None,
                        )
                    wire_id = response_id(route.api, msgspec.json.encode(chunks).decode())
                    return await self._send_replayed(
                        request, parsed, identity, chunks, None, wire_id, before_final=final
                    )
                finally:
                    if gates is not None:
                        gates.ended()
            meta = _recorded_meta(bound)
            return await self._replay_as_it_comes(request, parsed, identity, stream, served, meta)
        except asyncio.CancelledError:
            # The proxy is stopping while this call streams (a hang override, pacing).
            provider.interrupted(bound.script, bound.position)
            if served is not None:
                served.interrupt(identity.describe())
            else:
                logger.warning(
                    "%s: a replayed call was still streaming when the proxy stopped",
                    identity.describe(),
                )
            raise
        finally:
            if served is not None:
                served.abandon()  # a replayed stream that broke off ends as recorded: cut

    def _live_key(self, request: web.Request, identity: Identity) -> str:
        """Who goes live (SPEC 20): a named caller by its identity; a caller without one by
        the conversation the drifted proxy's record run found it is (``LANE_HEADER``: by
        content, chaining and lineage, as it records headerless callers), so one headerless
        conversation drifting sends only it live."""
        if identity.session is not None:
            return identity.session
        if self.live is not None:
            lane = request.headers.get(LANE_HEADER, "").strip()
            if lane:
                return lane
        return ANONYMOUS

    async def _forward_live(self, request: web.Request, route: Route) -> web.StreamResponse:
        """A call of a caller that went live, forwarded to ``live_upstream`` as it came (its
        auth headers too: the key is the client's, never written) and the answer relayed
        back as it arrives; whoever records the run records it (``--record-drifted``)."""
        client, upstream = self._client, self.settings.live_upstream
        assert client is not None
        assert upstream is not None
        base, path = upstream.rstrip("/"), route.upstream_path
        if base.endswith("/v1") and path.startswith("/v1/"):
            path = path[3:]
        url = base + path + (f"?{request.query_string}" if request.query_string else "")
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in HOP_BY_HOP and k.lower() != LANE_HEADER
        }
        headers["accept-encoding"] = "identity"
        try:
            answer = await client.post(url, data=await request.read(), headers=headers)
        except aiohttp.ClientError as exc:
            raise RequestError(502, unreachable(url, exc)) from None
        try:
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in RESPONSE_DROP}
            response = web.StreamResponse(status=answer.status, headers=kept)
            await response.prepare(request)
            async for data in answer.content.iter_any():
                await response.write(data)
            await response.write_eof()
            return response
        finally:
            answer.release()

    def _answer_as_sent(self, bound: BoundCall, parsed: ParsedRequest) -> VerbatimCall | None:
        """The bound call's answer as the upstream sent it, when one was kept and it
        answers this request's wire API and streaming mode (else: re-encoded)."""
        calls = bound.script.calls
        if not self._verbatim or not 0 <= bound.position < len(calls):
            return None
        answer = self._verbatim.get((bound.script.header.id, calls[bound.position].turn))
        if answer is None or answer.api != parsed.api:
            return None
        return answer if (answer.frames is not None) == parsed.stream else None

    async def _replay_as_it_comes(
        self,
        request: web.Request,
        parsed: ParsedRequest,
        identity: Identity,
        stream: AsyncIterator[Chunk],
        served: CallRecording | None,
        meta: ResponseMeta | None,
    ) -> web.StreamResponse:
        """A call whose chunks take time, sent as they come (``_paced``), then closed."""
        paced = await stream_as_it_comes(request, parsed, identity, stream, served, meta)
        if paced.client_left:
            assert paced.response is not None  # only writes raise it
            return paced.response
        return await self._send_replayed(
            request,
            parsed,
            identity,
            paced.chunks,
            paced.failure,
            paced.wire_id,
            response=paced.response,
            sent=paced.sent,
            meta=meta,
        )

    async def _send_replayed(
        self,
        request: web.Request,
        parsed: ParsedRequest,
        identity: Identity,
        chunks: list[Chunk],
        failure: LlmError | None,
        wire_id: str,
        *,
        response: web.StreamResponse | None = None,
        sent: int = 0,
        meta: ResponseMeta | None = None,
        before_final: Callable[[], Awaitable[None]] | None = None,
    ) -> web.StreamResponse:
        """Answer with a replayed call in the request's wire API; ``response`` and ``sent``:
        the stream already started and how many of its frames went out; ``meta``: the
        recorded ``ResponseMeta`` when ``chunks`` may lack the finish carrying it;
        ``before_final``: awaited before the frames that end the call (a whole body: before
        it), for the recorded schedule."""
        finish = chunks[-1] if chunks and isinstance(chunks[-1], Finish) else None
        if response is None and before_final is not None and not parsed.stream:
            await before_final()  # the body is the call's one frame
            before_final = None
        if response is None:
            if finish is not None and finish.code and finish.code.startswith(HTTP_CODE_PREFIX):
                return recorded_http_error(finish)
            if not parsed.stream:
                if failure is not None:
                    status = failure.status or 500
                    return json_response(status, error_body(parsed.api, status, str(failure)))
                return json_response(200, encode_body(parsed, chunks, wire_id, meta))
            response = await prepare_sse(request, wire_api(parsed.api).stream_content_type)
        special = finish is not None and finish.code in (CUT_CODE, STREAM_ERROR_CODE)
        frames = encode_stream(parsed, chunks[:-1] if special else chunks, wire_id, meta)
        if special or failure is not None:
            frames = without_ending(parsed.api, frames)
        # What may go out before the hold, then the rest: one write each, the body's end
        # in the last (as ``_send_verbatim``). Without a hold all of it is the rest.
        split = sent
        if before_final is not None:
            split = len(frames)
            if not special and failure is None:
                split = len(without_ending(parsed.api, frames))
        try:
            if split > sent:
                await response.write(b"".join(frames[sent:split]))
            if before_final is not None:
                await before_final()
            rest = b"".join(frames[max(sent, split) :])
            if finish is not None and finish.code == STREAM_ERROR_CODE:
                # Each API frames it its own way (Chat Completions and Gemini: a bare data
                # frame; the others name it; Ollama: one line).
                rest += wire_api(parsed.api).error_frame(finish.message or "")
            elif (finish is not None and finish.code == CUT_CODE) or failure is not None:
                if rest:
                    await response.write(rest)
                abort(request)
                return response
            await response.write_eof(rest)
        except ConnectionResetError:
            logger.info("the client of %s left mid-stream", identity.describe())
        return response


def _recorded_meta(bound: BoundCall) -> ResponseMeta | None:
    """The bound call's recorded ``ResponseMeta`` (on its finish), if it has one."""
    calls = bound.script.calls
    if not 0 <= bound.position < len(calls) or not calls[bound.position].chunks:
        return None
    last = calls[bound.position].chunks[-1]
    return last.response if isinstance(last, Finish) else None


async def _send_verbatim(
    request: web.Request,
    answer: VerbatimCall,
    cwd: str,
    identity: Identity,
    *,
    before_final: Callable[[], Awaitable[None]] | None = None,
    paced_from: float | None = None,
) -> web.StreamResponse:
    """Serve a recorded answer byte for byte: its status and kept headers, then its body
    or its frames; a stream the upstream broke off is broken off again. ``before_final``:
    awaited before the last frame (a body: before it). ``paced_from``: the request's
    arrival (``loop.time()``) under ``pace = "recorded"``: each frame goes out when it
    arrived when recorded (``VerbatimCall.times``), counted from there.

    The frames go out in as few writes as the schedule allows — all at once, or all but
    the last, then the last after ``before_final`` — with the headers and the chunked
    body's end in the same write: the bytes are the upstream's either way, and a write per
    frame cost a replayed call more than everything else the proxy does for it (a send
    and a wake-up of the client per frame)."""
    if paced_from is not None and answer.times:
        return await _send_at_recorded_pace(
            request, answer, cwd, identity, paced_from, before_final
        )
    if answer.frames is None:
        if before_final is not None:
            await before_final()
        body = with_cwd(answer.body or "", cwd).encode()
        return web.Response(status=answer.status, body=body, headers=answer.headers)
    response = web.StreamResponse(status=answer.status, headers=answer.headers)
    await response.prepare(request)
    frames = served_frames(answer, cwd)
    held = frames.pop() if before_final is not None and frames else b""
    try:
        if before_final is not None:
            if frames:
                await response.write(b"".join(frames))
            await before_final()
            frames = [held]
        if answer.cut:
            if any(frames):
                await response.write(b"".join(frames))
            abort(request)
            return response
        await response.write_eof(b"".join(frames))
    except ConnectionResetError:
        logger.info("the client of %s left mid-stream", identity.describe())
    return response


async def _until(start: float, offset_ms: int) -> None:
    """Sleep until ``offset_ms`` milliseconds after ``start`` (``loop.time()``)."""
    delay = start + offset_ms / 1000 - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)


async def _send_at_recorded_pace(
    request: web.Request,
    answer: VerbatimCall,
    cwd: str,
    identity: Identity,
    start: float,
    before_final: Callable[[], Awaitable[None]] | None,
) -> web.StreamResponse:
    """``_send_verbatim`` at the recorded pace: the headers with the first frame (a body:
    whole) at the recorded first-byte delay, each next frame at its recorded time, all
    counted from ``start`` so a late write never delays the rest."""
    times = answer.times or []
    if answer.frames is None:
        if before_final is not None:
            await before_final()
        await _until(start, times[0])
        body = with_cwd(answer.body or "", cwd).encode()
        return web.Response(status=answer.status, body=body, headers=answer.headers)
    frames = served_frames(answer, cwd)
    response = web.StreamResponse(status=answer.status, headers=answer.headers)
    try:
        for index, frame in enumerate(frames):
            if index == len(frames) - 1 and before_final is not None:
                await before_final()
            await _until(start, times[min(index, len(times) - 1)])
            if index == 0:
                await response.prepare(request)
            await response.write(frame)
        if not frames:
            await response.prepare(request)
        if answer.cut:
            abort(request)
            return response
        await response.write_eof()
    except ConnectionResetError:
        logger.info("the client of %s left mid-stream", identity.describe())
    return response
