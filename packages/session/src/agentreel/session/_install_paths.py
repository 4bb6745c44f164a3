"""The agent's own install path, a machine fact (SPEC 13): one owner for its shapes.

Where a package manager put the agent differs between machines and installs — npm's
global folder (``/usr/lib``, ``/opt/homebrew/lib``, nvm's ``~/.nvm/versions/node/v22…/lib``),
a local prefix (``nox -s interop``'s ``.nox/interop-npm``), npx's cache, pnpm's
``node_modules/.pnpm/<pkg>@<version>/node_modules``, a Python venv, pipx or uv tool — while
what follows that folder (the package and its files) does not. Agents print it: Qwen Code
names each bundled skill's ``filePath`` in its transcript, Gemini CLI each built-in skill's
``<location>`` in its prompt. So, in decoded text:

- everything up to a path's **last** ``node_modules`` → ``{{node-modules}}`` (npm, pnpm,
  yarn, bun, npx: ``{{node-modules}}/@qwen-code/qwen-code/bundled/…`` on every one);
- everything up to a path's last ``site-packages`` / ``dist-packages`` →
  ``{{site-packages}}`` (a venv's ``lib/python3.12/site-packages``, the system's);
- a Python environment's script folder, named by what made it — ``.venv``, ``venv``,
  ``.nox/<env>`` (``.nox/interop-py/<agent>`` and ``.nox/interop-npm``), ``.tox/<env>``,
  ``pipx/venvs/<pkg>``, ``uv/tools/<pkg>``, ``virtualenvs/<env>`` — up to its ``bin`` /
  ``Scripts`` → ``{{venv}}`` (``{{venv}}/bin/vibe-acp``).

A match starts only where an absolute path starts (``/``, ``\\`` or a drive letter), never
inside another path or a relative one (``./node_modules``, ``src/node_modules``), nor right
after a token: ``{{cwd}}/node_modules/…`` — the workspace's own packages — stays, as does
anything under another token the caller already wrote. Masking masked text changes nothing.

The proxy's request masks (``agentreel.llm_proxy``, with the cwd refused by a lookahead
of its own) and the session normalizer's goldens (after the cwd became ``{{cwd}}``) use
these rules.
"""

from __future__ import annotations

import re

__all__ = [
    "INSTALL_PATH_ANCHORS",
    "INSTALL_PATH_TOKENS",
    "install_path_rules",
    "mask_install_paths",
]

INSTALL_PATH_TOKENS = ("node-modules", "site-packages", "venv")
"""The token names the rules write (``{{node-modules}}``, ...), reserved to them."""

INSTALL_PATH_ANCHORS = (
    "node_modules",
    "-packages",
    "venv",
    "virtualenvs",
    ".nox",
    ".tox",
    "uv/tools",
    "uv\\tools",
)
"""Every text an install path rule matches holds one of these: a text without any of them
needs no regex pass."""

# One path component: no separator, no white space, quote, bracket or shell metacharacter.
_COMPONENT = r"[^\s\"'`<>:|*?\\/]+"
_SEP = r"[/\\]"
# Where an absolute path starts: not inside a word or another path, nor right after a
# token (``{{cwd}}/…``) or a ``>`` — ``<skill-base>/runtime/node_modules/…`` is relative to
# a placeholder (Qwen Code's browser-use skill) — unless that ``>`` opens a tag closed
# later in the text (``<location>/usr/lib/node_modules/…/SKILL.md</location>``, Gemini
# CLI's skills).
_OPEN_TAG = r"(?P<open><(?P<tag>[\w:-]+)(?:\s[^<>]*)?>)"
_NOT_INSIDE = r"(?<![\w.>-])(?<!\}\})"
_DRIVE = r"(?:[A-Za-z]:)?"
_TAG_CLOSED = r"(?(tag)(?=(?s:.*?)</(?P=tag)>))"
# The folder ends where a path component ends (a period ending a sentence is not part of
# its name).
_END = r"(?=[/\\\s\"'`<>,;:)\]]|\.(?![\w-])|$)"
_ENV_ROOT = (
    rf"(?:\.?venv|\.nox{_SEP}{_COMPONENT}(?:{_SEP}{_COMPONENT})?|\.tox{_SEP}{_COMPONENT}"
    rf"|pipx{_SEP}venvs{_SEP}{_COMPONENT}|uv{_SEP}tools{_SEP}{_COMPONENT}"
    rf"|virtualenvs{_SEP}{_COMPONENT})"
)

_SHAPES: tuple[tuple[str, str], ...] = (
    (rf"(?:{_SEP}{_COMPONENT})*{_SEP}node_modules{_END}", "{{node-modules}}"),
    (rf"(?:{_SEP}{_COMPONENT})*{_SEP}(?:site|dist)-packages{_END}", "{{site-packages}}"),
    (rf"(?:{_SEP}{_COMPONENT})*?{_SEP}{_ENV_ROOT}(?={_SEP}(?:bin|Scripts){_SEP})", "{{venv}}"),
)


def install_path_rules(not_here: str = "") -> tuple[tuple[str, str], ...]:
    """The install path rules as ``(regex, replacement template)`` pairs, in the order to
    apply them (``re.sub`` with the template: a tag the path is the text of is kept).

    ``not_here``: a lookahead refusing other paths at a start (the proxy's refuses the
    live cwd, which is the normalizer's ``{{cwd}}``); empty for text whose cwd is already
    a token."""
    return tuple(
        (
            rf"(?:{_OPEN_TAG}|{_NOT_INSIDE}){not_here}{_DRIVE}{shape}{_TAG_CLOSED}",
            rf"\g<open>{token}",
        )
        for shape, token in _SHAPES
    )


_RULES = tuple((re.compile(pattern), token) for pattern, token in install_path_rules())


def mask_install_paths(text: str) -> str:
    """``text`` with every install path as its token (the rules above, no cwd refused:
    the caller's cwd is a token already)."""
    if not any(anchor in text for anchor in INSTALL_PATH_ANCHORS):
        return text
    for pattern, token in _RULES:
        text = pattern.sub(token, text)
    return text
