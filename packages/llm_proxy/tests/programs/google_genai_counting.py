"""A google-genai program: a lead agent delegating two counts to helper agents, which it
runs concurrently (both function calls come in one model response), each helper its own
``generate_content`` conversation on the Gemini API.

Run as a user would: ``GOOGLE_GEMINI_BASE_URL`` / ``GEMINI_API_KEY`` point the SDK at a
model, and it prints its final output as JSON on stdout. ``--identity-headers`` sends
agentreel's ``x-agentreel-*`` headers through the SDK's per-call ``http_options``: each
helper its own session id, the lead's as parent and the spawn index of its function call.
Without it the proxy has only the requests' content to tell the sessions apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid

from google import genai
from google.genai import types

PARENT = "x-agentreel-parent-session-id"
SESSION = "x-agentreel-session-id"
SPAWN_INDEX = "x-agentreel-spawn-index"
MODEL = "gemini-test"

ASK_HELPER = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="ask_helper",
            description="Give one counting task to a helper agent; returns its answer.",
            parameters_json_schema={
                "type": "object",
                "properties": {"task": {"type": "string"}},
                "required": ["task"],
            },
        )
    ]
)


def _config(
    headers: dict[str, str] | None, system: str, tools: types.ToolListUnion | None = None
) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(
        system_instruction=system,
        tools=tools,
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        http_options=types.HttpOptions(headers=headers) if headers else None,
    )


async def helper(client: genai.Client, task: str, headers: dict[str, str] | None) -> str:
    answer = await client.aio.models.generate_content(
        model=MODEL, contents=task, config=_config(headers, "You count one kind of fruit.")
    )
    return answer.text or ""


async def main(identity: bool) -> None:
    client = genai.Client()  # GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL from the environment
    lead = str(uuid.uuid4())
    lead_headers = {SESSION: lead} if identity else None
    config = _config(
        lead_headers, "You coordinate counting: ask a helper once per fruit, all at once.",
        [ASK_HELPER],
    )  # fmt: skip
    contents: list[types.Content] = [
        types.Content(role="user", parts=[types.Part(text="How many apples and pears are there?")])
    ]
    plan = await client.aio.models.generate_content(model=MODEL, contents=contents, config=config)
    assert plan.candidates
    assert plan.candidates[0].content
    parts = plan.candidates[0].content.parts or []
    calls = [part.function_call for part in parts if part.function_call is not None]
    answers = await asyncio.gather(
        *(
            helper(
                client,
                str((call.args or {})["task"]),
                {SESSION: str(uuid.uuid4()), PARENT: lead, SPAWN_INDEX: str(index)}
                if identity
                else None,
            )
            for index, call in enumerate(calls)
        )
    )
    contents.append(plan.candidates[0].content)
    contents.append(
        types.Content(
            role="user",
            parts=[
                types.Part.from_function_response(name=call.name or "", response={"output": text})
                for call, text in zip(calls, answers, strict=True)
            ],
        )
    )
    final = await client.aio.models.generate_content(model=MODEL, contents=contents, config=config)
    print(json.dumps({"final": final.text, "helpers": len(calls)}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--identity-headers", action="store_true")
    asyncio.run(main(parser.parse_args().identity_headers))
