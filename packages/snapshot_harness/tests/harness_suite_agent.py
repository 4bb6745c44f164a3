"""The reference agent with one test-only change, for the scenario suite's mechanism checks.

Run as ``python harness_suite_agent.py``; ``AGENTREEL_SUITE_TWEAK`` picks the change:

- ``anonymous``: every model call goes out without the caller's identity (no
  ``session_id``, ``parent_session_id`` or ``spawn_index``), like an agent that never
  tells the provider which session is calling.
- ``late-first-child``: a child with spawn index 0 waits a moment before its first model
  call, so concurrent siblings call the model in an order other than their spawn order
  (what a real agent with I/O before its first call does).

Anything else (or unset) runs the agent unchanged. It is never part of a committed
scenario: tests pass it as the scenario's ``agent`` through ``dataclasses.replace``.
"""

from __future__ import annotations

import asyncio
import os
import sys

import msgspec

from agentreel.acp_agent import _loop
from agentreel.acp_agent._main import main
from agentreel.llm import GenerateOptions

TWEAK = os.environ.get("AGENTREEL_SUITE_TWEAK", "")
FIRST_CHILD_DELAY = 0.3


def _install() -> None:
    session_class = _loop.AgentSession
    if TWEAK == "anonymous":
        identified = session_class._options

        def anonymous_options(self: _loop.AgentSession) -> GenerateOptions:
            return msgspec.structs.replace(
                identified(self), session_id=None, parent_session_id=None, spawn_index=None
            )

        session_class._options = anonymous_options  # type: ignore[method-assign]
    elif TWEAK == "late-first-child":
        run_turn = session_class.run_turn

        async def late_run_turn(self: _loop.AgentSession, prompt: str) -> _loop.TurnOutcome:
            if self.session.header.parent_session is not None and (
                self.session.header.spawn_index == 0
            ):
                await asyncio.sleep(FIRST_CHILD_DELAY)
            return await run_turn(self, prompt)

        session_class.run_turn = late_run_turn  # type: ignore[method-assign]


if __name__ == "__main__":
    _install()
    sys.exit(main())
