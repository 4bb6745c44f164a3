"""The built-in masks (SPEC 13, 15): what a recording writes and compares instead of the
volatile text real agents send and MCP servers answer — the one owner of machine facts, of
time in every spelling, and of the numbered, frozen mask sets (``MASK_SETS``, the newest
``MASKS_VERSION``). Here, below every package that writes recordings: the proxy masks
model requests with them (``agentreel.llm_proxy.Masks``, which adds the scenario's checked
regexes), ``agentreel.mcp_replay`` the messages of an MCP connection.

Real agents send, between two runs of the same scenario, different session, thread, turn
and item ids, dates, temp and HOME paths, and billing/version headers in the system prompt.
Every string passes through the scenario's own regexes, then the built-in rules; what still
differs is drift, with its readable diff. UUIDs and the cwd are the session normalizer's
(``{{uuid:N}}``, ``{{cwd}}``); key order never matters (headers digest canonical JSON).

Machine facts (SPEC 13): what agents write into prompts about the machine they run on, in
the shapes they write it — Claude Code's ``OS Version: Linux 6.18.44-fc-v1045``, ``Platform:
linux``, ``Shell: unknown``; Codex's ``<shell>bash</shell>``; opencode's ``Platform:
linux``; Gemini CLI's ``My operating system is: linux`` — and any other machine's spelling
of the same fact: OS name and kernel version, platform, architecture, shell, hostname, user
name, home directory, time zone, runtime versions (Node.js, Python, ...), and the agent's
own install path (an npm ``node_modules`` folder, a Python ``site-packages`` or venv one:
``install_path_rules``, which the golden normalizer shares). Each becomes ``{{<fact>}}``, so
a recording replays on any machine. Time is one of them, in every spelling
(``_TIME_RULES``: dates with their weekday, time and zone, times, a weekday that names
today, UTC offsets), so a recording replays on any day and in any time zone.

Listings in no fixed order: Gemini CLI lists its skills in the order a directory glob
returned them (the system prompt's ``<available_skills>``, its ``activate_skill`` tool's
description and ``enum``); each is sorted. Every rule is idempotent (masking
masked text changes nothing), also where a path continues a token (``{{cwd}}/home/…`` with
HOME inside the cwd: the token wins, as the cwd did in the live text; no path rule starts
inside another path), so replay applies them to recorded texts too: a recording made
before a rule existed compares equal (``agentreel.llm_replay.ReplayProvider``'s
``content_mask``).
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import re
import socket
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentreel.session._format import MASKS_VERSION
from agentreel.session._install_paths import install_path_rules

__all__ = ["MASK_SETS", "BuiltInMasks", "mask_set_fingerprint", "this_machine_facts"]

_BUILT_IN: tuple[tuple[str, str], ...] = (
    # Claude Code's first system block: x-anthropic-billing-header: cc_version=...; ...
    (r"x-anthropic-billing-header:[^\n]*", "{{billing-header}}"),
    # Prefixed random ids agents and APIs mint (opencode ses_, Codex items, API objects).
    (
        r"\b(?:ses|msg|prt|thread|thr|turn|item|rs|fc|resp|req|agent|toolu|call|chatcmpl)"
        r"[_-][A-Za-z0-9]{12,}\b",
        "{{id}}",
    ),
    (r"\"?duration_ms\"?\s*[:=]\s*\d+", "duration_ms: 0"),
    # Claude Code's subagent id, "a" + 16 random hex digits, new per spawn: its Task/Agent
    # tool result says "agentId: a1b2… (use SendMessage with to: 'a1b2…' …)".
    (r"(?<![\w-])a(?=[0-9a-f]{0,15}[0-9])[0-9a-f]{16}(?![\w-])", "{{agent-id}}"),
)

# -- time: a machine fact in every spelling ---------------------------------------------

# What agents write about today: Codex's ``<current_date>2026-12-02</current_date>``,
# opencode's ``Tue Dec 02 2026`` (Date.toDateString), Gemini CLI's and Qwen Code's
# ``Wednesday, December 2, 2026``, fast-agent's ``02 December 2026``, Mistral Vibe's
# ``2026-12-02 (Wednesday)``; and the other common spellings: ISO 8601 with time and offset,
# RFC 2822 (``Fri, 04 Dec 2026 17:03:11 +0000``), ctime and date(1) (``Fri Dec  4 17:03:11
# UTC 2026``), JavaScript's Date.toString (``… GMT+0000 (Coordinated Universal Time)``),
# ``12/04/2026``, ``04.12.2026``. A whole date expression (its weekday, time and zone with
# it) becomes ``{{date}}``; a time of day alone ``{{time}}``; a weekday alone where it
# says which day today is ``{{weekday}}``; a UTC offset alone (``UTC+14``) ``{{timezone}}``.
# A bare year, month or weekday name in prose stays text ("knowledge cutoff is August
# 2025", "after Thursday", "May"): only a day with its month, or numbers in a date's shape.
# ``{{date}}`` is itself a date here, so masking masked text changes nothing and a token
# an earlier rule wrote takes the rest of its expression with it.
_WEEKDAY_FULL = r"(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day(?![\w-])"
_WEEKDAY = (
    r"(?:(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day|(?:Mon|Tues?|Wed|Thu(?:rs?)?|Fri|Sat|Sun)"
    r"\.?)(?![\w-])"
)
_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November"
    r"|December|(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.?|May)(?![\w-])"
)
_DAY = r"(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?(?!\d)"
_YEAR = r"\d{4}(?![\w-])"
_MERIDIEM = r"(?:[ \u202f]?(?:[AaPp][Mm]|[AaPp]\.[Mm]\.)(?!\w))"
_CLOCK = (
    r"(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:[.,]\d+)?)?(?![\d:])"
    rf"{_MERIDIEM}?"
)
_SIGN = "[+\\-\u2212]"
_ZONE = (
    rf"(?:(?:UTC|GMT){_SIGN}\d{{1,2}}(?::?\d{{2}})?(?!\d)|{_SIGN}\d{{2}}(?::?\d{{2}})?(?![\d:])"
    r"|(?:UTC|GMT|Z|[A-Z]{1,4}T)(?![\w-]))"
    # Date.toString's zone name: "(Coordinated Universal Time)", "(GMT-12:00)".
    r"(?: \([A-Z][A-Za-z0-9 .:'+\-\u2212]*\))?"
)
# A zone after a date with no time of day: no abbreviation (a word ending in T is no zone).
_OFFSET = rf"(?:(?:UTC|GMT)(?:{_SIGN}\d{{1,2}}(?::?\d{{2}})?)?|{_SIGN}\d{{2}}:?\d{{2}})(?![\w:])"
# The earlier rules' shapes (``\b`` on both sides: "gpt-4o-2024-11-20" is masked), so a
# text they masked is masked the same way.
_ISO = (
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
    rf"(?:Z|{_SIGN}\d{{2}}(?::?\d{{2}})?)?)?\b"
)
_DATE_CORE = (
    r"(?:\{\{date\}\}"
    rf"|{_ISO}"
    # "12/04/2026": day and month in range, never a run of a path ("/home/0/0/0000").
    r"|(?<![\w./-])(?:0?[1-9]|[12]\d|3[01])/(?:0?[1-9]|[12]\d|3[01])/\d{4}(?![\w/])"
    r"|(?<![\w./-])(?:\d{4}/\d{1,2}/\d{1,2}|\d{1,2}-\d{1,2}-\d{4}|\d{1,2}\.\d{1,2}\.\d{4})"
    r"(?![\w/]|[.-]\d)"
    # "December 4, 2026", "Dec 04 2026", "Dec  4 17:03:11 UTC 2026", "Dec  4 17:03".
    rf"|{_MONTH} +{_DAY}(?:,? +{_YEAR}|,? +(?:at +)?{_CLOCK}(?: +{_ZONE})?(?: +{_YEAR})?)"
    # "4 December 2026", "04 Dec 2026", "the 4th of December, 2026".
    rf"|(?:the +)?{_DAY} +(?:of +)?{_MONTH},? +{_YEAR})"
)
_DATE_EXPRESSION = (
    rf"(?<!\w)(?:{_WEEKDAY},? +(?:the +)?)?{_DATE_CORE}"
    rf"(?:,? +(?:at +)?{_CLOCK}(?: *{_ZONE})?|,? +{_OFFSET})?"
    rf"(?: +\({_WEEKDAY}\)|, +{_WEEKDAY_FULL})?"
)
_TIME_RULES: tuple[tuple[str, str], ...] = (
    (_DATE_EXPRESSION, "{{date}}"),
    # A time of day alone: with seconds, AM/PM or a zone (never a file:line:column).
    (
        rf"(?<![\w:./-])(?:[01]?\d|2[0-3]):[0-5]\d(?:(?::[0-5]\d(?:[.,]\d+)?)(?![\d:])"
        rf"{_MERIDIEM}?(?: ?{_ZONE})?"
        rf"|(?![\d:])(?:{_MERIDIEM}(?: ?{_ZONE})?| ?(?:UTC|GMT){_SIGN}?\d{{0,2}}"
        r"(?::?\d{2})?(?![\w:])))",
        "{{time}}",
    ),
    # Which day today is, said by its weekday alone.
    (
        rf"(?<=\b[Tt]oday is )(?:{_WEEKDAY})|(?<=[Dd]ay of the week is )(?:{_WEEKDAY})",
        "{{weekday}}",
    ),
    (rf"(?<![\w-])(?:UTC|GMT){_SIGN}\d{{1,2}}(?::?\d{{2}})?(?![\d:])", "{{timezone}}"),
)

# -- machine facts ---------------------------------------------------------------------

# A labelled fact's value: one line, stopping at a quote or a tag (a label inside XML or
# JSON text), and not swallowing a token already masked.
_LINE_VALUE = r"(?:[^\n\r\"<>.]|\.(?=\S))*[^\s\"<>.]"
_WORD_VALUE = r"[^\s\"'<>,;)]+"

# (label, value shape, token): "Label: value" / "Label = value", also as a YAML-ish or
# markdown list item; the label is kept, the value becomes the token.
_LABELLED: tuple[tuple[str, str, str], ...] = (
    (r"OS[ _]?[Vv]ersion|os_version|osVersion|Operating [Ss]ystem|OS", _LINE_VALUE, "os-version"),
    # Gemini CLI and Qwen Code: "My operating system is: linux" (Node's process.platform).
    (r"[Oo]perating [Ss]ystem is", _WORD_VALUE, "platform"),
    (r"[Kk]ernel(?: [Vv]ersion)?", _LINE_VALUE, "os-version"),
    (r"[Pp]latform", _WORD_VALUE, "platform"),
    (r"[Aa]rch(?:itecture)?|CPU [Aa]rch(?:itecture)?", _WORD_VALUE, "arch"),
    (r"[Ss]hell|SHELL|[Dd]efault [Ss]hell", _WORD_VALUE, "shell"),
    (r"[Hh]ost ?[Nn]ame|HOSTNAME|[Mm]achine(?: [Nn]ame)?", _WORD_VALUE, "hostname"),
    (r"[Uu]ser ?[Nn]ame|USER|[Ll]ogin(?: [Nn]ame)?", _WORD_VALUE, "user"),
    (r"[Hh]ome(?: [Dd]ir(?:ectory)?)?|HOME", _WORD_VALUE, "home"),
    (r"[Tt]ime ?[Zz]one|TZ", _WORD_VALUE, "timezone"),
    (
        r"(?:Node(?:\.js)?|Python|Bun|Deno|Ruby|Go|Rust|Java|npm) [Vv]ersion",
        _WORD_VALUE,
        "runtime-version",
    ),
)
# The same facts as XML-ish tags (Codex's <environment_context>).
_TAGS: dict[str, str] = {
    "shell": "shell",
    "os": "os-version",
    "os_version": "os-version",
    "platform": "platform",
    "arch": "arch",
    "architecture": "arch",
    "hostname": "hostname",
    "host": "hostname",
    "user": "user",
    "username": "user",
    "home": "home",
    "timezone": "timezone",
    "time_zone": "timezone",
}
_IANA_AREAS = "Africa|America|Antarctica|Arctic|Asia|Atlantic|Australia|Europe|Indian|Pacific|Etc"
_PATH_CHAR = r"[^\s\"'`<>:|*?\\/]"
_MACHINE: tuple[tuple[str, str], ...] = (
    # An OS name with its version where no label names it: uname -sr, os.release().
    (
        r"\b(?:Linux|Darwin|FreeBSD|OpenBSD) \d+\.\d+(?:\.\d+)?(?:[-+_~.][\w.+~-]*\w)?",
        "{{os-version}}",
    ),
    (r"\b(?:Windows(?:_NT)?|win32) \d+\.\d+(?:\.\d+)*", "{{os-version}}"),
    (r"\bmacOS (?:\d+(?:\.\d+)*|[A-Z][a-z]+)(?: \d+(?:\.\d+)*)?", "{{os-version}}"),
    # Runtimes with their versions: "Node.js v22.3.0", "Python 3.11.7", "bun 1.1.8".
    (
        r"\b(?:Node(?:\.js)?|node|Python|python|CPython|PyPy|Bun|bun|Deno|deno|Ruby|ruby|rustc|go)"
        r"(?: version)? v?\d+\.\d+(?:\.\d+)?(?:[-+.][0-9A-Za-z]+)*\b",
        "{{runtime-version}}",
    ),
    # Time zones: IANA names, and JavaScript's Date.toString() offset and zone name.
    (rf"\b(?:{_IANA_AREAS})/[A-Z][A-Za-z0-9_+-]*(?:/[A-Z][A-Za-z_-]*)?", "{{timezone}}"),
    (r"\bGMT[+-]\d{4} \([A-Z][A-Za-z .'-]*\)", "{{timezone}}"),
)


# -- mask set 1, frozen (SPEC 15) ----------------------------------------------------------

# What mask set 1 had where set 2 differs: four date shapes (after the billing header) in
# place of the time rules, and IANA zone names without digits. Never edit: a recording
# stamped (or unstamped, so read as) mask set 1 keeps digests taken with exactly these.
_DATES_V1: tuple[tuple[str, str], ...] = (
    (
        r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b",
        "{{date}}",
    ),
    (r"\b\d{1,2}/\d{1,2}/\d{4}\b", "{{date}}"),
    (
        r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
        r" \d{2} \d{4}\b",
        "{{date}}",
    ),
    (
        r"\b(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day, (?:January|February|March|April|May"
        r"|June|July|August|September|October|November|December) \d{1,2}, \d{4}\b",
        "{{date}}",
    ),
)
_MACHINE_V1: tuple[tuple[str, str], ...] = (
    # An OS name with its version where no label names it: uname -sr, os.release().
    (
        r"\b(?:Linux|Darwin|FreeBSD|OpenBSD) \d+\.\d+(?:\.\d+)?(?:[-+_~.][\w.+~-]*\w)?",
        "{{os-version}}",
    ),
    (r"\b(?:Windows(?:_NT)?|win32) \d+\.\d+(?:\.\d+)*", "{{os-version}}"),
    (r"\bmacOS (?:\d+(?:\.\d+)*|[A-Z][a-z]+)(?: \d+(?:\.\d+)*)?", "{{os-version}}"),
    # Runtimes with their versions: "Node.js v22.3.0", "Python 3.11.7", "bun 1.1.8".
    (
        r"\b(?:Node(?:\.js)?|node|Python|python|CPython|PyPy|Bun|bun|Deno|deno|Ruby|ruby|rustc|go)"
        r"(?: version)? v?\d+\.\d+(?:\.\d+)?(?:[-+.][0-9A-Za-z]+)*\b",
        "{{runtime-version}}",
    ),
    # Time zones: IANA names, and JavaScript's Date.toString() offset and zone name.
    (rf"\b(?:{_IANA_AREAS})/[A-Z][A-Za-z_+-]*(?:/[A-Z][A-Za-z_-]*)?", "{{timezone}}"),
    (r"\bGMT[+-]\d{4} \([A-Z][A-Za-z .'-]*\)", "{{timezone}}"),
)


# -- listings in no fixed order ------------------------------------------------------------

# Gemini CLI lists its skills in the order its directory glob found them (``glob`` over
# ``bundle/builtin/*/SKILL.md``: node-glob returns files in no fixed order), which changes
# from run to run: in the system prompt's ``<available_skills>`` and in its
# ``activate_skill`` tool — the description's ``(Available: 'a', 'b')`` and the ``enum``
# of its ``name`` parameter. Each is put in order. Only Gemini CLI's shapes: Qwen Code
# writes its listing in another shape, already in its own order, and a recorded digest
# taken from any other text must stay what it was.
_SKILL = re.compile(r"<skill>\n[ \t]*<name>[^<\n]*</name>.*?</skill>", re.S)
_SKILL_LISTING = r"(?s)<available_skills>\n.*?</available_skills>"
_AVAILABLE_HINT = r"\(Available: '[^'\n]*'(?:, '[^'\n]*')+\)"
_UNORDERED_ENUMS = frozenset({"activate_skill"})
"""Tools whose ``enum`` values are what the agent found on disk, in no fixed order."""


def _sorted_skills(found: re.Match[str]) -> str:
    """An ``<available_skills>`` listing of Gemini CLI's shape with its skills sorted;
    any other listing as it is."""
    listing = found.group(0)
    skills = _SKILL.findall(listing)
    inner = listing[len("<available_skills>") : -len("</available_skills>")]
    if len(skills) < 2 or _SKILL.sub("", inner).strip():
        return listing
    ordered = iter(sorted(skills))
    return _SKILL.sub(lambda _: next(ordered), listing)


def _sorted_hint(found: re.Match[str]) -> str:
    names = re.findall(r"'[^'\n]*'", found.group(0))
    return f"(Available: {', '.join(sorted(names))})"


_UNORDERED: tuple[tuple[str, Callable[[re.Match[str]], str]], ...] = (
    (_SKILL_LISTING, _sorted_skills),
    (_AVAILABLE_HINT, _sorted_hint),
)


def _sorted_enums(value: Any) -> Any:
    """``value`` (a tool declaration) with every ``enum`` of strings in it sorted."""
    if isinstance(value, dict):
        return {
            key: sorted(item)
            if key == "enum" and isinstance(item, list) and all(isinstance(v, str) for v in item)
            else _sorted_enums(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_sorted_enums(item) for item in value]
    return value


def _labelled_rules() -> list[tuple[str, str]]:
    rules: list[tuple[str, str]] = []
    for label, value, token in _LABELLED:
        # Not the label's tail inside a longer word ("Cross-platform: x" stays text: a
        # letter, digit, "_" or "-" before the label refuses it).
        rules.append(
            (
                rf"(?<![\w-])(?P<label>\"?(?:{label})\"?)"
                rf"(?P<sep>[ \t]*[:=][ \t]*\"?)(?=[^\s{{\"]){value}",
                rf"\g<label>\g<sep>{{{{{token}}}}}",
            )
        )
    tags = "|".join(sorted(_TAGS, key=len, reverse=True))
    rules.append((rf"<(?P<tag>{tags})>[^<]*</(?P=tag)>", "TAG"))
    return rules


def _tag_token(found: re.Match[str]) -> str:
    tag = found.group("tag")
    return f"<{tag}>{{{{{_TAGS[tag]}}}}}</{tag}>"


# A path that starts right after a token continues what the token stands for: replay masks
# the recorded text (``{{cwd}}/home/.gemini/…``, HOME inside the cwd) again, and a rule that
# refuses to start after a path's last character in the live text (``(?<![\w.-])``) must
# refuse to start after the token that replaced the path (``{{cwd}}``, or a ``{{home}}``
# a first pass wrote) — else ``{{cwd}}{{home}}``.
_NOT_AFTER_TOKEN = r"(?<!\}\})"


def _home_rules(not_cwd: str) -> list[tuple[str, str]]:
    """Home directories in every machine's shape: /home/<user>, /Users/<user>, /root,
    C:\\Users\\<user> (the user name with them)."""
    return [
        (
            rf"{not_cwd}(?<![\w.-]){_NOT_AFTER_TOKEN}(?:/home/{_PATH_CHAR}+|/Users/{_PATH_CHAR}+|/root"
            rf"|[A-Za-z]:\\Users\\{_PATH_CHAR}+)(?=[/\\\s\"'`<>,;:)]|$)",
            "{{home}}",
        )
    ]


def _user_and_host() -> tuple[str, str]:
    """This machine's user and host name ("" where it has none)."""
    try:
        host = socket.gethostname()
    except OSError:
        host = ""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = ""
    return user, host


