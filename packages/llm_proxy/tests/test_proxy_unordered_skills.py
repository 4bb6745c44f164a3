"""Gemini CLI lists its skills in the order a directory glob found them (issue 30's
1-in-20 replay failure of gemini-cli-read): its built-in skills are read with ``glob``
(``bundle/builtin/*/SKILL.md``, node-glob returns files in no fixed order) and listed in that
order in the system prompt's ``<available_skills>`` and in its ``activate_skill`` tool — the
description's ``(Available: 'a', 'b')`` and the ``enum`` of its ``name`` parameter. A replay
whose glob came back the other way round sent a request no recording starts with.

Through the proxy and the real google-genai SDK, shaped as Gemini CLI sends it (no identity
header, a router call before the streamed conversation): recorded with the skills in one
order, replayed in the other, every call binds and the report is clean; a skill that is
really gone is still a failure. Qwen Code's listing (its own shape, already sorted by Qwen
Code) is left as sent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from google import genai
from google.genai import errors, types

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import Masks, start_proxy
from agentreel.llm_replay import read_report

KEY = "unordered-skills-test-key-0123456789"
ROUTER = "You route requests by complexity."
QUESTION = "Please read notes.txt and tell me what it says."
SKILLS = {
    "skill-creator": "Guide for creating effective skills.",
    "antigravity-support": "Use when the user asks about Antigravity CLI.",
}

RULES = """
[[rule]]
match = { api = "gemini", stream = false }
json = { complexity_reasoning = "a single read", complexity_score = 1 }

[[rule]]
match = { api = "gemini", system_contains = "CLI agent" }
text = "notes.txt says: alpha beta."
"""


def _system(names: list[str]) -> str:
    """Gemini CLI 0.61's system prompt section, skills in ``names``' order."""
    skills = "".join(
        f"  <skill>\n    <name>{name}</name>\n    <description>{SKILLS[name]}</description>\n"
        f"    <location>/opt/gemini-cli/bundle/builtin/{name}/SKILL.md</location>\n  </skill>\n"
        for name in names
    )
    return (
        "You are a CLI agent.\n\n# Available Agent Skills\n\n<available_skills>\n"
        f"{skills}</available_skills>\n\n# Hook Context\n"
    )


def _activate_skill(names: list[str]) -> types.Tool:
    """Gemini CLI 0.61's ``activate_skill`` declaration (getActivateSkillDeclaration)."""
    hint = ", ".join(f"'{name}'" for name in names)
    return types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="activate_skill",
                description=f"Activates a specialized agent skill by name (Available: {hint}).",
                parameters_json_schema={
                    "type": "object",
                    "properties": {
                        "name": {
                            "type": "string",
                            "enum": names,
                            "description": "The name of the skill to activate.",
                        }
                    },
                    "required": ["name"],
                },
            )
        ]
    )


@asynccontextmanager
async def _client(base_url: str) -> AsyncIterator[genai.Client]:
    async with httpx2.AsyncClient() as http:
        options = types.HttpOptions(
            base_url=base_url, api_version="v1beta", httpx_async_client=http
        )
        yield genai.Client(api_key=KEY, http_options=options)


async def _turn(base_url: str, names: list[str]) -> str:
    async with _client(base_url) as client:
        routed = await client.aio.models.generate_content(
            model="gemini-flash-lite",
            contents=QUESTION,
            config=types.GenerateContentConfig(
                system_instruction=ROUTER,
                response_mime_type="application/json",
                response_json_schema={
                    "type": "object",
                    "properties": {"complexity_score": {"type": "integer"}},
                },
            ),
        )
        assert json.loads(routed.text or "")["complexity_score"] == 1
        stream = await client.aio.models.generate_content_stream(
            model="gemini-pro",
            contents=QUESTION,
            config=types.GenerateContentConfig(
                system_instruction=_system(names), tools=[_activate_skill(names)]
            ),
        )
        return "".join([response.text or "" async for response in stream])


@pytest.mark.asyncio
async def test_skills_listed_in_another_order_replay_and_a_missing_skill_does_not(
    tmp_path: Path,
) -> None:
    fixture = tmp_path / "fixture"
    recorded = ["skill-creator", "antigravity-support"]  # as gemini-cli-read was recorded
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture) as proxy:
            assert await _turn(proxy.base_url, recorded) == "notes.txt says: alpha beta."

    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture, report=report) as proxy:
        answer = await _turn(proxy.base_url, list(reversed(recorded)))
    assert answer == "notes.txt says: alpha beta."
    assert read_report(report).ok, read_report(report).errors

    gone = tmp_path / "gone.json"
    async with start_proxy("replay", fixture=fixture, report=gone) as proxy:
        with pytest.raises(errors.ClientError):
            await _turn(proxy.base_url, ["skill-creator"])
    (error,) = read_report(gone).errors
    assert error.type == "UnrecordedSessionError"
    # Shown as text: the recording keeps the tool's whole JSON (SPEC 15).
    assert "tool 'activate_skill' (schema and description) differs at character" in error.message


def test_only_gemini_clis_skill_listings_are_put_in_order() -> None:
    masks = Masks()
    forward, backward = _system(list(SKILLS)), _system(list(reversed(SKILLS)))
    assert forward != backward
    assert masks.text(forward) == masks.text(backward) == masks.text(masks.text(backward))
    hint = "by name (Available: 'skill-creator', 'antigravity-support')."
    assert masks.text(hint) == "by name (Available: 'antigravity-support', 'skill-creator')."
    # Qwen Code renders its listing itself, grouped (skills, then commands) and sorted by
    # name within each group: its shape is left as sent.
    qwen = (
        "<available_skills>\n<skill>\n<name>\nzeta\n</name>\n<description>\nz (bundled)\n"
        "</description>\n</skill>\n<skill>\n<name>\nalpha\n</name>\n<description>\na\n"
        "</description>\n</skill>\n</available_skills>"
    )
    assert masks.text(qwen) == qwen
    # An enum is put in order only in the activate_skill declaration.
    other = {"name": "set_mode", "parameters": {"enum": ["plan", "edit"]}}
    assert masks.value(other) == other
    skill = {"name": "activate_skill", "parameters": {"properties": {"name": {"enum": ["b", "a"]}}}}
    assert masks.value(skill)["parameters"]["properties"]["name"]["enum"] == ["a", "b"]
