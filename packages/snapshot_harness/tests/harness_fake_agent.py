"""A tiny ACP agent built on agentreel's llm and session packages, for the harness tests.

It is what "any ACP agent using agentreel's packages" looks like at its smallest: each
prompt is one turn of one model call through the configured provider
(``AGENTREEL_PROVIDER``: ``replay``, ``openai``, or the built-in ``echo``), every chunk
persisted, text streamed as ``agent_message_chunk``. ``FAKE_SUBAGENTS=n`` makes each turn
also run n spawned children (one call each, with lineage). ``FAKE_BEHAVIOUR`` makes it
misbehave on the first prompt: ``crash``, ``hang`` (after starting a grandchild process
whose pid goes to ``FAKE_PID_FILE``), ``garbage`` (a non-JSON line on stdout),
``fail-exit`` (exit 5 at stdin EOF), ``network`` (try an HTTP request, report on stderr),
``dump-env`` (print the environment to stderr at start), ``random-system`` (a random
system prompt on every run), ``random-output`` (a random agent id and count in its
answer, not in what it asks the model), ``traceback`` (a Python traceback on stderr, then
on as normal), ``names-user`` (its system prompt names ``$USER`` when that is set and not
empty, as Claude Code's auto-mode classifier does), ``names-day`` (its system prompt names
today's weekday, in UTC, in words no built-in mask covers), ``no-faketime`` (it exits at
start when libfaketime is preloaded), ``zone-order`` / ``zone-chunked`` (two updates in
an order, or a tool call's updates in a chunking, that follows the time zone).
``FAKE_AUTH_METHOD=<id>`` makes it
list that auth method in ``initialize`` and refuse ``session/new`` until ``authenticate``
with it succeeds, which needs the variable ``FAKE_AUTH_ENV`` names set;
``FAKE_AUTH_LEAK=1`` puts that key into its system prompt (into what is recorded).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    RequestError,
    run_agent,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
)
from acp.interfaces import Client
from acp.schema import (
    AuthenticateResponse,
    AuthMethodAgent,
    EnvVarAuthMethod,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    TerminalAuthMethod,
)

from agentreel.brand import SessionId
from agentreel.llm import (
    AgentEnvironment,
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    GenerateOptions,
    Message,
    Provider,
    TextDelta,
    TextPart,
    Usage,
)
from agentreel.session import (
    AssistantChunkData,
    Session,
    SessionStore,
    SubagentEndData,
    SubagentStartData,
    TurnEndData,
    TurnStartData,
    UserMessageData,
    build_request_header,
)

# The AGENTREEL_* contract the harness writes, read with the agent kit's one reader.
CONTRACT = AgentEnvironment.from_environ()
BEHAVIOUR = os.environ.get("FAKE_BEHAVIOUR", "normal")
SYSTEM_PROMPT = os.environ.get("FAKE_SYSTEM_PROMPT", "You are a terse test agent.")
SUBAGENTS = int(os.environ.get("FAKE_SUBAGENTS", "0"))
if BEHAVIOUR == "random-system":  # a different request on every run: cannot replay
    SYSTEM_PROMPT += f" Run {os.urandom(4).hex()}."
if BEHAVIOUR == "names-user" and os.environ.get("USER"):
    SYSTEM_PROMPT += f" The user is {os.environ['USER']}."
if BEHAVIOUR == "names-day":
    SYSTEM_PROMPT += f" It is {time.strftime('%A', time.gmtime())} here."
if BEHAVIOUR == "no-faketime" and "faketime" in os.environ.get("LD_PRELOAD", ""):
    sys.exit("fake agent: refusing to run under libfaketime")
AUTH_METHOD = os.environ.get("FAKE_AUTH_METHOD")
AUTH_ENV = os.environ.get("FAKE_AUTH_ENV", "")
if os.environ.get("FAKE_AUTH_LEAK"):
    SYSTEM_PROMPT += f" Key {os.environ.get(AUTH_ENV, '')}."


class EchoProvider:
    """A model that answers ``echo: <last user text>`` in two deltas."""

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Chunk]:
        text = ""
        for part in options.messages[-1].content:
            if isinstance(part, TextPart):
                text = part.text
        answer = f"echo: {text}"
        if os.environ.get("FAKE_ECHO_FILES"):
            answer += " files: " + ", ".join(sorted(os.listdir(os.getcwd())))
        yield BlockStart(index=0, block_type="text")
        yield TextDelta(index=0, text=answer[:6])
        yield TextDelta(index=0, text=answer[6:])
        yield BlockEnd(index=0, block=TextPart(answer))
        yield Usage(input_tokens=3, output_tokens=2)
        yield Finish(reason="stop")


def make_provider() -> Provider:
    if CONTRACT.provider in (None, "echo"):
        return EchoProvider()
    return CONTRACT.load_provider()


class FakeAgent:
    def __init__(self) -> None:
        assert CONTRACT.sessions_root is not None, "the harness always sets the sessions root"
        self.store = SessionStore(CONTRACT.sessions_root)
        self.provider: Provider | None = None
        self.sessions: dict[str, Session] = {}
        self.turns: dict[str, int] = {}
        self.client: Client | None = None
        self.running: dict[str, asyncio.Task[str]] = {}
        self.authenticated = False

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        if AUTH_METHOD is None:
            return InitializeResponse(protocol_version=PROTOCOL_VERSION)
        methods: list[EnvVarAuthMethod | TerminalAuthMethod | AuthMethodAgent] = [
            AuthMethodAgent(id=AUTH_METHOD, name="API key"),
            AuthMethodAgent(id="oauth", name="OAuth"),
        ]
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, auth_methods=methods)

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        if method_id != AUTH_METHOD or not os.environ.get(AUTH_ENV):
            raise RequestError.invalid_params({"method": method_id, "needs": AUTH_ENV})
        self.authenticated = True
        return AuthenticateResponse()

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        if AUTH_METHOD is not None and not self.authenticated:
            raise RequestError.auth_required()
        session = self.store.create(cwd)
        self.sessions[session.id] = session
        self.turns[session.id] = 0
        return NewSessionResponse(session_id=session.id)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = " ".join(getattr(block, "text", "") for block in prompt)
        misbehave(text)
        task = asyncio.create_task(self.turn(session_id, text))
        self.running[session_id] = task
        try:
            await task
        except asyncio.CancelledError:
            return PromptResponse(stop_reason="cancelled")
        finally:
            self.running.pop(session_id, None)
        if BEHAVIOUR in ("zone-order", "zone-chunked") and self.client is not None:
            await self.zone_dependent(session_id)
        if BEHAVIOUR == "random-output" and self.client is not None:
            volatile = (
                f" [agent-{os.urandom(8).hex()} tokens used: {int.from_bytes(os.urandom(3))}]"
            )
            await self.client.session_update(
                session_id=session_id, update=update_agent_message_text(volatile)
            )
        return PromptResponse(stop_reason="end_turn")

    async def zone_dependent(self, session_id: str) -> None:
        """Updates whose order (``zone-order``) or chunking (``zone-chunked``) follows the
        time zone, as a race between the agent's tasks would: the same in every run of one
        environment, another under a trial's."""
        assert self.client is not None
        other_zone = os.environ.get("TZ", "UTC") != "UTC"
        send = self.client.session_update
        if BEHAVIOUR == "zone-order":
            updates: list[Any] = [update_agent_thought_text("done"), update_agent_message_text("!")]
        else:
            done = update_tool_call(
                "call-1", status="completed", content=[tool_content(text_block("read"))]
            )
            updates = [start_tool_call("call-1", "Read notes", kind="read", status="pending")]
            if other_zone:
                updates.append(update_tool_call("call-1", status="in_progress"))
            updates.append(done)
        if other_zone and BEHAVIOUR == "zone-order":
            updates.reverse()
        for update in updates:
            await send(session_id=session_id, update=update)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        task = self.running.get(session_id)
        if task is not None:
            task.cancel()

    async def turn(self, session_id: str, text: str) -> str:
        session = self.sessions[session_id]
        turn = self.turns[session_id]
        self.turns[session_id] += 1
        session.append(TurnStartData(turn=turn))
        session.append(UserMessageData(turn=turn, text=text))
        reason = "completed"
        try:
            answer = await self.call(session, turn, text, stream_to=session_id)
            for index in range(SUBAGENTS):
                child = self.store.spawn(session, index)
                session.append(
                    SubagentStartData(child_session=child.id, spawn_index=index, mode="spawn")
                )
                child.append(TurnStartData(turn=0))
                await self.call(child, 0, f"subtask {index}", parent=session, spawn_index=index)
                child.append(TurnEndData(turn=0, reason="completed"))
                child.close()
                session.append(SubagentEndData(child_session=child.id, outcome="completed"))
            return answer
        except asyncio.CancelledError:
            reason = "aborted"
            raise
        except Exception as exc:
            reason = "error"
            print(f"fake agent: turn failed: {exc}", file=sys.stderr)
            return ""
        finally:
            session.append(TurnEndData(turn=turn, reason=reason))  # type: ignore[arg-type]

    async def call(
        self,
        session: Session,
        turn: int,
        text: str,
        *,
        stream_to: str | None = None,
        parent: Session | None = None,
        spawn_index: int | None = None,
    ) -> str:
        if self.provider is None:
            self.provider = make_provider()
        session.step_start(turn, 0)
        options = GenerateOptions(
            model=CONTRACT.model or "echo-model",
            messages=(Message(role="user", content=(TextPart(text),)),),
            system=SYSTEM_PROMPT,
            session_id=SessionId(session.id),
            parent_session_id=SessionId(parent.id) if parent is not None else None,
            spawn_index=spawn_index,
        )
        session.append(build_request_header(options, turn=turn, step=0, cwd=session.header.cwd))
        answer = ""
        async for chunk in self.provider.stream(options):
            session.append(AssistantChunkData(turn=turn, step=0, chunk=chunk))
            if isinstance(chunk, TextDelta):
                answer += chunk.text
                if stream_to is not None and self.client is not None:
                    await self.client.session_update(
                        session_id=stream_to, update=update_agent_message_text(chunk.text)
                    )
        session.step_end(turn, 0)
        return answer

    def shutdown(self) -> None:
        self.store.close_all()
        close = getattr(self.provider, "close", None)
        if close is not None:
            close()


