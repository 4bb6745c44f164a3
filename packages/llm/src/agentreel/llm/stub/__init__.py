"""The stub model server: an offline, loopback model speaking the OpenAI and Anthropic wires.

It answers from a TOML rules file (see ``packages/llm/README.md``), can inject faults
(429 with retry-after, 500, a stream cut, slow chunks), and records every request it
received so tests can inspect them. Start it in process with ``StubServer`` or from a
shell with ``python -m agentreel.llm.stub --rules FILE`` (prints its base URL). The wire
encoders are public too: the proxy's replay re-encodes recorded chunks with them.
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
from agentreel.llm.stub._server import StubRequest, StubServer
from agentreel.llm.stub._wire import (
    NAMESPACE_SEPARATOR,
    anthropic_error_body,
    chat_chunk_body,
    chat_chunk_frames,
    count_tokens_body,
    messages_chunk_body,
    messages_chunk_frames,
    models_listing_body,
    openai_error_body,
    responses_chunk_body,
    responses_chunk_frames,
)

__all__ = [
    "NAMESPACE_SEPARATOR",
    "RequestView",
    "Rule",
    "RuleMatch",
    "RuleSet",
    "StubRequest",
    "StubRulesError",
    "StubServer",
    "ToolCallRule",
    "UsageRule",
    "anthropic_error_body",
    "chat_chunk_body",
    "chat_chunk_frames",
    "count_tokens_body",
    "load_rules",
    "messages_chunk_body",
    "messages_chunk_frames",
    "models_listing_body",
    "openai_error_body",
    "parse_rules",
    "responses_chunk_body",
    "responses_chunk_frames",
    "rules_from_mapping",
]
