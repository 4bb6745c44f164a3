"""The Gemini wire rules and the ``gemini`` adapter, with the real ``google-genai`` SDK.

What the three SDK adapters share (retries, errors, timeouts, cancellation) runs in
test_llm_sdk_adapters.py; here: what a Gemini request looks like on the wire, the stub
server's other Gemini endpoints, and real recorded Gemini answers (public test suites'
recordings, ``data/gemini_recorded.json``) mapped to chunks and encoded back.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
from google import genai
from google.genai import types

from agentreel.llm import (
    BlockEnd,
    Chunk,
    Finish,
    GenerateOptions,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
    load_provider,
    validate_stream,
)
from agentreel.llm._gemini import GeminiProvider
from agentreel.llm.stub import StubServer
from agentreel.llm.wire import (
    MINTED_CALL_ID_PREFIX,
    GeminiStreamMapper,
    gemini_chunk_body,
    gemini_chunk_frames,
)

_CORPUS = json.loads((Path(__file__).parent / "data" / "gemini_recorded.json").read_text())
_CASES: list[dict[str, Any]] = _CORPUS["cases"]


def _client(base_url: str, http: httpx2.AsyncClient | None = None) -> genai.Client:
    """A google-genai client as a user makes one; async calls on ``http`` (with aiohttp
    installed, they would take aiohttp, which warns about the SDK's session subclass)."""
    options = types.HttpOptions(base_url=base_url, httpx_async_client=http)
    return genai.Client(api_key="not-a-key", http_options=options)


def _connect(server: StubServer, **settings: object) -> GeminiProvider:
    provider = load_provider("stub-gemini", base_url=server.base_url, **settings)
    assert isinstance(provider, GeminiProvider)
    return provider


READ_TWO = """
[[rule]]
match = { api = "gemini", model = "gemini-2.5-flash", last_user = "read" }
text = "Reading."
tool_calls = [
  { name = "read_file", arguments = { path = "a.txt" } },
  { name = "read_file", arguments = { path = "b.txt" } },
]

[[rule]]
match = { api = "gemini", last_tool_result_regex = "(?s)alpha.*beta" }
text = "Both read."
"""


@pytest.mark.asyncio
async def test_gemini_conversation_on_the_wire() -> None:
    """A tool round trip through the stub: function calls without ids get minted ones, the
    results go back as ``functionResponse`` parts named after the call they answer, the
    system prompt as ``systemInstruction``, the options as ``generationConfig``."""
    tool = ToolSpec(name="read_file", description="Read a file", parameters={"type": "object"})
    with StubServer.from_toml(READ_TWO) as server:
        async with _connect(server) as provider:
            first = GenerateOptions(
                model="gemini-2.5-flash",
                system="Be brief.",
                messages=(Message.user("read both"),),
                tools=(tool,),
                temperature=0.5,
                max_tokens=100,
                stop=("END",),
            )
            chunks = [c async for c in provider.stream(first)]
            validate_stream(chunks)
            blocks = [c.block for c in chunks if isinstance(c, BlockEnd)]
            calls = [b for b in blocks if isinstance(b, ToolCallPart)]
            assert [c.arguments for c in calls] == ['{"path":"a.txt"}', '{"path":"b.txt"}']
            assert all(c.id.startswith(MINTED_CALL_ID_PREFIX) for c in calls)
            assert len({c.id for c in calls}) == 2
            assert chunks[-1] == Finish(reason="tool-calls")
            results = tuple(
                ToolResultPart(call_id=call.id, content=text, is_error=text == "beta")
                for call, text in zip(calls, ["alpha", "beta"], strict=True)
            )
            second = GenerateOptions(
                model="gemini-2.5-flash",
                messages=(
                    Message.user("read both"),
                    Message(role="assistant", content=tuple(blocks)),
                    Message(role="tool", content=results),
                ),
                tools=(tool,),
            )
            answer = [c async for c in provider.stream(second)]
    assert [c.block for c in answer if isinstance(c, BlockEnd)] == [TextPart("Both read.")]
    opening, follow_up = server.requests
    assert opening.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert opening.headers["x-goog-api-key"] == "<redacted>"
    assert opening.body["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    config = opening.body["generationConfig"]
    assert (config["temperature"], config["maxOutputTokens"], config["stopSequences"]) == (
        0.5,
        100,
        ["END"],
    )
    assert follow_up.body["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {"text": "Reading."},
                {"functionCall": {"name": "read_file", "args": {"path": "a.txt"}}},
                {"functionCall": {"name": "read_file", "args": {"path": "b.txt"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "read_file", "response": {"output": "alpha"}}},
                {"functionResponse": {"name": "read_file", "response": {"error": "beta"}}},
            ],
        },
    ]


@pytest.mark.asyncio
async def test_gemini_thought_signature_goes_back_with_its_function_call() -> None:
    """Gemini 3 refuses a function call sent back without its ``thoughtSignature``: the
    signature the mapper kept (a reasoning part without text before the call) is sent on
    the call's part; a call with a real id keeps it."""
    rules = '[[rule]]\nmatch.api = "gemini"\ntext = "ok"'
    history = (
        Message.user("go"),
        Message(
            role="assistant",
            content=(
                ReasoningPart("", signature="c2lnbmF0dXJl"),
                ToolCallPart(id="fc-1", name="get_country", arguments="{}"),
            ),
        ),
        Message(role="tool", content=(ToolResultPart(call_id="fc-1", content="Mexico"),)),
    )
    with StubServer.from_toml(rules) as server:
        async with _connect(server) as provider:
            options = GenerateOptions(model="gemini-3-pro-preview", messages=history)
            [c async for c in provider.stream(options)]
    contents = server.requests[0].body["contents"]
    assert contents[1]["parts"] == [
        {
            "functionCall": {"id": "fc-1", "name": "get_country", "args": {}},
            "thoughtSignature": "c2lnbmF0dXJl",
        }
    ]
    assert contents[2]["parts"] == [
        {
            "functionResponse": {
                "id": "fc-1",
                "name": "get_country",
                "response": {"output": "Mexico"},
            }
        }
    ]


def test_gemini_stub_answers_whole_counts_tokens_and_lists_models() -> None:
    """The stub's other Gemini endpoints, through the SDK as a user calls them."""
    rules = """
[[rule]]
match = { api = "gemini", model = "gemini-2.5-flash", stream = false }
text = "Hello there."
usage = { input_tokens = 7, output_tokens = 5, reasoning_tokens = 2 }
"""
    with StubServer.from_toml(rules) as server:
        client = _client(server.base_url)
        try:
            answer = client.models.generate_content(model="gemini-2.5-flash", contents="hi")
            counted = client.models.count_tokens(
                model="gemini-2.5-flash", contents="three words here"
            )
            listed = [model.name for model in client.models.list()]
        finally:
            client.close()
    assert answer.text == "Hello there."
    assert answer.candidates is not None
    assert answer.candidates[0].finish_reason == types.FinishReason.STOP
    assert answer.usage_metadata is not None
    usage = answer.usage_metadata
    assert (usage.prompt_token_count, usage.candidates_token_count) == (7, 3)
    assert (usage.thoughts_token_count, usage.total_token_count) == (2, 12)
    assert counted.total_tokens == 3
    assert listed == ["models/gemini-2.5-flash"]
    # google-genai 3 calls the Gemini API's v1 unless told otherwise (the adapter asks v1beta).
    assert [r.path for r in server.requests] == ["/v1/models/gemini-2.5-flash:generateContent"]


# -- real recorded answers ----------------------------------------------------------------------


class _Recorded(BaseHTTPRequestHandler):
    """Serves the one body it is given, as the API sent it (SSE or JSON)."""

    protocol_version = "HTTP/1.1"
    payload: bytes = b""
    content_type = "text/event-stream"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", self.content_type)
        self.send_header("content-length", str(len(self.payload)))
        self.end_headers()
        self.wfile.write(self.payload)


@contextmanager
def _serving(payload: bytes, content_type: str) -> Iterator[str]:
    handler = type("Handler", (_Recorded,), {"payload": payload, "content_type": content_type})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _sdk_parse(case: dict[str, Any], payload: bytes) -> list[types.GenerateContentResponse]:
    """What google-genai makes of ``payload`` answering the case's request."""
    streaming = ":streamGenerateContent" in case["path"]
    model = case["path"].split("/models/", 1)[1].split(":", 1)[0]
    content_type = "text/event-stream" if streaming else "application/json"
    with _serving(payload, content_type) as base_url:
        if not streaming:
            client = _client(base_url)
            try:
                return [client.models.generate_content(model=model, contents="x")]
            finally:
                client.close()

        async def collect(url: str) -> list[types.GenerateContentResponse]:
            async with httpx2.AsyncClient() as http:
                client = _client(url, http)
                stream = await client.aio.models.generate_content_stream(model=model, contents="x")
                return [response async for response in stream]

        return asyncio.run(collect(base_url))


def _chunks(case: dict[str, Any]) -> list[Chunk]:
    mapper = GeminiStreamMapper()
    if case["body_kind"] == "parsed":
        return mapper.body(json.loads(case["body"]))
    chunks: list[Chunk] = []
    for frame in case["body"].replace("\r\n", "\n").split("\n\n"):
        if frame.startswith("data: "):
            chunks += mapper.feed(json.loads(frame.removeprefix("data: ")))
    return chunks + mapper.finish()


def _meaning(responses: list[types.GenerateContentResponse]) -> dict[str, Any]:
    """What the chunks keep of an answer, read from the SDK's parse: text and thoughts,
    function calls (with their signatures), finish reason, last usage, model, response id."""
    text, thoughts, calls, reasons = "", "", [], []
    usage: Any = None
    for response in responses:
        usage = response.usage_metadata or usage
        for candidate in response.candidates or []:
            if candidate.finish_reason is not None:
                reasons.append(candidate.finish_reason)
            for part in (candidate.content.parts if candidate.content else None) or []:
                if part.function_call is not None:
                    call = part.function_call
                    calls.append((call.name, call.args, call.id, part.thought_signature))
                elif part.thought:
                    thoughts += part.text or ""
                else:
                    text += part.text or ""
    return {
        "text": text,
        "thoughts": thoughts,
        "calls": calls,
        "finish": reasons[-1:],
        "usage": None
        if usage is None
        else (
            usage.prompt_token_count,
            usage.candidates_token_count or 0,
            usage.thoughts_token_count or 0,
            usage.cached_content_token_count or 0,
        ),
        "model": responses[-1].model_version,
        "id": responses[-1].response_id,
    }


@pytest.mark.parametrize("case", _CASES, ids=[case["name"] for case in _CASES])
def test_recorded_gemini_answer_maps_and_encodes_back(case: dict[str, Any]) -> None:
    """Each real answer maps to a valid chunk stream, and the chunks encoded back in
    Gemini's wire parse in google-genai to the same text, thoughts, calls, finish, usage,
    model and response id as the recorded bytes did."""
    chunks = _chunks(case)
    validate_stream(chunks)
    upstream = _sdk_parse(case, case["body"].encode())
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    mapper = GeminiStreamMapper()
    streaming = ":streamGenerateContent" in case["path"]
    raw = case["body"].replace("\r\n", "\n").split("\n\n") if streaming else [case["body"]]
    for frame in raw:
        if frame.strip():
            mapper.feed(json.loads(frame.removeprefix("data: ")))
    meta = mapper.meta()
    recorded = [*chunks[:-1], Finish(reason=finish.reason, code=finish.code, response=meta)]
    model = case["path"].split("/models/", 1)[1].split(":", 1)[0]
    if streaming:
        encoded = b"".join(gemini_chunk_frames(recorded, model=model, response_id="minted"))
    else:
        encoded = gemini_chunk_body(recorded, model=model, response_id="minted")
    replayed = _sdk_parse(case, encoded)
    expected = _meaning(upstream)
    got = _meaning(replayed)
    if expected["usage"] is None:
        got["usage"] = None  # an answer without usage: the chunks have none to send
    assert got == expected


def test_recorded_answers_cover_the_gemini_shapes() -> None:
    """The recorded cases hold what the mapping must get right: streamed and whole answers,
    thoughts, function calls with and without signatures, and each kind of finish."""
    finishes: set[tuple[str, str | None]] = set()
    kinds: set[str] = set()
    for case in _CASES:
        chunks = _chunks(case)
        finish = chunks[-1]
        assert isinstance(finish, Finish)
        finishes.add((finish.reason, finish.code))
        blocks = [c.block for c in chunks if isinstance(c, BlockEnd)]
        kinds |= {type(b).__name__ for b in blocks}
        kinds |= {"signed-call" for b in blocks if isinstance(b, ReasoningPart) and b.signature}
        kinds |= {"stream" if ":stream" in case["path"] else "whole"}
        assert all(isinstance(c, Usage) for c in chunks[-2:-1]) or "usage" not in case["body"]
    assert {"stream", "whole", "TextPart", "ReasoningPart", "ToolCallPart", "signed-call"} <= kinds
    assert {("stop", None), ("tool-calls", None), ("max-tokens", None), ("error", "SAFETY")} <= (
        finishes
    )
