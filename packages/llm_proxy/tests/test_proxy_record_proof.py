"""A record through the proxy refuses what ``agentreel record`` refuses (issue 39): an
answer of the stub upstream to a request no rule matches is no model's answer, so an agent
that takes the error in is not recorded answering a rules-file mistake — the fixture is not
written and the error names the request and the rule closest to it."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy

RULES = '[[rule]]\nname = "greets"\nmatch = { last_user = "hello" }\ntext = "hi"\n'


@pytest.mark.asyncio
async def test_a_no_rule_answer_the_client_swallowed_refuses_the_fixture(
    fixture_dir: Path,
) -> None:
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            client = openai.AsyncOpenAI(
                base_url=proxy.openai_base_url, api_key="sk-proof-test-1", max_retries=0
            )
            reply = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hello"}]
            )
            assert reply.choices[0].message.content == "hi"
            with pytest.raises(openai.BadRequestError):  # the agent carries on regardless
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "goodbye"}]
                )
            await client.close()
    (error,) = proxy.errors
    assert "the stub upstream answered a request no rule matches" in error
    assert "last user message 'goodbye'" in error
    assert "the closest is rule 1 ('greets'), which fails on last_user = 'hello'" in error
    assert f"the fixture {fixture_dir} was not written" in error
    assert not (fixture_dir / "session.jsonl").exists()
