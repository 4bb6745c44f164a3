"""The replay provider: each live session gets its own recorded script (SPEC section 5).

``ReplayProvider.stream`` binds the caller (``_binding``: the four rules), advances that
script's cursor, checks the request against the recorded ``request/header``, and returns
the recorded chunks (``{{cwd}}`` made the live cwd, overrides applied). Binding and the
cursor advance happen synchronously inside ``stream()``, before anything awaits, so
concurrent tasks bind in the order they call. Error messages are built in ``_failures``;
the consumption report is written by ``_report.ReportWriter``.
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple, Unpack

from agentreel.llm import Chunk, Finish, GenerateOptions, LlmError, setting_flag
from agentreel.llm_replay._binding import Binder
from agentreel.llm_replay._captures import (
    captured_values,
    has_capture_token,
    request_strings,
    substitute_chunk,
)
from agentreel.llm_replay._failures import drift_message, exhausted_error, with_live_request
from agentreel.llm_replay._fixture import (
    RecordedCall,
    Recording,
    Script,
    load_recording,
    masked_recording,
    message_texts,
    substitute_cwd,
)
from agentreel.llm_replay._lanes import PartialLanes
from agentreel.llm_replay._overrides import HangOverride, Override
from agentreel.llm_replay._report import (
    ConsumptionReport,
    ReportedError,
    ReportWriter,
    ScriptReport,
    unconsumed_error,
    unconsumed_lines,
    write_report,
)
from agentreel.llm_replay._schedule import CallGates, Schedule, ScheduleDivergence
from agentreel.llm_replay._settings import (
    PACE_NEEDS_PROXY,
    DriftMode,
    ReplaySettings,
    ReplaySettingsKeywords,
)
from agentreel.llm_replay.exceptions import (
    ReplayError,
    ReplaySettingsError,
    RequestDriftError,
    RequestDriftWarning,
    ScheduleDivergenceError,
    UnrecordedSessionError,
)
from agentreel.session import (
    MASKS_VERSION,
    RequestHeaderData,
    SecretScan,
    WireApi,
    build_request_header,
    diff_request_headers,
    request_text,
    with_older_masks,
)


class BoundCall(NamedTuple):
    """A call ``ReplayProvider.stream_bound`` bound: the recorded script, the call's
    position in it (0-based) and its chunks (what ``stream`` returns)."""

    script: Script
    position: int
    chunks: AsyncIterator[Chunk]


class ReplayProvider:
    """Streams recorded model calls from a fixture directory, keyed by the calling session.

    Settings (also the keyword settings of the ``replay`` registry factory):

    - ``fixture_dir``: directory holding ``session.jsonl`` and ``session.<n>.jsonl``.
    - ``live_cwd``: the live run's working directory; ``{{cwd}}`` in recorded chunks
      becomes it, and live requests are normalized with it (default: ``os.getcwd()``).
    - ``pacing_ms``: delay before each chunk, for watching streaming in a UI (default 0).
    - ``report_path``: where to write the consumption report (``close()``, at interpreter
      exit, and right after every replay error); ``None`` writes nothing.
    - ``scenario``: the scenario name used in re-record commands (default: the fixture
      directory's name).
    - ``content_binding``: lanes and binding by what a request is (``_binding``; the
      proxy's setting, for callers without identity and side calls under one identity).
      Off by default: an agentreel agent names every session, one lane each.
    - ``content_mask``: the masking its caller applied to request text before building
      requests (the proxy's volatile-content masks, built-in rules and ``masks``);
      conversation chaining sees recorded replies through it, so a reply the client sends
      back compares equal, and the recorded request headers' texts pass through it at load
      (``masked_recording``).
      A recording made with an older built-in mask set (its stamp's ``masks``: the
      ``older_masks`` property) compares its digests with the live request masked with
      that set: its caller passes that masking too (``stream_bound(..., older=...)``).
    - ``settings`` and the keywords of the same names (``ReplaySettings``, one value
      checked once; ``self.settings``):

      - ``drift``: ``"error"`` (default) raises ``RequestDriftError`` when a live request
        differs from the recorded ``request/header``; ``"warn"`` emits
        ``RequestDriftWarning`` and records it in the report; ``"off"`` skips the check.
      - ``drift_dir``: where a drifted call's full masked recorded and live requests are
        written (``<file>.call-<n>.{recorded,live}.txt``, named in the error; created on
        the first drift); default ``drift/`` beside the report, none without a report. A
        harness whose run folder is removed after the run passes a folder it keeps. An
        ``UnrecordedSessionError`` writes there too (``unrecorded-<k>.live.txt``, and
        ``unrecorded-<k>.recorded.txt``: the recorded request nearest to it, the next call
        of some script), so a caller with no identity shows what it sent. Known
        credential shapes in either are written as ``[redacted: rule]``.
      - ``partial_lanes``: regular expressions naming the lanes (side calls that vary
        with timing) that may be consumed partly or not at all (``_lanes.PartialLanes``:
        found in a lane's model, system prompt or first message preview); the report
        marks them ``partial`` and the consumption check does not count them.
      - ``schedule``: ``"free"`` (default) serves each call as soon as it is asked for;
        ``"recorded"`` holds first and final frames so calls of different sessions and
        lanes keep their recorded order (``_schedule``, SPEC 13); ``schedule_timeout``:
        seconds a held frame waits before it goes on anyway (default 10), a schedule
        divergence naming both calls; ``schedule_divergence``: ``"error"`` (default: a
        replay error in the report, the call still served) or ``"allow"`` (listed as a
        warning in the report).
      - ``captures``: live values a served answer carries (``_captures.Capture``): a
        ``{{<token>:N}}`` in a recorded call's chunks becomes the N-th value the capture
        finds in the live request (a child's agent id that Codex's ``wait_agent`` names).
      - ``masks``: applied by whoever builds the requests (the proxy, through
        ``content_mask``); the provider compares requests as it is given them.

    Test hooks, not for normal use (the scenario suite flips them to prove each mechanism
    matters): ``lineage_binding=False`` disables binding rule 3 (and the reservation of
    lineage children), leaving first-call order alone; ``respect_seed_length=False``
    treats a fork child's seed as its own script.
    """

    def __init__(
        self,
        fixture_dir: str | os.PathLike[str],
        *,
        live_cwd: str | os.PathLike[str] | None = None,
        pacing_ms: float = 0,
        report_path: str | os.PathLike[str] | None = None,
        scenario: str | None = None,
        lineage_binding: bool = True,
        content_binding: bool = False,
        content_mask: Callable[[str], str] | None = None,
        respect_seed_length: bool = True,
        settings: ReplaySettings | None = None,
        **keywords: Unpack[ReplaySettingsKeywords],
    ) -> None:
        self.settings = (settings or ReplaySettings()).with_values(keywords)
        """How calls are replayed (``ReplaySettings``: a bad one is a ``ValueError``)."""
        if pacing_ms < 0:
            raise ValueError(f"pacing_ms must be >= 0; got {pacing_ms!r}")
        self._recording: Recording = load_recording(
            Path(fixture_dir), respect_seed_length=respect_seed_length
        )
        self._tools_kept = frozenset(
            tool.name
            for script in self._recording.scripts
            for call in script.calls
            if call.request is not None
            for tool in call.request.tools
            if tool.text is not None
        )
        messages = [
            message
            for script in self._recording.scripts
            for call in script.calls
            if call.request is not None
            for message in call.request.messages
        ]
        kept = {message.digest for message in messages if message.json is not None}
        # Format 3 keeps every message's masked JSON (once per log): replay masks it again.
        self._messages_kept = bool(kept) and all(message.digest in kept for message in messages)
        # Per log, as each log is stamped (SPEC 15): a log keeping every message's JSON is
        # compared with today's masks whatever the others keep — a ``--drifted`` merge
        # holds new logs (today's mask set, texts kept) beside kept older ones (an older
        # set, digests only when recorded before format 3), each compared as it was made.
        self._logs_kept = frozenset(
            script.number
            for script in self._recording.scripts
            if all(
                message.digest in kept
                for call in script.calls
                if call.request is not None
                for message in call.request.messages
            )
        )
        # The set the live request is masked with a second time: that of the logs that
        # compare digests only, when some do (the others re-mask their texts anyway).
        made_with = {
            script.header.masks
            for script in self._recording.scripts
            if script.number not in self._logs_kept
        } or {script.header.masks for script in self._recording.scripts}
        self.older_masks: int | None = (
            min(made_with)
            if content_mask is not None and min(made_with, default=MASKS_VERSION) < MASKS_VERSION
            else None
        )
        """The built-in mask set the recording was made with when older than this
        agentreel's (``MASKS_VERSION``) and requests are masked (``content_mask``); then
        the caller passes each request masked with that set too (``stream_bound``'s
        ``older``): the recording's digests compare with it (SPEC 15)."""
        if content_mask is not None:
            # Recorded headers through today's masks: a recording made before a rule
            # existed (a machine fact in a system prompt) compares equal to a live request.
            older = self.older_masks is not None
            self._recording = masked_recording(
                self._recording,
                content_mask,
                messages=not older or self._messages_kept,
                digests=older and bool(kept),
            )
        self._today: frozenset[str] = frozenset()
        """With logs unlike in what they keep: the messages' digests (today's masks) of
        those keeping their JSON — a live message with one of them is compared as today's
        masks make it (``with_older_masks``)."""
        if self.older_masks is not None and not self._messages_kept:
            self._today = frozenset(
                message.digest
                for script in self._recording.scripts
                if script.number in self._logs_kept
                for call in script.calls
                if call.request is not None
                for message in call.request.messages
            )
        # Whole message texts (the proxy keeps each once per log) serve a drift's excerpt.
        self._recording, self._texts = message_texts(self._recording)
        self._report_path = Path(report_path) if report_path is not None else None
        self._drift_dir = (
            self.settings.drift_dir
            if self.settings.drift_dir is not None
            else self._report_path.parent / "drift"
            if self._report_path is not None
            else None
        )
        self.scenario = scenario or self._recording.scenario
        self.live_cwd = os.fspath(live_cwd) if live_cwd is not None else os.getcwd()
        self.drift: DriftMode = self.settings.drift
        self._pacing = pacing_ms / 1000
        scripts = self._recording.scripts
        self._scripts = scripts
        self._overrides = self._recording.overrides
        cwd_in_json = json.dumps(self.live_cwd)[1:-1]
        self._prepared: list[list[tuple[Chunk, ...]]] = [
            [self._prepare(call, cwd_in_json) for call in script.calls] for script in scripts
        ]
        self._cursor = [0] * len(scripts)
        self.last_bound: Script | None = None
        """The script the latest call was bound to, set before its drift check: which
        conversation a caller without identity was, also when that call then drifted (the
        drifted proxy's live callers, SPEC 20)."""
        self._captures = self.settings.captures
        self._capture_tokens = frozenset(capture.token for capture in self._captures)
        self._interrupted: list[list[int]] = [[] for _ in scripts]
        partial = PartialLanes(self.settings.partial_lanes)
        self._partial = [
            bool(partial)
            and bool(script.calls)
            and script.calls[0].request is not None
            and partial.naming(script.calls[0].request) is not None
            for script in scripts
        ]
        self._content_binding = content_binding
        self._binder = Binder(
            self._recording,
            self.scenario,
            lineage_binding=lineage_binding,
            content_binding=content_binding,
            cursors=self._cursor,
            replies=self._prepared,
            mask=content_mask,
            texts=self._texts,
        )
        self._errors: list[ReportedError] = []
        # UnrecordedSessionErrors whose requests were written (their files' numbers).
        self._unrecorded = 0
        self._secrets: SecretScan | None = None
        self._drift_warnings: list[str] = []
        self._schedule_warnings: list[str] = []
        self._schedule = (
            Schedule(
                scripts,
                timeout=self.settings.schedule_timeout,
                on_divergence=self._diverged,
                skip=self._partial,
            )
            if self.settings.schedule == "recorded"
            else None
        )
        self._reports = ReportWriter(
            Path(report_path) if report_path is not None else None, self.consumption_report
        )

    @property
    def recording(self) -> Recording:
        """The loaded fixture (scripts in session order, lineage, overrides)."""
        return self._recording

    # -- streaming ---------------------------------------------------------------------

    def stream(
        self, options: GenerateOptions, *, api: WireApi | None = None
    ) -> AsyncIterator[Chunk]:
        """Bind the caller, advance its cursor and return the recorded call's chunks.

        ``api`` is the wire API the request came in (the proxy's); a call recorded in
        another API is request drift, never re-encoded silently. Replay errors
        (``UnrecordedSessionError``, ``ScriptExhaustedError``, ``RequestDriftError``) are
        raised here, at call time; an override's ``LlmError`` is raised while iterating,
        after its prefix.
        """
        return self.stream_bound(options, api=api).chunks

    def stream_bound(
        self,
        options: GenerateOptions,
        *,
        api: WireApi | None = None,
        older: GenerateOptions | None = None,
    ) -> BoundCall:
        """``stream``, also naming the recorded script and call it was bound to (the proxy
        writes its served logs as the scripts they replay, whatever order calls came in).
        ``older``: the same request masked with the recording's built-in mask set
        (``older_masks``), whose digests it compares."""
        self.last_bound = None
        try:
            live = (
                self.live_header(options, api=api, older=older) if self._content_binding else None
            )
            number = self._binder.bind(options, live)
            self.last_bound = self._scripts[number]
            position = self._cursor[number]
            script = self._scripts[number]
            if position >= len(script.calls):
                raise exhausted_error(
                    options, script, position + 1, self.scenario, proxied=self._content_binding
                )
            self._cursor[number] = position + 1
            call = script.calls[position]
            gates = self._schedule.gates(number, position) if self._schedule else None
            if gates is not None:
                gates.requested()
            if self.drift != "off" and call.request is not None:
                try:
                    self._check_drift(options, script, call, live, api, older)
                except ReplayError:
                    if gates is not None:
                        gates.ended()  # never served: nothing waits for it
                    raise
        except UnrecordedSessionError as error:
            shown = self._with_requests(error, options, api)
            self._note_error(shown)
            raise shown from None
        except ReplayError as error:
            self._note_error(error)
            raise
        chunks = self._prepared[number][position]
        if self._captures and any(has_capture_token(c, self._capture_tokens) for c in chunks):
            values = captured_values(self._captures, request_strings(options))
            chunks = tuple(substitute_chunk(chunk, values) for chunk in chunks)
            # What was served: conversation chaining compares the next request with it.
            self._prepared[number][position] = chunks
        stream: AsyncIterator[Chunk] | None = None
        if self._overrides:
            override = self._overrides.get((number, call.number))
            if override is not None:
                stream = _overridden(chunks, override, self._pacing)
        if stream is None and self._pacing:
            stream = _paced(chunks, self._pacing)
        if stream is None:
            return BoundCall(script, position, RecordedStream(chunks, gates))
        if gates is not None:
            stream = _gated(stream, gates)
        return BoundCall(script, position, stream)

    def interrupted(self, script: Script, position: int) -> None:
        """Note that call ``position`` (0-based) of ``script`` was cut while it streamed
        because the replaying process is stopping; the report lists it."""
        self._interrupted[script.number].append(position + 1)

    def live_header(
        self,
        options: GenerateOptions,
        *,
        api: WireApi | None = None,
        older: GenerateOptions | None = None,
        cwd: str | None = None,
        turn: int = 0,
        step: int = 0,
        full_text: bool = False,
        script: Script | None = None,
    ) -> RequestHeaderData:
        """The header of a live request as this recording compares it: built from
        ``options`` (today's masks), with the parts the recording keeps as digests only
        taken from ``older`` (the request masked with the recording's mask set) when
        given (``with_older_masks``) — as ``script``'s log keeps them when it is known,
        else as the log holding each message does (a ``--drifted`` merge's logs may
        keep unlike texts)."""
        where = self.live_cwd if cwd is None else cwd
        live = build_request_header(
            options, turn=turn, step=step, cwd=where, api=api, full_text=full_text
        )
        if older is None or self.older_masks is None:
            return live
        then = build_request_header(
            older, turn=turn, step=step, cwd=where, api=api, full_text=full_text
        )
        if script is not None and self._today:
            kept = script.number in self._logs_kept
            return with_older_masks(live, then, self._tools_kept, messages_kept=kept)
        return with_older_masks(
            live, then, self._tools_kept, messages_kept=self._messages_kept, today=self._today
        )

    def _prepare(self, call: RecordedCall, cwd_in_json: str) -> tuple[Chunk, ...]:
        if not call.cwd_chunks:
            return call.chunks
        chunks = list(call.chunks)
        for position in call.cwd_chunks:
            chunks[position] = substitute_cwd(chunks[position], self.live_cwd, cwd_in_json)
        return tuple(chunks)

    # -- request drift ----------------------------------------------------------------

    def _check_drift(
        self,
        options: GenerateOptions,
        script: Script,
        call: RecordedCall,
        live: RequestHeaderData | None = None,
        api: WireApi | None = None,
        older: GenerateOptions | None = None,
    ) -> None:
        recorded = call.request
        assert recorded is not None
        if live is None or (older is not None and self._today):
            # With logs unlike in what they keep: built as this call's log was made.
            live = self.live_header(
                options,
                api=api,
                older=older,
                turn=recorded.turn,
                step=recorded.step,
                script=script,
            )
        differences = diff_request_headers(recorded, live)
        if not differences:
            return
        # Drift is the rare path: now build the live side with its whole texts, for the
        # excerpts and the full requests written beside the run.
        live = self.live_header(
            options,
            api=api,
            older=older,
            turn=recorded.turn,
            step=recorded.step,
            full_text=True,
            script=script,
        )
        differences = diff_request_headers(recorded, live, texts=self._texts) or differences
        files = self._write_requests(script, call, recorded, live)
        parent = next(
            (s for s in self._recording.scripts if s.header.id == script.header.parent_session),
            None,
        )
        message = drift_message(
            options,
            script,
            call,
            differences,
            self.scenario,
            files,
            proxied=self._content_binding,
            parent=parent,
        )
        if self.drift == "error":
            raise RequestDriftError(message, differences=differences)
        self._drift_warnings.append(message)
        warnings.warn(message, RequestDriftWarning, stacklevel=3)

    def _write_requests(
        self,
        script: Script,
        call: RecordedCall,
        recorded: RequestHeaderData,
        live: RequestHeaderData,
    ) -> tuple[Path, Path] | None:
        """The full masked recorded and live requests of a drifted call, as two text files
        in ``drift_dir`` (default: ``drift/`` beside the report); ``None`` without one."""
        stem = f"{script.path.stem}.call-{call.number}"
        written = self._write_texts(
            (f"{stem}.recorded.txt", request_text(recorded, self._texts)),
            (f"{stem}.live.txt", request_text(live)),
        )
        return (written[0], written[1]) if written is not None else None

    def _write_texts(self, *files: tuple[str, str]) -> list[Path] | None:
        """``(name, text)`` files in ``drift_dir``, each through the secret scan's
        redaction (a live request is whatever the agent sent); ``None`` when there is no
        folder or writing failed (the replay error is what to report, not this)."""
        folder = self._drift_dir
        if folder is None:
            return None
        if self._secrets is None:
            self._secrets = SecretScan()
        paths = [folder / name for name, _ in files]
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for path, (_, text) in zip(paths, files, strict=True):
                path.write_text(self._secrets.redact(text), encoding="utf-8")
        except OSError:
            return None
        return paths

    def _with_requests(
        self, error: UnrecordedSessionError, options: GenerateOptions, api: WireApi | None
    ) -> UnrecordedSessionError:
        """``error`` showing what the live caller sent (SPEC 13): how its request differs
        from the nearest recorded one, and both in full in ``drift_dir`` when there is one."""
        live = build_request_header(
            options, turn=0, step=0, cwd=self.live_cwd, api=api, full_text=True
        )
        # A child its parent handed on is compared with nothing: the delegating call the
        # error names says what was expected, another session's next request would not.
        nearest = self._nearest_call(live) if error.delegation is None else None
        if self._secrets is None:
            self._secrets = SecretScan()
        files: tuple[Path, Path | None] | None = None
        if self._drift_dir is not None:
            self._unrecorded += 1
            stem = f"unrecorded-{self._unrecorded}"
            texts = [(f"{stem}.live.txt", request_text(live))]
            if nearest is not None:
                assert nearest[1].request is not None
                texts.append(
                    (f"{stem}.recorded.txt", request_text(nearest[1].request, self._texts))
                )
            written = self._write_texts(*texts)
            if written is not None:
                files = (written[0], written[1] if len(written) > 1 else None)
        if nearest is None:
            return with_live_request(error, files, None)
        script, call = nearest
        assert call.request is not None
        differences = [
            self._secrets.redact(line)
            for line in diff_request_headers(call.request, live, texts=self._texts)
        ]
        return with_live_request(error, files, (script, call, differences))

    def _nearest_call(self, live: RequestHeaderData) -> tuple[Script, RecordedCall] | None:
        """Of every script's next recorded call, the one whose request is most like
        ``live``: the same wire API, model, system prompt and tools first, then the most
        leading messages alike, then the closest message count."""
        best: tuple[tuple[bool, bool, bool, bool, int, int], Script, RecordedCall] | None = None
        for script in self._scripts:
            position = self._cursor[script.number]
            if position >= len(script.calls):
                continue
            call = script.calls[position]
            recorded = call.request
            if recorded is None:
                continue
            alike = 0
            for ours, theirs in zip(recorded.messages, live.messages, strict=False):
                if ours.digest != theirs.digest:
                    break
                alike += 1
            score = (
                recorded.api == live.api,
                recorded.model == live.model,
                recorded.system == live.system,
                recorded.tools_digest == live.tools_digest,
                alike,
                -abs(len(recorded.messages) - len(live.messages)),
            )
            if best is None or score > best[0]:
                best = (score, script, call)
        return (best[1], best[2]) if best is not None else None

    def _note_error(self, error: ReplayError) -> None:
        self._errors.append(ReportedError(type=type(error).__name__, message=str(error)))
        self._reports.error_raised(error)

    def _diverged(self, divergence: ScheduleDivergence) -> None:
        message = divergence.message(self.scenario)
        if self.settings.schedule_divergence == "allow":
            self._schedule_warnings.append(message)
            return
        # Reported, not raised: the call goes on (SPEC 13); the run fails on the report.
        self._note_error(ScheduleDivergenceError(message, divergence=divergence))

    # -- consumption -----------------------------------------------------------------------

    def consumption_report(self) -> ConsumptionReport:
        """What this run has consumed so far (see ``agentreel.llm_replay`` for the format)."""
        return ConsumptionReport(
            fixture_dir=str(self._recording.fixture_dir),
            scenario=self.scenario,
            scripts=[
                ScriptReport(
                    session=script.number,
                    file=script.file,
                    recorded_session_id=script.header.id,
                    parent_session=script.header.parent_session,
                    spawn_index=script.header.spawn_index,
                    calls=len(script.calls),
                    consumed=self._cursor[script.number],
                    bound_to=self._binder.bound_to[script.number],
                    partial=self._partial[script.number],
                    interrupted=list(self._interrupted[script.number]),
                )
                for script in self._scripts
            ],
            errors=list(self._errors),
            drift_warnings=list(self._drift_warnings),
            schedule_warnings=list(self._schedule_warnings),
        )

    def assert_consumed(self) -> None:
        """Raise ``UnconsumedScriptError`` if any recorded call was never requested."""
        lines = unconsumed_lines(self.consumption_report().scripts)
        if lines:
            raise unconsumed_error(self.scenario, str(self._recording.fixture_dir), lines)

    def write_report(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the consumption report to ``path`` (default: ``report_path``)."""
        return self._reports.write(path)

    def close(self) -> None:
        """Write the report (if ``report_path`` is set). Idempotent; call at shutdown."""
        self._reports.close()


class RecordedStream:
    """A recorded call that streams without waiting (no pacing, no override): the async
    iterator ``stream()`` promises, plus ``chunks``, for a caller that takes the call whole
    (the proxy encodes it in one go; a call that takes time it passes on chunk by chunk).

    ``gates``: the call's holds under the recorded schedule (None when free). Iterating
    honours them; a caller that takes ``chunks`` whole awaits ``gates.first()`` before it
    sends anything, ``gates.final()`` before the final frame, and calls ``gates.ended()``
    once that frame is out or it stops early.

    ``async for`` gets the async generator itself from ``__aiter__``: a step of an async
    generator is C code, where an ``async def __anext__`` builds a coroutine per chunk
    (1.6x the stream cost in the replay-throughput bench).
    """

    __slots__ = ("_iterator", "chunks", "gates")

    def __init__(self, chunks: tuple[Chunk, ...], gates: CallGates | None = None) -> None:
        self.chunks = chunks
        self.gates = gates
        self._iterator = _replay(chunks) if gates is None else _held(chunks, gates)

    def __aiter__(self) -> AsyncGenerator[Chunk, None]:
        return self._iterator

    def __anext__(self) -> Awaitable[Chunk]:
        return self._iterator.__anext__()

    async def aclose(self) -> None:
        await self._iterator.aclose()


async def _replay(chunks: tuple[Chunk, ...]) -> AsyncGenerator[Chunk, None]:
    for chunk in chunks:
        yield chunk


async def _held(chunks: tuple[Chunk, ...], gates: CallGates) -> AsyncGenerator[Chunk, None]:
    """``_gated`` for a recorded call's chunks, in one generator (a step of a generator
    wrapping another costs a second step per chunk: 1.10x free in the 64-session bench)."""
    try:
        await gates.first()
        for chunk in chunks[:-1]:
            yield chunk
        await gates.final()
        gates.ended()
        if chunks:
            yield chunks[-1]
    finally:
        gates.ended()


async def _gated(chunks: AsyncIterator[Chunk], gates: CallGates) -> AsyncGenerator[Chunk, None]:
    """``chunks`` held by the recorded schedule: before the first chunk, and before the
    ``finish`` (the final frame); the call counts as ended once it is handed over, or
    when the stream stops without it (cancelled, an override's error, closed early)."""
    try:
        await gates.first()
        async for chunk in chunks:
            if isinstance(chunk, Finish):
                await gates.final()
                gates.ended()
            yield chunk
    finally:
        gates.ended()


async def _paced(chunks: tuple[Chunk, ...], delay: float) -> AsyncIterator[Chunk]:
    for chunk in chunks:
        await asyncio.sleep(delay)
        yield chunk


async def _overridden(
    chunks: tuple[Chunk, ...], override: Override, delay: float
) -> AsyncIterator[Chunk]:
    for chunk in chunks[: override.chunks]:
        if delay:
            await asyncio.sleep(delay)
        yield chunk
    if isinstance(override, HangOverride):
        # Wait for cancellation: the future never completes on its own.
        await asyncio.get_running_loop().create_future()
        return
    raise LlmError(override.code, override.status, override.message)


def create_replay_provider(*, live_cwd: str | None = None, **settings: Any) -> ReplayProvider:
    """The ``replay`` registry factory: ``load_provider("replay", fixture_dir=..., ...)``.

    ``live_cwd`` is a named keyword so the registry's environment reader
    (``agentreel.llm.provider_from_env``) knows to give it the agent's working directory.

    Takes the ``ReplayProvider`` settings as keywords; values may be strings (as they come
    from ``AGENTREEL_*`` environment variables): ``pacing_ms`` is parsed as a number,
    ``lineage_binding`` / ``respect_seed_length`` as booleans (1/true/yes/on,
    0/false/no/off; other text is a ``ValueError``) and the ``ReplaySettings`` as that
    value reads its text (``ReplaySettings.parse``: what ``ReplaySettings.settings``
    writes). If the fixture cannot be loaded and ``report_path`` is set, a report holding
    just that error is written before the error is raised.
    """
    if live_cwd is not None:
        settings["live_cwd"] = live_cwd
    own = {
        "fixture_dir",
        "live_cwd",
        "pacing_ms",
        "report_path",
        "scenario",
        "lineage_binding",
        "content_binding",
        "respect_seed_length",
    }
    known = own | set(ReplaySettings.names())
    unknown = sorted(set(settings) - known)
    if unknown:
        raise TypeError(
            f"unknown replay provider setting(s) {', '.join(unknown)}; "
            f"known settings: {', '.join(sorted(known))}"
        )
    if settings.get("fixture_dir") in (None, ""):
        raise TypeError(
            "the replay provider needs fixture_dir: the directory holding session.jsonl "
            "(e.g. load_provider('replay', fixture_dir='fixtures/plain-turn'))"
        )
    fixture_dir = settings.pop("fixture_dir")
    if isinstance(settings.get("pacing_ms"), str):
        settings["pacing_ms"] = _parse_milliseconds(settings["pacing_ms"])
    for flag in ("lineage_binding", "content_binding", "respect_seed_length"):
        if isinstance(settings.get(flag), str):
            settings[flag] = _parse_flag(flag, settings[flag])
    for optional in ("live_cwd", "report_path", "scenario"):
        if settings.get(optional) == "":
            settings[optional] = None
    replay = {name: settings.pop(name) for name in ReplaySettings.names() if name in settings}
    for name, value in replay.items():
        if isinstance(value, str):
            replay[name] = ReplaySettings.parse(name, value)
    try:
        settings["settings"] = ReplaySettings().with_values(replay)
    except ReplaySettingsError as error:
        raise ReplaySettingsError(
            error.setting,
            error.key,
            error.problem,
            f"{error}. Fix the provider settings (e.g. AGENTREEL_PROVIDER_SETTINGS)",
        ) from None
    try:
        provider = ReplayProvider(fixture_dir, **settings)
    except ReplayError as error:
        # A harness reading the report learns why the agent could not replay at all.
        report_path = settings.get("report_path")
        if report_path is not None:
            failed = ConsumptionReport(
                fixture_dir=str(fixture_dir),
                scenario=settings.get("scenario") or Path(fixture_dir).name,
                scripts=[],
                errors=[ReportedError(type=type(error).__name__, message=str(error))],
            )
            write_report(failed, report_path)
        raise
    if provider.settings.pace == "recorded":
        # The recorded pace is kept with the answers as sent (wire.ndjson), which only a
        # recording made through the proxy holds; in process there is nothing to pace by.
        raise ReplaySettingsError(
            "pace", "pace", PACE_NEEDS_PROXY, f"pace 'recorded': {PACE_NEEDS_PROXY}"
        )
    return provider


def _parse_flag(name: str, text: str) -> bool:
    """A boolean setting given as text; anything but a known word is an error, so a typo
    never silently flips a test hook."""
    return setting_flag(f"replay provider setting {name}", text)


def _parse_milliseconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(
            f"replay provider setting pacing_ms must be a number of milliseconds; got "
            f"{text!r}. Fix the provider settings (e.g. AGENTREEL_PROVIDER_SETTINGS)"
        ) from None