def _this_machine() -> list[tuple[str, str]]:
    """This machine's hostname and user name where they are distinctive enough to mask as
    literals (``user@host`` prompts, a hostname in a path): a short common word such as
    ``root`` or ``localhost`` is left to the shaped rules."""
    rules: list[tuple[str, str]] = []
    user, host = _user_and_host()
    if user and host:
        rules.append((rf"\b{re.escape(user)}@{re.escape(host)}\b", "{{user}}@{{hostname}}"))
    if len(host) >= 6 and host != "localhost" and not host.isalpha():
        rules.append((rf"(?<![\w.-]){re.escape(host)}(?![\w-])", "{{hostname}}"))
    return rules


def this_machine_facts(cwd: str | None = None) -> tuple[tuple[str | None, str, str], ...]:
    """This machine's own HOME, ``user@host`` and host name as the built-in masks find them
    (literals; the cwd and paths inside it left alone): ``(pattern, token, value)``, each
    token standing for exactly ``value`` here, the pattern ``None`` where this machine's
    value is too common a word to mask. A text masked with them reads as another machine's
    once its tokens are replaced by that machine's values — how MCP replay gives a server's
    recorded answer back on the machine replaying it, as it gives the cwd back."""
    user, host = _user_and_host()
    rules = dict(
        (token, pattern)
        for pattern, token in (
            *(rule for rule in _path_rules(cwd) if rule[1] == "{{home}}"),
            *_this_machine(),
        )
    )
    values = (
        ("{{home}}", os.path.expanduser("~").rstrip("/")),
        ("{{user}}@{{hostname}}", f"{user}@{host}" if user and host else ""),
        ("{{hostname}}", host),
    )
    return tuple((rules.get(token), token, value) for token, value in values)


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
    # Where a path starts: never inside another one (HOME is a suffix of the cwd in
    # /root/root), nor where a token ends (see _NOT_AFTER_TOKEN).
    not_cwd = _not_the_cwd(cwd) + r"(?<![\w.-])" + _NOT_AFTER_TOKEN
    rules: list[tuple[str, str]] = []
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


