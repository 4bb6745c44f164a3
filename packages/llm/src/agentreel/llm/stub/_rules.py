"""Stub server rules: the TOML format, strict loading, and matching a request to a rule.

A rules file is an ordered list of ``[[rule]]`` tables. For each request the first rule
whose ``[rule.match]`` fits (and whose ``times`` budget is not spent) answers it. The
format is documented with an example in ``packages/llm/README.md``.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import msgspec

from agentreel.llm.exceptions import StubRulesError

Api = Literal["openai", "anthropic"]
FinishName = Literal["stop", "tool-calls", "max-tokens", "refusal"]


class RuleMatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Conditions on the request; every condition given must hold (an empty match fits all).

    "Last" means the message the request ends with: ``last_user`` only fits a request whose
    final message is the user's text, ``last_tool_result`` one that ends with tool results.
    String conditions are substrings; the ``*_regex`` variants are ``re.search`` patterns.
    """

    last_user: str | None = None
    last_user_regex: str | None = None
    last_tool_result: str | None = None
    last_tool_result_regex: str | None = None
    any_message: str | None = None
    system_contains: str | None = None
    system_regex: str | None = None
    has_tools: bool | None = None
    tool_offered: str | None = None
    model: str | None = None
    api: Api | None = None
    call_index: int | None = None


class ToolCallRule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One tool call to stream: ``arguments`` as a TOML table or a raw JSON string."""

    name: str
    arguments: dict[str, Any] | str = msgspec.field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, separators=(",", ":"), ensure_ascii=False)


class UsageRule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None


class Rule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One answer: what it matches, what it streams, and which fault it injects."""

    name: str | None = None
    match: RuleMatch = msgspec.field(default_factory=RuleMatch)
    times: int | None = None
    # What to stream.
    reasoning: str = ""
    text: str = ""
    tool_calls: tuple[ToolCallRule, ...] = ()
    chunk_size: int = 8
    interleave: bool = False
    finish: FinishName | None = None
    usage: UsageRule | None = None
    # Faults.
    status: int = 200
    retry_after: float | None = None
    error_message: str | None = None
    cut_after: int | None = None
    error_after: int | None = None
    delay_ms: int = 0

    @property
    def finish_name(self) -> FinishName:
        if self.finish is not None:
            return self.finish
        return "tool-calls" if self.tool_calls else "stop"


class _RulesFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    rule: tuple[Rule, ...] = ()


class RuleSet:
    """Ordered rules plus the per-rule use counters that ``times`` needs."""

    def __init__(self, rules: tuple[Rule, ...] | list[Rule], source: str = "<rules>") -> None:
        self.rules = tuple(rules)
        self.source = source
        for position, rule in enumerate(self.rules):
            _check_rule(rule, position, source)
        self._used = [0] * len(self.rules)

    def describe(self, position: int) -> str:
        rule = self.rules[position]
        label = f"rule {position + 1}"
        return f"{label} ({rule.name!r})" if rule.name else label

    def take(self, request: RequestView) -> int | None:
        """Position of the first rule that fits ``request``, counting one use of it."""
        for position, rule in enumerate(self.rules):
            if rule.times is not None and self._used[position] >= rule.times:
                continue
            if _matches(rule.match, request):
                self._used[position] += 1
                return position
        return None


def load_rules(path: str | Path) -> RuleSet:
    """Load and strictly validate a TOML rules file (unknown keys are errors)."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise StubRulesError(f"cannot read stub rules file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise StubRulesError(f"{path}: not valid TOML: {exc}") from None
    return rules_from_mapping(raw, source=str(path))


def parse_rules(text: str, source: str = "<rules>") -> RuleSet:
    """Parse rules from TOML text (``source`` names it in errors)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StubRulesError(f"{source}: not valid TOML: {exc}") from None
    return rules_from_mapping(raw, source=source)


def rules_from_mapping(raw: dict[str, Any], source: str = "<rules>") -> RuleSet:
    """Validate an already-parsed rules document (``{"rule": [...]}``)."""
    try:
        parsed = msgspec.convert(raw, _RulesFile)
    except msgspec.ValidationError as exc:
        rule_keys = ", ".join(Rule.__struct_fields__)
        match_keys = ", ".join(RuleMatch.__struct_fields__)
        raise StubRulesError(
            f"{source}: {_toml_path(str(exc))}. Known rule keys: {rule_keys}; "
            f"match keys: {match_keys}."
        ) from None
    if not parsed.rule:
        raise StubRulesError(f"{source}: no [[rule]] tables; add at least one rule.")
    return RuleSet(parsed.rule, source)


def _toml_path(message: str) -> str:
    """Turn msgspec's ``$.rule[0].match`` locations into TOML-ish ``rule[1].match``."""

    def one_based(found: re.Match[str]) -> str:
        return f"rule[{int(found.group(1)) + 1}]"

    message = re.sub(r"\$\.rule\[(\d+)\]", one_based, message)
    return message.replace("at `$`", "at the top level").replace("`$.", "`")


