"""A plain-SDK script, not an ACP server: the prompt comes in argv, the answer goes to stdout.

Nothing here imports agentreel. A writer call drafts an answer; a reviewer — a subagent in
the same process — checks the draft; both answers are printed. Every request names its
session with ``x-agentreel-*`` headers (the reviewer also its parent and spawn index), so a
recording proxy files the reviewer as the writer's child. ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY`` point it at any OpenAI-compatible endpoint; ``EXAMPLE_MODEL`` names the
model (default ``gpt-4o-mini``).
"""

from __future__ import annotations

import os
import sys
import uuid

from openai import OpenAI


def ask(client: OpenAI, system: str, text: str, headers: dict[str, str]) -> str:
    reply = client.chat.completions.create(
        model=os.environ.get("EXAMPLE_MODEL", "gpt-4o-mini"),
        messages=[{"role": "system", "content": system}, {"role": "user", "content": text}],
        extra_headers=headers,
    )
    return reply.choices[0].message.content or ""


def main() -> None:
    prompt = sys.argv[1]
    writer = str(uuid.uuid4())
    with OpenAI(max_retries=0) as client:
        draft = ask(client, "You write short answers.", prompt, {"x-agentreel-session-id": writer})
        review = ask(
            client,
            "You review a draft in one line.",
            f"Review this draft: {draft}",
            {
                "x-agentreel-session-id": str(uuid.uuid4()),
                "x-agentreel-parent-session-id": writer,
                "x-agentreel-spawn-index": "0",
            },
        )
    print(f"draft: {draft}")
    print(f"review: {review}")
    print(f"working on {uuid.uuid4()}", file=sys.stderr)  # stderr: kept apart, not golden


if __name__ == "__main__":
    main()
