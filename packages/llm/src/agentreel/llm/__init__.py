"""Model-call types, the stream chunk union and its contract, and the provider registry.

Adapters (``openai``, ``anthropic``) and the stub model server live in submodules that are
imported only on demand: ``import agentreel.llm`` pulls in no provider SDK.
"""

from agentreel.llm._agent_env import (
    LIVE_CWD_SETTING,
    SETTING_VARIABLES,
    AgentEnv,
    AgentEnvironment,
    provider_from_env,
)
from agentreel.llm._chunks import (
    BlockEnd,
    BlockStart,
    BlockType,
    Chunk,
    CompletedBlock,
    Finish,
    FinishReason,
    ReasoningDelta,
    ResponseMeta,
    TextDelta,
    ToolCallDelta,
    Usage,
    decode_chunk,
    decode_chunks,
    encode_chunk,
)
from agentreel.llm._contract import StreamContractChecker, checked_stream, validate_stream
from agentreel.llm._identity import (
    IDENTITY_HEADERS,
    PARENT_HEADER,
    SESSION_HEADER,
    SPAWN_INDEX_HEADER,
    identity_headers,
)
from agentreel.llm._messages import (
    ContentPart,
    Message,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from agentreel.llm._options import GenerateOptions
from agentreel.llm._provider import (
    PROVIDER_ENTRY_POINT_GROUP,
    Provider,
    ProviderFactory,
    available_providers,
    load_provider,
    load_provider_factory,
)
from agentreel.llm.exceptions import (
    AgentEnvironmentError,
    AgentreelLlmError,
    ChunkDecodeError,
    LlmError,
    ProviderNotFoundError,
    StreamContractError,
)

__all__ = [
    "IDENTITY_HEADERS",
    "LIVE_CWD_SETTING",
    "PARENT_HEADER",
    "PROVIDER_ENTRY_POINT_GROUP",
    "SESSION_HEADER",
    "SETTING_VARIABLES",
    "SPAWN_INDEX_HEADER",
    "AgentEnv",
    "AgentEnvironment",
    "AgentEnvironmentError",
    "AgentreelLlmError",
    "BlockEnd",
    "BlockStart",
    "BlockType",
    "Chunk",
    "ChunkDecodeError",
    "CompletedBlock",
    "ContentPart",
    "Finish",
    "FinishReason",
    "GenerateOptions",
    "LlmError",
    "Message",
    "Provider",
    "ProviderFactory",
    "ProviderNotFoundError",
    "ReasoningDelta",
    "ReasoningPart",
    "ResponseMeta",
    "Role",
    "StreamContractChecker",
    "StreamContractError",
    "TextDelta",
    "TextPart",
    "ToolCallDelta",
    "ToolCallPart",
    "ToolResultPart",
    "ToolSpec",
    "Usage",
    "available_providers",
    "checked_stream",
    "decode_chunk",
    "decode_chunks",
    "encode_chunk",
    "identity_headers",
    "load_provider",
    "load_provider_factory",
    "provider_from_env",
    "validate_stream",
]
