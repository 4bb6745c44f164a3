"""The answers of the endpoints that are no model call: ``GET /v1/models`` and
``POST /v1/messages/count_tokens``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentreel.llm.wire._sse import json_bytes


def models_listing_body(models: Sequence[str]) -> bytes:
    """A ``GET /v1/models`` answer naming ``models``, in a shape both SDKs parse: OpenAI's
    ``list`` of ``model`` objects, with the fields Anthropic's listing adds (``type``,
    ``display_name``, ``created_at``, ``has_more``, ``first_id``, ``last_id``)."""
    data = [
        {
            "id": model,
            "object": "model",
            "type": "model",
            "created": 0,
            "created_at": "1970-01-01T00:00:00Z",
            "display_name": model,
            "owned_by": "agentreel",
        }
        for model in models
    ]
    return json_bytes(
        {
            "object": "list",
            "data": data,
            "has_more": False,
            "first_id": models[0] if models else None,
            "last_id": models[-1] if models else None,
        }
    )


def count_tokens_body(body: dict[str, Any]) -> bytes:
    """A ``POST /v1/messages/count_tokens`` answer: one token per word of every string in
    the request's ``system``, ``messages`` and ``tools`` (their ``role`` and ``type`` names
    aside) — deterministic, not a tokenizer."""
    words = words_in([body.get(key) for key in ("system", "messages", "tools")], ("role", "type"))
    return json_bytes({"input_tokens": words})


def words_in(value: Any, skipped_keys: tuple[str, ...]) -> int:
    """The words of every string in ``value`` (a JSON value), the values of
    ``skipped_keys`` aside: the stub's and replay's deterministic token count."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, dict):
        return sum(
            words_in(item, skipped_keys) for key, item in value.items() if key not in skipped_keys
        )
    if isinstance(value, list):
        return sum(words_in(item, skipped_keys) for item in value)
    return 0
