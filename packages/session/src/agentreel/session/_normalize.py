"""The one normalizer (SPEC section 7): goldens and replay's request drift check share it.

Rules, applied to every string (dict keys included) of a JSON value:

- the cwd — as given, its ``realpath`` (``/tmp`` vs ``/private/tmp``), and the JSON-escaped
  spellings of both (a path inside a JSON string inside a string, e.g. tool arguments) —
  becomes ``{{cwd}}``. A match must not continue or extend a path name component:
  ``/tmp/w`` does not match inside ``/tmp/work`` or ``/var/tmp/w``. A cwd of ``/`` is
  never replaced (it would rewrite every path).
- the session ids, in session order: the first becomes ``{{session:main}}``, the next
  ``{{session:1}}``, ``{{session:2}}``, ... (pass them in harvest order: ``order_sessions``);
- any other UUID (canonical hyphenated, any case, or 32-hex without hyphens when it carries
  a valid RFC 4122 version and variant) becomes ``{{uuid:N}}``, N = 1, 2, ... by first
  appearance in this Normalizer instance;
- a time-like field is set to 0 when its value is a number or a string (``null`` stays
  ``null``: "never happened" is meaningful); when its value is an object (a Rust
  ``Duration`` as ``{"secs": 0, "nanos": 15229}``), every number inside it is. Time-like
  keys: ``time``, ``timestamp``, ``ts``; any key ending in ``_at`` or camelCase ``At``
  (``created_at``, ``updatedAt``; not ``format``), also with a unit ``_ms`` / ``Ms``
  (``started_at_ms``, Codex); any key ending in ``_ms`` or camelCase ``Ms``
  (``wall_ms``, ``totalDurationMs``, Claude Code's Task result; not ``items``); any key
  starting with ``duration``, ``elapsed`` or ``latency`` (any case: ``duration_ms``,
  ``elapsedMs``, ``latency_s``) or holding one as a later word (``total_duration``,
  ``apiDuration``, ``wallElapsed``).
- JSON-RPC messages additionally get their top-level ``id`` renumbered 0, 1, 2, ... by first
  appearance (one mapping per instance; ``1`` and ``"1"`` are different ids).
- the agent's own install path, a machine fact (``_install_paths``, shared with the proxy's
  request masks), after the cwd and extra paths became tokens: up to a path's last
  ``node_modules`` → ``{{node-modules}}``, last ``site-packages`` → ``{{site-packages}}``, a
  Python environment's ``bin`` → ``{{venv}}``; never right after a token, so the
  workspace's ``{{cwd}}/node_modules/…`` stays.
- a scenario's own masks (``Mask``: a regex and a token name), for what a third-party agent
  prints that no built-in rule knows (opencode's ``ses_…`` ids, its cwd shown relative to
  ``/``), run first: each distinct match becomes ``{{<token>:N}}``, N by first appearance
  of that text for that token. ``{cwd_from_root}`` in a mask's regex stands for the cwd
  without its leading ``/``. A ``KeyMask`` names a JSON key instead: that key's value, at
  any depth and of any type (a number, an object), becomes the string ``{{<token>}}`` — a
  volatile value has no identity worth numbering (two durations equal by chance in one run
  are not in the next); it wins over the time-like rule.
- notifications of the ``unordered`` ``sessionUpdate`` kinds (``session/update`` whose
  ``params.update.sessionUpdate`` is one of them) are compared as a multiset per prompt
  turn: ``transcript`` holds each back and writes the ones of a turn together, in one
  canonical order, right before the turn's end, so the order in which they arrived never
  changes a golden. A prompt turn ends at the agent's response to ``session/prompt`` (a
  result with a ``stopReason``, which no other ACP response has, or an error response),
  or at the end of stdout. The responses to ``initialize``, ``session/new``,
  ``session/load``, ``session/fork`` or ``session/set_mode`` end no turn: what an agent
  announces around them (its commands, modes, a title) races their response (mistral-vibe
  3.0 sends ``available_commands_update`` before or after ``session/new``'s), so it
  belongs to the next prompt turn's multiset, written at that turn's end (or at the end
  of stdout when no prompt follows).
- notifications of the ``merge`` ``sessionUpdate`` kinds (``MERGE_KEYS``: today
  ``tool_call_update``, keyed by ``toolCallId``) that follow each other in one session
  about the same thing are written as one, before any other rule: an agent may send a
  command's output and its completion as one ``tool_call_update`` or as two, depending on
  timing (Codex 2.6). Only another message of the same session (a notification of another
  kind or thing, a request it makes) or a JSON-RPC response (a turn's end) breaks such a
  run; other sessions' notifications may come between. Merged as ACP reads updates: a
  later field replaces an earlier one, objects merge key by key, and a string inside a
  ``*delta`` object (``_meta.terminal_output_delta.data``) is appended to. Every
  notification of a merged kind, merged or alone, is written with its ``update``'s keys
  sorted at every depth, so one message and two merged ones give the same line.

Numbering state (UUIDs, JSON-RPC ids) lives in the instance, so the order in which a caller
feeds inputs decides the numbers: the harness normalizes the transcript first, then the
session logs in session order; the drift check uses a fresh instance per comparison side.
Output keeps key order and is compact JSON, one value a line, each line ending in ``\\n``.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import uuid
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from agentreel.session._fixture_layout import CWD_TOKEN
from agentreel.session._install_paths import (
    INSTALL_PATH_ANCHORS,
    INSTALL_PATH_TOKENS,
    mask_install_paths,
)
from agentreel.session._loader import SessionLog
from agentreel.session._order import order_sessions
from agentreel.session.exceptions import NotJsonLineError

__all__ = [
    "CWD_TOKEN",
    "MAIN_SESSION_TOKEN",
    "MERGE_KEYS",
    "SESSION_UPDATE_KINDS",
    "KeyMask",
    "Mask",
    "Normalizer",
    "is_time_key",
    "merge_kinds_checked",
    "session_token",
    "unordered_kinds_checked",
]

MAIN_SESSION_TOKEN = "{{session:main}}"


def session_token(position: int) -> str:
    """The token of the session at ``position`` in session order (``{{session:main}}``,
    ``{{session:1}}``, ...): how goldens, and the messages about a fixture's files, name it."""
    return MAIN_SESSION_TOKEN if position == 0 else f"{{{{session:{position}}}}}"


