"""Volatile request content masked before a request header is built (SPEC 11).

Real agents send, between two runs of the same scenario, different session, thread, turn
and item ids, dates, temp and HOME paths, and billing/version headers in the system prompt.
Every string of the request body passes through the built-in rules, then the scenario's
own regexes; what still differs is drift, with its readable diff. UUIDs and the cwd are the
session normalizer's (``{{uuid:N}}``, ``{{cwd}}``); key order never matters (headers digest
canonical JSON).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from typing import Any

from agentreel.llm_proxy.exceptions import ProxyConfigError

_BUILT_IN: tuple[tuple[str, str], ...] = (
    # Claude Code's first system block: x-anthropic-billing-header: cc_version=...; ...
    (r"x-anthropic-billing-header:[^\n]*", "{{billing-header}}"),
    (
        r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b",
        "{{date}}",
    ),
    (r"\b\d{1,2}/\d{1,2}/\d{4}\b", "{{date}}"),
    # JavaScript's Date.toDateString(), as opencode puts today's date in its system prompt.
    (
        r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
        r" \d{2} \d{4}\b",
        "{{date}}",
    ),
    # Prefixed random ids agents and APIs mint (opencode ses_, Codex items, API objects).
    (
        r"\b(?:ses|msg|prt|thread|thr|turn|item|rs|fc|resp|req|agent|toolu|call|chatcmpl)"
        r"[_-][A-Za-z0-9]{12,}\b",
        "{{id}}",
    ),
    (r"\"?duration_ms\"?\s*[:=]\s*\d+", "duration_ms: 0"),
)


# A path's last character is never sentence punctuation: "see /tmp/x/a.txt." keeps its period.
_PATH_TAIL = r"(?:[^\s\"'`<>]*[^\s\"'`<>.,;:!?)\]}])?"


def _not_the_cwd(cwd: str | None) -> str:
    """A lookahead refusing the cwd (as given or resolved) and paths inside it: those are
    the session normalizer's ``{{cwd}}``, which a tmp or HOME rule applied first would eat."""
    if not cwd or cwd == "/":
        return ""
    spellings = sorted({cwd.rstrip("/"), os.path.realpath(cwd)}, key=len, reverse=True)
    alternatives = "|".join(re.escape(spelling) for spelling in spellings)
    # The cwd ends where a path component ends (a dot then a name would continue it).
    return rf"(?!(?:{alternatives})(?![\w-]|\.[\w-]))"


def _path_rules(cwd: str | None) -> list[tuple[str, str]]:
    rules: list[tuple[str, str]] = []
    not_cwd = _not_the_cwd(cwd)
    temp = tempfile.gettempdir().rstrip("/")
    if temp:
        rules.append((not_cwd + re.escape(temp) + "/" + _PATH_TAIL, "{{tmp}}"))
        real = os.path.realpath(temp)
        if real != temp:
            rules.append((not_cwd + re.escape(real) + "/" + _PATH_TAIL, "{{tmp}}"))
    home = os.path.expanduser("~").rstrip("/")
    if home and home != "/":
        rules.append((not_cwd + re.escape(home) + r"(?=[/\s\"']|$)", "{{home}}"))
    return rules


class Masks:
    """The built-in rules plus the scenario's regexes (each replaced by ``{{mask:N}}``).

    ``cwd``: the run's working directory, left to the session normalizer (``{{cwd}}``)
    even when it lies under the temp directory or HOME."""

    def __init__(self, extra: Sequence[str] = (), *, cwd: str | None = None) -> None:
        rules: list[tuple[re.Pattern[str], str]] = []
        for number, pattern in enumerate(extra, 1):
            try:
                rules.append((re.compile(pattern), f"{{{{mask:{number}}}}}"))
            except re.error as exc:
                raise ProxyConfigError(
                    f"mask {number} {pattern!r} is not a valid regular expression: {exc}. "
                    "Fix the scenario's masks (Python re syntax)"
                ) from None
        # The scenario's own masks first: they may name text a built-in rule would split.
        rules += [(re.compile(p), r) for p, r in (*_path_rules(cwd), *_BUILT_IN)]
        self._rules = tuple(rules)
        self.extra = tuple(extra)

    def text(self, value: str) -> str:
        for pattern, replacement in self._rules:
            value = pattern.sub(replacement, value)
        return value

    def value(self, value: Any) -> Any:
        """``value`` (decoded JSON) with every string masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value
