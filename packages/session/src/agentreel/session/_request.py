"""Request headers: a model request reduced to what replay compares (SPEC sections 4, 5).

The agent writes ``build_request_header(...)`` as a ``request/header`` event before every
model call; the replay provider rebuilds it from the live ``GenerateOptions`` and reports
``diff_request_headers(recorded, live)`` as request drift. Both sides use a fresh
``Normalizer`` (cwd → ``{{cwd}}``, UUIDs → ``{{uuid:N}}``), so a header depends on the
request's content only, never on where or when it ran. Tools and messages are stored as
short digests of their canonical JSON (a message also keeps a short preview, so a diff is
readable); the system prompt is stored whole.

Owned by the llm_replay engineer; lives here because the agent writes these headers and
must not import ``agentreel.llm_replay``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Callable, Collection, Mapping, Sequence

import msgspec

from agentreel.llm import GenerateOptions, Message, TextPart, ToolCallPart, ToolResultPart
from agentreel.llm.wire import WIRE_API_PATHS
from agentreel.session._events import (
    MessageHeader,
    RequestHeaderData,
    ToolHeader,
    WireApi,
)
from agentreel.session._format import NO_TEXT_KEPT
from agentreel.session._install_paths import INSTALL_PATH_ANCHORS
from agentreel.session._normalize import Normalizer

__all__ = [
    "build_request_header",
    "diff_request_headers",
    "json_message_text",
    "remasked_messages",
    "remasked_tools",
    "request_text",
    "with_older_masks",
    "without_texts",
]

_DIGEST_LENGTH = 16
_PREVIEW_LENGTH = 80
_MAX_MESSAGE_DIFFS = 3
_CONTEXT = 24
_MIDDLE = 60
# A message's excerpt around its first difference: this many lines a side, each cut to
# this many characters around the difference.
_EXCERPT_LINES = 2
_EXCERPT_WIDTH = 100


# Every UUID the Normalizer tokenizes contains 8 hex digits in a row.
_UUID_HINT = re.compile(r"[0-9a-fA-F]{8}")


@functools.lru_cache(maxsize=64)
def _cwd_hints(cwd: str | None) -> tuple[str, ...] | None:
    """Substrings every spelling of ``cwd`` contains (its last path component, as given
    and resolved); ``None`` when JSON escaping could alter them (then always normalize)."""
    hints: set[str] = set()
    if cwd is None:
        return ()
    for variant in {cwd, os.path.realpath(cwd)}:
        variant = variant.rstrip("/")
        if not variant:
            continue
        name = variant.rsplit("/", 1)[-1]
        if not name or not name.isascii() or '"' in name or "\\" in name:
            return None
        hints.add(name)
    return tuple(sorted(hints))


def _fast_normalizer(cwd: str | os.PathLike[str] | None) -> Callable[[str], str]:
    """``Normalizer(cwd).text`` that skips texts which cannot contain a match.

    A text needs the full normalizer only if it holds 8 hex digits in a row (a possible
    UUID), the cwd's last path component or an install path's anchor (``node_modules``,
    ...); the Normalizer itself (one per header, as its UUID numbering is per instance) is
    built only when some text needs it.
    """
    names = _cwd_hints(os.fspath(cwd) if cwd is not None else None)
    normalizer: Normalizer | None = None

    def full(value: str) -> str:
        nonlocal normalizer
        if normalizer is None:
            normalizer = Normalizer(cwd)
        return normalizer.text(value)

    if names is None:
        return full
    search = _UUID_HINT.search
    hints = (*names, *INSTALL_PATH_ANCHORS)

    def text(value: str) -> str:
        if search(value) is not None or any(hint in value for hint in hints):
            return full(value)
        return value

    return text


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_LENGTH]


def _canonical(value: object) -> str:
    return msgspec.json.encode(value, order="sorted").decode()


def _shorten(text: str, limit: int = _PREVIEW_LENGTH) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _message_summary(message: Message) -> str:
    """The message's text on one line, white space folded (the preview's source)."""
    return " ".join(_message_text(message).split())


def _message_text(message: Message) -> str:
    """A message's whole text as a reader sees it: its parts one a line, lines kept."""
    parts: list[str] = []
    for part in message.content:
        if isinstance(part, TextPart):
            parts.append(part.text)
        elif isinstance(part, ToolCallPart):
            parts.append(f"{part.name}({part.arguments})")
        elif isinstance(part, ToolResultPart):
            marker = "error" if part.is_error else "result"
            parts.append(f"[{marker} {part.call_id}] {part.content}")
        else:
            parts.append(f"[reasoning] {part.text}")
    return "\n".join(parts)


