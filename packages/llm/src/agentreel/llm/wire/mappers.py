"""The SDK adapters' wire mappers, for code that sees a raw wire stream instead of an SDK.

``OpenAIStreamMapper`` (Chat Completions chunks) and ``AnthropicStreamMapper`` (Messages
events) turn wire items into agentreel chunks; any object with the SDK's attribute names
will do, so decoded JSON wrapped for attribute access maps exactly as the adapters map it
(the proxy records this way: one owner of the wire → chunk rules). Importing this module
imports both SDKs (``agentreel-llm[openai,anthropic]``).
"""

from agentreel.llm._anthropic import AnthropicStreamMapper
from agentreel.llm._openai import OpenAIStreamMapper
from agentreel.llm._sdk_common import ProviderLabel

__all__ = ["AnthropicStreamMapper", "OpenAIStreamMapper", "ProviderLabel"]
