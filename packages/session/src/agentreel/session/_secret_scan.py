"""The one secret scan: what a recording or a golden may never hold (SPEC 10).

Every path that writes a recording or a golden runs it over the bytes it is about to write
— the harness's record and refresh, ``agentreel proxy record`` (each lane's log at close,
and every record as it is written for the run's own keys), the proxy's fixture writer —
and ``agentreel check-secrets`` runs it over committed fixtures. It refuses:

- the run's own credential values (``SecretScan(values=...)``, ``add_value``): the keys of
  the environment or of the auth headers a client sent;
- auth-header shapes (``Authorization: Bearer …``, ``x-api-key: …``);
- known credential shapes, by the rules of ``detect-secrets`` (Yelp's detector: AWS key
  ids, GitHub, GitLab, OpenAI, private-key blocks, Stripe, Slack, PyPI, npm, SendGrid,
  Azure storage, Square) plus the shapes it lacks, written as its plugins are (a
  ``secret_type`` and a denylist): Anthropic ``sk-ant-…``, OpenAI ``sk-proj-…`` /
  ``sk-svcacct-…`` / ``sk-admin-…`` and 48-character ``sk-…`` keys, GitHub
  ``github_pat_…``, Google ``AIza…`` (Gemini's ``x-goog-api-key`` / ``?key=``).
  High-entropy strings alone are not refused (ids and hashes are in every recording), nor
  keyword guesses (``password = …``) whose false hits would refuse ordinary answers.

A hit names the file, the line, the event (session, turn and step, seq, chunk type) and
the rule — never the value; for a known shape it also gives the value's sha256, which a
scenario lists in ``[record] allow_secrets`` to allow a deliberate fake key (a test of the
scan itself). One allowed key covers every place a recording writes it, cut or not: a
request header's message preview ends at 80 characters with ``…`` (a format goldens hold,
so it stays), and a key running past it is written there cut — another value, another
sha256. A value ending at such a cut is allowed when an allowed key found whole in the
files scanned together begins with it (white space folded, as a preview folds it); a cut
key no allowed key begins with is refused. A PEM block JSON escaped twice (a message's
JSON kept as a string) is unescaped twice before its sha256 is taken. Keys streamed
across text deltas are caught where the log holds them whole (the block's
``block-end``); a block that never ended (a cut call) is scanned as its deltas joined.

Cost: one pass of RE2 (``google-re2``, a DFA: every rule in one scan, linear in the
bytes) finds candidate lines, and only those are checked rule by rule with the
detector's own regular expressions. Both imports happen on the first scan, never at
``import agentreel.session`` (an agent's start-up does not pay for them).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import warnings
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from agentreel.session.exceptions import SecretFoundError, SecretHit

__all__ = ["SecretHit", "SecretScan", "checked_allowlist", "secret_sha256"]

# Values shorter than this are not scanned for: they would match ordinary text.
MIN_VALUE_LENGTH = 8

AUTH_HEADER_RULE = "authorization header with a credential"
_AUTH_HEADER = (
    r"(?i)(?:authorization[\"']?\s*[:=]\s*[\"']?\s*(?:bearer|basic)\s+([A-Za-z0-9._~+/=-]{12,})"
    r"|x-api-key[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9._~+/=-]{12,}))"
)

# detect-secrets' plugins whose rules are known credential shapes (a fixed prefix or
# frame). Left out: the entropy and keyword plugins (they flag ids, hashes and ordinary
# prose), JWT and basic-auth URLs (documentation answers are full of them), and the
# shapes with no fixed part (Discord, Telegram, Mailchimp, Twilio, IBM, Cloudant,
# SoftLayer, Artifactory), which hit ids and cost a pass each.
_DETECT_SECRETS_PLUGINS = (
    ("detect_secrets.plugins.aws", "AWSKeyDetector", 1),  # the key id; the other is a keyword rule
    ("detect_secrets.plugins.github_token", "GitHubTokenDetector", None),
    ("detect_secrets.plugins.gitlab_token", "GitLabTokenDetector", None),
    ("detect_secrets.plugins.openai", "OpenAIDetector", None),
    ("detect_secrets.plugins.private_key", "PrivateKeyDetector", None),
    ("detect_secrets.plugins.stripe", "StripeDetector", None),
    ("detect_secrets.plugins.slack", "SlackDetector", None),
    ("detect_secrets.plugins.pypi_token", "PypiTokenDetector", None),
    ("detect_secrets.plugins.npm", "NpmDetector", None),
    ("detect_secrets.plugins.sendgrid", "SendGridDetector", None),
    ("detect_secrets.plugins.azure_storage_key", "AzureStorageKeyDetector", None),
    ("detect_secrets.plugins.square_oauth", "SquareOAuthDetector", None),
)

# The shapes detect-secrets 1.5 lacks, as its plugins state theirs: (secret_type, denylist).
_OWN_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Anthropic API Key", (r"sk-ant-[a-z]{3,6}[0-9]{2}-[A-Za-z0-9_-]{20,}",)),
    (
        "OpenAI Token",
        (r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}", r"\bsk-[A-Za-z0-9]{48}\b"),
    ),
    ("GitHub Token", (r"github_pat_[A-Za-z0-9_]{22,}",)),
    # Gemini and every Google API: AIza + 35, sent as x-goog-api-key or ?key= (the proxy
    # never writes either; an agent may echo the key it was given). Not inside a longer
    # token (a base64 signature), but right after a JSON escape (\n, \t, \r) it is a key.
    (
        "Google API Key",
        (r"(?:(?<![A-Za-z0-9_-])|(?<=\\[nrt]))AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])",),
    ),
)

# A lookaround RE2 cannot run: dropped from the one-pass prefilter (which then matches a
# superset); the detector's own expression confirms every candidate line.
_LOOKAROUND = re.compile(r"\(\?<?[=!](?:[^()\\]|\\.)*\)")
# A bounded repeat beyond RE2's limit (1000): unbounded in the prefilter (a superset).
_LONG_REPEAT = re.compile(r"\{(\d+),\d{4,}\}")
# A call that did not end well (cut, refused, interrupted): it may hold a block that never
# got its ``block-end``, whose deltas are then joined and scanned (found in the same pass).
_UNENDED_MARK = re.compile(rb'"reason":\s*"(?:error|aborted)"')


def secret_sha256(value: str) -> str:
    """The allowlist entry of ``value``: its sha256, hex (``[record] allow_secrets``)."""
    return hashlib.sha256(value.encode()).hexdigest()


_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def checked_allowlist(entries: object) -> tuple[str, ...]:
    """``entries`` as an allowlist (a list of sha256 hex digests), or ``ValueError`` saying
    which entry is wrong — by position and length, never echoing it (it may be the key)."""
    if not isinstance(entries, list | tuple):
        raise ValueError(f"expected a list of sha256 hex digests, got {type(entries).__name__}")
    checked: list[str] = []
    for position, entry in enumerate(entries):
        if not isinstance(entry, str) or not _SHA256_HEX.fullmatch(entry):
            shape = (
                f"a string of {len(entry)} characters"
                if isinstance(entry, str)
                else (type(entry).__name__)
            )
            raise ValueError(
                f"entry {position} ({shape}) is not a sha256 hex digest (64 characters "
                "0-9a-f): list sha256(value), never the value itself — a refusal prints the "
                "digest of each value it refused"
            )
        checked.append(entry)
    return tuple(checked)


@dataclass(frozen=True, slots=True)
class _Rule:
    name: str
    pattern: re.Pattern[str]
    value_group: bool = False
    """Whether the secret is the pattern's capture groups (auth headers), not its match."""


