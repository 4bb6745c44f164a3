"""A tiny agent whose subagents are processes of their own (run by test_proxy_processes).

``parent BASE_URL``: asks the model, which delegates two tasks; starts one child process
per task concurrently, each with the parent's session id and its spawn index; sends the
children's answers back; prints the outcome as JSON. ``child BASE_URL PARENT INDEX TASK``:
one model call with that identity; prints the answer. Plain ``openai`` SDK, identity in
``x-agentreel-*`` headers — what any agent can do to run its children through the proxy.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import openai

TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "delegate",
            "description": "Hand a task to a subagent process",
            "parameters": {"type": "object", "properties": {"task": {"type": "string"}}},
        },
    }
]


def client(base_url: str, headers: dict[str, str]) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=base_url + "/v1", api_key="sk-process-test", max_retries=0, default_headers=headers
    )


def child(base_url: str, parent: str, index: str, task: str) -> int:
    headers = {
        "x-agentreel-session-id": str(uuid.uuid4()),
        "x-agentreel-parent-session-id": parent,
        "x-agentreel-spawn-index": index,
    }
    try:
        reply = client(base_url, headers).chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": task}]
        )
    except openai.APIStatusError as error:
        print(json.dumps({"error": error.status_code, "body": error.body}))
        return 1
    print(json.dumps({"answer": reply.choices[0].message.content}))
    return 0


async def parent(base_url: str) -> int:
    session = str(uuid.uuid4())
    model = client(base_url, {"x-agentreel-session-id": session})
    messages: Any = [{"role": "user", "content": "How many apples and pears are there?"}]
    first = model.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS)
    calls = first.choices[0].message.tool_calls or []
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "child",
            base_url,
            session,
            str(index),
            json.loads(call.function.arguments)["task"],  # type: ignore[union-attr]
            stdout=asyncio.subprocess.PIPE,
        )
        for index, call in enumerate(calls)
    ]
    outputs = await asyncio.gather(*(c.communicate() for c in children))
    results = [json.loads(out.decode()) for out, _ in outputs]
    if any("error" in r for r in results):
        print(json.dumps({"children": results}))
        return 1
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages += [
        {"role": "tool", "tool_call_id": call.id, "content": result["answer"]}
        for call, result in zip(calls, results, strict=True)
    ]
    final = model.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS)
    answers = [r["answer"] for r in results]
    print(json.dumps({"children": answers, "final": final.choices[0].message.content}))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "child":
        sys.exit(child(*sys.argv[2:6]))
    sys.exit(asyncio.run(parent(sys.argv[2])))
