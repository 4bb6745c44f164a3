"""Stub server rules: the TOML format, strict loading, and matching a request to a rule.

A rules file is an ordered list of ``[[rule]]`` tables. For each request the first rule
whose ``[rule.match]`` fits (and whose ``times`` budget is not spent) answers it. Named
groups of the match's regexes are captured and fill ``{{name}}`` placeholders in what the
rule answers, so one rule can call a tool the request names or offers, or echo a path the
request carries. The format is documented with an example in the agentreel-llm README
(``python -m agentreel.llm.stub --rules-format`` prints it).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

import msgspec
import msgspec.structs

from agentreel.llm.exceptions import StubRulesError
from agentreel.llm.wire import (
    NAMESPACE_SEPARATOR,
    WIRE_APIS,
    PathMatch,
    WireRequest,
    match_under,
)

Api = str
"""A wire API as rules name it (``match.api``): its ``WireApiSpec.rule_api`` (``openai``,
``anthropic``, ``responses``, ``gemini``, ``ollama``, ``bedrock``; ``rule_apis()``)."""
Lane = Literal["conversation", "title", "classifier", "side"]
"""What a request is (``match.lane``): the agent's ``conversation`` (it offers tools), a
``classifier`` (no tools, one non-streamed body or a ``</severity>``-like stop sequence), a
``title`` call (no tools; its system prompt or message asks for a title), else ``side``."""
FinishName = Literal["stop", "tool-calls", "max-tokens", "refusal"]


class RuleMatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Conditions on the request; every condition given must hold (an empty match fits all).

    "Last" means the message the request ends with: ``last_user`` only fits a request whose
    final message is the user's text, ``last_tool_result`` one that ends with tool results.
    Trailing system / developer messages (Claude Code ends each request with its
    environment as a ``role: "system"`` message) are looked past.
    String conditions are substrings; the ``*_regex`` variants are ``re.search`` patterns
    whose named groups are captured for ``{{name}}`` placeholders. ``header`` and
    ``header_regex`` map a header name (any case) to a substring / pattern of its value.
    """

    last_user: str | None = None
    last_user_regex: str | None = None
    last_tool_result: str | None = None
    last_tool_result_regex: str | None = None
    any_message: str | None = None
    any_message_regex: str | None = None
    system_contains: str | None = None
    system_regex: str | None = None
    has_tools: bool | None = None
    tool_offered: str | None = None
    tool_offered_regex: str | None = None
    model: str | None = None
    model_regex: str | None = None
    header: dict[str, str] | None = None
    header_regex: dict[str, str] | None = None
    structured_output: bool | None = None
    stream: bool | None = None
    api: Api | None = None
    call_index: int | None = None
    lane: Lane | None = None

    def patterns(self) -> list[tuple[str, str]]:
        """Every regex of this match as ``(key, pattern)``, for validation and captures."""
        found = [
            (key, pattern) for key in _REGEX_KEYS if (pattern := getattr(self, key)) is not None
        ]
        found += [(f"header_regex.{name}", p) for name, p in (self.header_regex or {}).items()]
        return found


_REGEX_KEYS = (
    "any_message_regex",
    "last_user_regex",
    "last_tool_result_regex",
    "system_regex",
    "tool_offered_regex",
    "model_regex",
)
_PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}")
BUILTIN_PLACEHOLDERS = ("cwd",)
"""Placeholders every rule may use without a regex group: ``{{cwd}}`` is the working
directory the request states in any message (``RequestView.cwd``); a rule using it fits
only a request that states one. A named group of the same name wins."""


