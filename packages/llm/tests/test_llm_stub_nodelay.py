"""The stub server writes each SSE frame at once (TCP_NODELAY), not after a delayed ACK.

Without it every streamed call paid Nagle's algorithm against the client's delayed ACK
(about 40 ms on Linux): found by ``nox -s bench`` (recording pass-through, replay
throughput's recording pass).
"""

from __future__ import annotations

import http.client
import json
import socket

import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm.stub._server import _Handler


def test_stub_server_connections_have_tcp_nodelay(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    original_setup = _Handler.setup

    def recording_setup(handler: _Handler) -> None:
        original_setup(handler)
        seen.append(handler.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    monkeypatch.setattr(_Handler, "setup", recording_setup)
    with StubServer.from_toml('[[rule]]\ntext = "hello there"\n') as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
            connection.request("POST", "/v1/chat/completions", json.dumps(body))
            response = connection.getresponse()
            assert response.status == 200
            assert b"hello" in response.read()
        finally:
            connection.close()
    assert seen, "no connection was handled"
    assert all(value != 0 for value in seen)