def misbehave(text: str) -> None:
    if BEHAVIOUR == "crash":
        print("fake agent: crashing on purpose while handling the prompt", file=sys.stderr)
        sys.stderr.flush()
        os._exit(3)
    if BEHAVIOUR == "network":
        import urllib.request

        try:
            urllib.request.urlopen("http://example.invalid/", timeout=30)
            print("fake agent: NETWORK REACHED", file=sys.stderr)
        except OSError as exc:
            print(f"fake agent: network blocked: {exc!r}", file=sys.stderr)
    if BEHAVIOUR == "traceback":
        print(
            'Traceback (most recent call last):\n  File "agent.py", line 1, in <module>\n'
            "ValueError: fake agent: failing on purpose, then going on",
            file=sys.stderr,
        )
    if BEHAVIOUR == "garbage":
        os.write(1, b"this line is not json\n")
    if BEHAVIOUR == "hang":
        grandchild = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"],
            stdin=subprocess.DEVNULL,
        )
        Path(os.environ["FAKE_PID_FILE"]).write_text(str(grandchild.pid))
        print("fake agent: hanging on purpose", file=sys.stderr)
        sys.stderr.flush()
        import time

        time.sleep(600)


async def main() -> None:
    if BEHAVIOUR == "dump-env":
        print("ENV=" + json.dumps(dict(os.environ)), file=sys.stderr)
    agent = FakeAgent()
    try:
        await run_agent(agent)  # type: ignore[arg-type]
    finally:
        agent.shutdown()
    if BEHAVIOUR == "fail-exit":
        sys.exit(5)


if __name__ == "__main__":
    asyncio.run(main())
