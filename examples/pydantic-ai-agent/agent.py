"""A pydantic-ai agent with concurrent subagents, behind a small ACP front.

Nothing here imports agentreel: this is "your own agent" on a framework. The lead agent
hands independent tasks to a helper agent through its ``ask_helper`` tool; when the model
asks for several helpers in one response, pydantic-ai runs the tool calls concurrently,
so the helpers' model calls interleave. The helper reads files with ``read_file``
(confined to the session's cwd). Like real agents, the lead's system prompt names today's
date, the working directory and the session id: content that differs on every run. The
ACP front (official ``agent-client-protocol`` SDK) streams the lead's text to the editor
as ``agent_message_chunk`` updates.

The model is any OpenAI-compatible endpoint: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``EXAMPLE_MODEL`` (default ``gpt-4o-mini``). Identity for a recording proxy goes through
pydantic-ai's own ``extra_headers`` model setting: the lead's requests carry
``x-agentreel-session-id`` (the ACP session id), each helper's its own id plus
``x-agentreel-parent-session-id`` and ``x-agentreel-spawn-index`` (the order in which the
lead issued the calls). ``EXAMPLE_IDENTITY_HEADERS=0`` sends none: the proxy then has to
tell the sessions apart by conversation chaining and content.
"""

from __future__ import annotations

import asyncio
import datetime
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
    update_agent_message_text,
)
from acp.interfaces import Client
from acp.schema import AgentCapabilities, Implementation
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

HEADERS_ON = os.environ.get("EXAMPLE_IDENTITY_HEADERS", "1") != "0"


@dataclass
class Workspace:
    cwd: Path
    session_id: str = ""
    helpers: int = 0  # spawn indexes, in the order the lead issued ask_helper calls


def identity(session_id: str, parent: str | None = None, index: int | None = None) -> Any:
    """pydantic-ai model settings that send the caller's identity as headers."""
    if not HEADERS_ON:
        return None
    headers = {"x-agentreel-session-id": session_id}
    if parent is not None and index is not None:
        headers["x-agentreel-parent-session-id"] = parent
        headers["x-agentreel-spawn-index"] = str(index)
    return {"extra_headers": headers}


def build_agents(model: OpenAIChatModel) -> Agent[Workspace, str]:
    helper = Agent(
        model,
        deps_type=Workspace,
        instructions="You are a helper. Use read_file to look at files. Answer in one line.",
    )

    @helper.tool
    def read_file(ctx: RunContext[Workspace], path: str) -> str:
        """Read a UTF-8 text file, path relative to the working directory."""
        root = ctx.deps.cwd.resolve()
        target = (root / path).resolve()
        if not target.is_relative_to(root):
            return f"error: {path} is outside the working directory"
        try:
            return target.read_text(encoding="utf-8")
        except OSError as exc:
            return f"error: {exc}"

    lead = Agent(
        model,
        deps_type=Workspace,
        instructions=(
            "You lead a small team. Give each independent task to a helper with ask_helper "
            "(one call per task, all in one response); then combine their answers briefly."
        ),
    )

    @lead.instructions
    def environment(ctx: RunContext[Workspace]) -> str:
        # What real agents put in their system prompt and what differs on every run: the
        # date, the working directory, the session id. agentreel's proxy masks them before
        # it compares a replayed request with the recorded one.
        return (
            f"Today is {datetime.date.today().isoformat()}. Working directory: {ctx.deps.cwd}. "
            f"Session: {ctx.deps.session_id}."
        )

    @lead.tool
    async def ask_helper(ctx: RunContext[Workspace], task: str) -> str:
        """Give one self-contained task to a helper agent; returns its answer."""
        # Numbered before the first await: the concurrent calls start in the lead's order.
        index = ctx.deps.helpers
        ctx.deps.helpers += 1
        settings = identity(str(uuid.uuid4()), ctx.deps.session_id, index)
        result = await helper.run(task, deps=ctx.deps, model_settings=settings)
        return result.output

    return lead


@dataclass
class Conversation:
    cwd: Path
    history: list[ModelMessage] = field(default_factory=list)


class AcpFront:
    def __init__(self) -> None:
        self.client: Client | None = None
        model = OpenAIChatModel(
            os.environ.get("EXAMPLE_MODEL", "gpt-4o-mini"),
            provider=OpenAIProvider(
                base_url=os.environ.get("OPENAI_BASE_URL"),
                api_key=os.environ.get("OPENAI_API_KEY"),
            ),
        )
        self.lead = build_agents(model)
        self.sessions: dict[str, Conversation] = {}

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="pydantic-ai-example", version="0.1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = str(uuid.uuid4())
        self.sessions[session_id] = Conversation(Path(cwd))
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        conversation = self.sessions.get(session_id)
        if conversation is None:
            raise RequestError.invalid_params({"sessionId": session_id, "details": "unknown"})
        assert self.client is not None
        text = "\n".join(block.text for block in prompt if getattr(block, "text", None))
        async with self.lead.iter(
            text,
            deps=Workspace(conversation.cwd, session_id),
            message_history=conversation.history,
            model_settings=identity(session_id),
        ) as run:
            async for node in run:
                if not Agent.is_model_request_node(node):
                    continue
                async with node.stream(run.ctx) as events:
                    async for event in events:
                        piece = _text_of(event)
                        if piece:
                            await self.client.session_update(
                                session_id, update_agent_message_text(piece)
                            )
        assert run.result is not None
        conversation.history = run.result.all_messages()
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


def _text_of(event: Any) -> str:
    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
        return event.part.content
    if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
        return event.delta.content_delta
    return ""


class _WriteProtocol(asyncio.streams.FlowControlMixin, asyncio.Protocol):
    """Flow control for the write-only protocol pipe (what asyncio.StreamWriter needs)."""


async def serve(protocol_out: Any) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, write_protocol = await loop.connect_write_pipe(_WriteProtocol, protocol_out)
    writer = asyncio.StreamWriter(transport, write_protocol, None, loop)
    await acp.run_agent(AcpFront(), writer, reader)  # type: ignore[arg-type]


def main() -> None:
    # stdout carries protocol frames only: keep the real one for ACP, send fd 1 to
    # stderr, so a stray print (or a library's) can never corrupt a frame.
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    asyncio.run(serve(protocol_out))


if __name__ == "__main__":
    main()
