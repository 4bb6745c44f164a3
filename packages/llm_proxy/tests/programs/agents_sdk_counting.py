"""An OpenAI Agents SDK program: a coordinator that hands two counts to agents-as-tools
(called concurrently, in one model response), then hands off to a reporter agent.

Run as a user would: ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` point it at a model, and it
prints its final output as JSON on stdout. ``--identity-headers`` makes every agent send
agentreel's ``x-agentreel-*`` headers through the SDK's own ``ModelSettings.extra_headers``
(the counters name the coordinator as parent, with the spawn index of their tool call);
without it the proxy has only the requests' content to tell the sessions apart.

Tracing is off through the SDK's documented ``OPENAI_AGENTS_DISABLE_TRACING`` variable,
which whoever runs this sets (its exporter would reach the internet).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid

from agents import Agent, ModelSettings, Runner

PARENT = "x-agentreel-parent-session-id"
SESSION = "x-agentreel-session-id"
SPAWN_INDEX = "x-agentreel-spawn-index"


def settings(headers: dict[str, str] | None) -> ModelSettings:
    return ModelSettings(extra_headers=headers) if headers else ModelSettings()


def build(identity: bool) -> Agent:
    lead = str(uuid.uuid4())

    def child(index: int) -> dict[str, str] | None:
        if not identity:
            return None
        return {SESSION: str(uuid.uuid4()), PARENT: lead, SPAWN_INDEX: str(index)}

    apples = Agent(
        name="Apple counter",
        instructions="You count apples. Answer in one sentence.",
        model_settings=settings(child(0)),
    )
    pears = Agent(
        name="Pear counter",
        instructions="You count pears. Answer in one sentence.",
        model_settings=settings(child(1)),
    )
    reporter = Agent(
        name="Reporter",
        instructions="You write the final report from the counts in the conversation.",
        handoff_description="Writes the final report",
        # A handoff continues the coordinator's conversation: the same session, another lane.
        model_settings=settings({SESSION: lead} if identity else None),
    )
    return Agent(
        name="Coordinator",
        instructions=(
            "You coordinate fruit counts: call both counting tools at once, then hand off "
            "to the reporter."
        ),
        tools=[
            apples.as_tool(tool_name="count_apples", tool_description="Count the apples"),
            pears.as_tool(tool_name="count_pears", tool_description="Count the pears"),
        ],
        handoffs=[reporter],
        model_settings=settings({SESSION: lead} if identity else None),
    )


async def main(identity: bool) -> None:
    result = Runner.run_streamed(build(identity), "How many apples and pears are there?")
    async for _ in result.stream_events():
        pass
    print(json.dumps({"final": result.final_output, "last_agent": result.last_agent.name}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--identity-headers", action="store_true")
    asyncio.run(main(parser.parse_args().identity_headers))
