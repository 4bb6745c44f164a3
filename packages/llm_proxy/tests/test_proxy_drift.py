"""Readable drift past the preview (SPEC 13), through the proxy and the plain ``openai`` SDK:
a recording keeps each message's and each tool's whole text once per lane log, and a drift
deep inside a long message shows that text on both sides and writes the full masked
requests beside the report. A new built-in mask never breaks a recording that kept the
text; one that kept a digest only says which agentreel made it and the fix (SPEC 15)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import msgspec
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

import agentreel.llm_proxy._run as proxy_run
from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import Masks, start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import (
    MADE_BY,
    NO_TEXT_KEPT,
    OLDEST_FORMAT,
    RECORDING_FORMAT,
    RERECORD_COMMAND_ENV,
    MessageHeader,
    RequestHeaderData,
    ToolHeader,
    remasked_messages,
    remasked_tools,
)

RULES = '[[rule]]\ntext = "noted"\n'


def _document(word: str) -> str:
    lines = [f"clause {n}: the parties agree to nothing in particular" for n in range(800)]
    lines[640] = f"clause 640: payment is due in {word}"
    return "\n".join(lines)


async def _two_turns(base_url: str, word: str) -> list[str]:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-drift-0123456789")
    try:
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": "You read contracts."},
            {"role": "user", "content": _document(word)},
        ]
        replies: list[str] = []
        for follow_up in ("Summarize it.", "Anything else?"):
            messages.append({"role": "user", "content": follow_up})
            reply = await client.chat.completions.create(model="reader", messages=messages)
            text = reply.choices[0].message.content or ""
            replies.append(text)
            messages.append({"role": "assistant", "content": text})
        return replies
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_a_drift_deep_in_a_long_message_shows_the_text_and_writes_both_requests(
    fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            assert await _two_turns(proxy.base_url, "thirty days") == ["noted", "noted"]
    recording = (fixture_dir / "session.jsonl").read_text()
    # Two calls resend the document, but the lane's log keeps its text once.
    assert recording.count("clause 640: payment is due in thirty days") == 1

    report = tmp_path / "run" / "report.json"
    report.parent.mkdir()
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        with pytest.raises(openai.BadRequestError) as refused:
            await _two_turns(proxy.base_url, "ninety days")
    message = str(refused.value)
    assert "clause 640: payment is due in thirty days" in message
    assert "clause 640: payment is due in ninety days" in message
    assert "digest" not in message
    (error,) = read_report(report).errors
    assert error.type == "RequestDriftError"
    recorded = report.parent / "drift" / "session.call-1.recorded.txt"
    live = report.parent / "drift" / "session.call-1.live.txt"
    assert str(recorded) in error.message
    assert str(live) in error.message
    assert "clause 640: payment is due in thirty days" in recorded.read_text()
    assert "clause 640: payment is due in ninety days" in live.read_text()
    assert "clause 799:" in live.read_text()  # the whole request, not an excerpt


@pytest.mark.asyncio
async def test_start_proxy_writes_a_drifts_requests_to_the_drift_dir_it_is_given(
    fixture_dir: Path, tmp_path: Path
) -> None:
    """``start_proxy(drift_dir=...)``, as ``ProxySettings`` and ``ReplayProvider`` take it:
    a harness whose run folder goes away keeps a drift's full requests elsewhere."""
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            await _two_turns(proxy.base_url, "thirty days")
    report = tmp_path / "run" / "report.json"
    report.parent.mkdir()
    kept = tmp_path / "kept"
    async with start_proxy("replay", fixture=fixture_dir, report=report, drift_dir=kept) as proxy:
        with pytest.raises(openai.BadRequestError):
            await _two_turns(proxy.base_url, "ninety days")
    (error,) = read_report(report).errors
    live = kept / "session.call-1.live.txt"
    assert str(live) in error.message
    assert "clause 640: payment is due in ninety days" in live.read_text()
    assert not (report.parent / "drift").exists()


# -- an older recording that kept no text of what differs (SPEC 15) ----------------------

TOOL: dict[str, object] = {
    "type": "function",
    "function": {
        "name": "remind",
        "description": "Set a reminder. Reminders fire on Thu, 03 Dec 2026 09:00 +0000.",
        "parameters": {"type": "object", "properties": {"what": {"type": "string"}}},
    },
}