def build_request_header(
    options: GenerateOptions,
    *,
    turn: int,
    step: int,
    cwd: str | os.PathLike[str] | None,
    api: WireApi | None = None,
    full_text: bool = False,
) -> RequestHeaderData:
    """The normalized header of one model request (what ``request/header`` stores).

    ``cwd`` is the session's working directory (``None``: no cwd tokenizing). ``api`` is
    the wire API of a request made over HTTP (the proxy's; ``None`` in process). The caller
    identity, temperature, max_tokens and stop are not part of it. ``full_text``: each
    message also keeps its whole normalized text where the preview does not hold it all
    (the proxy records it; replay builds it for a drift's excerpt).
    """
    text = _fast_normalizer(cwd)
    system = text(options.system) if options.system is not None else None
    tools = tuple(
        _tool_header(text(tool.name), text(_canonical(tool)), full_text) for tool in options.tools
    )
    tools_digest = _tools_digest(tools)
    messages = tuple(_message_header(message, text, full_text) for message in options.messages)
    return RequestHeaderData(
        turn=turn,
        step=step,
        model=options.model,
        system=system,
        tools=tools,
        tools_digest=tools_digest,
        messages=messages,
        message_count=len(messages),
        api=api,
    )


def _tool_header(name: str, canonical: str, full_text: bool) -> ToolHeader:
    return ToolHeader(name=name, digest=_digest(canonical), text=canonical if full_text else None)


def _tools_digest(tools: Sequence[ToolHeader]) -> str:
    return _digest("\n".join(f"{tool.name}\t{tool.digest}" for tool in tools))


def remasked_tools(
    header: RequestHeaderData, texts: Mapping[str, str], mask: Callable[[str], str]
) -> RequestHeaderData:
    """``header`` with each tool whose canonical JSON is known (its ``text``, or ``texts``
    by digest: a recording keeps each once per log) masked again with ``mask`` — every
    string in it, as the proxy masks a live request's — and digested again: a recording
    made with older masks compares equal to a live request under today's (what replay
    compares is the text, masked alike on both sides). A tool without a known text stays
    as it was."""
    changed = False
    tools: list[ToolHeader] = []
    for tool in header.tools:
        known, canonical = _remasked(tool.text, texts.get(tool.digest), mask)
        if canonical is not None and (canonical != known or _digest(canonical) != tool.digest):
            tool = _tool_header(tool.name, canonical, tool.text is not None)
            changed = True
        tools.append(tool)
    if not changed:
        return header
    return msgspec.structs.replace(header, tools=tuple(tools), tools_digest=_tools_digest(tools))


def with_older_masks(
    live: RequestHeaderData,
    older: RequestHeaderData,
    tools_kept: Collection[str],
    *,
    messages_kept: bool = False,
    today: Collection[str] = (),
) -> RequestHeaderData:
    """The live request as a recording made with an older built-in mask set compares it
    (SPEC 15): ``live`` is built from the request masked with today's masks, ``older`` from
    the same request masked with the recording's set. The recording keeps each message as
    a digest of its masked JSON, and a tool as one unless its whole JSON is kept (its name
    in ``tools_kept``: replay masks that text again with today's masks): those parts are
    ``older``'s, whose digests were taken as the recording's were; the system prompt (kept
    whole, masked again at replay), the kept tools and — ``messages_kept``: the recording
    keeps every message's JSON (format 3) — the messages are ``live``'s. ``today``: the
    digests, taken with today's masks, of the messages of the logs that keep their JSON
    where others do not (a ``--drifted`` merge, SPEC 15): a live message whose digest is
    one of them is ``live``'s, the others ``older``'s — each compares with the log that
    holds it as that log was made."""
    if len(live.tools) == len(older.tools):
        tools = tuple(
            now if now.name in tools_kept else then
            for now, then in zip(live.tools, older.tools, strict=True)
        )
    else:
        tools = older.tools
    return msgspec.structs.replace(
        live,
        tools=tools,
        tools_digest=_tools_digest(tools),
        messages=live.messages
        if messages_kept
        else tuple(
            now if now.digest in today else then
            for now, then in zip(live.messages, older.messages, strict=True)
        )
        if today and len(live.messages) == len(older.messages)
        else older.messages,
    )