@dataclass(frozen=True, slots=True)
class _Detector:
    rules: tuple[_Rule, ...]
    prefilter: tuple[str, ...]
    """The rules as RE2-compatible expressions for the one-pass prefilter."""
    slow: tuple[_Rule, ...]
    """Rules RE2 cannot run even without lookarounds: a Python pass each."""


@cache
def _detector() -> _Detector:
    rules: list[_Rule] = []
    # Importing detect-secrets calls logging.captureWarnings(True) (its get_logger, at
    # import): every warning of the process, a replay's RequestDriftWarning included, would
    # then go to logging instead of the warnings machinery (pytest.warns saw none after a
    # first scan). Its plugins' rules are all the scan takes from it.
    showwarning = warnings.showwarning
    try:
        plugins = [
            (getattr(importlib.import_module(module_name), class_name), only)
            for module_name, class_name, only in _DETECT_SECRETS_PLUGINS
        ]
    finally:
        warnings.showwarning = showwarning
    for plugin, only in plugins:
        patterns = list(plugin.denylist)
        if only is not None:
            patterns = patterns[:only]
        rules += [_Rule(str(plugin.secret_type), pattern) for pattern in patterns]
    for name, expressions in _OWN_RULES:
        rules += [_Rule(name, re.compile(expression)) for expression in expressions]
    rules.append(_Rule(AUTH_HEADER_RULE, re.compile(_AUTH_HEADER), value_group=True))
    prefilter: list[str] = []
    slow: list[_Rule] = []
    for rule in rules:
        expression = _LONG_REPEAT.sub(r"{\1,}", _LOOKAROUND.sub("", rule.pattern.pattern))
        if rule.pattern.flags & re.IGNORECASE and not expression.startswith("(?i)"):
            expression = "(?i)" + expression
        if _re2_accepts(expression):
            prefilter.append(expression)
        else:
            slow.append(rule)
    return _Detector(tuple(rules), tuple(prefilter), tuple(slow))