async def _with_tool(base_url: str) -> str:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-drift-0123456789")
    try:
        reply = await client.chat.completions.create(
            model="reader",
            messages=[{"role": "user", "content": "Remind me."}],
            tools=[TOOL],  # type: ignore[list-item]
        )
        return reply.choices[0].message.content or ""
    finally:
        await client.close()


def _as_if_recorded_by(fixture: Path, *, stamped: bool) -> str:
    """The fixture's log as an earlier agentreel wrote it: its tool kept as a digest only,
    taken through the masks of the time (which left this date as it was), and — unless
    ``stamped`` — no format stamp. Returns the digest written."""
    log = fixture / "session.jsonl"
    lines = log.read_text().splitlines()
    header = json.loads(lines[0])
    if not stamped:
        del header["format"], header["masks"]
    lines[0] = json.dumps(header, separators=(",", ":"))
    old = "0123456789abcdef"
    for number, line in enumerate(lines[1:], 1):
        event = json.loads(line)
        if event["type"] == "request/header":
            (tool,) = event["data"]["tools"]
            tool["digest"] = old
            tool.pop("text", None)
            lines[number] = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    log.write_text("\n".join(lines) + "\n")
    return old


@pytest.mark.asyncio
@pytest.mark.parametrize("stamped", [False, True], ids=["format-1", "current-format"])
async def test_a_drift_where_an_older_recording_kept_no_text_names_its_agentreel_and_the_fix(
    fixture_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stamped: bool
) -> None:
    monkeypatch.setenv(RERECORD_COMMAND_ENV, "agentreel record {scenario}")
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            assert await _with_tool(proxy.base_url) == "noted"
    digest = _as_if_recorded_by(fixture_dir, stamped=stamped)

    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        with pytest.raises(openai.BadRequestError):
            await _with_tool(proxy.base_url)
    (error,) = read_report(report).errors
    assert error.type == "RequestDriftError"
    message = error.message
    assert "tool 'remind': schema or description changed" in message
    assert NO_TEXT_KEPT in message
    assert digest not in message
    assert "digest" not in message
    assert len(message.splitlines()) <= 20, message
    if stamped:
        # A recording of the current format: the agent changed, as before.
        assert "The agent now sends a different request" in message
        assert MADE_BY[OLDEST_FORMAT] not in message
    else:
        assert f"session.jsonl was made by {MADE_BY[OLDEST_FORMAT]}" in message
        assert f"recording format {OLDEST_FORMAT}, built-in mask set {OLDEST_FORMAT}" in message
        assert f"this agentreel: format {RECORDING_FORMAT}" in message
        assert "the live request was masked with mask set 1 too" in message
        assert f"Fix: re-record it: agentreel record {fixture_dir.name}" in message
        assert "The agent now sends a different request" not in message


