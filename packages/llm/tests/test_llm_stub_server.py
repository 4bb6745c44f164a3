"""The stub model server: rules loading and matching, wire shapes, faults, and its CLI."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentreel.llm.stub import StubRulesError, StubServer, load_rules, parse_rules


def _post(server: StubServer, path: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request("POST", path, json.dumps(body), {"content-type": "application/json"})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def _openai_body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "m", "stream": True, "messages": list(messages), **extra}


def test_stub_rules_unknown_key_names_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text('[[rule]]\ntext = "hi"\n\n[[rule]]\nmatch.last_usr = "x"\ntext = "y"\n')
    with pytest.raises(StubRulesError) as caught:
        load_rules(path)
    message = str(caught.value)
    assert str(path) in message
    assert "last_usr" in message
    assert "rule[2].match" in message
    assert "last_user" in message  # the known keys are listed


def test_stub_rules_unknown_top_level_rule_key(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text('[[rule]]\ntext = "hi"\nchunksize = 3\n')
    with pytest.raises(StubRulesError, match="chunksize"):
        load_rules(path)


@pytest.mark.parametrize(
    ("rules", "fragment"),
    [
        ('[[rule]]\nmatch.last_user_regex = "("', "not a valid regex"),
        ("[[rule]]\nchunk_size = 0", "chunk_size"),
        ("[[rule]]\ntimes = 0", "times"),
        ("[[rule]]\nstatus = 302", "status"),
        ("[[rule]]\nretry_after = 1", "error status"),
        ("[[rule]]\ncut_after = 1\nerror_after = 2", "not both"),
        ("[[rule]]\nstatus = 500\ncut_after = 1", "apply to streams"),
        ("", "no [[rule]]"),
        ("[[rule]\n", "not valid TOML"),
    ],
)
def test_stub_rules_are_validated_strictly(rules: str, fragment: str) -> None:
    with pytest.raises(StubRulesError, match=r"rules\.toml") as caught:
        parse_rules(rules, source="scenario/rules.toml")
    assert fragment in str(caught.value)


MATCHING = """
[[rule]]
name = "after tool"
match.last_tool_result = "file body"
text = "summary"

[[rule]]
name = "first time only"
match.last_user_regex = "^read"
times = 1
text = "once"

[[rule]]
name = "system"
match.system_contains = "pirate"
match.has_tools = false
text = "arr"

[[rule]]
name = "fallback"
text = "fallback"
"""


def test_stub_matching_is_ordered_and_counts_times() -> None:
    with StubServer.from_toml(MATCHING) as server:
        user = {"role": "user", "content": "read a.txt"}
        _post(server, "/v1/chat/completions", _openai_body(user))
        _post(server, "/v1/chat/completions", _openai_body(user))
        tool_turn: list[dict[str, Any]] = [
            user,
            {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "tool", "tool_call_id": "c", "content": "file body"},
        ]
        _post(server, "/v1/chat/completions", _openai_body(*tool_turn))
        pirate = {"role": "system", "content": "You are a pirate"}
        _post(server, "/v1/chat/completions", _openai_body(pirate, user))
        anthropic_tool_turn = {
            "model": "m",
            "stream": True,
            "messages": [
                {"role": "user", "content": "read a.txt"},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t", "content": "file body"}
                    ],
                },
            ],
        }
        _post(server, "/v1/messages", anthropic_tool_turn)
        rules = [r.rule for r in server.requests]
    assert rules == [
        "rule 2 ('first time only')",
        "rule 4 ('fallback')",
        "rule 1 ('after tool')",
        "rule 3 ('system')",
        "rule 1 ('after tool')",
    ]


def test_stub_no_matching_rule_answers_400_naming_the_request() -> None:
    with StubServer.from_toml('[[rule]]\nmatch.last_user = "hello"\ntext = "hi"') as server:
        status, _, raw = _post(
            server, "/v1/chat/completions", _openai_body({"role": "user", "content": "bye"})
        )
        record = server.requests[0]
    assert status == 400
    error = json.loads(raw)["error"]
    assert error["type"] == "invalid_request_error"
    assert "no rule in <inline rules> matches request #0" in error["message"]
    assert "'bye'" in error["message"]
    # Where the format is, for a user who installed the package (no repository paths).
    assert "python -m agentreel.llm.stub --rules-format" in error["message"]
    assert "packages/" not in error["message"]
    assert record.outcome == "no-rule"


def test_rules_format_prints_the_installed_readmes_rules_section() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agentreel.llm.stub", "--rules-format"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("### Rules file\n")
    assert "[[rule]]" in result.stdout
    assert "### Scripting real agents" not in result.stdout


def test_stub_openai_wire_shape() -> None:
    rules = (
        '[[rule]]\ntext = "Hello"\nchunk_size = 3\nusage = {input_tokens = 5, output_tokens = 2}'
    )
    with StubServer.from_toml(rules) as server:
        status, headers, raw = _post(
            server,
            "/v1/chat/completions",
            _openai_body({"role": "user", "content": "hi"}, stream_options={"include_usage": True}),
        )
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["transfer-encoding"] == "chunked"
    frames = raw.decode().split("\n\n")
    assert frames[-1] == ""
    assert frames[-2] == "data: [DONE]"
    chunks = [json.loads(f.removeprefix("data: ")) for f in frames[:-2]]
    assert all(f.startswith("data: {") for f in frames[:-2])
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:3]] == ["Hel", "lo"]
    assert chunks[3]["choices"][0]["finish_reason"] == "stop"
    assert chunks[4]["choices"] == []
    assert chunks[4]["usage"]["prompt_tokens"] == 5
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}


def test_stub_anthropic_wire_shape() -> None:
    rules = """
