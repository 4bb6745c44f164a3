"""``partial_lanes``: a side call that varies with timing (a title request an agent makes or
skips) may be consumed partly or not at all — the report says "partial" for it and the
consumption check lets it be, while any other unconsumed script still fails."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import SESSION_HEADER, ProxyConfigError, start_proxy
from agentreel.llm_replay import UnconsumedScriptError, read_report

RULES = """
[[rule]]
match.model = "small-model"
text = "Fixing the parser bug"
[[rule]]
match.last_user = "fix the bug"
text = "I will read the parser first."
tool_calls = [{ name = "read_file", arguments = { path = "parser.py" } }]
[[rule]]
match.last_tool_result = "def parse"
text = "Fixed."
"""
TITLE_SYSTEM = "Write a five-word title for the conversation."


async def _run(base_url: str, *, title: bool, main_calls: int = 2) -> None:
    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key="sk-partial-lanes-test",
        max_retries=0,
        default_headers={SESSION_HEADER: "one-session"},
    )
    messages: Any = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "fix the bug"},
    ]
    first = await client.chat.completions.create(model="big-model", messages=messages)
    if title:
        await client.chat.completions.create(
            model="small-model",
            messages=[
                {"role": "system", "content": TITLE_SYSTEM},
                {"role": "user", "content": "fix the bug"},
            ],
        )
    if main_calls > 1:
        message = first.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or []:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "def parse(): 1"})
        await client.chat.completions.create(model="big-model", messages=messages)
    await client.close()


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(RULES) as stub:

        async def record() -> None:
            async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
                await _run(proxy.openai_base_url, title=True)

        asyncio.run(record())
    assert sorted(p.name for p in fixture.glob("session*.jsonl")) == [
        "session.1.jsonl",
        "session.jsonl",
    ]
    return fixture


@pytest.mark.asyncio
async def test_a_partial_lane_left_unconsumed_passes_and_is_reported_partial(
    recorded: Path, tmp_path: Path
) -> None:
    report = tmp_path / "partial.json"
    served = tmp_path / "served"
    async with start_proxy(
        "replay", fixture=recorded, report=report, partial_lanes=["title"], sessions_root=served
    ) as proxy:
        await _run(proxy.openai_base_url, title=False)
    outcome = read_report(report)
    assert outcome.ok
    outcome.assert_consumed()
    scripts = {s.file: (s.calls, s.consumed, s.partial) for s in outcome.scripts}
    assert scripts == {"session.jsonl": (2, 2, False), "session.1.jsonl": (1, 0, True)}
    (line,) = outcome.partial_lines()
    assert line.startswith("session.1.jsonl ({{session:1}}, side lane): ")
    assert line.endswith("partial lane, made 0 of 1 call(s)")
    # The same run without naming the lane fails on the title script.
    strict = tmp_path / "strict.json"
    async with start_proxy("replay", fixture=recorded, report=strict) as proxy:
        await _run(proxy.openai_base_url, title=False)
    with pytest.raises(UnconsumedScriptError) as caught:
        read_report(strict).assert_consumed()
    assert "session.1.jsonl" in str(caught.value)
    assert not any(s.partial for s in read_report(strict).scripts)


@pytest.mark.asyncio
async def test_a_partial_lane_that_ran_is_consumed_and_left_out_of_the_served_logs(
    recorded: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    served = tmp_path / "served"
    async with start_proxy(
        "replay", fixture=recorded, report=report, partial_lanes=["five-word"], sessions_root=served
    ) as proxy:
        await _run(proxy.openai_base_url, title=True)
    scripts = {s.file: (s.consumed, s.partial) for s in read_report(report).scripts}
    assert scripts == {"session.jsonl": (2, False), "session.1.jsonl": (1, True)}
    # Whether a partial lane ran is timing, not behaviour: only the main lane is logged.
    (log,) = list(served.rglob("*.jsonl"))
    assert "big-model" in log.read_text()
    assert TITLE_SYSTEM not in log.read_text()


@pytest.mark.asyncio
async def test_other_unconsumed_scripts_still_fail_with_a_partial_lane_named(
    recorded: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    async with start_proxy(
        "replay", fixture=recorded, report=report, partial_lanes=["small-model"]
    ) as proxy:
        await _run(proxy.openai_base_url, title=False, main_calls=1)
    outcome = read_report(report)
    assert not outcome.ok
    (line,) = outcome.unconsumed()
    assert line.startswith("session.jsonl ")
    assert "made 1 of 2 call(s); call 2 never requested" in line


@pytest.mark.asyncio
async def test_a_partial_lane_that_is_not_a_regex_is_a_config_error(recorded: Path) -> None:
    with pytest.raises(ProxyConfigError, match=r"partial lane 1 '\(title' is not a valid"):
        async with start_proxy("replay", fixture=recorded, partial_lanes=["(title"]):
            pass