class ToolCallRule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One tool call to stream: ``arguments`` as a TOML table or a raw JSON string."""

    name: str
    arguments: dict[str, Any] | str = msgspec.field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, separators=(",", ":"), ensure_ascii=False)

    def filled(self, captures: Mapping[str, str]) -> ToolCallRule:
        """This call with ``{{name}}`` placeholders in name, id and arguments filled."""
        return ToolCallRule(
            name=_fill(self.name, captures),
            arguments=_fill_value(self.arguments, captures),
            id=None if self.id is None else _fill(self.id, captures),
        )


class SubagentCall(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``call_subagent``: a call of the subagent tool the request offers, arguments built
    from that tool's JSON schema (see ``subagent_call``).

    ``prompt`` is the child's task; ``tool`` picks the tool by name (``ns.name`` or the bare
    name) instead of the built-in preference; ``agent`` names the kind or name of subagent
    (``subagent_type``, ``agent_type``, fast-agent's ``agent__<agent>``, vibe's
    ``tools.agents.spawn({name})``); ``description`` fills a description property (default:
    the prompt's first words); ``arguments`` are set last, over what the schema gave.
    """

    prompt: str
    tool: str | None = None
    agent: str | None = None
    description: str | None = None
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    id: str | None = None

    def filled(self, captures: Mapping[str, str]) -> SubagentCall:
        return SubagentCall(
            prompt=_fill(self.prompt, captures),
            tool=None if self.tool is None else _fill(self.tool, captures),
            agent=None if self.agent is None else _fill(self.agent, captures),
            description=None if self.description is None else _fill(self.description, captures),
            arguments=_fill_value(self.arguments, captures),
            id=None if self.id is None else _fill(self.id, captures),
        )


SUBAGENT_TOOLS = ("Task", "Agent", "task", "spawn_agent", "agent__*", "run_typescript")
"""The subagent tools of real agents, in the order ``call_subagent`` prefers them (bare
names; a namespaced ``ns.spawn_agent`` counts as ``spawn_agent``): Claude Code ``Task`` /
``Agent``, opencode ``task``, Codex ``spawn_agent`` (in ``multi_agent_v1``), fast-agent's
agents as tools ``agent__<name>``, mistral-vibe's code tool ``run_typescript`` (its
``tools.agents.spawn``)."""

_PROMPT_KEYS = ("prompt", "message", "task", "input", "query", "instructions", "request")
_DESCRIPTION_KEYS = ("description", "title", "summary")
_AGENT_KEYS = ("subagent_type", "agent_type", "agent", "agent_name", "name", "type")
_DEFAULT_AGENTS = ("general-purpose", "general", "default", "worker")


def _bare(name: str) -> str:
    return name.rpartition(NAMESPACE_SEPARATOR)[2]


def _pick_subagent_tool(call: SubagentCall, names: tuple[str, ...]) -> str | None:
    if call.tool is not None:
        exact = [n for n in names if n == call.tool] or [n for n in names if _bare(n) == call.tool]
        return exact[0] if exact else None
    if call.agent is not None and f"agent__{call.agent}" in names:
        return f"agent__{call.agent}"
    for preferred in SUBAGENT_TOOLS:
        for name in names:
            bare = _bare(name)
            if bare == preferred or (preferred == "agent__*" and bare.startswith("agent__")):
                return name
    return None


def _agent_value(call: SubagentCall, spec: Mapping[str, Any], tool_description: str) -> Any:
    """The subagent kind: ``call.agent``, else the schema's enum or default, else the
    general-purpose kind the tool's description lists (Claude Code, opencode)."""
    if call.agent is not None:
        return call.agent
    enum = spec.get("enum")
    if isinstance(enum, list) and enum:
        return next((v for v in _DEFAULT_AGENTS if v in enum), enum[0])
    if "default" in spec:
        return spec["default"]
    text = f"{spec.get('description', '')}\n{tool_description}"
    for kind in _DEFAULT_AGENTS:
        if re.search(rf"(?<![\w-]){re.escape(kind)}(?![\w-])", text):
            return kind
    return None


def _empty_of(spec: Mapping[str, Any]) -> Any:
    if "default" in spec:
        return spec["default"]
    enum = spec.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = spec.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return {"integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}.get(
        str(kind), ""
    )


