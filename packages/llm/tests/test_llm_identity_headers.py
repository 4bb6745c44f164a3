"""The adapters' opt-in ``send_identity``: the caller identity of ``GenerateOptions`` as
``x-agentreel-*`` headers (what the proxy binds by), over both SDK adapters."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentreel.brand import SessionId
from agentreel.llm import (
    PARENT_HEADER,
    SESSION_HEADER,
    SPAWN_INDEX_HEADER,
    GenerateOptions,
    Message,
)
from agentreel.llm.stub import StubServer

RULES = '[[rule]]\ntext = "ok"\n'


def _options(**identity: object) -> GenerateOptions:
    return GenerateOptions(model="stub-model", messages=(Message.user("hi"),), **identity)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_identity_headers_are_sent_only_when_asked(connect: Callable[..., object]) -> None:
    with StubServer.from_toml(RULES) as server:
        asked = connect(server, send_identity="true")
        silent = connect(server)
        child = _options(
            session_id=SessionId("child-1"), parent_session_id=SessionId("main-1"), spawn_index=2
        )
        for provider in (asked, silent):
            text = [c async for c in provider.stream(child)]  # type: ignore[attr-defined]
            assert text
        anonymous = [c async for c in asked.stream(_options())]  # type: ignore[attr-defined]
        assert anonymous
        for provider in (asked, silent):
            await provider.aclose()  # type: ignore[attr-defined]
        first, second, third = (r.headers for r in server.requests)
    assert (first[SESSION_HEADER], first[PARENT_HEADER], first[SPAWN_INDEX_HEADER]) == (
        "child-1",
        "main-1",
        "2",
    )
    assert not any(name in second for name in (SESSION_HEADER, PARENT_HEADER, SPAWN_INDEX_HEADER))
    assert SESSION_HEADER not in third  # an anonymous caller sends nothing


def test_send_identity_text_must_be_a_known_word(connect: Callable[..., object]) -> None:
    with StubServer.from_toml(RULES) as server, pytest.raises(ValueError, match="send_identity"):
        connect(server, send_identity="perhaps")
