"""A tiny ACP agent that knows nothing of agentreel: plain ``openai`` SDK, for proxied runs.

It reads its base URL from ``~/.config/tiny-agent/config.json`` (the harness renders that
file into the fresh HOME) and its key from ``TINY_KEY``; each prompt is one streamed Chat
Completions call whose text goes to the editor. ``TINY_SYSTEM`` is its system prompt, so a
test can make a replay drift; the date in it is volatile content the proxy masks.
``TINY_IGNORE_EOF=1`` keeps it serving after stdin closes, like agents that wait for a
signal. ``TINY_OWN_IDS=1`` makes it print what opencode prints: session ids of its own
(``ses_`` + 26 random characters, new on every run) and its cwd relative to ``/``.
``TINY_CWD_IN_SYSTEM=1`` tells the model its working directory, as coding agents do.
``TINY_TITLE=1`` also asks another model for a title, as a side call beside the prompt
(agents make or skip such calls depending on timing). ``TINY_URL_LOG=FILE`` appends the base
URL it was given to FILE, so a test can see which proxy served which scenario.
``TINY_TOKENS=N`` reports a tool call whose raw output holds, deep inside, the number N
under a key no built-in rule knows (``outputTokens``): a test sets another N per run, as a
real agent's count differs. ``TINY_RACE=title-first`` / ``commands-first`` sends a
``session_info_update`` and an ``available_commands_update`` in that order, as a title lane
racing the editor notifications does in either order. ``TINY_SET_UP=before`` / ``after``
sends an ``available_commands_update`` before its ``session/new`` response or after it
(first thing in the first prompt turn), as mistral-vibe 3.0 does either by timing.
``TINY_PAD=WORD`` makes the request real-agent sized (some 60 KB, as Claude Code sends):
2,000 lines of context after the prompt, line 1200 naming WORD. ``TINY_SPLIT=one`` /
``two`` reports a command's output and its completion as one ``tool_call_update`` or as
two, as Codex 2.6 does depending on timing.
``TINY_RAW_LOG=DIR`` lists the models first and reads the
streamed answer as bytes, writing both as the SDK received them into DIR, one numbered file
each per run (the text is still sent to the editor), so a test can compare what replay
served with what the upstream sent.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import random
import string
import sys
import uuid
from pathlib import Path
from typing import Any

import acp
from acp import PROTOCOL_VERSION, start_tool_call, update_agent_message_text, update_tool_call
from acp.schema import (
    AvailableCommand,
    AvailableCommandsUpdate,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    SessionInfoUpdate,
)
from openai import AsyncOpenAI


class TinyAgent:
    def __init__(self) -> None:
        config = json.loads((Path.home() / ".config" / "tiny-agent" / "config.json").read_text())
        self.openai = AsyncOpenAI(base_url=config["base_url"], api_key=os.environ["TINY_KEY"])
        if url_log := os.environ.get("TINY_URL_LOG"):
            with open(url_log, "a", encoding="utf-8") as log:
                log.write(config["base_url"] + "\n")
        self.client: Any = None
        self.system = os.environ.get("TINY_SYSTEM", "You are tiny.")
        self.own_ids = os.environ.get("TINY_OWN_IDS") == "1"
        self.cwd_in_system = os.environ.get("TINY_CWD_IN_SYSTEM") == "1"
        self.cwd = ""
        self.commands_pending = False

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        self.cwd = cwd
        if self.own_ids:
            alphabet = string.ascii_letters + string.digits
            return NewSessionResponse(session_id="ses_" + "".join(random.choices(alphabet, k=26)))
        session_id = str(uuid.uuid4())
        set_up = os.environ.get("TINY_SET_UP")
        if set_up == "before":
            await self._send_commands(session_id)
        self.commands_pending = set_up == "after"
        return NewSessionResponse(session_id=session_id)

    async def _send_commands(self, session_id: str) -> None:
        commands = [AvailableCommand(name="plan", description="Plan it")]
        await self.client.session_update(
            session_id,
            AvailableCommandsUpdate(
                session_update="available_commands_update", available_commands=commands
            ),
        )

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        if self.commands_pending:
            self.commands_pending = False
            await self._send_commands(session_id)
        today = datetime.date.today().isoformat()
        text = "".join(b.text for b in prompt)
        if pad := os.environ.get("TINY_PAD"):
            lines = [f"line {n}: the quick brown fox jumps over the lazy dog" for n in range(2000)]
            lines[1200] = f"line 1200: the word of the day is {pad}"
            text = text + "\n" + "\n".join(lines)
        if os.environ.get("TINY_TITLE") == "1":
            await self.openai.chat.completions.create(
                model="tiny-title-model",
                messages=[
                    {"role": "system", "content": "Write a title for this conversation."},
                    {"role": "user", "content": text},
                ],
            )
        if self.own_ids:
            relative = self.cwd.lstrip("/") + "/notes.txt"
            await self.client.session_update(session_id, update_agent_message_text(relative))
        where = f" Working directory: {self.cwd}" if self.cwd_in_system else ""
        messages: Any = [
            {"role": "system", "content": f"{self.system} Today is {today}.{where}"},
            {"role": "user", "content": text},
        ]
        if raw_log := os.environ.get("TINY_RAW_LOG"):
            await self._raw_stream(session_id, messages, Path(raw_log))
        else:
            stream = await self.openai.chat.completions.create(
                model="tiny-model", stream=True, messages=messages
            )
            async for chunk in stream:
                for choice in chunk.choices:
                    if choice.delta.content:
                        await self.client.session_update(
                            session_id, update_agent_message_text(choice.delta.content)
                        )
        if tokens := os.environ.get("TINY_TOKENS"):
            usage = {"usage": {"model": "tiny-model", "outputTokens": int(tokens)}}
            await self.client.session_update(
                session_id,
                start_tool_call("count-1", "Count tokens", status="completed", raw_output=usage),
            )
        if split := os.environ.get("TINY_SPLIT"):
            await self.client.session_update(
                session_id, start_tool_call("cat-1", "Read notes.txt", status="in_progress")
            )
            delta = {"terminal_output_delta": {"data": "alpha beta\n", "terminal_id": "cat-1"}}
            output = update_tool_call("cat-1")
            output.field_meta = delta
            done = update_tool_call("cat-1", status="completed", raw_output={"exit_code": 0})
            if split == "one":
                done.field_meta = delta
                updates = [done]
            else:
                updates = [output, done]
            for update in updates:
                await self.client.session_update(session_id, update)
        if race := os.environ.get("TINY_RACE"):
            racing: list[Any] = [
                SessionInfoUpdate(session_update="session_info_update", title="A greeting"),
                AvailableCommandsUpdate(
                    session_update="available_commands_update",
                    available_commands=[AvailableCommand(name="plan", description="Plan it")],
                ),
            ]
            if race == "commands-first":
                racing.reverse()
            for update in racing:
                await self.client.session_update(session_id, update)
        return PromptResponse(stop_reason="end_turn")

    async def _raw_stream(self, session_id: str, messages: Any, raw_log: Path) -> None:
        """The listing and the streamed call read as bytes (kept in ``raw_log``), the
        answer's text parsed from them."""
        run = sum(1 for name in os.listdir(raw_log) if name.endswith(".sse"))
        listing = await self.openai.models.with_raw_response.list()
        (raw_log / f"{run:03d}.models.json").write_bytes(listing.http_response.content)
        received = bytearray()
        async with self.openai.chat.completions.with_streaming_response.create(
            model="tiny-model", stream=True, messages=messages
        ) as response:
            async for piece in response.iter_bytes():
                received += piece
        (raw_log / f"{run:03d}.sse").write_bytes(bytes(received))
        for line in bytes(received).decode().splitlines():
            if not line.startswith("data: {"):
                continue
            for choice in json.loads(line[len("data: ") :]).get("choices", []):
                if content := (choice.get("delta") or {}).get("content"):
                    await self.client.session_update(session_id, update_agent_message_text(content))


async def main() -> None:
    await acp.run_agent(TinyAgent())  # type: ignore[arg-type]
    if os.environ.get("TINY_IGNORE_EOF") == "1":
        await asyncio.Event().wait()  # until a signal ends the process


if __name__ == "__main__":
    sys.stdout.flush()
    asyncio.run(main())
