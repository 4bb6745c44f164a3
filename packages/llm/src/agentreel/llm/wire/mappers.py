"""The SDK adapters' wire mappers, for code that sees a raw wire stream instead of an SDK.

``OpenAIStreamMapper`` (Chat Completions chunks) and ``AnthropicStreamMapper`` (Messages
events) turn wire items into agentreel chunks; any object with the SDK's attribute names
will do, so decoded JSON wrapped for attribute access maps exactly as the adapters map it
(the proxy records this way: one owner of the wire → chunk rules). SDK-free: importing
this module imports no provider SDK, so the proxy records without one installed.
"""

from agentreel.llm._label import ProviderLabel
from agentreel.llm.wire._chat_mapper import OpenAIStreamMapper
from agentreel.llm.wire._messages_mapper import AnthropicStreamMapper

__all__ = ["AnthropicStreamMapper", "OpenAIStreamMapper", "ProviderLabel"]
