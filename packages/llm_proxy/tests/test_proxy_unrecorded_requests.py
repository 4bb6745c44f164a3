"""A headerless caller that no recording starts with shows what it sent (SPEC 13, issue
30), through the proxy and the real google-genai SDK, shaped as Gemini CLI runs: a router
call (``generateContent``, complexity schema) before the conversation's first streamed
request, both holding the session context, no identity header at all.

The router call binds its lane; the conversation's first request, changed deep in its
context, continues no lane and starts no recording: an ``UnrecordedSessionError`` (not a
drift of another lane). It writes the live caller's full masked request and the nearest
recorded one (the conversation's first call) beside the report and names both — the only
way to see what a caller without identity changed — with known credential shapes
redacted: a key the agent put into its prompt is never written."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from google import genai
from google.genai import errors, types

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report
from agentreel.session.testing import FAKE_CREDENTIAL_RULES, fake_credentials

KEY = "unrecorded-requests-test-key-0123456789"
ROUTER = "You route requests by complexity."
AGENT = "You are a CLI agent. Read files when asked."
QUESTION = "Please read notes.txt and tell me what it says."
READ_FILE = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="read_file",
            description="Read a file of the workspace.",
            parameters_json_schema={
                "type": "object",
                "properties": {"file_path": {"type": "string"}},
            },
        )
    ]
)

RULES = """
[[rule]]
match = { api = "gemini", stream = false }
json = { complexity_reasoning = "a single read", complexity_score = 1 }

[[rule]]
match = { api = "gemini", system_contains = "CLI agent" }
text = "notes.txt says: alpha beta."
"""


def _context(listing: list[str]) -> str:
    """Gemini CLI's session context: filler first, so what changes lies past any preview."""
    lines = [f"Setting {n}: the agent's own default, unchanged between runs." for n in range(40)]
    return "<session_context>\n" + "\n".join([*lines, *listing]) + "\n</session_context>"


def _user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


@asynccontextmanager
async def _client(base_url: str) -> AsyncIterator[genai.Client]:
    async with httpx2.AsyncClient() as http:
        options = types.HttpOptions(
            base_url=base_url, api_version="v1beta", httpx_async_client=http
        )
        yield genai.Client(api_key=KEY, http_options=options)


async def _turn(base_url: str, context: str, changed: str | None = None) -> str:
    """The router call, then the conversation's first (streamed) request; ``changed``:
    the context only the conversation's request holds (default: ``context``)."""
    async with _client(base_url) as client:
        routed = await client.aio.models.generate_content(
            model="gemini-flash-lite",
            contents=[_user(context), _user(QUESTION)],
            config=types.GenerateContentConfig(
                system_instruction=ROUTER,
                response_mime_type="application/json",
                response_json_schema={
                    "type": "object",
                    "properties": {
                        "complexity_reasoning": {"type": "string"},
                        "complexity_score": {"type": "integer"},
                    },
                },
            ),
        )
        assert json.loads(routed.text or "")["complexity_score"] == 1
        stream = await client.aio.models.generate_content_stream(
            model="gemini-pro",
            contents=[_user(f"{changed or context}\n{QUESTION}")],
            config=types.GenerateContentConfig(system_instruction=AGENT, tools=[READ_FILE]),
        )
        return "".join([response.text or "" async for response in stream])


@pytest.mark.asyncio
async def test_an_unrecorded_headerless_caller_writes_its_request_and_the_nearest_recorded(
    tmp_path: Path,
) -> None:
    fixture = tmp_path / "fixture"
    recorded_listing = ["workspace/", "└───notes.txt"]
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            answer = await _turn(proxy.base_url, _context(recorded_listing))
    assert answer == "notes.txt says: alpha beta."

    key = fake_credentials()["google"]
    # The router's request is the recorded one; the conversation's context gained a line
    # (the agent echoed a key it was given) that only the conversation's request holds.
    changed = _context([*recorded_listing, f"└───.env (GEMINI_API_KEY={key})"])
    report = tmp_path / "run" / "report.json"
    report.parent.mkdir()
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        with pytest.raises(errors.ClientError) as refused:
            await _turn(proxy.base_url, _context(recorded_listing), changed)

    (error,) = read_report(report).errors
    assert error.type == "UnrecordedSessionError"
    live = report.parent / "drift" / "unrecorded-1.live.txt"
    recorded = report.parent / "drift" / "unrecorded-1.recorded.txt"
    for message in (str(refused.value.message), error.message):
        assert f"Its full masked request: {live}; the nearest recorded one: {recorded}." in message
        # The nearest recorded request is the conversation's first call, not the router's,
        # and what differs is shown: the line the live context gained.
        nearest = "The nearest recorded request (call 1 of session.jsonl ({{session:main}}))"
        assert f"{nearest} differs from it in:\n  messages[0] (user) differs at" in message
        redacted = f"[redacted: {FAKE_CREDENTIAL_RULES['google']}]"
        assert f"| └───.env (GEMINI_API_KEY={redacted})" in message
        assert 'first message "<session_context> Setting 0:' in message
        # The first line says what failed and what to run; what differs follows it.
        assert "re-record: " in message.splitlines()[0]
        assert str(live) in message.splitlines()[0]
        assert key not in message
    live_text = live.read_text(encoding="utf-8")
    recorded_text = recorded.read_text(encoding="utf-8")
    # Whole requests, both sides: the line only the live one holds, past any preview.
    assert "└───.env (GEMINI_API_KEY=" in live_text
    assert ".env" not in recorded_text
    for text in (live_text, recorded_text):
        assert "Setting 39: the agent's own default" in text
        assert f"--- system prompt ---\n{AGENT}\n" in text
        assert QUESTION in text
    # Never written: the key the agent echoed, nor the one its client sent.
    assert key not in live_text
    assert f"[redacted: {FAKE_CREDENTIAL_RULES['google']}]" in live_text
    for written in (live, recorded, report):
        assert KEY not in written.read_text(encoding="utf-8")