@cache
def _slow_patterns() -> tuple[re.Pattern[bytes], ...]:
    """The rules RE2 cannot run, for a pass of Python's ``re`` each over the bytes."""
    return tuple(
        re.compile(rule.pattern.pattern.encode(), rule.pattern.flags & ~re.UNICODE)
        for rule in _detector().slow
    )


def _re2() -> Any:
    return importlib.import_module("re2")


def _re2_options() -> Any:
    options = _re2().Options()
    options.log_errors = False
    return options


def _re2_accepts(expression: str) -> bool:
    re2 = _re2()
    try:
        re2.compile(expression.encode(), _re2_options())
    except re2.error:
        return False
    return True


class SecretScan:
    """What one run may not write: its own credential ``values`` (``{value: where it came
    from}``, e.g. ``{"sk-…": "$OPENAI_API_KEY"}``), auth headers and known credential
    shapes, less the ``allow``-ed sha256 digests (``secret_sha256``)."""

    def __init__(self, values: Mapping[str, str] | None = None, allow: Iterable[str] = ()) -> None:
        self._values: dict[str, str] = {}
        self._allow = frozenset(allow)
        self._prefilter: Any = None
        for value, origin in (values or {}).items():
            self.add_value(value, origin)

    @property
    def allow(self) -> frozenset[str]:
        return self._allow

    @property
    def has_values(self) -> bool:
        """Whether any credential value of the run is known (``value_in`` can hit)."""
        return bool(self._values)

    def add_value(self, value: str, origin: str) -> None:
        """Refuse ``value`` too (a key a client sent); shorter than 8 characters: ignored."""
        value = value.strip()
        if len(value) >= MIN_VALUE_LENGTH and value not in self._values:
            self._values[value] = origin
            self._prefilter = None

    def value_in(self, text: str) -> str | None:
        """Where the first of the run's own credential values in ``text`` came from, or
        None — the cheap check a writer runs on every record as it goes."""
        for value, origin in self._values.items():
            if value in text:
                return origin
        return None

    # -- files -----------------------------------------------------------------------

    def check(self, files: Mapping[str, bytes]) -> None:
        """Raise ``SecretFoundError`` naming every hit in ``files`` (name → bytes). A cut
        key in one file is allowed by the allowed key written whole in another."""
        scanned = [self._scan(name, data) for name, data in files.items()]
        allowed = {value for _, wholes in scanned for value in wholes}
        hits = [hit for found, _ in scanned for hit in _uncovered(found, allowed)]
        if hits:
            raise SecretFoundError(tuple(hits))

    def scan(self, name: str, data: bytes) -> list[SecretHit]:
        """Every hit in ``data`` (the file ``name``), in line order."""
        found, allowed = self._scan(name, data)
        return _uncovered(found, allowed)

    def _scan(self, name: str, data: bytes) -> tuple[list[_Found], set[str]]:
        """Every hit in ``data`` not allowed by its own sha256, in line order, and the
        allowed values found whole (which allow a cut value they begin with)."""
        found: dict[tuple[int, str, str | None], _Found] = {}
        allowed: set[str] = set()
        unended = False
        if self._candidates(data):
            events = _Events(data)
            for start in self._candidate_lines(data):
                end = data.find(b"\n", start)
                end = len(data) if end < 0 else end
                raw = data[start:end]
                unended = unended or _UNENDED_MARK.search(raw) is not None
                number = data.count(b"\n", 0, start) + 1
                line = raw.decode("utf-8", "replace")
                # A PEM block in a plain file spans lines: its value runs to its END banner.
                tail = ""
                if b"PRIVATE KEY" in raw and b"-----END" not in raw:
                    tail = data[end : end + _PEM_REACH].decode("utf-8", "replace")
                for rule, digest, value, cut in self._line_hits(line, tail, allowed):
                    key = (number, rule, digest)
                    if key not in found:
                        hit = SecretHit(name, number, rule, events.describe(line), digest)
                        found[key] = _Found(hit, value if cut else None)
        if unended:
            for number, text, what in _unended_blocks(data):
                for rule, digest, value, cut in self._line_hits(text, "", allowed):
                    key = (number, rule, digest)
                    if key not in found:
                        found[key] = _Found(
                            SecretHit(name, number, rule, what, digest), value if cut else None
                        )
        return [found[key] for key in sorted(found, key=lambda k: (k[0], k[1]))], allowed

    def _compiled(self) -> Any:
        if self._prefilter is None:
            detector = _detector()
            values = [re.escape(value) for value in self._values]
            expressions = (*detector.prefilter, *values, _UNENDED_MARK.pattern.decode())
            union = "|".join(f"(?:{expression})" for expression in expressions)
            self._prefilter = _re2().compile(union.encode(), _re2_options())
        return self._prefilter

    def _candidates(self, data: bytes) -> bool:
        if self._compiled().search(data) is not None:
            return True
        return any(pattern.search(data) for pattern in _slow_patterns())

    def _candidate_lines(self, data: bytes) -> Iterator[int]:
        """The start offset of each line with a prefilter match (each once, in order)."""
        seen: set[int] = set()
        matches: list[int] = [m.start() for m in self._compiled().finditer(data)]
        for pattern in _slow_patterns():
            matches += [m.start() for m in pattern.finditer(data)]
        for offset in sorted(matches):
            start = data.rfind(b"\n", 0, offset) + 1
            if start not in seen:
                seen.add(start)
                yield start

    def redact(self, text: str) -> str:
        """``text`` with every value the scan would refuse replaced by ``[redacted: rule]``
        (as written and JSON-escaped) — for what is shown rather than written: a failure's
        diff of goldens that hold a key."""
        data = text.encode()
        if not self._candidates(data):
            return text
        found: dict[str, str] = {}
        for start in self._candidate_lines(data):
            end = data.find(b"\n", start)
            end = len(data) if end < 0 else end
            tail = data[end : end + _PEM_REACH].decode("utf-8", "replace")
            line = data[start:end].decode("utf-8", "replace")
            for rule, _, value, _ in self._line_hits(line, tail):
                found[value] = rule
        for value in sorted(found, key=len, reverse=True):
            for form in {value, json.dumps(value)[1:-1]}:
                text = text.replace(form, f"[redacted: {found[value]}]")
        return text

    def _line_hits(
        self, line: str, tail: str = "", allowed: set[str] | None = None
    ) -> Iterator[tuple[str, str | None, str, bool]]:
        """(rule, sha256 or None, value, cut) for every secret in ``line`` the allowlist
        does not let through; the run's own values first (never allowed). ``cut``: the
        value ends where a preview was cut (``…``, a message's preview in a request
        header): the start of a key, allowed when an allowed key written whole begins with
        it (``_uncovered``). Each allowed value found whole is added to ``allowed``."""
        for value, origin in self._values.items():
            if value in line:
                yield f"the value of {origin} (a credential of this run)", None, value, False
        spans: list[tuple[int, int, str, str, bool]] = []
        for rule in _detector().rules:
            for match in rule.pattern.finditer(line):
                groups = [g for g in match.groups() if g] if rule.value_group else []
                value = groups[0] if groups else match.group(0)
                end = match.end()
                cut = line.startswith(_CUT_MARKS, end)
                text = line + tail
                if "PRIVATE KEY" in value:
                    start = line.rfind("-----", 0, match.start())
                    start = start if start >= 0 else match.start()
                    string = _string_rest(line, end)
                    if string.endswith(_CUT_MARKS) and _PEM_END.search(string) is None:
                        # A block begun in a preview and cut there: its start, as far as shown.
                        mark = next(m for m in _CUT_MARKS if string.endswith(m))
                        value = _unescaped(line[start : end + len(string) - len(mark)])
                        cut = True
                    elif (block := _PEM_END.search(text, end)) is not None:
                        # The whole block is the value, not its banner.
                        value = _unescaped(text[start : block.end()])
                if value not in self._values:  # else named above, as what it is
                    spans.append((match.start(), end, rule.name, value, cut))
        # One key, one hit: a match inside another (two rules of one shape) is dropped.
        for start, end, name, value, cut in spans:
            if any(s <= start and end <= e and (s, e) != (start, end) for s, e, *_ in spans):
                continue
            digest = secret_sha256(value)
            if digest not in self._allow:
                yield name, digest, value, cut
            elif allowed is not None and not cut:
                allowed.add(value)