_TIME_KEYS = frozenset({"time", "timestamp", "ts"})
_TIME_KEY = re.compile(
    r"(?:_at|[a-z0-9]At)(?:_ms|Ms)?$|[A-Za-z0-9]_ms$|[a-z0-9]Ms$|^(?i:duration|elapsed|latency)"
    r"|(?:_|[a-z0-9](?=[DEL]))(?:[Dd]uration|[Ee]lapsed|[Ll]atency)"
)

# A JSON escape such as ``\n`` right before a token is a boundary, not a name character.
_AFTER_ESCAPE = r"(?<=\\[nrtbf])|(?<=\\u00[0-9a-fA-F]{2})"
_UUID = (
    rf"(?:(?<![0-9A-Za-z])|{_AFTER_ESCAPE})"
    r"(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|[0-9a-fA-F]{12}[1-8][0-9a-fA-F]{3}[89abAB][0-9a-fA-F]{15})"
    r"(?![0-9A-Za-z])"
)
# A path must not continue a name before it nor after it. Name characters are ASCII
# letters, digits, "_", "-" (and "." before), and any non-ASCII character: stated in
# ASCII terms so the byte-level scanner of encoded logs applies the very same rule.
_PATH_BEFORE = rf"(?:(?<![A-Za-z0-9_.\-\x80-\U0010ffff])|{_AFTER_ESCAPE})"
_PATH_AFTER = r"(?![A-Za-z0-9_\-\x80-\U0010ffff])"

