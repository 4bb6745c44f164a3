"""The wire registry: every API is one ``WireApiSpec`` whose parts fit together — a request
parsed into the common view, answered by its encoder, decoded back by its decoder."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentreel.llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    Message,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallPart,
    Usage,
)
from agentreel.llm.wire import (
    WIRE_API_PATHS,
    WIRE_APIS,
    WireApiName,
    embedding_vector,
    match_path,
    pack_vector,
    supported_paths,
    wire_api,
)

_BODIES: dict[WireApiName, dict[str, Any]] = {
    "chat": {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "ls", "parameters": {}}}],
    },
    "messages": {
        "model": "m",
        "stream": True,
        "system": "be brief",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "ls", "input_schema": {}}],
    },
    "responses": {
        "model": "m",
        "stream": True,
        "instructions": "be brief",
        "input": "hi",
        "tools": [{"type": "function", "name": "ls", "parameters": {}}],
    },
    "ollama-chat": {
        "model": "m",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "ls", "parameters": {}}}],
    },
    "ollama-generate": {"model": "m", "system": "be brief", "prompt": "hi"},
    "bedrock-converse": {
        "system": [{"text": "be brief"}],
        "messages": [{"role": "user", "content": [{"text": "hi"}]}],
        "toolConfig": {"tools": [{"toolSpec": {"name": "ls", "inputSchema": {"json": {}}}}]},
    },
    "bedrock-invoke": {
        "anthropic_version": "bedrock-2023-05-31",
        "system": "be brief",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "ls", "input_schema": {}}],
    },
    "gemini": {
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "tools": [{"functionDeclarations": [{"name": "ls", "parameters": {}}]}],
    },
}

_PATH_NAMES_MODEL = ("gemini", "bedrock-converse", "bedrock-invoke")
"""The APIs whose request path, not body, names the model."""

_CHUNKS: list[Chunk] = [
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text="hello "),
    TextDelta(index=0, text="there"),
    BlockEnd(index=0, block=TextPart("hello there")),
    BlockStart(index=1, block_type="tool-call"),
    ToolCallDelta(index=1, id="call_1", name="ls", arguments_delta='{"path":"."}'),
    BlockEnd(index=1, block=ToolCallPart(id="call_1", name="ls", arguments='{"path":"."}')),
    Usage(input_tokens=3, output_tokens=5),
    Finish(reason="tool-calls"),
]


def test_the_registry_names_every_api_by_its_session_log_name() -> None:
    assert sorted(WIRE_APIS) == [
        "bedrock-converse",
        "bedrock-embed",
        "bedrock-invoke",
        "chat",
        "embeddings",
        "gemini",
        "gemini-embed",
        "messages",
        "ollama-chat",
        "ollama-embed",
        "ollama-generate",
        "responses",
        "vertex-embed",
    ]
    for name, spec in WIRE_APIS.items():
        assert spec.name == name
        assert wire_api(name) is spec
        assert spec.auth_headers, f"{name}: where does its key travel?"
    assert wire_api("ollama-chat").stream_content_type == "application/x-ndjson"
    assert wire_api("chat").stream_content_type == "text/event-stream"
    assert wire_api("bedrock-converse").stream_content_type == "application/vnd.amazon.eventstream"


@pytest.mark.parametrize("name", sorted(_BODIES))
def test_each_api_parses_its_request_into_the_common_view(name: WireApiName) -> None:
    request = wire_api(name).parse(_BODIES[name], "m" if name in _PATH_NAMES_MODEL else "", True)
    assert request.api == name
    assert request.model == "m"
    assert request.stream is True
    assert request.system == "be brief"
    assert request.messages == (Message.user("hi"),)
    offered = [] if name == "ollama-generate" else ["ls"]
    assert [tool.name for tool in request.tools] == offered


@pytest.mark.parametrize("name", sorted(_BODIES))
def test_each_api_decodes_what_its_encoder_streams(name: WireApiName) -> None:
    spec = wire_api(name)
    request = spec.parse(_BODIES[name], "m" if name in _PATH_NAMES_MODEL else "", True)
    calls_tools = name != "ollama-generate"  # a generate answer has no tool calls
    chunks = _CHUNKS if calls_tools else [*_CHUNKS[:4], _CHUNKS[7], Finish(reason="stop")]
    frames = spec.encode_stream(request, chunks, spec.response_id_prefix + "abc", None)
    decoder = spec.decoder("http://upstream.test")
    splitter = spec.splitter()
    decoded: list[Chunk] = []
    for frame in frames:
        for event in splitter.feed(frame):
            decoded += decoder.event(event)
    decoded += decoder.finish()
    ends = [chunk.block for chunk in decoded if isinstance(chunk, BlockEnd)]
    assert ends[0] == TextPart("hello there")
    if calls_tools:
        call = ends[1]
        assert isinstance(call, ToolCallPart)
        assert (call.name, json.loads(call.arguments)) == ("ls", {"path": "."})
    usage = next(chunk for chunk in decoded if isinstance(chunk, Usage))
    assert (usage.input_tokens, usage.output_tokens) == (3, 5)
    finish = decoded[-1]
    assert isinstance(finish, Finish)
    assert finish.reason == ("tool-calls" if calls_tools else "stop")
    assert b"".join(spec.split_frames(b"".join(frames))) == b"".join(frames)
    # A replayed cut or error ends otherwise: the frames that end the stream can go.
    kept = spec.without_ending(frames)
    assert len(kept) < len(frames)
    assert all(not frame.startswith(spec.stream_endings) for frame in kept)


@pytest.mark.parametrize("name", sorted(_BODIES))
def test_each_api_answers_errors_and_listings_in_its_own_shape(name: WireApiName) -> None:
    spec = wire_api(name)
    error = json.loads(spec.error_body(429, "slow down", None))
    assert "slow down" in json.dumps(error)
    assert ("__type" if name.startswith("bedrock") else "error") in error
    listing = json.loads(spec.models_body(["m1", "m2"]))
    assert "m1" in json.dumps(listing)
    assert "m2" in json.dumps(listing)


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("embeddings", {"encoding_format": "base64"}),
        ("embeddings", {}),
        ("ollama-embed", {}),
        ("gemini-embed", {}),
        ("gemini-embed", {"single": True}),
    ],
)
def test_an_embeddings_body_decodes_to_its_vectors_and_back(
    name: WireApiName, options: dict[str, Any]
) -> None:
    spec = wire_api(name)
    texts = ["tea"] if options.get("single") else ["tea", "water"]
    body: dict[str, Any] = {"model": "e", "input": texts, **options}
    if name == "gemini-embed":
        contents = [{"content": {"parts": [{"text": text}]}} for text in texts]
        body = contents[0] if options.get("single") else {"requests": contents}
    request = spec.parse(body, "e", False)
    assert request.model == "e"
    assert request.messages == (
        Message(role="user", content=tuple(TextPart(text) for text in texts)),
    )
    vectors = [pack_vector(embedding_vector(text)) for text in texts]
    text = "\n".join(vectors)
    chunks: list[Chunk] = [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text=text),
        BlockEnd(index=0, block=TextPart(text)),
        Usage(input_tokens=2, output_tokens=0),
        Finish(reason="stop"),
    ]
    answer = json.loads(spec.encode_body(request, chunks, "", None))
    decoded = spec.decoder("http://upstream.test").body(answer)
    ends = [chunk.block for chunk in decoded if isinstance(chunk, BlockEnd)]
    assert ends == [TextPart(text)]
    if name == "embeddings":
        first = answer["data"][0]["embedding"]
        assert isinstance(first, str) == (options.get("encoding_format") == "base64")
    elif name == "gemini-embed" and options.get("single"):
        assert answer == {"embedding": {"values": embedding_vector("tea")}}
    elif name == "gemini-embed":
        assert answer["embeddings"][1] == {"values": embedding_vector("water")}
    else:
        assert answer["embeddings"][1] == embedding_vector("water")


# One path a real client sends, per (API, kind, model, method, stream) the route table gives.
_ROUTED: list[tuple[str, str, tuple[str, str, str, str, bool]]] = [
    ("POST", "/v1/chat/completions", ("chat", "call", "", "", False)),
    ("POST", "/chat/completions/", ("chat", "call", "", "", False)),
    ("POST", "/openai/deployments/gpt-4o/chat/completions", ("chat", "call", "", "", False)),
    ("GET", "/v1/models", ("chat", "models", "", "", False)),
    ("GET", "/openai/v1/models", ("chat", "models", "", "", False)),
    ("POST", "/v1/messages", ("messages", "call", "", "", False)),
    ("POST", "/v1/messages/count_tokens", ("messages", "count_tokens", "", "", False)),
    (
        "POST",
        "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-x:streamRawPredict",
        ("messages", "call", "claude-x", "streamRawPredict", True),
    ),
    ("POST", "/openai/responses", ("responses", "call", "", "", False)),
    (
        "POST",
        "/v1beta/models/g-1:streamGenerateContent",
        ("gemini", "call", "g-1", "streamGenerateContent", True),
    ),
    ("POST", "/v1/models/g-1:countTokens", ("gemini", "count_tokens", "g-1", "countTokens", False)),
    ("GET", "/v1beta/models", ("gemini", "models", "", "", False)),
    (
        "POST",
        "/v1beta1/projects/p/locations/l/publishers/google/models/g-1:generateContent",
        ("gemini", "call", "g-1", "generateContent", False),
    ),
    ("POST", "/api/chat", ("ollama-chat", "call", "", "", False)),
    ("GET", "/api/tags", ("ollama-chat", "models", "", "", False)),
    ("POST", "/api/generate", ("ollama-generate", "call", "", "", False)),
    ("POST", "/api/embed", ("ollama-embed", "call", "", "", False)),
    (
        "POST",
        "/model/us.anthropic.claude:0/converse-stream",
        ("bedrock-converse", "call", "us.anthropic.claude:0", "converse-stream", True),
    ),
    ("POST", "/model/m/invoke", ("bedrock-invoke", "call", "m", "invoke", False)),
    ("POST", "/openai/deployments/e/embeddings", ("embeddings", "call", "", "", False)),
    (
        "POST",
        "/model/amazon.titan-embed-text-v2:0/invoke",
        ("bedrock-embed", "call", "amazon.titan-embed-text-v2:0", "invoke", False),
    ),
    (
        "POST",
        "/v1/projects/p/locations/l/publishers/google/models/text-embedding-005:predict",
        ("vertex-embed", "call", "text-embedding-005", "predict", False),
    ),
    (
        "POST",
        "/v1beta/models/e:batchEmbedContents",
        ("gemini-embed", "call", "e", "batchEmbedContents", False),
    ),
]


@pytest.mark.parametrize(("http_method", "path", "expected"), _ROUTED)
def test_the_route_table_is_built_from_each_apis_paths(
    http_method: str, path: str, expected: tuple[str, str, str, str, bool]
) -> None:
    found = match_path(http_method, path)
    assert found is not None, f"{http_method} {path} routes nowhere"
    assert (found.spec.name, found.path.kind, found.model, found.method, found.stream) == expected
    assert found.path in found.spec.paths


def test_every_api_is_routed_and_named_by_its_own_paths() -> None:
    routed = {expected[0] for _, _, expected in _ROUTED}
    assert routed == set(WIRE_APIS), "an API whose paths no route reaches"
    for name, spec in WIRE_APIS.items():
        calls = [path for path in spec.paths if path.kind == "call"]
        assert calls, f"{name}: no model-call path"
        assert WIRE_API_PATHS[name] == f"{calls[0].shown} ({spec.title})"
    lines = supported_paths()
    assert len(lines) == len(WIRE_APIS)
    assert any("/api/tags" in line and "Ollama" in line for line in lines)


def test_a_path_on_the_wrong_method_or_unknown_routes_nowhere() -> None:
    assert match_path("GET", "/v1/chat/completions") is None
    assert match_path("POST", "/v1/models") is None
    assert match_path("POST", "/v2/chat") is None
    assert match_path("POST", "/v1beta/models/g:predictLongRunning") is None
    assert match_path("POST", "/v1beta/models/text-embedding-005:predict") is None


def test_a_bedrock_model_is_forwarded_as_the_client_signed_it() -> None:
    found = match_path("POST", "/model/us.anthropic.claude-3:0/converse/")
    assert found is not None
    assert found.upstream_path == "/model/us.anthropic.claude-3%3A0/converse"