def _remasked(
    kept: str | None, logged: str | None, mask: Callable[[str], str]
) -> tuple[str | None, str | None]:
    """A recorded part's canonical JSON — ``kept`` with the part, else ``logged`` once in
    its log — and that JSON masked again with ``mask`` (every string in it); ``(None,
    None)`` where neither is known."""
    known = kept if kept is not None else logged
    if known is None:
        return None, None
    return known, _canonical(_masked_strings(msgspec.json.decode(known), mask))


def _masked_strings(value: object, mask: Callable[[str], str]) -> object:
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {key: _masked_strings(item, mask) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked_strings(item, mask) for item in value]
    return value


def _message_header(message: Message, text: Callable[[str], str], full_text: bool) -> MessageHeader:
    preview = _shorten(text(_message_summary(message)))
    whole = text(_message_text(message)) if full_text else None
    canonical = text(_canonical(message))
    return MessageHeader(
        role=message.role,
        digest=_digest(canonical),
        preview=preview,
        text=whole if whole is not None and whole != preview else None,
        json=canonical if full_text else None,
    )


def json_message_text(canonical: str) -> str:
    """The readable text of a message a recording keeps as its canonical JSON
    (``MessageHeader.json``, format 3, which then keeps no ``text``): its parts one a
    line, as ``MessageHeader.text`` holds it."""
    return _message_text(msgspec.json.decode(canonical, type=Message))


def remasked_messages(
    header: RequestHeaderData, jsons: Mapping[str, str], mask: Callable[[str], str]
) -> RequestHeaderData:
    """``header`` with each message whose canonical JSON is known (``json``, or ``jsons``
    by digest: a recording keeps each once per log) masked again with ``mask`` — every
    string in it — and digested again, as ``remasked_tools`` does for tools: a recording
    made with older masks compares equal to a live request under today's. A message
    without a known JSON stays as it was."""
    changed = False
    messages: list[MessageHeader] = []
    for message in header.messages:
        known, canonical = _remasked(message.json, jsons.get(message.digest), mask)
        if canonical is not None and canonical != known:
            message = msgspec.structs.replace(
                message,
                digest=_digest(canonical),
                json=canonical if message.json is not None else None,
            )
            changed = True
        messages.append(message)
    if not changed:
        return header
    return msgspec.structs.replace(header, messages=tuple(messages))


def without_texts(header: RequestHeaderData) -> RequestHeaderData:
    """``header`` without its messages' whole texts: what replay compares and serves (the
    texts a recording keeps are for a drift's excerpt only)."""
    if all(message.text is None and message.json is None for message in header.messages) and all(
        tool.text is None for tool in header.tools
    ):
        return header
    messages = tuple(
        msgspec.structs.replace(message, text=None, json=None)
        if message.text is not None or message.json is not None
        else message
        for message in header.messages
    )
    tools = tuple(
        msgspec.structs.replace(tool, text=None) if tool.text is not None else tool
        for tool in header.tools
    )
    return msgspec.structs.replace(header, messages=messages, tools=tools)


def request_text(header: RequestHeaderData, texts: Mapping[str, str] | None = None) -> str:
    """A request header as one readable text: model, system prompt, tools, then every
    message whole where it is known (``MessageHeader.text``, or ``texts`` by digest), else
    its preview — what a drift writes beside the run for both sides."""
    known = texts or {}
    lines = [f"model: {header.model}"]
    if header.api is not None:
        lines.append(f"wire API: {WIRE_API_PATHS[header.api]}")
    lines.append(f"tools: {', '.join(tool.name for tool in header.tools) or 'none'}")
    lines.append("--- system prompt ---")
    lines.append(header.system if header.system is not None else "(none)")
    for position, message in enumerate(header.messages):
        whole = message.text or known.get(message.digest)
        note = (
            ""
            if whole is not None or len(message.preview) < _PREVIEW_LENGTH
            else (" (preview only: this recording keeps no whole text)")
        )
        lines.append(f"--- messages[{position}] ({message.role}){note} ---")
        lines.append(whole if whole is not None else message.preview)
    return "\n".join(lines) + "\n"


