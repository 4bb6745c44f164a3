"""A pydantic-ai program: a lead agent delegating two counts to a helper agent, which
pydantic-ai runs concurrently (both tool calls come in one model response).

Run as a user would: ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` point it at a model (Chat
Completions), and it prints its final output as JSON on stdout. ``--identity-headers``
sends agentreel's ``x-agentreel-*`` headers through pydantic-ai's ``extra_headers`` model
setting: each helper run its own session id, the lead's as parent and the spawn index of
its tool call (numbered before the first await, so in the order the lead issued them).
Without it the proxy has only the requests' content to tell the sessions apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid
from dataclasses import dataclass

from pydantic_ai import Agent, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

PARENT = "x-agentreel-parent-session-id"
SESSION = "x-agentreel-session-id"
SPAWN_INDEX = "x-agentreel-spawn-index"


@dataclass
class Team:
    identity: bool
    lead: str
    helpers: int = 0

    def settings(self, headers: dict[str, str]) -> ModelSettings | None:
        return ModelSettings(extra_headers=headers) if self.identity else None


def build(model: OpenAIChatModel) -> Agent[Team, str]:
    helper = Agent(model, deps_type=Team, instructions="You count one kind of fruit.")
    lead = Agent(
        model,
        deps_type=Team,
        instructions="You coordinate counting: ask a helper once per fruit, all at once.",
    )

    @lead.tool
    async def ask_helper(ctx: RunContext[Team], task: str) -> str:
        """Give one counting task to a helper agent; returns its answer."""
        index = ctx.deps.helpers
        ctx.deps.helpers += 1
        headers = {SESSION: str(uuid.uuid4()), PARENT: ctx.deps.lead, SPAWN_INDEX: str(index)}
        result = await helper.run(task, deps=ctx.deps, model_settings=ctx.deps.settings(headers))
        return result.output

    return lead


async def main(identity: bool) -> None:
    model = OpenAIChatModel(
        "gpt-test",
        provider=OpenAIProvider(
            base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"]
        ),
    )
    team = Team(identity=identity, lead=str(uuid.uuid4()))
    result = await build(model).run(
        "How many apples and pears are there?",
        deps=team,
        model_settings=team.settings({SESSION: team.lead}),
    )
    print(json.dumps({"final": result.output, "helpers": team.helpers}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--identity-headers", action="store_true")
    asyncio.run(main(parser.parse_args().identity_headers))
