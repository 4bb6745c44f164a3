"""A LangGraph fan-out agent: a supervisor hands two tasks to two workers that run at once.

Nothing here imports agentreel: this is "your own agent" on LangGraph, called as a function
(no ACP front, no server). The supervisor asks the model to split the request with its
``assign`` tool; LangGraph's ``Send`` starts one ``worker`` per task in the same superstep,
so the workers' model calls run concurrently; the supervisor then combines their answers,
continuing its own conversation with the tool results.

The model is any OpenAI-compatible endpoint: pass an ``openai.AsyncOpenAI`` client. Identity
for a recording proxy is optional: ``headers(session_id, parent, spawn_index)`` returns the
extra HTTP headers each call carries (the supervisor's session, and each worker's with its
parent and the order the supervisor assigned it) — agentreel's fixture passes
``agentreel.headers``; without it the proxy binds the workers by their tasks.
"""

from __future__ import annotations

import json
import operator
import uuid
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from openai import AsyncOpenAI

Headers = Callable[..., dict[str, str]]
SUPERVISOR_PROMPT = (
    "You supervise two workers. Split the request into independent tasks with assign "
    "(one call per task, all in one response); then combine the workers' answers briefly."
)
WORKER_PROMPT = "You are a worker. Do the task you are given. Answer in one line."
ASSIGN = {
    "type": "function",
    "function": {
        "name": "assign",
        "description": "Give one self-contained task to a worker.",
        "parameters": {
            "type": "object",
            "properties": {"task": {"type": "string"}},
            "required": ["task"],
        },
    },
}


class State(TypedDict, total=False):
    request: str
    session: str
    messages: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    results: Annotated[list[tuple[int, str]], operator.add]
    answer: str


class Task(TypedDict):
    session: str
    index: int
    task: str


def build_graph(
    client: AsyncOpenAI, model: str = "gpt-4o-mini", headers: Headers | None = None
) -> Any:
    def extra(session: str, parent: str | None = None, index: int | None = None) -> dict[str, str]:
        return headers(session, parent, index) if headers is not None else {}

    async def supervise(state: State) -> State:
        messages = [
            {"role": "system", "content": SUPERVISOR_PROMPT},
            {"role": "user", "content": state["request"]},
        ]
        reply = await client.chat.completions.create(
            model=model, messages=messages, tools=[ASSIGN], extra_headers=extra(state["session"])
        )
        message = reply.choices[0].message
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in message.tool_calls or []
            if c.type == "function"
        ]
        messages.append({"role": "assistant", "content": message.content, "tool_calls": calls})
        return {"messages": messages, "tasks": calls}

    def fan_out(state: State) -> list[Send]:
        return [
            Send(
                "worker",
                Task(
                    session=state["session"],
                    index=index,
                    task=json.loads(call["function"]["arguments"])["task"],
                ),
            )
            for index, call in enumerate(state["tasks"])
        ]

    async def worker(task: Task) -> State:
        reply = await client.chat.completions.create(
            model=model,
            messages=[
                {"role": "system", "content": WORKER_PROMPT},
                {"role": "user", "content": task["task"]},
            ],
            extra_headers=extra(str(uuid.uuid4()), task["session"], task["index"]),
        )
        return {"results": [(task["index"], reply.choices[0].message.content or "")]}

    async def combine(state: State) -> State:
        answers = dict(state["results"])
        messages = state["messages"] + [
            {"role": "tool", "tool_call_id": call["id"], "content": answers[index]}
            for index, call in enumerate(state["tasks"])
        ]
        reply = await client.chat.completions.create(
            model=model, messages=messages, tools=[ASSIGN], extra_headers=extra(state["session"])
        )
        return {"answer": reply.choices[0].message.content or ""}

    graph = StateGraph(State)
    graph.add_node("supervise", supervise)
    graph.add_node("worker", worker)
    graph.add_node("combine", combine)
    graph.add_edge(START, "supervise")
    graph.add_conditional_edges("supervise", fan_out, ["worker"])
    graph.add_edge("worker", "combine")
    graph.add_edge("combine", END)
    return graph.compile()


async def run(
    request: str, client: AsyncOpenAI, model: str = "gpt-4o-mini", headers: Headers | None = None
) -> str:
    """Answer ``request`` with a supervisor and its workers; returns the combined answer."""
    graph = build_graph(client, model, headers)
    state = await graph.ainvoke({"request": request, "session": str(uuid.uuid4()), "results": []})
    return str(state["answer"])


if __name__ == "__main__":
    import asyncio
    import os
    import sys

    print(
        asyncio.run(
            run(
                " ".join(sys.argv[1:]),
                AsyncOpenAI(),
                os.environ.get("EXAMPLE_MODEL", "gpt-4o-mini"),
            )
        )
    )