def _mask_set_1(not_cwd: str) -> tuple[tuple[str, str], ...]:
    """Mask set 1 (everything before the format stamp), in its order."""
    return (
        *install_path_rules(not_cwd),
        *_labelled_rules(),
        *_MACHINE_V1,
        _BUILT_IN[0],
        *_DATES_V1,
        *_BUILT_IN[1:],
    )


def _mask_set_2(not_cwd: str) -> tuple[tuple[str, str], ...]:
    """Mask set 2: time in every spelling (``_TIME_RULES``)."""
    return (*install_path_rules(not_cwd), *_TIME_RULES, *_labelled_rules(), *_MACHINE, *_BUILT_IN)


# Set 2's UTC offset rule took the ``GMT+12`` out of an IANA name (``Etc/GMT+12``, the
# real name of UTC-12) before the zone-name rule saw it, leaving ``Etc/{{timezone}}``.
_TIME_RULES_3 = (
    *_TIME_RULES[:-1],
    (rf"(?<![\w/-])(?:UTC|GMT){_SIGN}\d{{1,2}}(?::?\d{{2}})?(?![\d:])", "{{timezone}}"),
)


def _mask_set_3(not_cwd: str) -> tuple[tuple[str, str], ...]:
    """Mask set 3: an IANA zone name holding an offset (``Etc/GMT+12``) masked whole."""
    return (*install_path_rules(not_cwd), *_TIME_RULES_3, *_labelled_rules(), *_MACHINE, *_BUILT_IN)


