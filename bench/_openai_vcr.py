"""The stub server, the real ``openai`` adapter, and a vcrpy-visible variant of it.

The ``openai`` SDK 3.x talks through ``httpx2`` by default, which vcrpy does not patch;
it still accepts a legacy ``httpx`` client, which vcrpy does patch. ``VcrVisibleOpenAI``
is the real adapter (same request building, same wire → chunk mapping) with only that
transport swapped, so a vcrpy cassette sees and replays exactly the calls the adapter
makes.

``InMemoryOpenAI`` is the same adapter again over an in-memory transport that answers every
request with one fixed SSE body: the client's own work per call (request building, the
SDK's SSE parsing and pydantic models, the wire → chunk mapping) with no server, no socket
and no cassette — the floor under anything that replays to this client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import openai

from agentreel.llm import Chunk, GenerateOptions, Message
from agentreel.llm._openai import OpenAIProvider

TEXT_DELTAS = 16
CHUNK_SIZE = 8
# 16 deltas of 8 characters: block-start, 16 text-deltas, block-end, usage, finish = 20.
ANSWER = "".join(f"word{n:03d} " for n in range(TEXT_DELTAS))[: TEXT_DELTAS * CHUNK_SIZE]
CHUNKS_PER_CALL = TEXT_DELTAS + 4
# SPEC 9 compares replay with vcrpy at 1,000 recorded calls: vcrpy's cost per call grows
# with its cassette, so a ratio against it means something only at a stated size.
VCR_COMPARISON_CALLS = 1000


def stub_rules(delay_ms: int = 0) -> str:
    """One rule answering every request with ``ANSWER`` in ``TEXT_DELTAS`` deltas."""
    return (
        "[[rule]]\n"
        'name = "bench answer"\n'
        f'text = "{ANSWER}"\n'
        f"chunk_size = {CHUNK_SIZE}\n"
        f"delay_ms = {delay_ms}\n"
    )


class VcrVisibleOpenAI(OpenAIProvider):
    """The ``openai`` adapter over a legacy ``httpx.AsyncClient`` (which vcrpy patches)."""

    def _make_client(self) -> openai.AsyncOpenAI:
        client: Any = httpx.AsyncClient(timeout=self.settings.timeout)
        return openai.AsyncOpenAI(
            api_key="bench-not-a-secret", base_url=self.base_url, max_retries=0, http_client=client
        )


# vcrpy's default matchers compare method and URI only, and every model call goes to one
# URL: it answers in recorded order. Matching the body too is what keeps calls apart.
VCR_MATCH_ON_BODY = ("method", "scheme", "host", "port", "path", "query", "body")


class InMemoryOpenAI(OpenAIProvider):
    """The ``openai`` adapter over a transport that answers with ``frames`` from memory."""

    def __init__(self, frames: Sequence[bytes], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._body = b"".join(frames)

    def _make_client(self) -> openai.AsyncOpenAI:
        def answer(request: httpx.Request) -> httpx.Response:
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=self._body
            )

        client: Any = httpx.AsyncClient(
            transport=httpx.MockTransport(answer), timeout=self.settings.timeout
        )
        return openai.AsyncOpenAI(
            api_key="bench-not-a-secret", base_url=self.base_url, max_retries=0, http_client=client
        )


def question(number: int) -> GenerateOptions:
    return GenerateOptions(model="stub-model", messages=(Message.user(f"question {number}"),))


async def drain(stream: AsyncIterator[Chunk]) -> list[Chunk]:
    return [chunk async for chunk in stream]