def subagent_call(call: SubagentCall, request: RequestView) -> ToolCallRule | None:
    """The tool call that spawns a subagent in ``request``'s agent, or ``None`` if the
    request offers no subagent tool (then the rule does not fit).

    Arguments come from the tool's JSON schema: the prompt into its prompt-like property
    (``prompt``, ``message``, ``task``, ...), a description into ``description``, the kind
    of subagent into ``subagent_type`` / ``agent_type``, any other required property its
    default, first enum value or empty value; ``call.arguments`` last. vibe's
    ``run_typescript`` gets code calling ``tools.agents.spawn({name, message})``.
    """
    name = _pick_subagent_tool(call, request.tool_names)
    if name is None:
        return None
    tool = request.tool_specs.get(name, {})
    schema = tool.get("parameters")
    schema = schema if isinstance(schema, dict) else {}
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    required = required if isinstance(required, list) else []
    tool_description = str(tool.get("description", ""))
    arguments: dict[str, Any] = {}
    if _bare(name) == "run_typescript":
        spawn = {"name": call.agent or "explore", "message": call.prompt}
        code_key = next((k for k in properties if "code" in k.lower()), "code")
        arguments[code_key] = (
            f"const child = await tools.agents.spawn({json.dumps(spawn, ensure_ascii=False)});\n"
            "return child;"
        )
    else:
        prompt_key = next((k for k in properties if k.lower() in _PROMPT_KEYS), None)
        for key, spec in properties.items():
            spec = spec if isinstance(spec, dict) else {}
            lowered = key.lower()
            if key == prompt_key:
                arguments[key] = call.prompt
            elif lowered in _DESCRIPTION_KEYS:
                words = call.prompt.split()
                arguments[key] = call.description or " ".join(words[:5])
            elif lowered in _AGENT_KEYS and (kind := _agent_value(call, spec, tool_description)):
                arguments[key] = kind
            elif key in required:
                arguments[key] = _empty_of(spec)
        if prompt_key is None:
            arguments["prompt"] = call.prompt
    arguments.update(call.arguments)
    return ToolCallRule(name=name, arguments=arguments, id=call.id)


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
    json: dict[str, Any] | list[Any] | None = None
    tool_calls: tuple[ToolCallRule, ...] = ()
    call_subagent: SubagentCall | tuple[SubagentCall, ...] | None = None
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
        return "tool-calls" if self.tool_calls or self.call_subagent else "stop"

    @property
    def subagent_calls(self) -> tuple[SubagentCall, ...]:
        if self.call_subagent is None:
            return ()
        if isinstance(self.call_subagent, SubagentCall):
            return (self.call_subagent,)
        return self.call_subagent

    def answer(self, captures: Mapping[str, str], request: RequestView | None = None) -> Rule:
        """The rule as streamed for one request: placeholders filled, ``json`` as the text,
        ``call_subagent`` turned into tool calls of the subagent tool ``request`` offers.

        ``json`` (for structured-output requests) becomes compact JSON text, which is what
        a model answering a JSON-schema request streams. Call ``fits`` first: a
        ``call_subagent`` the request offers no tool for is dropped here.
        """
        spawned: list[ToolCallRule] = []
        if request is not None:
            for call in self.subagent_calls:
                built = subagent_call(call.filled(captures), request)
                if built is not None:
                    spawned.append(built)
        text = _fill(self.text, captures)
        if self.json is not None:
            text = json.dumps(
                _fill_value(self.json, captures), separators=(",", ":"), ensure_ascii=False
            )
        return msgspec.structs.replace(
            self,
            text=text,
            json=None,
            reasoning=_fill(self.reasoning, captures),
            tool_calls=tuple(call.filled(captures) for call in self.tool_calls) + tuple(spawned),
            call_subagent=None,
        )

    def fits_subagents(self, request: RequestView) -> bool:
        """Whether ``request`` offers a tool for each of this rule's ``call_subagent``."""
        return all(
            _pick_subagent_tool(call, request.tool_names) is not None
            for call in self.subagent_calls
        )

    def placeholders(self) -> list[tuple[str, str]]:
        """Every ``(key, placeholder name)`` this rule's answer uses."""
        found: list[tuple[str, str]] = []

        def scan(key: str, value: Any) -> None:
            if isinstance(value, str):
                found.extend((key, name) for name in _PLACEHOLDER.findall(value))
            elif isinstance(value, dict):
                for item_key, item in value.items():
                    scan(f"{key}.{item_key}", item)
            elif isinstance(value, list | tuple):
                for position, item in enumerate(value):
                    scan(f"{key}[{position}]", item)

        scan("text", self.text)
        scan("reasoning", self.reasoning)
        scan("json", self.json)
        for position, call in enumerate(self.tool_calls):
            where = f"tool_calls[{position + 1}]"
            scan(f"{where}.name", call.name)
            scan(f"{where}.arguments", call.arguments)
            scan(f"{where}.id", call.id)
        for position, sub in enumerate(self.subagent_calls):
            where = f"call_subagent[{position + 1}]"
            for key in ("prompt", "tool", "agent", "description", "arguments", "id"):
                scan(f"{where}.{key}", getattr(sub, key))
        return found