# What agents say of now in prose, where the words before it name it so: Claude Code's and
# Qwen Code's WebSearch description "The current month is December 2026" (JavaScript's
# ``toLocaleString("en-US", {month: "long", year: "numeric"})``, next to a knowledge cutoff
# "August 2025" that is no machine fact and stays), a year said as the current one, and a
# day said as today's without its year ("Today is Friday, December 4"), a weekday labelled
# as the day of the week (``"day_of_week": "Friday"``). A whole date there
# is already ``{{date}}`` (``_DATE_EXPRESSION``); the month with its year becomes
# ``{{month}}``, a year ``{{year}}``, a day without a year ``{{date}}``. Only after these
# words: a month, year or day elsewhere in prose stays text.
_NOW = r"(?<![\w-])(?P<said>(?i:"
_IT_IS_NOW = r"it +is +(?:now|currently)"
_NOW_IN_PROSE: tuple[tuple[str, str], ...] = (
    # "Today is Friday, December 4", "today's date: 4 Dec", "The current date is Dec 4".
    (
        rf"{_NOW}today +is|today['\u2019]s +date(?: +is|:)"
        rf"|(?:the +)?(?:current|present) +date(?: +is|:)|{_IT_IS_NOW}) +)"
        rf"(?:{_WEEKDAY},? +(?:the +)?)?(?:{_MONTH} +{_DAY}"
        rf"|(?:the +)?{_DAY} +(?:of +)?{_MONTH})(?!,? *\d)",
        r"\g<said>{{date}}",
    ),
    # "The current month is December 2026", "this month: Dec", "It is now December 2026".
    (
        rf"{_NOW}(?:(?:the +)?(?:current|present) +month|this +month)(?: +is|:)|{_IT_IS_NOW})"
        rf" +){_MONTH}(?:,? +{_YEAR})?",
        r"\g<said>{{month}}",
    ),
    # A weekday labelled as the day of the week: the MCP reference server mcp-server-time's
    # convert_time answers with the date of the call and its weekday ("datetime":
    # "2026-12-04T12:00:00+00:00", "day_of_week": "Friday"), also inside a JSON string.
    (
        r"(?<![\w-])(?P<said>\\?[\"']?(?i:day[_ ]?of[_ ]?(?:the[_ ]?)?week)\\?[\"']?[ \t]*[:=]"
        rf"[ \t]*\\?[\"']?){_WEEKDAY}",
        r"\g<said>{{weekday}}",
    ),
    # "The current year is 2026", "It is now 2026".
    (
        rf"{_NOW}(?:(?:the +)?(?:current|present) +year|this +year)(?: +is|:)|{_IT_IS_NOW}) +)"
        r"(?:19|20)\d\d(?![\w-])",
        r"\g<said>{{year}}",
    ),
)