@dataclass(frozen=True, slots=True)
class _Found:
    hit: SecretHit
    cut: str | None
    """The value, when it ends where a preview was cut (the start of a key)."""


def _uncovered(found: Iterable[_Found], allowed: Collection[str]) -> list[SecretHit]:
    """The hits no allowed key covers: a cut value is covered by an allowed key found whole
    that begins with it (white space folded, as a preview folds it) — one allowed key
    covers every place it is written, cut or not; a cut key no allowed key begins with
    is refused (its sha256 is the cut value's)."""
    folded = [" ".join(value.split()) for value in allowed]
    return [
        entry.hit
        for entry in found
        if entry.cut is None
        or not any(whole.startswith(" ".join(entry.cut.split())) for whole in folded)
    ]


# How a message's preview marks its cut (``…``, raw or as a JSON escape).
_CUT_MARKS = ("…", "\\u2026")
_JSON_STRING_REST = re.compile(r'(?:[^"\\]|\\.)*')


def _string_rest(line: str, start: int) -> str:
    """The rest of the JSON string ``line`` is in at ``start`` (to its closing quote)."""
    match = _JSON_STRING_REST.match(line, start)
    return match.group(0) if match is not None else ""


_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----")
_PEM_REACH = 64 * 1024  # how far past its banner line a PEM block's END is looked for