def _first_difference(recorded: str, live: str) -> int:
    prefix = 0
    limit = min(len(recorded), len(live))
    while prefix < limit and recorded[prefix] == live[prefix]:
        prefix += 1
    return prefix


def _excerpt(text: str, at: int) -> list[str]:
    """The lines of ``text`` up to and including the one holding character ``at`` (at
    most ``_EXCERPT_LINES``), each cut to ``_EXCERPT_WIDTH`` characters around the column
    of the difference."""
    line_start = text.rfind("\n", 0, at) + 1
    column = at - line_start
    starts = [line_start]
    while len(starts) < _EXCERPT_LINES and starts[0] > 0:
        starts.insert(0, text.rfind("\n", 0, starts[0] - 1) + 1)
    lines: list[str] = []
    for start in starts:
        end = text.find("\n", start)
        line = text[start : end if end >= 0 else len(text)]
        left = max(0, column - _EXCERPT_WIDTH // 2)
        piece = line[left : left + _EXCERPT_WIDTH]
        lead = "…" if left > 0 else ""
        tail = "…" if left + _EXCERPT_WIDTH < len(line) else ""
        lines.append(f"{lead}{piece}{tail}")
    if at >= len(text):
        lines[-1] += "⟨end⟩"
    return lines


def _text_excerpt(label: str, recorded: str, live: str) -> str:
    """``label`` differs: a few lines of each side's text up to its first difference."""
    at = _first_difference(recorded, live)
    line = recorded.count("\n", 0, at) + 1
    out = [f"{label} differs at character {at} (line {line}):"]
    for side, text in (("recorded", recorded), ("live", live)):
        for number, excerpt in enumerate(_excerpt(text, at)):
            out.append(f"    {side if number == 0 else '':8} | {excerpt}")
    return "\n".join(out)


def _text_change(label: str, recorded: str | None, live: str | None) -> str:
    if recorded is None or live is None:
        return f"{label}: recorded {_describe(recorded)}, live {_describe(live)}"
    prefix = 0
    limit = min(len(recorded), len(live))
    while prefix < limit and recorded[prefix] == live[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < limit - prefix
        and recorded[len(recorded) - 1 - suffix] == live[len(live) - 1 - suffix]
    ):
        suffix += 1
    start = max(0, prefix - _CONTEXT)

    def excerpt(text: str) -> str:
        middle_end = len(text) - suffix
        middle = text[prefix:middle_end]
        if len(middle) > _MIDDLE:
            middle = middle[: _MIDDLE - 1] + "…"
        after = text[middle_end : middle_end + _CONTEXT]
        lead = "…" if start > 0 else ""
        tail = "…" if middle_end + _CONTEXT < len(text) else ""
        return repr(f"{lead}{text[start:prefix]}{middle}{after}{tail}")

    return (
        f"{label} differs at character {prefix}: recorded {excerpt(recorded)}, live {excerpt(live)}"
    )


def _describe(text: str | None) -> str:
    return "none" if text is None else repr(_shorten(text))


def _tool_changes(
    recorded: RequestHeaderData, live: RequestHeaderData, texts: Mapping[str, str]
) -> list[str]:
    old = {tool.name: tool.digest for tool in recorded.tools}
    new = {tool.name: tool.digest for tool in live.tools}
    live_texts = {tool.name: tool.text for tool in live.tools}
    changes: list[str] = []
    for name, digest in old.items():
        if name not in new:
            changes.append(f"tool {name!r}: recorded, missing from the live request")
        elif new[name] != digest and (was := texts.get(digest)) and (now := live_texts[name]):
            changes.append(_text_change(f"tool {name!r} (schema and description)", was, now))
        elif new[name] != digest:
            changes.append(
                f"tool {name!r}: schema or description changed; {NO_TEXT_KEPT}, so the "
                "change cannot be shown: see the live request written beside the run"
            )
    changes.extend(
        f"tool {name!r}: in the live request, not recorded" for name in new if name not in old
    )
    if not changes and recorded.tools_digest != live.tools_digest:
        changes.append(
            f"tool order changed: recorded {[t.name for t in recorded.tools]}, "
            f"live {[t.name for t in live.tools]}"
        )
    return changes


def _message_changes(
    recorded: RequestHeaderData, live: RequestHeaderData, texts: Mapping[str, str]
) -> list[str]:
    changes: list[str] = []
    if recorded.message_count != live.message_count:
        changes.append(
            f"message count: recorded {recorded.message_count}, live {live.message_count}"
        )
    differing: list[str] = []
    for position in range(max(len(recorded.messages), len(live.messages))):
        old = recorded.messages[position] if position < len(recorded.messages) else None
        new = live.messages[position] if position < len(live.messages) else None
        if old is not None and new is not None:
            if old.digest == new.digest and old.role == new.role:
                continue
            if old.role != new.role:
                differing.append(
                    f"messages[{position}]: role recorded {old.role!r}, live {new.role!r} "
                    f"(recorded {old.preview!r}, live {new.preview!r})"
                )
            elif (
                (old_text := old.text or texts.get(old.digest)) is not None
                and (
                    new_text := new.text
                    or (new.preview if len(new.preview) < _PREVIEW_LENGTH else None)
                )
                is not None
                and old_text != new_text
            ):
                label = f"messages[{position}] ({old.role})"
                differing.append(
                    _text_excerpt(label, old_text, new_text)
                    if not differing
                    else _text_change(label, old_text, new_text)
                )
            elif old.preview != new.preview:
                differing.append(
                    f"messages[{position}] ({old.role}): recorded {old.preview!r}, "
                    f"live {new.preview!r}"
                )
            elif (old.text or texts.get(old.digest)) is not None and (
                old.text or texts.get(old.digest)
            ) == (new.text or (new.preview if len(new.preview) < _PREVIEW_LENGTH else None)):
                # Both sides read the same through today's masks: what differs is what the
                # recording compares, a checksum taken with the masks of its time.
                differing.append(
                    f"messages[{position}] ({old.role}): reads the same on both sides through "
                    "today's masks, but the recording compares it by a checksum taken with the "
                    f"masks it was recorded with; {NO_TEXT_KEPT} in that masking"
                )
            else:
                differing.append(
                    f"messages[{position}] ({old.role}): content differs beyond the preview "
                    f"{old.preview!r}; {NO_TEXT_KEPT} (recorded before the proxy kept "
                    "texts, or in process): compare the full requests written "
                    "beside the run, or re-record"
                )
        elif old is not None:
            differing.append(
                f"messages[{position}] ({old.role}): recorded {old.preview!r}, missing live"
            )
        elif new is not None:
            differing.append(
                f"messages[{position}] ({new.role}): live {new.preview!r}, not recorded"
            )
    if len(differing) > _MAX_MESSAGE_DIFFS:
        hidden = len(differing) - _MAX_MESSAGE_DIFFS
        differing = [*differing[:_MAX_MESSAGE_DIFFS], f"... and {hidden} more message(s)"]
    return changes + differing


def diff_request_headers(
    recorded: RequestHeaderData,
    live: RequestHeaderData,
    *,
    texts: Mapping[str, str] | None = None,
) -> list[str]:
    """Readable differences between two request headers; empty when they match.

    A differing message whose whole text is known on both sides (``MessageHeader.text``,
    or ``texts``: recorded texts by digest, as a recording keeps each text once; the live
    header built with ``full_text=True``) is shown as a few lines of each side up to its
    first difference — the first such message; later ones in one line each — never as
    digests.

    One line per difference: the wire API (when both name one: a recording made over
    HTTP replayed over another API), the model, the system prompt (the first change with some
    context), each added, removed or changed tool, the message count and the first few
    differing messages (role and preview). ``turn`` and ``step`` are not compared.
    """
    differences: list[str] = []
    if recorded.api is not None and live.api is not None and recorded.api != live.api:
        differences.append(
            f"wire API: recorded {WIRE_API_PATHS[recorded.api]}, live "
            f"{WIRE_API_PATHS[live.api]} — the recorded calls are not re-encoded into "
            "another API; point the agent at the API it was recorded with, or re-record"
        )
    if recorded.model != live.model:
        differences.append(f"model: recorded {recorded.model!r}, live {live.model!r}")
    if recorded.system != live.system:
        differences.append(_text_change("system prompt", recorded.system, live.system))
    differences.extend(_tool_changes(recorded, live, texts or {}))
    differences.extend(_message_changes(recorded, live, texts or {}))
    return differences