def _check_rule(rule: Rule, position: int, source: str) -> None:
    where = f"{source}: rule[{position + 1}]" + (f" ({rule.name!r})" if rule.name else "")
    if rule.chunk_size < 1:
        raise StubRulesError(f"{where}: chunk_size must be at least 1, got {rule.chunk_size}")
    if rule.times is not None and rule.times < 1:
        raise StubRulesError(f"{where}: times must be at least 1, got {rule.times}")
    if rule.delay_ms < 0:
        raise StubRulesError(f"{where}: delay_ms must not be negative")
    for key in ("cut_after", "error_after"):
        value = getattr(rule, key)
        if value is not None and value < 0:
            raise StubRulesError(f"{where}: {key} must not be negative")
    if rule.cut_after is not None and rule.error_after is not None:
        raise StubRulesError(f"{where}: use either cut_after or error_after, not both")
    if rule.status != 200 and (rule.cut_after is not None or rule.error_after is not None):
        raise StubRulesError(f"{where}: cut_after and error_after apply to streams (status 200)")
    if not (rule.status == 200 or 400 <= rule.status <= 599):
        raise StubRulesError(f"{where}: status must be 200 or an error status 400-599")
    if rule.retry_after is not None and rule.retry_after < 0:
        raise StubRulesError(f"{where}: retry_after must not be negative")
    if rule.status == 200 and rule.retry_after is not None:
        raise StubRulesError(f"{where}: retry_after needs an error status (e.g. status = 429)")
    if rule.status == 200 and rule.error_message is not None and rule.error_after is None:
        raise StubRulesError(f"{where}: error_message needs an error status or error_after")
    for key in ("last_user_regex", "last_tool_result_regex", "system_regex"):
        pattern = getattr(rule.match, key)
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise StubRulesError(f"{where}: match.{key} is not a valid regex: {exc}") from None


class RequestView(msgspec.Struct, frozen=True, kw_only=True):
    """What rules can see of a request, the same for both wire formats."""

    api: Api
    model: str
    system: str
    last_user: str | None
    last_tool_result: str | None
    all_text: str
    tool_names: tuple[str, ...]
    call_index: int

    def summary(self) -> str:
        if self.last_user is not None:
            last = f"last user message {_clip(self.last_user)}"
        elif self.last_tool_result is not None:
            last = f"last tool result {_clip(self.last_tool_result)}"
        else:
            last = "no user message or tool result at the end"
        tools = ", ".join(self.tool_names) or "none"
        return (
            f"request #{self.call_index} ({self.api}, model {self.model!r}): {last}; "
            f"system prompt {_clip(self.system)}; tools: {tools}"
        )


def _clip(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _matches(match: RuleMatch, request: RequestView) -> bool:
    checks: list[bool] = []
    if match.api is not None:
        checks.append(match.api == request.api)
    if match.model is not None:
        checks.append(match.model == request.model)
    if match.call_index is not None:
        checks.append(match.call_index == request.call_index)
    if match.has_tools is not None:
        checks.append(match.has_tools == bool(request.tool_names))
    if match.tool_offered is not None:
        checks.append(match.tool_offered in request.tool_names)
    if match.system_contains is not None:
        checks.append(match.system_contains in request.system)
    if match.system_regex is not None:
        checks.append(re.search(match.system_regex, request.system) is not None)
    if match.any_message is not None:
        checks.append(match.any_message in request.all_text)
    user = request.last_user
    if match.last_user is not None:
        checks.append(user is not None and match.last_user in user)
    if match.last_user_regex is not None:
        checks.append(user is not None and re.search(match.last_user_regex, user) is not None)
    result = request.last_tool_result
    if match.last_tool_result is not None:
        checks.append(result is not None and match.last_tool_result in result)
    if match.last_tool_result_regex is not None:
        checks.append(
            result is not None and re.search(match.last_tool_result_regex, result) is not None
        )
    return all(checks)


def _text_of(content: Any) -> str:
    """Text of a wire ``content`` value: a string or a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") == "tool_result":
                    parts.append(_text_of(block.get("content", "")))
            elif isinstance(block, str):
                parts.append(block)
        return "".join(parts)
    return ""


def openai_request_view(body: dict[str, Any], call_index: int) -> RequestView:
    """Project an OpenAI Chat Completions request body onto a ``RequestView``."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    system = "\n".join(
        _text_of(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
    )
    last_user: str | None = None
    last_tool: str | None = None
    if messages and messages[-1].get("role") == "user":
        last_user = _text_of(messages[-1].get("content"))
    elif messages and messages[-1].get("role") == "tool":
        trailing: list[str] = []
        for message in reversed(messages):
            if message.get("role") != "tool":
                break
            trailing.append(_text_of(message.get("content")))
        last_tool = "\n".join(reversed(trailing))
    tools = tuple(
        str(t.get("function", {}).get("name", ""))
        for t in body.get("tools", []) or []
        if isinstance(t, dict)
    )
    return RequestView(
        api="openai",
        model=str(body.get("model", "")),
        system=system,
        last_user=last_user,
        last_tool_result=last_tool,
        all_text="\n".join(_text_of(m.get("content")) for m in messages),
        tool_names=tools,
        call_index=call_index,
    )


def anthropic_request_view(body: dict[str, Any], call_index: int) -> RequestView:
    """Project an Anthropic Messages request body onto a ``RequestView``."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    last_user: str | None = None
    last_tool: str | None = None
    if messages and messages[-1].get("role") == "user":
        content = messages[-1].get("content")
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            last_tool = "\n".join(_text_of(b.get("content", "")) for b in results)
        else:
            last_user = _text_of(content)
    tools = tuple(
        str(t.get("name", "")) for t in body.get("tools", []) or [] if isinstance(t, dict)
    )
    return RequestView(
        api="anthropic",
        model=str(body.get("model", "")),
        system=_text_of(body.get("system", "")),
        last_user=last_user,
        last_tool_result=last_tool,
        all_text="\n".join(_text_of(m.get("content")) for m in messages),
        tool_names=tools,
        call_index=call_index,
    )
