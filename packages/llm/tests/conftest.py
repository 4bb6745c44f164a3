"""Fixtures shared by the SDK adapter tests (openai and anthropic against the stub server).

``adapter_name`` is the registry name of the stub-backed adapter under test. Here it runs
every test over both adapters; a module that tests one wire format overrides it with a
plain fixture returning its own name. Test modules cannot import each other under
``--import-mode=importlib``, so shared setup lives here as fixtures.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from agentreel.llm import (
    GenerateOptions,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    load_provider,
    validate_stream,
)
from agentreel.llm._anthropic import AnthropicProvider
from agentreel.llm._gemini import GeminiProvider
from agentreel.llm._openai import OpenAIProvider
from agentreel.llm.stub import StubServer

AdapterProvider = OpenAIProvider | AnthropicProvider | GeminiProvider
_ADAPTER_CLASSES: dict[str, type[AdapterProvider]] = {
    "stub": OpenAIProvider,
    "stub-anthropic": AnthropicProvider,
    "stub-gemini": GeminiProvider,
}
_FAST_RETRIES = {"max_retries": 2, "retry_initial_delay": 0.01, "retry_max_delay": 0.02}


@pytest.fixture(params=list(_ADAPTER_CLASSES), ids=["openai", "anthropic", "gemini"])
def adapter_name(request: pytest.FixtureRequest) -> str:
    """The stub-backed provider name; both adapters unless a module overrides it."""
    name: str = request.param
    return name


@pytest.fixture
def fast_retries() -> dict[str, float]:
    """Retry settings that keep a retrying test well under a second."""
    return dict(_FAST_RETRIES)


@pytest.fixture
def connect(adapter_name: str) -> Callable[..., AdapterProvider]:
    """``connect(server, **settings)``: the adapter under test pointed at ``server``."""

    def connect_to(server: StubServer, **settings: object) -> AdapterProvider:
        provider = load_provider(adapter_name, base_url=server.base_url, **settings)
        assert isinstance(provider, _ADAPTER_CLASSES[adapter_name])
        return provider

    return connect_to


@pytest_asyncio.fixture
async def server_and_provider(
    request: pytest.FixtureRequest,
    connect: Callable[..., AdapterProvider],
) -> AsyncIterator[tuple[StubServer, AdapterProvider]]:
    """A stub server running the rules in ``request.param`` and an open adapter on it."""
    rules: str = request.param
    with StubServer.from_toml(rules) as server:
        async with connect(server, **_FAST_RETRIES) as provider:
            yield server, provider


_READ_FILE_RULES = """
[[rule]]
match.last_tool_result = "file body"
text = "The file says: file body"
"""


@pytest_asyncio.fixture
async def read_file_request(connect: Callable[..., AdapterProvider]) -> dict[str, Any]:
    """The request body the adapter under test sends for a conversation that read a file:
    the user asks, the assistant says "Reading." and calls ``read_file`` (id ``c1``, no
    arguments), the tool answers "file body". The answer is checked stream by stream."""
    messages = (
        Message.user("read a.txt"),
        Message(
            role="assistant",
            content=(TextPart("Reading."), ToolCallPart(id="c1", name="read_file", arguments="")),
        ),
        Message(role="tool", content=(ToolResultPart(call_id="c1", content="file body"),)),
    )
    with StubServer.from_toml(_READ_FILE_RULES) as server:
        async with connect(server, **_FAST_RETRIES) as provider:
            chunks = [
                c async for c in provider.stream(GenerateOptions(model="m", messages=messages))
            ]
        validate_stream(chunks)
        body: dict[str, Any] = server.requests[0].body
    return body


class RawSseServer:
    """A loopback HTTP server answering every POST with fixed SSE bytes, for the wire shapes
    of real OpenAI-compatible servers the stub does not imitate.

    ``ending`` says how the body ends after the frames: ``chunked`` (a complete chunked body,
    as a finished stream), ``close`` (no length, no chunking: the server simply closes, so
    the client sees a clean end of body) or ``drop`` (a chunked body cut before its last
    chunk: the client sees the connection drop mid-body).
    """

    def __init__(self, frames: list[bytes], ending: str = "chunked") -> None:
        import http.server
        import threading

        frames_to_send = list(frames)

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                if ending == "close":
                    self.send_header("connection", "close")
                    self.end_headers()
                    for frame in frames_to_send:
                        self.wfile.write(frame)
                    self.close_connection = True
                    return
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for frame in frames_to_send:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                if ending == "chunked":
                    self.wfile.write(b"0\r\n\r\n")
                self.close_connection = True

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> RawSseServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def raw_sse_server() -> Callable[..., RawSseServer]:
    """``raw_sse_server(frames, ending=...)``: a ``RawSseServer`` to use as a context manager."""
    return RawSseServer
