"""A small coding agent on the plain ``openai`` SDK, served over ACP; its subagents are processes.

Nothing here imports agentreel: this is "your own agent". It speaks ACP on stdio (the
official ``agent-client-protocol`` SDK), calls a model through ``openai.AsyncOpenAI`` — so
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` point it anywhere, agentreel's proxy included —
and offers two tools: ``read_file`` (inside the session's cwd) and ``delegate``. Each
``delegate`` call starts this same program again as a child process, drives it over ACP
as a client (``session/new``, ``session/prompt``), and returns the child's answer as the
tool result; several ``delegate`` calls in one step run concurrently.

Identity for a recording proxy: every model request carries ``x-agentreel-session-id``
(the ACP session id), and a child's also ``x-agentreel-parent-session-id`` and
``x-agentreel-spawn-index`` — which the parent passes down in the child's environment
(``AGENTREEL_PARENT_SESSION_ID``, ``AGENTREEL_SPAWN_INDEX``). ``EXAMPLE_IDENTITY_HEADERS=0``
turns the headers off (the proxy then binds by conversation chaining and content alone).

Environment: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``EXAMPLE_MODEL`` (default
``gpt-4o-mini``), ``EXAMPLE_MAX_STEPS`` (default 8).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
from acp import (
    PROTOCOL_VERSION,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    text_block,
    update_agent_message_text,
)
from acp.interfaces import Client
from acp.schema import AgentCapabilities, ClientCapabilities, Implementation
from openai import AsyncOpenAI

THIS_PROGRAM = str(Path(__file__).resolve())
PARENT_ENV = "AGENTREEL_PARENT_SESSION_ID"
SPAWN_INDEX_ENV = "AGENTREEL_SPAWN_INDEX"
SYSTEM_PROMPT = (
    "You are a careful coding assistant. Read files with read_file. Hand independent "
    "pieces of work to subagents with delegate (one call per task; they run in parallel). "
    "Answer briefly."
)
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a UTF-8 text file, path relative to the working directory.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "delegate",
            "description": "Give one self-contained task to a subagent; returns its answer.",
            "parameters": {
                "type": "object",
                "properties": {"task": {"type": "string"}},
                "required": ["task"],
            },
        },
    },
]


@dataclass
class Conversation:
    cwd: Path
    messages: list[Any] = field(default_factory=list)
    children: int = 0  # spawn indexes, in the order the delegate calls were issued


class ExampleAgent:
    def __init__(self) -> None:
        self.client: Client | None = None
        self.model = os.environ.get("EXAMPLE_MODEL", "gpt-4o-mini")
        self.max_steps = int(os.environ.get("EXAMPLE_MAX_STEPS", "8"))
        self.headers_on = os.environ.get("EXAMPLE_IDENTITY_HEADERS", "1") != "0"
        self.parent = os.environ.get(PARENT_ENV)
        self.spawn_index = os.environ.get(SPAWN_INDEX_ENV)
        self.openai = AsyncOpenAI(max_retries=0)
        self.sessions: dict[str, Conversation] = {}

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="openai-sdk-example", version="0.1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = str(uuid.uuid4())
        self.sessions[session_id] = Conversation(Path(cwd))
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        conversation = self.sessions.get(session_id)
        if conversation is None:
            raise RequestError.invalid_params({"sessionId": session_id, "details": "unknown"})
        text = "\n".join(block.text for block in prompt if getattr(block, "text", None))
        conversation.messages.append({"role": "user", "content": text})
        for _ in range(self.max_steps):
            message = await self._step(session_id, conversation)
            conversation.messages.append(message)
            calls = message.get("tool_calls") or []
            if not calls:
                return PromptResponse(stop_reason="end_turn")
            results = await asyncio.gather(
                *(self._run_tool(session_id, conversation, call) for call in calls)
            )
            conversation.messages += results
        return PromptResponse(stop_reason="max_turn_requests")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None

    def _headers(self, session_id: str) -> dict[str, str]:
        if not self.headers_on:
            return {}
        headers = {"x-agentreel-session-id": session_id}
        if self.parent is not None and self.spawn_index is not None:
            headers["x-agentreel-parent-session-id"] = self.parent
            headers["x-agentreel-spawn-index"] = self.spawn_index
        return headers

    async def _step(self, session_id: str, conversation: Conversation) -> dict[str, Any]:
        """One streamed model call; text goes to the editor as it arrives."""
        stream = await self.openai.chat.completions.create(
            model=self.model,
            messages=[{"role": "system", "content": SYSTEM_PROMPT}, *conversation.messages],
            tools=TOOLS,
            stream=True,
            extra_headers=self._headers(session_id),
        )
        text = ""
        calls: dict[int, dict[str, Any]] = {}
        async for chunk in stream:
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text += delta.content
                    assert self.client is not None
                    await self.client.session_update(
                        session_id, update_agent_message_text(delta.content)
                    )
                for piece in delta.tool_calls or []:
                    call = calls.setdefault(
                        piece.index,
                        {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                    )
                    if piece.id:
                        call["id"] = piece.id
                    if piece.function and piece.function.name:
                        call["function"]["name"] = piece.function.name
                    if piece.function and piece.function.arguments:
                        call["function"]["arguments"] += piece.function.arguments
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            # Spawn indexes follow the order of the calls in the message, not their finish.
            message["tool_calls"] = [calls[index] for index in sorted(calls)]
        return message

    async def _run_tool(
        self, session_id: str, conversation: Conversation, call: dict[str, Any]
    ) -> dict[str, Any]:
        name = call["function"]["name"]
        try:
            arguments = json.loads(call["function"]["arguments"] or "{}")
            if name == "read_file":
                content = _read(conversation.cwd, str(arguments["path"]))
            elif name == "delegate":
                index = conversation.children
                conversation.children += 1
                content = await self._delegate(session_id, conversation, index, arguments["task"])
            else:
                content = f"error: no tool named {name!r}"
        except (KeyError, ValueError, OSError) as exc:
            content = f"error: {type(exc).__name__}: {exc}"
        return {"role": "tool", "tool_call_id": call["id"], "content": content}

    async def _delegate(
        self, session_id: str, conversation: Conversation, index: int, task: str
    ) -> str:
        """Start this program as a child process and drive it over ACP as a client."""
        env = dict(os.environ)
        env[PARENT_ENV] = session_id
        env[SPAWN_INDEX_ENV] = str(index)
        collector = _ChildOutput()
        async with acp.spawn_agent_process(
            collector,
            sys.executable,
            THIS_PROGRAM,
            env=env,
            cwd=str(conversation.cwd),
            transport_kwargs={"stderr": sys.stderr},
        ) as (child, _process):
            await child.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="openai-sdk-example-parent", version="0.1.0"),
            )
            session = await child.new_session(cwd=str(conversation.cwd), mcp_servers=[])
            await child.prompt(session_id=session.session_id, prompt=[text_block(task)])
        return collector.text


class _ChildOutput:
    """The parent's ACP client for one child: keeps the child's answer text."""

    def __init__(self) -> None:
        self.text = ""

    def on_connect(self, conn: Any) -> None:
        return None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        content = getattr(update, "content", None)
        if getattr(update, "session_update", "") == "agent_message_chunk" and content:
            self.text += getattr(content, "text", "")

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("session/request_permission")


def _read(cwd: Path, path: str) -> str:
    target = (cwd / path).resolve()
    if not target.is_relative_to(cwd.resolve()):
        raise ValueError(f"{path} is outside the working directory")
    return target.read_text(encoding="utf-8")


class _WriteProtocol(asyncio.streams.FlowControlMixin, asyncio.Protocol):
    """Flow control for the write-only protocol pipe (what asyncio.StreamWriter needs)."""


async def serve(protocol_out: Any) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, write_protocol = await loop.connect_write_pipe(_WriteProtocol, protocol_out)
    writer = asyncio.StreamWriter(transport, write_protocol, None, loop)
    await acp.run_agent(ExampleAgent(), writer, reader)  # type: ignore[arg-type]


def main() -> None:
    # stdout carries protocol frames only: keep the real one for ACP, send fd 1 to
    # stderr, so a stray print can never corrupt a frame.
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    asyncio.run(serve(protocol_out))


if __name__ == "__main__":
    main()
