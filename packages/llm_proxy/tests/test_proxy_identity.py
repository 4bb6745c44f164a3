"""Caller identity, resolved in SPEC 11's order, and the volatile-content masks."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import openai
import pytest

from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import Identity, Masks, RequestError, resolve_identity, start_proxy
from agentreel.session import RequestHeader, harvest_session_logs


@pytest.mark.parametrize(
    ("headers", "body", "token", "expected"),
    [
        (
            {
                "x-agentreel-session-id": "child",
                "x-agentreel-parent-session-id": "parent",
                "x-agentreel-spawn-index": "1",
                "x-claude-code-session-id": "ignored: explicit headers win",
            },
            {},
            "tok",
            Identity("child", "parent", 1, "x-agentreel-session-id"),
        ),
        (
            {"x-claude-code-session-id": "acp-1"},
            {},
            None,
            Identity("acp-1", None, None, "x-claude-code-session-id"),
        ),
        (
            {"x-claude-code-session-id": "acp-1", "x-claude-code-agent-id": "agent-7"},
            {},
            None,
            Identity("agent-7", "acp-1", None, "x-claude-code-agent-id"),
        ),
        (
            {"session-id": "root", "thread-id": "t-2", "x-codex-parent-thread-id": "t-1"},
            {},
            None,
            Identity("t-2", "t-1", None, "codex thread-id"),
        ),
        (
            {"x-session-id": "ses_b", "x-parent-session-id": "ses_a"},
            {},
            None,
            Identity("ses_b", "ses_a", None, "x-session-id"),
        ),
        ({"x-affinity": "vibe-1"}, {}, None, Identity("vibe-1", None, None, "x-affinity")),
        (
            {},
            {"metadata": {"user_id": json.dumps({"device_id": "d", "session_id": "s-9"})}},
            None,
            Identity("s-9", None, None, "metadata.user_id"),
        ),
        ({}, {}, "child-2", Identity("child-2", None, None, "/s/<token>/ prefix")),
        (
            {"x-agentreel-parent-session-id": "parent", "x-agentreel-spawn-index": "3"},
            {},
            "child-3",
            Identity("child-3", "parent", 3, "/s/<token>/ prefix"),
        ),
        (
            {
                "x-claude-code-session-id": "acp-1",
                "x-claude-code-agent-id": "agent-7",
                "x-agentreel-spawn-index": "0",
            },
            {},
            None,
            Identity("agent-7", "acp-1", 0, "x-claude-code-agent-id"),
        ),
        (
            {"x-session-id": "ses_b", "x-agentreel-parent-session-id": "explicit"},
            {},
            None,
            Identity("ses_b", "explicit", None, "x-session-id"),
        ),
        (
            {"x-agentreel-parent-session-id": "parent", "x-agentreel-spawn-index": "0"},
            {},
            None,
            Identity(None),
        ),
        ({}, {"metadata": {"user_id": "not json"}}, None, Identity(None)),
    ],
)
def test_identity_resolution_order(
    headers: dict[str, str], body: dict[str, object], token: str | None, expected: Identity
) -> None:
    assert resolve_identity(headers, body, token) == expected


def test_a_malformed_spawn_index_is_a_400_naming_the_header() -> None:
    with pytest.raises(RequestError) as raised:
        resolve_identity(
            {"x-agentreel-session-id": "a", "x-agentreel-spawn-index": "two"}, {}, None
        )
    assert raised.value.status == 400
    assert "x-agentreel-spawn-index" in raised.value.message


def test_masks_hide_volatile_text_and_scenario_regexes() -> None:
    masks = Masks(["run-[0-9]+"])
    text = (
        "x-anthropic-billing-header: cc_version=2.1.318; cc_is_subagent=true\n"
        "Today is 2026-12-01. Session ses_0123456789abcdefghij, run-42."
    )
    assert masks.text(text) == (
        "{{billing-header}}\nToday is {{date}}. Session {{id}}, {{mask:1}}."
    )
    assert masks.value({"a": [text[:10], 3]}) == {"a": [masks.text(text[:10]), 3]}


def test_claude_codes_subagent_id_is_masked_and_a_hex_word_is_not() -> None:
    # Claude Code's Agent/Task result names the child by a new random id on every run.
    result = "agentId: a349c910f5133ccf4 (use SendMessage with to: 'a349c910f5133ccf4' to"
    assert Masks().text(result) == (
        "agentId: {{agent-id}} (use SendMessage with to: '{{agent-id}}' to"
    )
    for kept in ("acafebabedeadbeef", "a349c910f5133ccf", "xa349c910f5133ccf4"):
        assert Masks().text(kept) == kept


def test_javascript_date_strings_are_masked_as_dates() -> None:
    # opencode writes today's date with Date.toDateString() into its system prompt.
    assert Masks().text("Today's date: Tue Dec 01 2026.") == "Today's date: {{date}}."
    # Gemini CLI and Qwen Code write it with toLocaleDateString's long English form.
    for day in ("Wednesday, December 2, 2026", "Sunday, March 15, 2027"):
        text = f"Today's date is {day} (formatted according to the user's locale)."
        assert Masks().text(text) == (
            "Today's date is {{date}} (formatted according to the user's locale)."
        )


@pytest.mark.asyncio
async def test_the_cwd_under_tmp_stays_the_cwd_and_a_tmp_path_keeps_its_period(
    tmp_path: Path,
) -> None:
    """The tmp and HOME masks leave the cwd to the session normalizer ({{cwd}}) even when
    the cwd is a temp directory (every harness run's is), and a path ending a sentence
    keeps the sentence's period."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    scratch = Path(tempfile.gettempdir()) / "agentreel-scratch" / "notes.txt"
    system = f"Working directory: {cwd}. Read {cwd}/a.py. Scratch file: {scratch}."
    root = tmp_path / "sessions"
    with StubServer.from_toml('[[rule]]\ntext = "ok"\n') as stub:
        async with start_proxy(
            "record", upstream=stub.base_url, sessions_root=root, cwd=cwd
        ) as proxy:
            client = openai.AsyncOpenAI(
                base_url=proxy.openai_base_url, api_key="sk-masks-test", max_retries=0
            )
            await client.chat.completions.create(
                model="m",
                messages=[{"role": "system", "content": system}, {"role": "user", "content": "hi"}],
            )
            await client.close()
    (log,) = harvest_session_logs(root)
    (request,) = [e.data for e in log.events if isinstance(e, RequestHeader)]
    assert request.system == (
        "Working directory: {{cwd}}. Read {{cwd}}/a.py. Scratch file: {{tmp}}."
    )


@pytest.mark.asyncio
async def test_token_prefix_identifies_child_processes(tmp_path: Path) -> None:
    rules = '[[rule]]\ntext = "ok"\n'
    root = tmp_path / "sessions"
    with StubServer.from_toml(rules) as stub:
        async with start_proxy("record", upstream=stub.base_url, sessions_root=root) as proxy:
            for token in ("one", "two"):
                client = openai.AsyncOpenAI(
                    base_url=proxy.url_for(token) + "/v1", api_key="sk-token-test", max_retries=0
                )
                reply = await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": f"hi {token}"}]
                )
                assert reply.choices[0].message.content == "ok"
                await client.close()
        assert [r.path for r in stub.requests] == ["/v1/chat/completions"] * 2
    logs = harvest_session_logs(root)
    assert len(logs) == 2  # two identities → two sessions


def test_mask_that_is_no_regex_is_a_config_error() -> None:
    from agentreel.llm_proxy import ProxyConfigError

    with pytest.raises(ProxyConfigError, match="mask 1"):
        Masks(["("])