@pytest.mark.asyncio
async def test_a_new_mask_never_breaks_a_recording_that_kept_the_tools_text(
    fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            assert await _with_tool(proxy.base_url) == "noted"
    log = fixture_dir / "session.jsonl"
    recorded = log.read_text()
    # The tool's whole masked JSON is kept, once in the log.
    assert recorded.count("Reminders fire on {{date}}.") == 1
    # As an agentreel whose masks left this date alone wrote it: the raw date in the
    # tool's text, the digest of that text, no stamp.
    lines = recorded.splitlines()
    header = json.loads(lines[0])
    del header["format"], header["masks"]
    lines[0] = json.dumps(header, separators=(",", ":"))
    for number, line in enumerate(lines[1:], 1):
        event = json.loads(line)
        if event["type"] == "request/header":
            data = RequestHeaderData(**{**event["data"], "tools": ()})
            (tool,) = event["data"]["tools"]
            raw = tool["text"].replace("{{date}}", "Thu, 03 Dec 2026 09:00 +0000")
            old = ToolHeader(name=tool["name"], digest=tool["digest"], text=raw)
            # The digest as the older agentreel took it: of the text it kept.
            (again,) = remasked_tools(
                msgspec.structs.replace(data, tools=(old,)), {}, lambda text: text
            ).tools
            tool.update(text=raw, digest=again.digest)
            assert again.digest != json.loads(line)["data"]["tools"][0]["digest"]
            lines[number] = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    log.write_text("\n".join(lines) + "\n")

    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        assert await _with_tool(proxy.base_url) == "noted"
    assert read_report(report).ok, read_report(report).errors


async def _ask_at(base_url: str, when: str) -> str:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-drift-0123456789")
    try:
        reply = await client.chat.completions.create(
            model="reader",
            messages=[{"role": "user", "content": f"The build broke at {when}. Why?"}],
        )
        return reply.choices[0].message.content or ""
    finally:
        await client.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("stamped", [False, True], ids=["unstamped", "stamped-mask-set-1"])
async def test_a_digest_only_message_of_an_older_mask_set_replays_where_todays_masks_differ(
    fixture_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stamped: bool
) -> None:
    # Recorded by an agentreel whose masks were set 1: a time of day and "4 December 2026"
    # stayed text, and the message is kept as a digest of that masking (SPEC 15).
    when = "17:03:11 on 4 December 2026"
    assert Masks(version=1).text(when) == when != Masks().text(when)
    monkeypatch.setattr(proxy_run, "Masks", functools.partial(Masks, version=1))
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            assert await _ask_at(proxy.base_url, when) == "noted"
    monkeypatch.undo()
    log = fixture_dir / "session.jsonl"
    lines = log.read_text().splitlines()
    header = json.loads(lines[0])
    if stamped:
        header["masks"] = 1
    else:
        del header["format"], header["masks"]
    lines[0] = json.dumps(header, separators=(",", ":"))
    for number, line in enumerate(lines[1:], 1):
        event = json.loads(line)
        if event["type"] == "request/header":
            for message in event["data"]["messages"]:
                message.pop("json")  # kept from format 3 on: this one is a digest only
            lines[number] = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    log.write_text("\n".join(lines) + "\n")
    assert when in log.read_text()

    # Replayed by today's agentreel: the live request is masked with set 1 as well before
    # its message digest is compared, so the same request replays.
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        assert await _ask_at(proxy.base_url, when) == "noted"
    assert read_report(report).ok, read_report(report).errors

    # A request that differs under set 1 is drift: what the agent sent changed.
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        with pytest.raises(openai.BadRequestError):
            await _ask_at(proxy.base_url, "17:03:11 on 5 December 2026")
    (error,) = read_report(report).errors
    assert error.type == "RequestDriftError"
    # Shown as both sides read through set 1, never as digests.
    assert "recorded 'The build broke at 17:03:11 on 4 December 2026. Why?'" in error.message
    assert "live 'The build broke at 17:03:11 on 5 December 2026. Why?'" in error.message


@pytest.mark.asyncio
async def test_a_message_kept_whole_is_masked_again_so_a_newer_mask_never_breaks_it(
    fixture_dir: Path, tmp_path: Path
) -> None:
    # Format 3 keeps each message's canonical masked JSON once per lane log: replay masks it
    # again with today's set and digests it again (SPEC 15).
    with StubServer.from_toml(RULES) as stub:
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            assert await _ask_at(proxy.base_url, "17:03:11") == "noted"
    log = fixture_dir / "session.jsonl"
    lines = log.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == RECORDING_FORMAT
    # As an agentreel whose masks (set 1) left a time of day alone wrote it.
    header["masks"] = 1
    lines[0] = json.dumps(header, separators=(",", ":"))
    for number, line in enumerate(lines[1:], 1):
        event = json.loads(line)
        if event["type"] == "request/header":
            (message,) = event["data"]["messages"]
            assert "{{time}}" in message["json"]
            raw = message["json"].replace("{{time}}", "17:03:11")
            data = RequestHeaderData(**{**event["data"], "messages": (), "tools": ()})
            old = MessageHeader(role="user", digest="", preview="", json=raw)
            (again,) = remasked_messages(
                msgspec.structs.replace(data, messages=(old,)), {}, lambda text: text
            ).messages
            message.update(
                json=raw,
                digest=again.digest,
                preview=message["preview"].replace("{{time}}", "17:03:11"),
            )
            lines[number] = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    log.write_text("\n".join(lines) + "\n")

    # Another time of day: set 1 would give another digest; the kept JSON, masked again
    # with today's set, reads as the live request does.
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        assert await _ask_at(proxy.base_url, "09:15:42") == "noted"
    assert read_report(report).ok, read_report(report).errors
