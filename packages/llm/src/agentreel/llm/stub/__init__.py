"""The stub model server: an offline, loopback model speaking the OpenAI and Anthropic wires.

It answers from a TOML rules file (its format: ``python -m agentreel.llm.stub --rules-format``),
can inject faults
(429 with retry-after, 500, a stream cut, slow chunks), and records every request it
received so tests can inspect them. Start it in process with ``StubServer`` or from a
shell with ``python -m agentreel.llm.stub --rules FILE`` (prints its base URL). The wire
codec it answers with is ``agentreel.llm.wire`` (the proxy's replay encodes with it too).
Only the standard library and msgspec: no provider SDK is imported.
"""

from agentreel.llm.exceptions import StubRulesError
from agentreel.llm.stub._rules import (
    RequestView,
    Rule,
    RuleMatch,
    RuleSet,
    ToolCallRule,
    UsageRule,
    load_rules,
    parse_rules,
    rules_from_mapping,
)
from agentreel.llm.stub._rules_doc import RULES_FORMAT_HINT, rules_format
from agentreel.llm.stub._server import NO_RULE_MARK, StubRequest, StubServer, no_rule_answer

__all__ = [
    "NO_RULE_MARK",
    "RULES_FORMAT_HINT",
    "RequestView",
    "Rule",
    "RuleMatch",
    "RuleSet",
    "StubRequest",
    "StubRulesError",
    "StubServer",
    "ToolCallRule",
    "UsageRule",
    "load_rules",
    "no_rule_answer",
    "parse_rules",
    "rules_format",
    "rules_from_mapping",
]