def _unescaped(text: str) -> str:
    """``text`` as it was before JSON escaped it (a PEM block's newlines), when it can be —
    as often as it was: a message's JSON kept as a string in a log line (format 3's
    ``MessageHeader.json``) escapes the block twice, and its one sha256 must still be the
    block's (a key allowed once is allowed wherever the recording writes it)."""
    while "\\" in text:
        try:
            value = json.loads(f'"{text}"')
        except ValueError:
            return text
        if not isinstance(value, str) or value == text:
            return text
        text = value
    return text


class _Events:
    """Says which event a line of a session log is (a JSONL file of section 4)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._session: str | None = None
        self._read = False

    def session(self) -> str | None:
        if not self._read:
            self._read = True
            first = self._data.split(b"\n", 1)[0]
            record = _json_object(first.decode("utf-8", "replace"))
            if record is not None and record.get("type") == "session":
                identifier = record.get("id")
                self._session = identifier if isinstance(identifier, str) else None
        return self._session

    def describe(self, line: str) -> str:
        record = _json_object(line)
        if record is None:
            return ""
        kind = record.get("type")
        if kind == "session":
            return "session header"
        session = self.session()
        data = record.get("data")
        if not isinstance(kind, str) or "seq" not in record or not isinstance(data, dict):
            return _rpc_event(record)
        parts = [f"session {session}"] if session else []
        if isinstance(data.get("turn"), int):
            step = data.get("step")
            where = f"call turn {data['turn']}"
            parts.append(where + (f" step {step}" if isinstance(step, int) else ""))
        chunk = data.get("chunk")
        chunk_type = chunk.get("type") if isinstance(chunk, dict) else None
        parts.append(f"event {record['seq']} {kind}" + (f" {chunk_type}" if chunk_type else ""))
        return ", ".join(parts)


def _rpc_event(record: dict[str, Any]) -> str:
    """A transcript line: the JSON-RPC method and the update kind, if any."""
    method = record.get("method")
    if not isinstance(method, str):
        return ""
    params = record.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    kind = update.get("sessionUpdate") if isinstance(update, dict) else None
    return method + (f" {kind}" if isinstance(kind, str) else "")


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _unended_blocks(data: bytes) -> Iterator[tuple[int, str, str]]:
    """Each streamed block that never got its ``block-end`` (a cut call): its deltas'
    text joined, with the line of its first delta — a key split across deltas is whole
    there, as it would be concatenated by whoever reads the recording."""
    open_blocks: dict[tuple[Any, ...], tuple[int, list[str], str]] = {}
    session = _Events(data)
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if b"-delta" not in raw and b'"block-end"' not in raw:
            continue
        record = _json_object(raw.decode("utf-8", "replace"))
        if record is None or not isinstance(record.get("data"), dict):
            continue
        chunk = record["data"].get("chunk")
        if not isinstance(chunk, dict):
            continue
        turn, step = record["data"].get("turn"), record["data"].get("step")
        key = (turn, step, chunk.get("index"))
        kind = chunk.get("type")
        if kind == "block-end":
            open_blocks.pop(key, None)
        elif isinstance(kind, str) and kind.endswith("-delta"):
            text = chunk.get("text", chunk.get("arguments_delta"))
            if isinstance(text, str):
                if key not in open_blocks:
                    where = f"session {session.session()}, call turn {turn} step {step}, "
                    open_blocks[key] = (number, [], where + f"block {chunk.get('index')}")
                open_blocks[key][1].append(text)
    for number, texts, where in open_blocks.values():
        yield number, "".join(texts), f"{where} never ended: its {len(texts)} deltas joined"