[[rule]]
reasoning = "hmm"
text = "Hi"
tool_calls = [{name = "list_files"}]
"""
    with StubServer.from_toml(rules) as server:
        body = {"model": "m", "stream": True, "max_tokens": 10, "messages": []}
        status, _, raw = _post(server, "/v1/messages", body)
    assert status == 200
    frames = [f for f in raw.decode().split("\n\n") if f]
    events = []
    for frame in frames:
        event_line, data_line = frame.split("\n")
        name = event_line.removeprefix("event: ")
        data = json.loads(data_line.removeprefix("data: "))
        assert data["type"] == name
        events.append(data)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "ping"]
    assert kinds[-2:] == ["message_delta", "message_stop"]
    starts = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use"]
    assert events[-2]["delta"]["stop_reason"] == "tool_use"
    assert events[0]["message"]["usage"]["input_tokens"] == 16


def test_stub_429_sends_retry_after_headers_and_a_wire_error_body() -> None:
    rules = "[[rule]]\nstatus = 429\nretry_after = 1.5"
    with StubServer.from_toml(rules) as server:
        status, headers, raw = _post(server, "/v1/messages", {"model": "m", "messages": []})
    assert status == 429
    assert headers["retry-after"] == "2"
    assert headers["retry-after-ms"] == "1500"
    assert json.loads(raw)["error"]["type"] == "rate_limit_error"


def test_stub_client_resetting_a_keep_alive_connection_prints_no_traceback(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentreel.llm.stub")
    with StubServer.from_toml('[[rule]]\ntext = "hi"') as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        body = json.dumps(_openai_body({"role": "user", "content": "hello"}))
        connection.request("POST", "/v1/chat/completions", body)
        assert connection.getresponse().read().endswith(b"[DONE]\n\n")
        assert connection.sock is not None
        # Linger 0: close() sends a TCP reset, as a client pool dropping a socket may.
        connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()
        deadline = time.monotonic() + 30
        while "hung up on an idle connection" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "hung up on an idle connection" in caplog.text
        assert _post(server, "/v1/chat/completions", json.loads(body))[0] == 200
    assert "Traceback" not in capsys.readouterr().err


def test_stub_unknown_path_is_404() -> None:
    with StubServer.from_toml('[[rule]]\ntext = "x"') as server:
        status, _, raw = _post(server, "/v2/chat", {})
    assert status == 404
    assert b"/v1/chat/completions" in raw


def test_stub_cli_prints_its_base_url_and_exits_when_stdin_closes(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nmatch.last_user = "ping"\ntext = "pong"\n')
    process = subprocess.Popen(
        [sys.executable, "-m", "agentreel.llm.stub", "--rules", str(rules), "--exit-on-stdin-eof"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        host, port = url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        body = _openai_body({"role": "user", "content": "ping"})
        connection.request("POST", "/v1/chat/completions", json.dumps(body))
        raw = connection.getresponse().read()
        connection.close()
        assert b'"content":"pong"' in raw
    finally:
        assert process.stdin is not None
        process.stdin.close()
        code = process.wait(timeout=30)
        assert process.stderr is not None
        stderr = process.stderr.read()
        process.stderr.close()
        if process.stdout is not None:
            process.stdout.close()
    assert code == 0
    assert "answered by rule 1" in stderr


def test_stub_cli_reports_a_bad_rules_file(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text("[[rule]]\nbogus = 1\n")
    result = subprocess.run(
        [sys.executable, "-m", "agentreel.llm.stub", "--rules", str(rules)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "bogus" in result.stderr
    assert str(rules) in result.stderr


def test_stub_package_imports_no_provider_sdk() -> None:
    code = (
        "import sys, agentreel.llm.stub;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('openai', 'anthropic', 'httpx', 'httpx2', 'pydantic'));"
        "print(','.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == ""


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("/v1/chat/completions", "request body"),
        ("/v1/messages/count_tokens", "count_tokens request body"),
        ("/v1/embeddings", "embeddings request body"),
    ],
)
def test_stub_answers_a_body_that_is_no_json_object_with_a_400_naming_it(
    path: str, what: str
) -> None:
    with StubServer.from_toml('[[rule]]\ntext = "unused"') as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            connection.request("POST", path, b"[1]", {"content-type": "application/json"})
            response = connection.getresponse()
            status, payload = response.status, response.read().decode()
        finally:
            connection.close()
        assert server.requests == []
    assert status == 400
    assert f"agentreel stub server: {what} is not JSON: the body is not a JSON object" in payload
