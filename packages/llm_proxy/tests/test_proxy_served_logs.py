"""Replay with ``sessions_root`` writes the session logs of what it served, as record does.

A harness diffs the logs a replay re-persists with its goldens; an agent behind the proxy
writes none of agentreel's, so the proxy writes them: same tree, same lineage, same
request headers and chunks as the recording — and nothing for a call it could not serve.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import msgspec
import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import PARENT_HEADER, SESSION_HEADER, SPAWN_INDEX_HEADER, start_proxy
from agentreel.session import RequestHeader, SessionLog, harvest_session_logs, without_texts

RULES = """
[[rule]]
match.last_user = "plan"
text = "Delegating."
tool_calls = [{ id = "call_a", name = "delegate", arguments = { task = "count apples" } }]
[[rule]]
match.last_user = "count apples"
text = "7 apples."
[[rule]]
match.last_tool_result = "7 apples"
text = "There are 7 apples."
"""


async def _program(base_url: str) -> list[str]:
    """A parent, one child (by identity headers), the parent again."""

    def client(**headers: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=base_url + "/v1", api_key="not-a-key", max_retries=0, default_headers=headers
        )

    async def ask(model: openai.AsyncOpenAI, messages: list[Any]) -> Any:
        completion = await model.chat.completions.create(model="m", messages=messages)
        return completion.choices[0].message

    parent = client(**{SESSION_HEADER: "parent-1"})
    child = client(
        **{SESSION_HEADER: "child-1", PARENT_HEADER: "parent-1", SPAWN_INDEX_HEADER: "0"}
    )
    history: list[Any] = [{"role": "user", "content": "plan the count"}]
    plan = await ask(parent, history)
    answer = await ask(child, [{"role": "user", "content": "count apples"}])
    history.append(plan.model_dump(exclude_none=True))
    history.append({"role": "tool", "tool_call_id": "call_a", "content": answer.content})
    final = await ask(parent, history)
    for model in (parent, child):
        await model.close()
    return [plan.content, answer.content, final.content]


def _served_view(logs: list[SessionLog]) -> list[SessionLog]:
    """What replay serves of recorded logs: the request headers without the whole message
    texts a recording keeps for a drift's excerpt (``without_texts``)."""
    return [
        dataclasses.replace(
            log,
            events=[
                msgspec.structs.replace(event, data=without_texts(event.data))
                if isinstance(event, RequestHeader)
                else event
                for event in log.events
            ],
        )
        for log in logs
    ]


def _shape(logs: list[SessionLog]) -> list[Any]:
    """Each log without ids and times: lineage by position, then every event's data."""
    ids = {log.header.id: position for position, log in enumerate(logs)}
    return [
        (
            ids.get(log.header.parent_session or ""),
            log.header.spawn_index,
            log.header.origin,
            [(type(event).__name__, msgspec.json.encode(event.data)) for event in log.events],
        )
        for log in logs
    ]


@pytest.mark.asyncio
async def test_replay_with_sessions_root_logs_what_the_recording_holds(tmp_path: Path) -> None:
    fixture, recorded_root, served_root = tmp_path / "fixture", tmp_path / "rec", tmp_path / "srv"
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy(
            "record", upstream=stub.base_url, sessions_root=recorded_root, cwd=str(tmp_path)
        ) as proxy:
            recorded = await _program(proxy.base_url)
        async with start_proxy(
            "record", upstream=stub.base_url, fixture=fixture, cwd=str(tmp_path)
        ) as proxy:
            await _program(proxy.base_url)
    async with start_proxy(
        "replay",
        fixture=fixture,
        sessions_root=served_root,
        report=tmp_path / "report.json",
        cwd=str(tmp_path),
    ) as proxy:
        replayed = await _program(proxy.base_url)
    assert replayed == recorded == ["Delegating.", "7 apples.", "There are 7 apples."]
    served = harvest_session_logs(served_root)
    assert len(served) == 2
    assert served[1].header.parent_session == served[0].header.id
    assert _shape(served) == _shape(_served_view(harvest_session_logs(recorded_root)))


@pytest.mark.asyncio
async def test_replay_without_sessions_root_writes_no_logs(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            await _program(proxy.base_url)
    before = _files(tmp_path)
    async with start_proxy("replay", fixture=fixture) as proxy:
        await _program(proxy.base_url)
    assert _files(tmp_path) == before


def _files(root: Path) -> set[Path]:
    return set(root.rglob("*"))