def _mask_set_4(not_cwd: str) -> tuple[tuple[str, str], ...]:
    """Mask set 4: the current month, year or day said in prose (``_NOW_IN_PROSE``), before
    the weekday rule (which would take the weekday of "Today is Friday, December 4")."""
    return (
        *install_path_rules(not_cwd),
        *_TIME_RULES_3[:2],
        *_NOW_IN_PROSE,
        *_TIME_RULES_3[2:],
        *_labelled_rules(),
        *_MACHINE,
        *_BUILT_IN,
    )


MASK_SETS: dict[int, Callable[[str], tuple[tuple[str, str], ...]]] = {
    1: _mask_set_1,
    2: _mask_set_2,
    3: _mask_set_3,
    4: _mask_set_4,
}
"""Every built-in mask set agentreel ever applied (SPEC 15), by its number
(``agentreel.session.MASKS_VERSION`` is the newest), each given the lookahead refusing the
cwd: its rules that hold on any machine, in order. A set is frozen once released: a
recording keeps digests of texts masked with the set it was made with, and replay masks
the live request with that same set to compare them. A new or better mask is a new set
(and ``MASKS_VERSION`` + 1, ``MASKS_HISTORY`` saying what it adds); the test pins each
set's rules by a fingerprint (``mask_set_fingerprint``)."""


