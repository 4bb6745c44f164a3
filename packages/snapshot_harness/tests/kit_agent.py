"""A minimal ACP agent from the agentreel kit alone: one tool, concurrent delegation."""

import asyncio
import json
import sys
from typing import Any

import acp

from agentreel import agent_kit as kit
from agentreel import session as log
from agentreel.llm import BlockEnd, Message, ToolSpec
from agentreel.session import SubagentStartData as Start
from agentreel.session import ToolResultData as Result

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
TOOLS = [ToolSpec(name=n, description=n, parameters=TEXT) for n in ("shout", "delegate")]
ENV = kit.AgentEnvironment.from_environ()  # the AGENTREEL_* contract the harness writes


class KitAgent:
    tools = TOOLS  # what the model is offered; run_tool answers each but `delegate`'s child

    def __init__(self) -> None:
        self.store = kit.SessionStore(ENV.sessions_root or ".")
        self.sessions: dict[str, log.Session] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **_: Any) -> acp.InitializeResponse:
        return acp.InitializeResponse(protocol_version=protocol_version)

    async def new_session(self, cwd: str, **_: Any) -> acp.NewSessionResponse:
        # One provider for every session; a replaying one turns {{cwd}} into this cwd.
        self.provider = getattr(self, "provider", None) or ENV.load_provider(cwd=cwd)
        session = self.store.create(cwd)
        self.sessions[session.id] = session
        return acp.NewSessionResponse(session_id=session.id)

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> acp.PromptResponse:
        text = await self.turn(self.sessions[session_id], prompt[0].text)
        await self.conn.session_update(session_id, acp.update_agent_message_text(text))
        return acp.PromptResponse(stop_reason="end_turn")

    async def turn(self, session: log.Session, text: str) -> str:
        turn = sum(isinstance(event, log.TurnEnd) for event in session.events)
        session.append(log.UserMessageData(turn=turn, text=text))
        for step in range(8):
            options = log.call_options(session, model=ENV.model or "stub-model", tools=self.tools)
            stream = kit.record_stream(session, self.provider, options, turn=turn, step=step)
            blocks = tuple([c.block async for c in stream if isinstance(c, BlockEnd)])
            reply = Message(role="assistant", content=blocks)
            session.append(log.AssistantMessageData(turn=turn, step=step, message=reply))
            if not reply.tool_calls:
                session.append(log.TurnEndData(turn=turn, reason="completed"))
                return reply.text
            results: dict[str, str] = {}  # in call order; a delegate's result is its child's
            children: list[tuple[str, log.Session]] = []
            for call in reply.tool_calls:
                results[call.id] = await self.run_tool(call.name, json.loads(call.arguments))
                if call.name == "delegate":  # spawn_index: the order of the delegating calls
                    child, n = self.store.spawn(session, len(children)), len(children)
                    session.append(Start(child_session=child.id, spawn_index=n, mode="spawn"))
                    children.append((call.id, child))
            answers = await asyncio.gather(*(self.turn(c, results[i]) for i, c in children))
            results.update((i, answer) for (i, _), answer in zip(children, answers, strict=True))
            for i, out in results.items():
                session.append(Result(turn=turn, step=step, call_id=i, content=out, is_error=False))
        raise RuntimeError(f"session {session.id}: turn {turn} made 8 model calls; stopping")

    async def run_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """A tool's result; `delegate`'s is its prompt until the child answers."""
        text = str(arguments["text"])
        return text.upper() if name == "shout" else text


async def serve(protocol_out: Any, agent_class: type[KitAgent] = KitAgent) -> None:
    reader, writer = await kit.protocol_streams(sys.stdin.buffer, protocol_out)
    agent = agent_class()
    try:
        await acp.run_agent(agent, writer, reader)  # type: ignore[arg-type]
    finally:  # flush every log; a replaying provider writes its consumption report
        agent.store.close_all()
        getattr(getattr(agent, "provider", None), "close", lambda: None)()


if __name__ == "__main__":
    asyncio.run(serve(kit.take_protocol_stdout()))  # first thing: stdout is protocol only
