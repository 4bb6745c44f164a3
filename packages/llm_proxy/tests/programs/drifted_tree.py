"""The three-level tree every drifted test runs through the proxy (SPEC 20): one program,
shared by the standalone proxy's, the fixture's and the proxied scenario's tests.

main ("Plan a trip.") delegates by tool calls to route and hotel, which run at once (two
threads); route delegates to weather. Each subagent's first message is the task its
parent's tool call handed on, so a caller without identity headers is placed by content
and lineage (the proxy's rule for headerless callers, SPEC 11). The weather agent's system
prompt is the grandchild's prompt the tests change: ``coast`` or ``inland``; the stub rules
beside this file (``drifted_tree.toml``) answer each differently, so a changed weather
answer changes route's next request and, through it, main's.

As a program: ``python drifted_tree.py coast|inland [--headers]``, the model at
``$OPENAI_BASE_URL`` with ``$OPENAI_API_KEY`` (the official ``openai`` SDK reads both); it
prints main's final answer. ``--headers`` names every session by the ``x-agentreel-*``
identity headers; without it no request carries any. Imported: ``run(client, weather,
headers=..., route=...)`` (``route``: the route agent's prompt — one that asks no weather
agent, or two).
"""

from __future__ import annotations

import json
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai

from agentreel.llm import PARENT_HEADER, SESSION_HEADER, SPAWN_INDEX_HEADER

RULES = Path(__file__).with_suffix(".toml")
MODEL = "stub-model"
WEATHER = {
    "coast": "You report the weather on the coast.",
    "inland": "You report the weather inland.",
}
ANSWER = {
    "coast": "Trip: the coast road to Hotel Miramar.",
    "inland": "Trip: the inland road to Hotel Miramar.",
}
DELEGATE: Any = {
    "type": "function",
    "function": {
        "name": "delegate",
        "description": "Hand a task to a subagent",
        "parameters": {
            "type": "object",
            "properties": {"task": {"type": "string"}},
            "required": ["task"],
        },
    },
}
TOOLS: list[Any] = [DELEGATE]
MAIN = "You plan trips."
HOTEL = "You pick hotels."
ROUTE = {
    "plan": "You plan routes.",  # asks one weather agent
    "direct": "You plan routes without asking anyone.",  # asks none: weather is dropped
    "twice": "You plan routes from two forecasts.",  # a second child, new
}


def run(client: openai.OpenAI, weather: str, *, headers: bool = False, route: str = "plan") -> str:
    """Run the tree on ``client`` (``route``: the route agent's prompt, ``ROUTE``); main's
    final answer."""

    def agent(system: str, task: str, parent: str | None, index: int | None) -> str:
        session = str(uuid.uuid4())
        extra = {SESSION_HEADER: session}
        if parent is not None:
            extra |= {PARENT_HEADER: parent, SPAWN_INDEX_HEADER: str(index)}
        messages: list[Any] = [
            {"role": "system", "content": system},
            {"role": "user", "content": task},
        ]
        delegates = system in (MAIN, *ROUTE.values())
        while True:
            if delegates:
                reply = client.chat.completions.create(
                    model=MODEL,
                    messages=messages,
                    tools=TOOLS,
                    extra_headers=extra if headers else None,
                )
            else:
                reply = client.chat.completions.create(
                    model=MODEL, messages=messages, extra_headers=extra if headers else None
                )
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            calls: list[Any] = list(message.tool_calls)  # function calls: the tool is one
            tasks = [json.loads(call.function.arguments)["task"] for call in calls]
            # Children at once, each numbered by its parent's tool call.
            with ThreadPoolExecutor(len(tasks)) as pool:
                started = [
                    pool.submit(agent, _system_for(task, weather, route), task, session, index)
                    for index, task in enumerate(tasks)
                ]
                answers = [future.result() for future in started]
            for call, answer in zip(calls, answers, strict=True):
                messages.append({"role": "tool", "tool_call_id": call.id, "content": answer})

    return agent(MAIN, "Plan a trip.", None, None)


def _system_for(task: str, weather: str, route: str) -> str:
    if "weather" in task:
        return WEATHER[weather]
    return ROUTE[route] if "route" in task else HOTEL


if __name__ == "__main__":
    arguments = sys.argv[1:]
    print(run(openai.OpenAI(), arguments[0], headers="--headers" in arguments))