def mask_set_fingerprint(version: int) -> str:
    """A short digest of mask set ``version``'s rules (patterns, replacements, order): what
    a test pins so that a released set never changes."""
    rules = (*MASK_SETS[version](""), *_home_rules(""), *_UNORDERED)
    text = "\n".join(f"{pattern}\t{getattr(how, '__name__', how)}" for pattern, how in rules)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class BuiltInMasks:
    """The built-in rules, after the caller's own regexes (each replaced by ``{{mask:N}}``).

    ``extra``: regexes already checked (``agentreel.llm_proxy.Masks`` checks a scenario's
    as its setting is). ``cwd``: the run's working directory, left to the session
    normalizer (``{{cwd}}``) even when it lies under the temp directory or HOME.
    ``version``: which built-in mask set (``sets``, by default ``MASK_SETS``; default the
    newest, ``MASKS_VERSION``) — an older one masks a live request as a recording made with
    it was masked, so their digests compare; an unknown one is a ``ValueError`` naming the
    sets this agentreel knows."""

    def __init__(
        self,
        extra: Sequence[str] = (),
        *,
        cwd: str | None = None,
        version: int = MASKS_VERSION,
        sets: Mapping[int, Callable[[str], tuple[tuple[str, str], ...]]] | None = None,
    ) -> None:
        sets = MASK_SETS if sets is None else sets
        if version not in sets:
            raise ValueError(
                f"built-in mask set {version} is unknown to this agentreel (it knows "
                f"{', '.join(map(str, sorted(sets)))}): upgrade agentreel"
            )
        self.version = version
        rules: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = []
        for number, pattern in enumerate(extra, 1):
            rules.append((re.compile(pattern), f"{{{{mask:{number}}}}}"))
        # The scenario's own masks first: they may name text a built-in rule would split.
        # Install paths before the tmp and HOME rules (a node_modules under HOME is the
        # agent's install, wherever HOME is); labelled facts before the unlabelled ones.
        # This machine's paths, home, host and user come right after the install paths.
        not_cwd = _not_the_cwd(cwd)
        portable = sets[version](not_cwd)
        installs = len(install_path_rules(not_cwd))
        built_in = (
            *portable[:installs],
            *_path_rules(cwd),
            *_home_rules(not_cwd),
            *_this_machine(),
            *portable[installs:],
        )
        for pattern, replacement in built_in:
            compiled = re.compile(pattern)
            rules.append((compiled, _tag_token if replacement == "TAG" else replacement))
        rules += [(re.compile(pattern), order) for pattern, order in _UNORDERED]
        self._rules = tuple(rules)
        self.extra = tuple(extra)
        self.cwd = cwd

    def text(self, value: str) -> str:
        for pattern, replacement in self._rules:
            value = pattern.sub(replacement, value)
        return value

    def _keyed(self, key: Any, item: Any) -> Any:
        """A JSON object's ``key: item`` masked as ``text`` masks it written out: a labelled
        fact (``"timezone":"UTC"``, an MCP tool's argument) is masked in a decoded body
        too, so a recording's texts stay as the masks leave them."""
        if not isinstance(item, str) or not isinstance(key, str):
            return self.value(item)
        if json.dumps(item, ensure_ascii=False)[1:-1] != item:
            # Escapes (a multi-line prompt) would read differently written out: a fact's
            # value is a plain word, so such a string is masked as the text it is.
            return self.text(item)
        pair = json.dumps({key: item}, ensure_ascii=False, separators=(",", ":"))
        masked = self.text(pair)
        if masked != pair:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                return self.text(json.loads(masked)[key])
        return self.text(item)

    def value(self, value: Any) -> Any:
        """``value`` (decoded JSON) with every string masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            masked = {key: self._keyed(key, item) for key, item in value.items()}
            name = masked.get("name")
            unordered = isinstance(name, str) and name in _UNORDERED_ENUMS
            return _sorted_enums(masked) if unordered else masked
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value