# Byte-level equivalents for the encoded-log scanner (``_uuid_spans``, ``_free_before``).
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ALNUM = frozenset(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_PATH_NAME_BEFORE = _ALNUM | frozenset(b"_.-") | frozenset(range(0x80, 0x100))
_SHORT_ESCAPES = frozenset(b"nrtbf")
_DASHED_UUID_TAIL = re.compile(
    rb"-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![0-9A-Za-z])"
)
# Translation table: hex digits become "x", every other byte ".", so runs of 32 hex digits
# are found with a plain (fast) substring search.
_HEX_MASK = bytes(0x78 if byte in _HEX else 0x2E for byte in range(256))
_HEX_RUN = b"x" * 32
_MASKED_HEX = re.compile(rb"x*")

_ENCODER = msgspec.json.Encoder()
# An install path's anchors as they appear in encoded JSON (a backslash doubled).
_ENCODED_INSTALL_ANCHORS = tuple(
    anchor.replace("\\", "\\\\").encode() for anchor in INSTALL_PATH_ANCHORS
)
# Records encoded and scanned per call when normalizing a loaded log: big enough that the
# per-call cost vanishes, small enough that a slice's bytes are nothing next to the log.
_RECORDS_PER_SLICE = 1024
_decode_json = msgspec.json.decode


# A mask's token names a family of placeholders: ``{{<token>:N}}``. The built-in families are
# not available, so a mask never makes a token that reads like a cwd, session or UUID.
_MASK_TOKEN = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
_RESERVED_TOKENS = frozenset(
    {"cwd", "session", "uuid", "sessions", "home", "tmp", *INSTALL_PATH_TOKENS}
)
_MASK_PLACEHOLDER = "{cwd_from_root}"


@dataclass(frozen=True, slots=True)
class Mask:
    """A scenario's own normalizer rule: every match of ``regex`` becomes ``{{token:N}}``.

    ``regex`` is Python ``re`` syntax and may hold ``{cwd_from_root}``: the run's cwd
    without its leading ``/`` (as tools that show paths relative to ``/`` print it).
    Built with ``Mask.checked``, which says what is wrong in terms of the value given.
    """

    regex: str
    token: str

    @classmethod
    def checked(cls, regex: str, token: str) -> Mask:
        """A ``Mask``, or ``ValueError`` saying what is wrong and how to fix it."""
        _check_token(token)
        try:
            pattern = re.compile(regex.replace(_MASK_PLACEHOLDER, "x"))
        except re.error as exc:
            raise ValueError(f"regex {regex!r} is not a valid regular expression: {exc}") from None
        if pattern.match(""):
            raise ValueError(
                f"regex {regex!r} matches the empty string, so it would mask between every "
                "character; make it match at least one character"
            )
        return cls(regex, token)

    def compile(self, cwd: str | None) -> re.Pattern[str]:
        """The regex with ``{cwd_from_root}`` filled in (a mask that uses it matches
        nothing without a cwd)."""
        if _MASK_PLACEHOLDER not in self.regex:
            return re.compile(self.regex)
        if cwd is None or len(cwd.strip("/")) == 0:
            return re.compile(r"(?!)")
        return re.compile(self.regex.replace(_MASK_PLACEHOLDER, re.escape(cwd.lstrip("/"))))


@dataclass(frozen=True, slots=True)
class KeyMask:
    """A scenario's own normalizer rule by JSON key: the value of every ``key`` (any depth,
    any type: a number, a string, an object) becomes the string ``{{token}}``.

    For what an agent prints that varies between runs under a key no built-in rule knows
    (Claude Code's ``totalDurationMs`` before it was built in, a token count). Built with
    ``KeyMask.checked``, which says what is wrong in terms of the value given.
    """

    key: str
    token: str

    @classmethod
    def checked(cls, key: str, token: str) -> KeyMask:
        """A ``KeyMask``, or ``ValueError`` saying what is wrong and how to fix it."""
        _check_token(token)
        if not key or key != key.strip():
            raise ValueError(
                f"key {key!r} is not a JSON key name: give the key exactly as the agent "
                "writes it, e.g. 'totalDurationMs' (no surrounding spaces)"
            )
        return cls(key, token)

    @property
    def placeholder(self) -> str:
        return f"{{{{{self.token}}}}}"


# The ``sessionUpdate`` kinds of ACP's ``session/update`` (the schema's, December 2026).
SESSION_UPDATE_KINDS = frozenset(
    {
        "agent_message_chunk",
        "agent_thought_chunk",
        "available_commands_update",
        "config_option_update",
        "current_mode_update",
        "plan",
        "plan_removed",
        "plan_update",
        "session_info_update",
        "tool_call",
        "tool_call_update",
        "usage_update",
        "user_message_chunk",
    }
)


def unordered_kinds_checked(kinds: object) -> tuple[str, ...]:
    """``kinds`` as the ``unordered`` setting of a ``Normalizer``, or ``ValueError`` saying
    what is wrong: a list of distinct ACP ``sessionUpdate`` kinds."""
    return _distinct_kinds(
        kinds,
        'unordered = ["session_info_update", "available_commands_update"]',
        SESSION_UPDATE_KINDS,
        lambda kind: (
            f"{kind!r} is not an ACP sessionUpdate kind; known kinds: "
            f"{', '.join(sorted(SESSION_UPDATE_KINDS))}"
        ),
    )


MERGE_KEYS: Mapping[str, str] = {"tool_call_update": "toolCallId"}
"""The ``sessionUpdate`` kinds a transcript may merge (``[transcript] merge``), each with
the field naming what its notifications are about: only updates of one thing merge."""


def merge_kinds_checked(kinds: object) -> tuple[str, ...]:
    """``kinds`` as the ``merge`` setting of a ``Normalizer``, or ``ValueError`` saying what
    is wrong: a list of distinct kinds of ``MERGE_KEYS``."""
    known = ", ".join(f"{name} (by {key})" for name, key in sorted(MERGE_KEYS.items()))
    return _distinct_kinds(
        kinds,
        'merge = ["tool_call_update"]',
        MERGE_KEYS,
        lambda kind: (
            f"{kind!r} is not a sessionUpdate kind that can be merged; mergeable kinds: {known}"
        ),
    )


def _distinct_kinds(
    kinds: object, example: str, known: Container[str], unknown: Callable[[object], str]
) -> tuple[str, ...]:
    """``kinds`` as a tuple of distinct known kinds, or ``ValueError``: not an array (with
    ``example``), a kind not in ``known`` (``unknown(kind)`` says so), a kind listed twice."""
    if not isinstance(kinds, list | tuple):
        raise ValueError(
            f"expected an array of sessionUpdate kinds, got {type(kinds).__name__}, e.g. {example}"
        )
    seen: list[str] = []
    for kind in kinds:
        if not isinstance(kind, str) or kind not in known:
            raise ValueError(unknown(kind))
        if kind in seen:
            raise ValueError(f"{kind!r} is listed twice; list each kind once")
        seen.append(kind)
    return tuple(seen)


def _check_token(token: str) -> None:
    if not _MASK_TOKEN.match(token):
        raise ValueError(
            f"token {token!r} is not a token name: lower-case letters and digits, words "
            "joined by '-', e.g. 'opencode-session' (it becomes {{opencode-session:1}})"
        )
    if token in _RESERVED_TOKENS:
        raise ValueError(
            f"token {token!r} is a built-in normalizer token; pick another name, e.g. "
            f"'agent-{token}'"
        )


# A golden holds what a run did, not which agentreel wrote its log: the header's format
# stamp (``_format``; its last two fields) is left out, so a golden stays byte for byte what
# it was when the stamp changes.
_STAMP = re.compile(rb',"format":-?\d+,"masks":-?\d+\}\n$')
_STAMP_KEYS = ("format", "masks")


def _unstamped(header_line: bytes) -> bytes:
    """An encoded header line without its format stamp."""
    return _STAMP.sub(b"}\n", header_line)


def _unstamped_value(record: Any) -> Any:
    """A decoded header without its format stamp (any other record as it is)."""
    if isinstance(record, dict) and record.get("type") == "session":
        return {key: item for key, item in record.items() if key not in _STAMP_KEYS}
    return record


def is_time_key(key: str) -> bool:
    """Whether a field named ``key`` holds a time or duration (normalized to 0)."""
    return key in _TIME_KEYS or _TIME_KEY.search(key) is not None


def _json_spellings(path: str) -> list[str]:
    """``path`` and the ways it is spelled inside a JSON string (one level of escaping):
    minimal escaping (msgspec, JavaScript), ASCII-only escaping (Python's ``json``), and
    both with ``/`` escaped as ``\\/``."""
    compact = msgspec.json.encode(path).decode()[1:-1]
    ascii_only = json.dumps(path)[1:-1]
    spellings = {path, compact, ascii_only}
    spellings |= {s.replace("/", "\\/") for s in list(spellings)}
    return sorted(spellings)


def _encoded(text: str) -> str:
    """``text`` as it appears between the quotes of an encoded JSON string."""
    return _ENCODER.encode(text).decode()[1:-1]


def _compile(path_tokens: Mapping[str, str]) -> re.Pattern[str]:
    """One pattern for every path spelling (longest first) and every UUID."""
    alternatives = [re.escape(s) for s in sorted(path_tokens, key=lambda s: (-len(s), s))]
    if not alternatives:
        return re.compile(f"(?P<uuid>{_UUID})")
    path_pattern = f"{_PATH_BEFORE}(?P<path>{'|'.join(alternatives)}){_PATH_AFTER}"
    return re.compile(f"{path_pattern}|(?P<uuid>{_UUID})")


def _free_before(data: bytes, start: int, name: frozenset[int]) -> bool:
    """Byte-level twin of the regex lookbehinds: ``data[start]`` does not continue a name
    (or follows a JSON escape such as ``\\n`` or ``\\u001b``)."""
    if start == 0 or data[start - 1] not in name:
        return True
    if start >= 2 and data[start - 2] == 0x5C and data[start - 1] in _SHORT_ESCAPES:
        return True
    return (
        start >= 6
        and data[start - 6 : start - 2] == b"\\u00"
        and data[start - 2] in _HEX
        and data[start - 1] in _HEX
    )


def _uuid_spans(data: bytes) -> list[tuple[int, int]]:
    """Spans of UUIDs in ``data`` (same rule as ``_UUID``), found from literal anchors
    instead of trying a regex at every byte: 10x faster on large encoded logs."""
    spans: list[tuple[int, int]] = []
    for match in _DASHED_UUID_TAIL.finditer(data):
        start = match.start() - 8
        if (
            start >= 0
            and all(byte in _HEX for byte in data[start : match.start()])
            and _free_before(data, start, _ALNUM)
        ):
            spans.append((start, match.end()))
    mask = data.translate(_HEX_MASK)
    position = mask.find(_HEX_RUN)
    while position >= 0:
        end = _MASKED_HEX.match(mask, position + 32).end()  # type: ignore[union-attr]
        hex_start = _hex_uuid_start(data, position, end)
        if (
            hex_start is not None
            and (end == len(data) or data[end] not in _ALNUM)
            and 0x31 <= data[hex_start + 12] <= 0x38
            and data[hex_start + 16] in b"89abAB"
        ):
            spans.append((hex_start, end))
        position = mask.find(_HEX_RUN, end)
    return spans


def _hex_uuid_start(data: bytes, position: int, end: int) -> int | None:
    """Where a 32-hex UUID ending at ``end`` starts in the hex run ``position..end``, if
    the UUID rule allows one: the whole run, or the run minus a JSON escape it begins
    with (``\\b``/``\\f`` end in a hex letter, ``\\u00XX`` in two hex digits)."""
    length = end - position
    if length == 32:
        return position if _free_before(data, position, _ALNUM) else None
    if length == 33 and position >= 1 and data[position - 1] == 0x5C and data[position] in b"bf":
        return position + 1
    if length == 36 and data[position - 2 : position + 2] == b"\\u00":
        return position + 4
    return None


def _canonical_uuid(text: str) -> str:
    return str(uuid.UUID(text))


class Normalizer:
    """Normalizes texts, JSON values, transcripts and session logs (module docstring rules).

    ``cwd``: the run's working directory (``None``: no cwd rule). ``session_ids``: in session
    order, first = main. ``extra_paths``: more absolute paths to tokenize, e.g.
    ``{"/tmp/x/sessions": "{{sessions}}"}`` (same matching rules as the cwd). ``masks``: a
    scenario's own rules (``Mask`` by regex, ``KeyMask`` by JSON key), applied before the
    built-in ones. ``unordered``: the ``sessionUpdate`` kinds a transcript compares as a
    multiset per prompt turn (``unordered_kinds_checked``). ``merge``: the kinds whose
    consecutive updates of one thing a transcript writes as one (``merge_kinds_checked``).
    """

    def __init__(
        self,
        cwd: str | os.PathLike[str] | None = None,
        session_ids: Sequence[str] = (),
        *,
        extra_paths: Mapping[str, str] | None = None,
        masks: Sequence[Mask | KeyMask] = (),
        unordered: Sequence[str] = (),
        merge: Sequence[str] = (),
    ) -> None:
        self._unordered = frozenset(unordered)
        self._merge = {kind: MERGE_KEYS[kind] for kind in merge}
        self._key_masks = {
            mask.key: mask.placeholder
            for mask in reversed(masks)  # the first mask of a key wins
            if isinstance(mask, KeyMask)
        }
        self._uuid_tokens: dict[str, str] = {}
        for position, session_id in enumerate(session_ids):
            token = session_token(position)
            try:
                key = _canonical_uuid(session_id)
            except ValueError:
                raise ValueError(
                    f"session id {session_id!r} (position {position} of session_ids) is not a "
                    "UUID, so the normalizer cannot recognise it: session ids come from "
                    "agentreel.brand.new_session_id()"
                ) from None
            self._uuid_tokens.setdefault(key, token)
        self._uuid_count = 0
        self._rpc_ids: dict[tuple[type, object], int] = {}
        self._key_cache: dict[str, tuple[str, bool, str | None]] = {}

        path_tokens: dict[str, str] = {}
        paths: list[tuple[str, str]] = []
        if cwd is not None:
            paths.append((os.fspath(cwd), CWD_TOKEN))
        paths.extend((extra_paths or {}).items())
        for path, token in paths:
            for variant in (path, os.path.realpath(path)):
                variant = variant.rstrip("/") if len(variant) > 1 else variant
                if len(variant) <= 1:
                    continue  # "/" or "": replacing it would rewrite everything
                for spelling in _json_spellings(variant):
                    path_tokens.setdefault(spelling, token)
        self._path_tokens = path_tokens
        self._pattern = _compile(path_tokens)
        self._has_paths = bool(path_tokens)
        self._sub: Callable[[Callable[[re.Match[str]], str], str], str] = self._pattern.sub
        live_cwd = os.fspath(cwd) if cwd is not None else None
        self._masks = tuple(
            (mask.compile(live_cwd), mask.token) for mask in masks if isinstance(mask, Mask)
        )
        self._mask_tokens: dict[tuple[str, str], str] = {}
        self._mask_counts: dict[str, int] = {}
        rules = self._pattern.sub
        if self._masks:

            def masked_then_rules(replace: Callable[[re.Match[str]], str], text: str) -> str:
                return mask_install_paths(rules(replace, self._apply_masks(text)))

            self._sub = masked_then_rules
        else:

            def rules_then_installs(replace: Callable[[re.Match[str]], str], text: str) -> str:
                return mask_install_paths(rules(replace, text))

            self._sub = rules_then_installs
        # The same spellings as they appear inside encoded JSON (UTF-8), for the scanner
        # that normalizes a whole encoded log at once (``session_log`` of a SessionLog).
        encoded: dict[bytes, str] = {}
        for spelling, token in path_tokens.items():
            try:
                encoded.setdefault(_encoded(spelling).encode(), token)
            except (UnicodeEncodeError, msgspec.EncodeError):
                continue  # lone surrogates: such a path cannot occur in encoded JSON
        self._encoded_path_tokens = encoded
        self._encoded_paths = (
            re.compile(
                b"(?:"
                + b"|".join(re.escape(s) for s in sorted(encoded, key=lambda s: (-len(s), s)))
                + rb")(?![A-Za-z0-9_\-\x80-\xff])"
            )
            if encoded
            else None
        )

    @classmethod
    def for_logs(
        cls,
        cwd: str | os.PathLike[str] | None,
        logs: Iterable[SessionLog],
        *,
        extra_paths: Mapping[str, str] | None = None,
        masks: Sequence[Mask | KeyMask] = (),
        unordered: Sequence[str] = (),
        merge: Sequence[str] = (),
    ) -> Normalizer:
        """A normalizer whose session tokens follow the session order of ``logs``."""
        ordered = order_sessions(logs, lambda log: log.header)
        return cls(
            cwd,
            [log.header.id for log in ordered],
            extra_paths=extra_paths,
            masks=masks,
            unordered=unordered,
            merge=merge,
        )

    def _apply_masks(self, text: str) -> str:
        for pattern, token in self._masks:
            text = pattern.sub(functools.partial(self._mask_token, token), text)
        return text

    def _mask_token(self, token: str, found: re.Match[str]) -> str:
        key = (token, found.group())
        name = self._mask_tokens.get(key)
        if name is None:
            count = self._mask_counts[token] = self._mask_counts.get(token, 0) + 1
            name = self._mask_tokens[key] = f"{{{{{token}:{count}}}}}"
        return name

    # -- strings and values ------------------------------------------------------------

    def _replace(self, match: re.Match[str]) -> str:
        path = match.group("path") if self._has_paths else None
        if path is not None:
            return self._path_tokens[path]
        return self._uuid_token(match.group("uuid"))

    def _uuid_token(self, text: str) -> str:
        key = _canonical_uuid(text)
        token = self._uuid_tokens.get(key)
        if token is None:
            self._uuid_count += 1
            token = f"{{{{uuid:{self._uuid_count}}}}}"
            self._uuid_tokens[key] = token
        return token

    def text(self, text: str) -> str:
        """``text`` with cwd (and extra paths), session ids and other UUIDs tokenized."""
        return self._sub(self._replace, text)

    def value(self, value: Any) -> Any:
        """A copy of a JSON value (dicts, lists, str, numbers, bool, None) normalized.

        Subclasses of dict/list/str are walked like their base type; other objects (e.g.
        msgspec Structs: convert with ``msgspec.to_builtins`` first) are returned as is.
        """
        kind = type(value)
        if kind is str:
            return self._sub(self._replace, value)
        if kind is dict:
            return self._object(value)
        if kind is list or kind is tuple:
            return [self.value(item) for item in value]
        if isinstance(value, str):
            return self._sub(self._replace, value)
        if isinstance(value, dict):
            return self._object(value)
        if isinstance(value, (list, tuple)):
            return [self.value(item) for item in value]
        return value

    def _object(self, value: dict[str, Any]) -> dict[str, Any]:
        keys = self._key_cache
        walk = self.value
        out: dict[str, Any] = {}
        for key, item in value.items():
            cached = keys.get(key)
            if cached is None:
                # A key's token is fixed once it is first seen, so caching is exact.
                cached = keys[key] = (
                    self._sub(self._replace, key),
                    is_time_key(key),
                    self._key_masks.get(key),
                )
            new_key, time_like, masked = cached
            kind = type(item)
            if masked is not None:
                out[new_key] = masked
            elif kind is str or kind is int or kind is float:
                out[new_key] = (
                    0 if time_like else (self._sub(self._replace, item) if kind is str else item)
                )
            elif kind is dict and time_like:
                out[new_key] = _zero_numbers(walk(item))
            elif kind is dict or kind is list:
                out[new_key] = walk(item)
            elif time_like and isinstance(item, (int, float, str)) and not isinstance(item, bool):
                out[new_key] = 0
            else:
                out[new_key] = walk(item)
        return out

    def jsonrpc_line(self, message: Any) -> Any:
        """One JSON-RPC message normalized: ``id`` renumbered by first appearance, then
        every ``value`` rule. Anything that is not an object is normalized as a value."""
        if isinstance(message, dict) and message.get("id") is not None:
            raw = message["id"]
            number = self._rpc_ids.setdefault((type(raw), raw), len(self._rpc_ids))
            return self.value({**message, "id": number})
        return self.value(message)

    # -- whole documents ---------------------------------------------------------------

    def transcript(self, stdout: bytes, *, source: str = "agent stdout") -> str:
        """Agent stdout (newline-delimited JSON-RPC) as normalized JSONL text.

        Every line must be a JSON object; otherwise ``NotJsonLineError`` names ``source``,
        the 1-based line number and shows the line. A missing final newline is accepted.
        """
        return self.transcript_bytes(stdout, source=source).decode()

    def transcript_bytes(self, stdout: bytes, *, source: str = "agent stdout") -> bytes:
        """``transcript`` as UTF-8 bytes, built without a text copy (what goldens hold)."""
        out = io.BytesIO()
        held: list[dict[str, Any]] = []  # unordered notifications of the current turn
        messages: Iterable[dict[str, Any]] = (
            _decode_object(
                line,
                source,
                number,
                "Only protocol frames may go to stdout: send logs and prints to stderr",
            )
            for number, line in enumerate(_lines(stdout), start=1)
        )
        if self._merge:
            messages = _merged(messages, self._merge)
        for message in messages:
            if self._unordered:
                if _update_kind(message) in self._unordered:
                    held.append(message)
                    continue
                if held and _ends_prompt_turn(message):
                    self._write_held(out, held)
            out.write(_ENCODER.encode(self.jsonrpc_line(message)))
            out.write(b"\n")
        if held:
            self._write_held(out, held)
        return out.getvalue()  # hands over the buffer: no copy

    def _write_held(self, out: io.BytesIO, held: list[dict[str, Any]]) -> None:
        """The held notifications of one turn, in an order that depends on what they are,
        never on when they came: each is normalized from the same numbering state to give
        its sort key, then all are normalized for real in that order (so ``{{uuid:N}}``
        numbers follow the canonical order too)."""
        state = self._state()
        keys: list[tuple[str, bytes]] = []
        for message in held:
            keys.append((_update_kind(message) or "", _ENCODER.encode(self.jsonrpc_line(message))))
            self._restore(state)
        for _, message in sorted(zip(keys, held, strict=True), key=lambda pair: pair[0]):
            out.write(_ENCODER.encode(self.jsonrpc_line(message)))
            out.write(b"\n")
        held.clear()

    def _state(self) -> tuple[Any, ...]:
        return (
            dict(self._uuid_tokens),
            self._uuid_count,
            dict(self._rpc_ids),
            dict(self._mask_tokens),
            dict(self._mask_counts),
            dict(self._key_cache),
        )

    def _restore(self, state: tuple[Any, ...]) -> None:
        (
            self._uuid_tokens,
            self._uuid_count,
            self._rpc_ids,
            self._mask_tokens,
            self._mask_counts,
            self._key_cache,
        ) = (
            dict(state[0]),
            state[1],
            dict(state[2]),
            dict(state[3]),
            dict(state[4]),
            dict(state[5]),
        )

    def session_log(self, log: SessionLog | bytes, *, source: str = "session log") -> str:
        """A session log as normalized JSONL text (header line, then one event a line).

        ``log`` is a loaded ``SessionLog`` (its torn tail, if any, is left out: the loader
        already reported it) or the raw bytes of a ``.jsonl`` file (every line must be a
        JSON object; ``source`` names it in errors).
        """
        return self.session_log_bytes(log, source=source).decode()

    def session_log_bytes(self, log: SessionLog | bytes, *, source: str = "session log") -> bytes:
        """``session_log`` as UTF-8 bytes: the same text, encoded, without ever holding it
        twice. Goldens are bytes, so the harness uses this one (SPEC 9, peak memory)."""
        if isinstance(log, SessionLog):
            if self._masks or self._key_masks:
                # A scenario's regexes are written for decoded text, not for the escaped
                # bytes the fast path scans: walk the values instead (same result).
                return self._walked_log(log)
            return self._typed_log(log)
        return self._raw_log(log, source)

    def _walked_log(self, log: SessionLog) -> bytes:
        out = io.BytesIO()
        for record in (log.header, *log.events):
            out.write(_ENCODER.encode(self.value(_unstamped_value(msgspec.to_builtins(record)))))
            out.write(b"\n")
        return out.getvalue()

    def _raw_log(self, data: bytes, source: str) -> bytes:
        # Line by line into one buffer. A bad line leaves the numbering as it was (as if
        # every line had been decoded before any was normalized).
        saved = (dict(self._uuid_tokens), self._uuid_count, dict(self._rpc_ids))
        out = io.BytesIO()
        try:
            for number, line in enumerate(_lines(data), start=1):
                value = _decode_object(line, source, number, _REPAIR_LOG)
                if number == 1:
                    value = _unstamped_value(value)
                out.write(_ENCODER.encode(self.value(value)))
                out.write(b"\n")
        except NotJsonLineError:
            self._uuid_tokens, self._uuid_count, self._rpc_ids = saved
            raise
        return out.getvalue()

    def _typed_log(self, log: SessionLog) -> bytes:
        # Fast path, same result as walking the values: in typed records the only time
        # fields are the header's created_at and each event's time (no other field of any
        # event type is time-like), so zero those, encode a slice of records per call and
        # scan the encoded bytes for paths and UUIDs (``_encoded_tokens``). Slices end at
        # line ends and no token spans a line, so slicing changes nothing but the peak
        # memory: the log, the output and one slice (SPEC 9). Slices are scanned in order,
        # so UUIDs are numbered by first appearance as in one whole-log scan.
        replace = msgspec.structs.replace
        out = io.BytesIO()
        header = _ENCODER.encode_lines([replace(log.header, created_at=0)])
        out.write(self._encoded_slice(_unstamped(header)))
        events = log.events
        for start in range(0, len(events), _RECORDS_PER_SLICE):
            records = [
                replace(event, time=0) for event in events[start : start + _RECORDS_PER_SLICE]
            ]
            out.write(self._encoded_slice(_ENCODER.encode_lines(records)))
        return out.getvalue()  # hands over the buffer: no copy

    def _encoded_slice(self, data: bytes) -> bytes:
        """A slice of encoded records normalized: by the byte scan, or — when it may hold
        an install path, whose rules read decoded text (``_install_paths``) — line by
        line through the value walk (the same result)."""
        if not any(anchor in data for anchor in _ENCODED_INSTALL_ANCHORS):
            return self._encoded_tokens(data)
        out = io.BytesIO()
        for line in _lines(data):
            out.write(_ENCODER.encode(self.value(_decode_json(line))))
            out.write(b"\n")
        return out.getvalue()

    def _encoded_tokens(self, data: bytes) -> bytes:
        """``data`` (encoded JSON) with every rule of ``text`` applied inside its strings.

        Equivalent to decoding, applying ``text`` to every string and re-encoding (the
        boundary rules are stated so that they read the same on both), but candidates are
        found from literal anchors rather than by trying a regex at every byte.
        """
        spans: list[tuple[int, int, str | None]] = []
        if self._encoded_paths is not None:
            for match in self._encoded_paths.finditer(data):
                if _free_before(data, match.start(), _PATH_NAME_BEFORE):
                    token = self._encoded_path_tokens[match.group()]
                    spans.append((match.start(), match.end(), token))
        spans.extend((start, end, None) for start, end in _uuid_spans(data))
        if not spans:
            return data
        # Leftmost wins; at one position a path beats a UUID (as in the regex).
        spans.sort(key=lambda span: (span[0], span[2] is None))
        view = memoryview(data)  # slices of a view copy nothing until the final join
        pieces: list[bytes | memoryview] = []
        done = 0
        for start, end, path_token in spans:
            if start < done:
                continue
            pieces.append(view[done:start])
            if path_token is None:
                pieces.append(self._uuid_token(data[start:end].decode("ascii")).encode())
            else:
                pieces.append(path_token.encode())
            done = end
        pieces.append(view[done:])
        joined = b"".join(pieces)
        del pieces
        view.release()
        return joined

    def session_log_file(self, path: str | os.PathLike[str]) -> str:
        """``session_log`` of a ``.jsonl`` file's raw bytes, errors naming ``path``."""
        return self.session_log(Path(path).read_bytes(), source=os.fspath(path))

    def session_log_file_bytes(self, path: str | os.PathLike[str]) -> bytes:
        """``session_log_file`` as UTF-8 bytes (``session_log_bytes`` of the file)."""
        return self.session_log_bytes(Path(path).read_bytes(), source=os.fspath(path))


def _zero_numbers(value: Any) -> Any:
    """``value`` (normalized already) with every number inside it 0: a duration object."""
    if isinstance(value, dict):
        return {key: _zero_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_zero_numbers(item) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return 0
    return value


def _update_kind(message: Mapping[str, Any]) -> str | None:
    """The ``sessionUpdate`` kind of a ``session/update`` notification, else ``None``."""
    if message.get("method") != "session/update" or "id" in message:
        return None
    params = message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    kind = update.get("sessionUpdate") if isinstance(update, dict) else None
    return kind if isinstance(kind, str) else None


def _merged(messages: Iterable[dict[str, Any]], kinds: Mapping[str, str]) -> list[dict[str, Any]]:
    """``messages`` with each run of updates of one thing merged (module docstring)."""
    out: list[dict[str, Any]] = []
    last: dict[str, int] = {}  # session id -> position in out of its open mergeable update
    for message in messages:
        if _is_response(message):
            last.clear()  # a turn ended: nothing merges across it
            out.append(message)
            continue
        params = message.get("params")
        session = params.get("sessionId") if isinstance(params, dict) else None
        kind = _update_kind(message)
        if kind is None or kind not in kinds or not isinstance(session, str):
            if isinstance(session, str):
                last.pop(session, None)
            out.append(message)
            continue
        update = message["params"]["update"]
        thing = update.get(kinds[kind])
        at = last.get(session)
        if at is not None and thing is not None:
            earlier = out[at]["params"]["update"]
            if earlier.get("sessionUpdate") == kind and earlier.get(kinds[kind]) == thing:
                merged = _merge_value(earlier, update, in_delta=False)
                out[at] = {**out[at], "params": {**out[at]["params"], "update": merged}}
                continue
        last[session] = len(out)
        out.append({**message, "params": {**message["params"], "update": _sorted_keys(update)}})
    return out


def _merge_value(earlier: Any, later: Any, *, in_delta: bool) -> Any:
    """``later`` over ``earlier``: objects key by key, a string of a ``*delta`` object
    appended, anything else replaced; keys sorted at every depth."""
    if isinstance(earlier, dict) and isinstance(later, dict):
        out = dict(earlier)
        for key, value in later.items():
            out[key] = (
                _merge_value(earlier[key], value, in_delta=in_delta or _is_delta(key))
                if key in earlier
                else value
            )
        return _sorted_keys(out)
    if in_delta and isinstance(earlier, str) and isinstance(later, str):
        return earlier + later
    return _sorted_keys(later)


def _is_delta(key: str) -> bool:
    return key.lower().endswith("delta")


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


def _is_response(message: Mapping[str, Any]) -> bool:
    """A JSON-RPC response (the end of the request it answers: a prompt turn's end)."""
    return "method" not in message and ("result" in message or "error" in message)


def _ends_prompt_turn(message: Mapping[str, Any]) -> bool:
    """The agent's response to ``session/prompt``: a result with a ``stopReason`` (ACP's
    ``PromptResponse``; no other response has one), or an error, which may be a failed
    prompt's (stdout alone does not say which request an error answers)."""
    if not _is_response(message):
        return False
    result = message.get("result")
    return "error" in message or (isinstance(result, dict) and "stopReason" in result)


_REPAIR_LOG = "Restore the log or re-record the scenario"


def _lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def _decode_object(line: bytes, source: str, number: int, advice: str) -> dict[str, Any]:
    try:
        value = _decode_json(line)
    except msgspec.DecodeError as exc:
        raise NotJsonLineError(source, number, line, f"not JSON ({exc})", advice) from None
    if not isinstance(value, dict):
        raise NotJsonLineError(
            source, number, line, f"JSON {type(value).__name__}, not an object", advice
        )
    return value