def _fill(text: str, captures: Mapping[str, str]) -> str:
    if "{{" not in text:
        return text
    return _PLACEHOLDER.sub(lambda found: captures.get(found.group(1), found.group(0)), text)


def _fill_value(value: Any, captures: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _fill(value, captures)
    if isinstance(value, dict):
        return {key: _fill_value(item, captures) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill_value(item, captures) for item in value]
    return value


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

    def closest(self, request: RequestView) -> str:
        """The rule nearest to fitting ``request`` and what keeps it from fitting, for a
        request no rule matched: the rule with the fewest failing conditions (the first
        on a tie), e.g. ``rule 2 ('child answers'): last_user = 'Suggest…' does not
        hold``; a rule used up by ``times`` or one whose ``call_subagent`` the request
        offers no tool for is named so."""
        best: tuple[int, int, list[str]] | None = None
        for position, rule in enumerate(self.rules):
            failing = [
                f"{key} = {_clip(str(value))}"
                for key, value in msgspec.structs.asdict(rule.match).items()
                if value is not None and _matches(RuleMatch(**{key: value}), request) is None
            ]
            if rule.times is not None and self._used[position] >= rule.times:
                failing.append(f"times = {rule.times} (used up)")
            if not rule.fits_subagents(request):
                failing.append("call_subagent (the request offers no subagent tool for it)")
            if best is None or len(failing) < best[1]:
                best = (position, len(failing), failing)
        if best is None:
            return f"{self.source} has no rules"
        position, _, failing = best
        reason = "; ".join(failing) if failing else "it fits now (a rule before it changed?)"
        return f"the closest is {self.describe(position)}, which fails on {reason}"

    def delegations(self, position: int, answer: Rule) -> tuple[str, ...]:
        """The subagent tool calls the rule at ``position`` answered with (its
        ``call_subagent``, as built for the request), by tool name."""
        spawned = len(self.rules[position].subagent_calls)
        if not spawned:
            return ()
        return tuple(call.name for call in answer.tool_calls[-spawned:])

    def take(self, request: RequestView) -> int | None:
        """Position of the first rule that fits ``request``, counting one use of it."""
        taken = self.take_answer(request)
        return None if taken is None else taken[0]

    def take_answer(self, request: RequestView) -> tuple[int, Rule] | None:
        """The first rule that fits ``request`` (one use counted) and its filled answer."""
        for position, rule in enumerate(self.rules):
            if rule.times is not None and self._used[position] >= rule.times:
                continue
            captures = _matches(rule.match, request)
            if captures is None or not rule.fits_subagents(request):
                continue
            if BUILTIN_PLACEHOLDERS[0] not in captures and request.cwd is not None:
                captures[BUILTIN_PLACEHOLDERS[0]] = request.cwd
            if any(
                name in BUILTIN_PLACEHOLDERS and name not in captures
                for _, name in rule.placeholders()
            ):
                continue  # {{cwd}} and the request says no working directory
            self._used[position] += 1
            return position, rule.answer(captures, request)
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
    if rule.match.api is not None and rule.match.api not in rule_apis():
        raise StubRulesError(
            f"{where}: match.api is {rule.match.api!r}; the APIs rules answer are "
            + ", ".join(rule_apis())
        )
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
    if rule.json is not None and rule.text:
        raise StubRulesError(
            f"{where}: use either text or json (json is streamed as the text), not both"
        )
    groups: set[str] = set()
    for key, pattern in rule.match.patterns():
        try:
            groups.update(re.compile(pattern).groupindex)
        except re.error as exc:
            raise StubRulesError(f"{where}: match.{key} is not a valid regex: {exc}") from None
    for key, name in rule.placeholders():
        if name not in groups and name not in BUILTIN_PLACEHOLDERS:
            known = ", ".join(sorted(groups)) or "none (add a named group, e.g. (?P<name>...))"
            raise StubRulesError(
                f"{where}: {key} uses {{{{{name}}}}}, but no regex in [rule.match] has a "
                f"group named {name!r}; named groups here: {known}; built in: "
                + ", ".join(BUILTIN_PLACEHOLDERS)
            )
    for position_, sub in enumerate(rule.subagent_calls):
        if not sub.prompt.strip():
            raise StubRulesError(f"{where}: call_subagent[{position_ + 1}].prompt is empty")


class RequestView(msgspec.Struct, frozen=True, kw_only=True):
    """What rules can see of a request, the same for every wire API: read by the API's
    parser (``WireRequest.rules``, ``read_request``)."""

    api: Api
    model: str
    system: str
    last_user: str | None
    last_tool_result: str | None
    all_text: str
    tool_names: tuple[str, ...]
    call_index: int
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    structured_output: bool = False
    stream: bool = True
    tool_specs: Mapping[str, Mapping[str, Any]] = msgspec.field(default_factory=dict)
    """Each offered tool's ``description`` and ``parameters`` (its JSON schema), by name."""
    stop_sequences: tuple[str, ...] = ()
    cwd: str | None = None
    """The working directory the request states in any message (system prompt, a trailing
    environment message, Codex's ``<cwd>``), for ``{{cwd}}``."""

    @classmethod
    def of_request(
        cls, request: WireRequest, api: str, call_index: int, headers: Mapping[str, str] | None
    ) -> RequestView:
        """The view of a request its API's parser read (``WireRequest.rules``: the texts
        rules match; ``api`` the API's ``rule_api``); header names lowered."""
        text = request.rules
        return cls(
            api=api,
            model=text.model,
            system=text.system,
            last_user=text.last_user,
            last_tool_result=text.last_tool_result,
            all_text="\n".join(text.texts),
            tool_names=tuple(text.tools),
            call_index=call_index,
            headers={key.lower(): value for key, value in (headers or {}).items()},
            structured_output=request.structured_output,
            stream=request.stream,
            tool_specs=text.tools,
            stop_sequences=request.stop_sequences,
            cwd=_stated_cwd(text.system, *text.texts),
        )

    @property
    def lane(self) -> Lane:
        """What this request is, for ``match.lane`` (see ``Lane``)."""
        if self.tool_names:
            return "conversation"
        if any("severity" in stop for stop in self.stop_sequences):
            return "classifier"
        if _TITLE.search(self.system) or _TITLE.search(self.all_text[:2000]):
            return "title"
        return "side" if self.stream else "classifier"

    def summary(self) -> str:
        if self.last_user is not None:
            last = f"last user message {_clip(self.last_user)}"
        elif self.last_tool_result is not None:
            last = f"last tool result {_clip(self.last_tool_result)}"
        else:
            last = "no user message or tool result at the end"
        tools = ", ".join(self.tool_names) or "none"
        shape = ", ".join(
            [self.api, "streaming" if self.stream else "not streaming"]
            + (["structured output"] if self.structured_output else [])
        )
        return (
            f"request #{self.call_index} ({shape}, {self.lane} lane, model {self.model!r}): "
            f"{last}; system prompt {_clip(self.system)}; tools: {tools}; "
            f"cwd: {self.cwd or 'not stated'}"
        )


_TITLE = re.compile(r"(?i)\btitle\b")
_CWD = re.compile(
    r"(?:(?i:working directory|cwd)\s*[:=]\s*|<cwd>\s*)(?P<cwd>/[^\s<>\"'`]*[^\s<>\"'`.,;:])"
)


def _stated_cwd(*texts: str) -> str | None:
    """The first working directory any text states (``Primary working directory: /x``,
    ``Working directory: /x``, ``<cwd>/x</cwd>``, ``cwd: /x``)."""
    for text in texts:
        found = _CWD.search(text)
        if found is not None:
            return found.group("cwd")
    return None


def _clip(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _matches(match: RuleMatch, request: RequestView) -> dict[str, str] | None:
    """The named-group captures if every condition of ``match`` holds, else ``None``."""
    captures: dict[str, str] = {}

    def search(pattern: str | None, text: str | None) -> bool:
        if pattern is None:
            return True
        found = None if text is None else re.search(pattern, text)
        if found is None:
            return False
        captures.update({k: v for k, v in found.groupdict().items() if v is not None})
        return True

    def contains(needle: str | None, text: str | None) -> bool:
        return needle is None or (text is not None and needle in text)

    def equals(wanted: object, actual: object) -> bool:
        return wanted is None or wanted == actual

    fits = (
        equals(match.api, request.api)
        and equals(match.model, request.model)
        and equals(match.call_index, request.call_index)
        and equals(match.has_tools, bool(request.tool_names))
        and equals(match.structured_output, request.structured_output)
        and equals(match.stream, request.stream)
        and (match.tool_offered is None or match.tool_offered in request.tool_names)
        and contains(match.system_contains, request.system)
        and contains(match.any_message, request.all_text)
        and (match.lane is None or match.lane == request.lane)
        and contains(match.last_user, request.last_user)
        and contains(match.last_tool_result, request.last_tool_result)
        and all(
            contains(needle, request.headers.get(name.lower()))
            for name, needle in (match.header or {}).items()
        )
        and search(match.model_regex, request.model)
        and search(match.system_regex, request.system)
        and search(match.any_message_regex, f"{request.system}\n{request.all_text}")
        and search(match.last_user_regex, request.last_user)
        and search(match.last_tool_result_regex, request.last_tool_result)
        and all(
            search(pattern, request.headers.get(name.lower()))
            for name, pattern in (match.header_regex or {}).items()
        )
        and _search_tools(match.tool_offered_regex, request.tool_names, captures)
    )
    return captures if fits else None


def _search_tools(pattern: str | None, names: tuple[str, ...], captures: dict[str, str]) -> bool:
    """Whether an offered tool's name matches ``pattern`` (the first one's groups kept)."""
    if pattern is None:
        return True
    for name in names:
        found = re.search(pattern, name)
        if found is not None:
            captures.update({k: v for k, v in found.groupdict().items() if v is not None})
            return True
    return False


def read_request(
    found: PathMatch, body: dict[str, Any], call_index: int, headers: Mapping[str, str] | None
) -> tuple[WireRequest, RequestView]:
    """A model call to the API ``found`` names, read by that API's parser (the wire
    registry's: the one the proxy reads it with), and the view rules match it by."""
    model = unquote(found.model) if found.path.quoted_model else found.model
    parsed = found.spec.parse(body, model, found.stream)
    return parsed, RequestView.of_request(parsed, found.spec.rule_api, call_index, headers)


def request_view(
    path: str,
    body: dict[str, Any],
    call_index: int = 0,
    headers: Mapping[str, str] | None = None,
) -> RequestView:
    """The view rules match a model call's ``body`` by, the call made to ``path`` (under
    any base path: ``/v1/messages``, ``/v1beta/models/<model>:generateContent``). Raises
    ``ValueError`` for a path no API with rules serves."""
    found = match_under("POST", path)
    if found is None or not found.spec.rule_api or found.path.kind != "call":
        raise ValueError(f"no wire API whose calls rules answer serves POST {path!r}")
    return read_request(found, body, call_index, headers)[1]


def rule_apis() -> tuple[str, ...]:
    """What ``match.api`` may name: each wire API's ``rule_api`` (the registry's)."""
    return tuple(sorted({spec.rule_api for spec in WIRE_APIS.values() if spec.rule_api}))
