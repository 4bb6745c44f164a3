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
  ``null``: "never happened" is meaningful). Time-like keys: ``time``, ``timestamp``,
  ``ts``; any key ending in ``_at`` or camelCase ``At`` (``created_at``, ``updatedAt``; not
  ``format``); any key starting with ``duration``, ``elapsed`` or ``latency`` (any case:
  ``duration_ms``, ``elapsedMs``, ``latency_s``).
- JSON-RPC messages additionally get their top-level ``id`` renumbered 0, 1, 2, ... by first
  appearance (one mapping per instance; ``1`` and ``"1"`` are different ids).

Numbering state (UUIDs, JSON-RPC ids) lives in the instance, so the order in which a caller
feeds inputs decides the numbers: the harness normalizes the transcript first, then the
session logs in session order; the drift check uses a fresh instance per comparison side.
Output keeps key order and is compact JSON, one value a line, each line ending in ``\\n``.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from agentreel.session._events import Event, SessionHeader
from agentreel.session._loader import SessionLog
from agentreel.session._order import order_sessions
from agentreel.session.exceptions import NotJsonLineError

__all__ = [
    "CWD_TOKEN",
    "MAIN_SESSION_TOKEN",
    "Normalizer",
    "is_time_key",
]

CWD_TOKEN = "{{cwd}}"
MAIN_SESSION_TOKEN = "{{session:main}}"

_TIME_KEYS = frozenset({"time", "timestamp", "ts"})
_TIME_KEY = re.compile(r"(?:_at|[a-z0-9]At)$|^(?i:duration|elapsed|latency)")

# A JSON escape such as ``\n`` right before a token is a boundary, not a name character.
_AFTER_ESCAPE = r"(?<=\\[nrtbf])"
_UUID = (
    rf"(?:(?<![0-9A-Za-z])|{_AFTER_ESCAPE})"
    r"(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|[0-9a-fA-F]{12}[1-8][0-9a-fA-F]{3}[89abAB][0-9a-fA-F]{15})"
    r"(?![0-9A-Za-z])"
)
# A path must not continue a name before it nor after it.
_PATH_BEFORE = rf"(?:(?<![\w.\-])|{_AFTER_ESCAPE})"
_PATH_AFTER = r"(?![\w\-])"

_ENCODER = msgspec.json.Encoder()
_decode_json = msgspec.json.decode


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


def _canonical_uuid(text: str) -> str:
    return str(uuid.UUID(text))


class Normalizer:
    """Normalizes texts, JSON values, transcripts and session logs (module docstring rules).

    ``cwd``: the run's working directory (``None``: no cwd rule). ``session_ids``: in session
    order, first = main. ``extra_paths``: more absolute paths to tokenize, e.g.
    ``{"/tmp/x/sessions": "{{sessions}}"}`` (same matching rules as the cwd).
    """

    def __init__(
        self,
        cwd: str | os.PathLike[str] | None = None,
        session_ids: Sequence[str] = (),
        *,
        extra_paths: Mapping[str, str] | None = None,
    ) -> None:
        self._uuid_tokens: dict[str, str] = {}
        for position, session_id in enumerate(session_ids):
            token = MAIN_SESSION_TOKEN if position == 0 else f"{{{{session:{position}}}}}"
            self._uuid_tokens.setdefault(_canonical_uuid(session_id), token)
        self._uuid_count = 0
        self._rpc_ids: dict[tuple[type, object], int] = {}

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
        alternatives = [re.escape(s) for s in sorted(path_tokens, key=lambda s: (-len(s), s))]
        if alternatives:
            path_pattern = f"{_PATH_BEFORE}(?P<path>{'|'.join(alternatives)}){_PATH_AFTER}"
            self._pattern = re.compile(f"{path_pattern}|(?P<uuid>{_UUID})")
        else:
            self._pattern = re.compile(f"(?P<uuid>{_UUID})")
        self._has_paths = bool(alternatives)
        self._sub: Callable[[Callable[[re.Match[str]], str], str], str] = self._pattern.sub

    @classmethod
    def for_logs(
        cls,
        cwd: str | os.PathLike[str] | None,
        logs: Iterable[SessionLog],
        *,
        extra_paths: Mapping[str, str] | None = None,
    ) -> Normalizer:
        """A normalizer whose session tokens follow the session order of ``logs``."""
        ordered = order_sessions(logs, lambda log: log.header)
        return cls(cwd, [log.header.id for log in ordered], extra_paths=extra_paths)

    # -- strings and values ------------------------------------------------------------

    def _replace(self, match: re.Match[str]) -> str:
        path = match.group("path") if self._has_paths else None
        if path is not None:
            return self._path_tokens[path]
        key = _canonical_uuid(match.group("uuid"))
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
        """A copy of a JSON value (dicts, lists, str, numbers, bool, None) normalized."""
        if isinstance(value, str):
            return self._sub(self._replace, value)
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if (
                    isinstance(item, (int, float, str))
                    and not isinstance(item, bool)
                    and is_time_key(key)
                ):
                    item = 0
                else:
                    item = self.value(item)
                out[self._sub(self._replace, key)] = item
            return out
        if isinstance(value, (list, tuple)):
            return [self.value(item) for item in value]
        return value

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
        out: list[bytes] = []
        for number, line in enumerate(_lines(stdout), start=1):
            message = _decode_object(
                line,
                source,
                number,
                "Only protocol frames may go to stdout: send logs and prints to stderr",
            )
            out.append(_ENCODER.encode(self.jsonrpc_line(message)))
        return _join(out)

    def session_log(self, log: SessionLog | bytes, *, source: str = "session log") -> str:
        """A session log as normalized JSONL text (header line, then one event a line).

        ``log`` is a loaded ``SessionLog`` (its torn tail, if any, is left out: the loader
        already reported it) or the raw bytes of a ``.jsonl`` file (every line must be a
        JSON object; ``source`` names it in errors).
        """
        if isinstance(log, SessionLog):
            records: list[SessionHeader | Event] = [log.header, *log.events]
            values: list[Any] = msgspec.to_builtins(records)
            source = str(log.path)
        else:
            values = [
                _decode_object(line, source, number, "Restore or re-record the log")
                for number, line in enumerate(_lines(log), start=1)
            ]
        return _join([_ENCODER.encode(self.value(value)) for value in values])

    def session_log_file(self, path: str | os.PathLike[str]) -> str:
        """``session_log`` of a ``.jsonl`` file's raw bytes, errors naming ``path``."""
        return self.session_log(Path(path).read_bytes(), source=os.fspath(path))


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


def _join(lines: list[bytes]) -> str:
    if not lines:
        return ""
    return (b"\n".join(lines) + b"\n").decode()
