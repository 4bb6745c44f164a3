"""One server, many runs: each run under its own ``/r/<run>/`` base URL is a proxy of its own.

A harness keeps one proxy server per worker process and opens a run per scenario; the runs
share the listening socket and nothing else. Two runs here answer the *same* requests from
recordings that differ only in what the model said, so a request served by the wrong run
would show as the other run's answer, log or report entry.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from agentreel.llm import TextDelta
from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import (
    PARENT_HEADER,
    SESSION_HEADER,
    SPAWN_INDEX_HEADER,
    ProxyServer,
    ProxySettings,
    start_proxy,
)
from agentreel.llm_replay import read_report
from agentreel.session import AssistantChunk, harvest_session_logs, load_session_log

RULES = """
[[rule]]
match.last_user = "plan"
text = "Delegating."
tool_calls = [{{ id = "call_a", name = "delegate", arguments = {{ task = "count the fruit" }} }}]
[[rule]]
match.last_user = "count"
text = "{count}"
[[rule]]
match.last_tool_result_regex = "."
text = "The count is {count}"
"""
COUNTS = {"a": "7 apples.", "b": "9 pears."}


async def _program(base_url: str, meet: asyncio.Barrier) -> list[str]:
    """A parent, its child (session id from the ``/s/<token>/`` prefix inside the run's
    URL, lineage by headers — its first message is not the delegating call's text, so only
    the headers can place it), the parent again; ``meet`` makes two programs interleave."""

    def client(url: str, **headers: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=url + "/v1", api_key="not-a-key", max_retries=0, default_headers=headers
        )

    async def ask(model: openai.AsyncOpenAI, messages: list[Any]) -> Any:
        await meet.wait()
        completion = await model.chat.completions.create(model="m", messages=messages)
        return completion.choices[0].message

    parent = client(base_url, **{SESSION_HEADER: "parent-1"})
    child = client(f"{base_url}/s/child-1", **{PARENT_HEADER: "parent-1", SPAWN_INDEX_HEADER: "0"})
    history: list[Any] = [{"role": "user", "content": "plan the count"}]
    plan = await ask(parent, history)
    answer = await ask(child, [{"role": "user", "content": "count"}])
    history.append(plan.model_dump(exclude_none=True))
    history.append({"role": "tool", "tool_call_id": "call_a", "content": answer.content})
    final = await ask(parent, history)
    for model in (parent, child):
        await model.close()
    return [plan.content, answer.content, final.content]


def _expected(name: str) -> list[str]:
    return ["Delegating.", COUNTS[name], f"The count is {COUNTS[name]}"]


def _served_text(root: Path) -> str:
    """Every text the served session logs under ``root`` hold, joined."""
    return "".join(
        event.data.chunk.text
        for log in harvest_session_logs(root)
        for event in log.events
        if isinstance(event, AssistantChunk) and isinstance(event.data.chunk, TextDelta)
    )


async def _record_both(tmp_path: Path) -> dict[str, Path]:
    """Both fixtures recorded at once, by two record runs of one server."""
    fixtures = {name: tmp_path / f"fixture-{name}" for name in COUNTS}
    with (
        StubServer.from_toml(RULES.format(count=COUNTS["a"])) as stub_a,
        StubServer.from_toml(RULES.format(count=COUNTS["b"])) as stub_b,
    ):
        server = await ProxyServer().start()
        try:
            runs = {
                name: await server.open_run(
                    ProxySettings(
                        mode="record", upstream=stub.base_url, fixture=fixtures[name], cwd="/w"
                    )
                )
                for name, stub in (("a", stub_a), ("b", stub_b))
            }
            meet = asyncio.Barrier(2)
            got = await asyncio.gather(*(_program(run.base_url, meet) for run in runs.values()))
            assert got == [_expected("a"), _expected("b")]
            for run in runs.values():
                await server.close_run(run)
                assert run.errors == []
        finally:
            await server.close()
    return fixtures


@pytest.mark.asyncio
async def test_two_runs_at_once_each_get_their_own_answers_logs_and_report(
    tmp_path: Path,
) -> None:
    fixtures = await _record_both(tmp_path)
    for name in COUNTS:
        parent = load_session_log(fixtures[name] / "session.jsonl").header
        child = load_session_log(fixtures[name] / "session.1.jsonl").header
        assert COUNTS[name] in (fixtures[name] / "session.1.jsonl").read_text()
        # The child named by its /s/<token>/ prefix keeps the lineage its headers give.
        assert (child.parent_session, child.spawn_index, child.origin) == (parent.id, 0, "spawn")
        assert parent.parent_session is None
    server = await ProxyServer().start()
    try:
        runs = {
            name: await server.open_run(
                ProxySettings(
                    mode="replay",
                    fixture=fixtures[name],
                    sessions_root=tmp_path / f"served-{name}",
                    report=tmp_path / f"report-{name}.json",
                    scenario=f"scenario-{name}",
                    cwd="/w",
                )
            )
            for name in COUNTS
        }
        assert runs["a"].base_url != runs["b"].base_url
        assert runs["a"].port == runs["b"].port == server.port
        meet = asyncio.Barrier(2)
        got = await asyncio.gather(*(_program(run.base_url, meet) for run in runs.values()))
        assert got == [_expected("a"), _expected("b")]
        # Closing one run writes exactly its report and logs; the other is still open.
        await server.close_run(runs["a"])
        assert server.runs == 1
        report_a = read_report(tmp_path / "report-a.json")
        assert report_a.scenario == "scenario-a"
        assert report_a.errors == []
        assert sorted((s.calls, s.consumed) for s in report_a.scripts) == [(1, 1), (2, 2)]
        assert COUNTS["a"] in _served_text(tmp_path / "served-a")
        assert COUNTS["b"] not in _served_text(tmp_path / "served-a")
    finally:
        await server.close()  # closes run b too: its logs and report are written now
    report_b = read_report(tmp_path / "report-b.json")
    assert report_b.scenario == "scenario-b"
    assert report_b.errors == []
    assert sorted((s.calls, s.consumed) for s in report_b.scripts) == [(1, 1), (2, 2)]
    assert COUNTS["b"] in _served_text(tmp_path / "served-b")
    assert COUNTS["a"] not in _served_text(tmp_path / "served-b")


async def _post(url: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as response:
        return response.status, await response.json()


def _chat_body() -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "plan the count"}]}


@pytest.mark.asyncio
async def test_a_finished_or_unknown_run_is_refused_by_name_and_never_served_by_another(
    tmp_path: Path,
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(RULES.format(count=COUNTS["a"])) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            await _program(proxy.base_url, asyncio.Barrier(1))
    server = await ProxyServer().start()
    try:
        finished = await server.open_run(
            ProxySettings(mode="replay", fixture=fixture, report=tmp_path / "finished.json")
        )
        other = await server.open_run(
            ProxySettings(mode="replay", fixture=fixture, report=tmp_path / "other.json")
        )
        await server.close_run(finished)
        gone = await _post(f"{finished.base_url}/v1/chat/completions", _chat_body())
        unknown = await _post(f"{server.base_url}/r/run99-none/v1/chat/completions", _chat_body())
        bare = await _post(f"{server.base_url}/v1/chat/completions", _chat_body())
        anthropic_gone = await _post(
            f"{finished.base_url}/v1/messages",
            {"model": "m", "max_tokens": 5, "messages": _chat_body()["messages"]},
        )
        assert finished.token is not None
        assert other.token is not None
        assert gone[0] == 404
        assert finished.token in gone[1]["error"]["message"]
        assert "has finished" in gone[1]["error"]["message"]
        assert unknown[0] == 404
        assert "no run 'run99-none'" in unknown[1]["error"]["message"]
        assert other.token in unknown[1]["error"]["message"]  # the open runs are named
        assert bare[0] == 404
        assert "names none" in bare[1]["error"]["message"]
        assert anthropic_gone[0] == 404
        assert anthropic_gone[1]["type"] == "error"  # the API's own error format
        assert finished.token in anthropic_gone[1]["error"]["message"]
        # The SDK does not retry it, and says which run.
        sdk = openai.AsyncOpenAI(
            base_url=finished.openai_base_url, api_key="not-a-key", max_retries=0
        )
        with pytest.raises(openai.NotFoundError, match=finished.token):
            await sdk.chat.completions.create(model="m", messages=_chat_body()["messages"])
        await sdk.close()
    finally:
        await server.close()
    # None of those requests reached the run still open.
    assert [s.consumed for s in read_report(tmp_path / "other.json").scripts] == [0, 0]
    assert read_report(tmp_path / "other.json").errors == []


@pytest.mark.asyncio
async def test_a_one_run_proxy_serves_at_its_root_and_refuses_a_run_prefix(
    tmp_path: Path,
) -> None:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(RULES.format(count=COUNTS["a"])) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert proxy.base_url == f"http://127.0.0.1:{proxy.port}"
            await _program(proxy.base_url, asyncio.Barrier(1))
    async with start_proxy("replay", fixture=fixture, report=tmp_path / "r.json") as proxy:
        prefixed = await _post(f"{proxy.base_url}/r/x/v1/chat/completions", _chat_body())
        assert prefixed[0] == 404
        assert "no run 'x'" in prefixed[1]["error"]["message"]
        assert await _program(proxy.base_url, asyncio.Barrier(1)) == _expected("a")
    assert json.loads((tmp_path / "r.json").read_text())["errors"] == []
