"""No credential lands in a fixture through the proxy (SPEC 10, 11): the fixture writer
and ``agentreel proxy record`` refuse known key shapes — echoed by the model's answer or
read from a file by the agent and sent back as a tool result — naming file, line, event and
rule, never the value; nothing is written, and the client still gets its stream."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import openai
import pytest
from aiohttp import web
from openai.types.chat import ChatCompletionMessageParam

from agentreel.llm import BlockEnd, BlockStart, Finish, TextDelta, TextPart
from agentreel.llm.stub import StubServer
from agentreel.llm_proxy import start_proxy, write_fixture
from agentreel.session import (
    AssistantChunkData,
    SecretFoundError,
    SecretScan,
    SessionStore,
    ToolResultData,
    TurnStartData,
    secret_sha256,
)
from agentreel.session.testing import FAKE_CREDENTIAL_RULES, fake_credentials

ProxyCli = Callable[[list[str]], tuple["subprocess.Popen[bytes]", int]]
KEYS = fake_credentials()


def _leaked(*texts: str | bytes) -> list[str]:
    """The kinds whose value appears in ``texts`` (names only: a failure prints no key)."""
    joined = "".join(t.decode("utf-8", "replace") if isinstance(t, bytes) else t for t in texts)
    return [kind for kind, value in KEYS.items() if value in joined or json.dumps(value) in joined]


def _logs(root: Path, cwd: Path, text: str, source: str) -> None:
    store = SessionStore(root)
    session = store.create(cwd)
    session.append(TurnStartData(turn=0))
    if source == "tool":
        session.append(ToolResultData(turn=0, step=0, call_id="c1", content=text, is_error=False))
    else:
        for chunk in (
            BlockStart(index=0, block_type="text"),
            TextDelta(index=0, text=text[:10]),
            TextDelta(index=0, text=text[10:]),
            BlockEnd(index=0, block=TextPart(text)),
            Finish(reason="stop"),
        ):
            session.append(AssistantChunkData(turn=0, step=0, chunk=chunk))
    store.close_all()


@pytest.mark.parametrize("source", ["answer", "tool"])
@pytest.mark.parametrize("kind", sorted(KEYS))
def test_the_fixture_writer_refuses_each_shape_and_writes_nothing(
    kind: str, source: str, tmp_path: Path
) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    _logs(tmp_path / "logs", cwd, f"the .env says {KEYS[kind]} ok", source)
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "session.jsonl").write_text("earlier\n")
    with pytest.raises(SecretFoundError) as caught:
        write_fixture(tmp_path / "logs", fixture, str(cwd))
    hits = caught.value.hits
    assert {hit.rule for hit in hits} == {FAKE_CREDENTIAL_RULES[kind]}
    assert all(hit.file == str(fixture / "session.jsonl") for hit in hits)
    event = "tool/result" if source == "tool" else "assistant/chunk block-end"
    assert any(event in hit.event for hit in hits), [hit.event for hit in hits]
    assert _leaked(str(caught.value)) == []
    assert sorted(p.name for p in fixture.iterdir()) == ["session.jsonl"]
    assert (fixture / "session.jsonl").read_text() == "earlier\n"  # not even removed
    allowed = SecretScan(allow=[secret_sha256(KEYS[kind])])
    assert write_fixture(tmp_path / "logs", fixture, str(cwd), scan=allowed) == [
        fixture / "session.jsonl"
    ]


def _answer_rules() -> str:
    rules = [
        f"[[rule]]\nmatch.last_user = {json.dumps(f'echo [{kind}]')}\n"
        f"text = {json.dumps(f'Found it: {value} (from .env)')}\nchunk_size = 6\n"
        for kind, value in KEYS.items()
    ]
    return "\n".join([*rules, '[[rule]]\ntext = "ok"\n'])


def _tool_messages(kind: str) -> list[ChatCompletionMessageParam]:
    """An agent's next request after reading a file holding the key (kept short, so the
    recorded request preview holds the key's start)."""
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    return [
        {"role": "user", "content": f"read {kind}.env"},
        {"role": "assistant", "content": None, "tool_calls": [call]},  # type: ignore[list-item]
        {"role": "tool", "tool_call_id": "c1", "content": KEYS[kind]},
    ]


@pytest.mark.slow
@pytest.mark.parametrize("source", ["answer", "tool"])
def test_proxy_record_refuses_each_shape_streams_it_and_writes_no_fixture(
    source: str, tmp_path: Path, proxy_cli: ProxyCli
) -> None:
    """One ``agentreel proxy record`` run, one conversation per kind of key: each lane is
    refused and named by its rule, every client still gets its whole answer, the CLI exits
    1, no fixture is written, and neither its output nor the kept logs hold a key."""
    fixture = tmp_path / "fixture"
    with StubServer.from_toml(_answer_rules()) as stub:
        process, port = proxy_cli(
            ["record", "--upstream", stub.base_url, "--fixture", str(fixture)]
        )
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="proxy-test-dummy", max_retries=0
        )
        for kind in KEYS:
            messages: list[ChatCompletionMessageParam] = (
                [{"role": "user", "content": f"echo [{kind}]"}]
                if source == "answer"
                else _tool_messages(kind)
            )
            stream = client.chat.completions.create(model="m", messages=messages, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            expected = f"Found it: {KEYS[kind]} (from .env)" if source == "answer" else "ok"
            whole = text == expected  # compared apart: a failure must not print the key
            assert whole, f"{kind}: the client did not get its stream whole"
        client.close()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    stderr = err.decode()
    assert process.returncode == 1
    assert _leaked(out, err) == []
    refusals = [line for line in stderr.splitlines() if "refused to record a credential" in line]
    assert len(refusals) == len(KEYS), f"{len(refusals)} refusals for {len(KEYS)} lanes"
    named = sorted(
        rule for rule in set(FAKE_CREDENTIAL_RULES.values()) for line in refusals if rule in line
    )
    assert named == sorted(FAKE_CREDENTIAL_RULES.values())
    event = "request/header" if source == "tool" else "assistant/chunk block-end"
    assert all(event in line and ".jsonl:" in line for line in refusals)
    assert all(f"the fixture {fixture} was not written" in line for line in refusals)
    assert not fixture.exists()
    kept = Path(refusals[0].split("the other session logs are kept in ")[1].strip())
    assert _leaked(*(p.read_bytes() for p in kept.rglob("*") if p.is_file())) == []


@pytest.mark.asyncio
async def test_a_key_in_the_upstreams_models_listing_refuses_the_fixture(tmp_path: Path) -> None:
    """``GET /v1/models`` is passed through and kept for replay: a listing holding a key
    shape reaches its client, but no fixture and no ``models.json`` is written."""
    listing = {"object": "list", "data": [{"id": "m", "owned_by": KEYS["aws"]}]}

    async def models(request: web.Request) -> web.Response:
        return web.json_response(listing)

    app = web.Application()
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fixture = tmp_path / "fixture"
    try:
        upstream = f"http://127.0.0.1:{runner.addresses[0][1]}"
        async with start_proxy("record", upstream=upstream, fixture=fixture) as proxy:
            client = openai.AsyncOpenAI(
                base_url=proxy.openai_base_url, api_key="proxy-test-dummy", max_retries=0
            )
            listed = [model.owned_by async for model in client.models.list()]
            await client.close()
            delivered = listed == [KEYS["aws"]]  # compared apart: a failure prints no key
            assert delivered, "the client did not get the upstream's listing"
    finally:
        await runner.cleanup()
    errors = "\n".join(proxy.errors)
    assert "refused to record a credential in the upstream's models listing" in errors
    assert "models.json (GET /v1/models):1" in errors
    assert "AWS Access Key" in errors
    assert _leaked(errors) == []
    assert not fixture.exists()


@pytest.mark.asyncio
async def test_proxy_record_writes_a_long_allowed_key_that_runs_past_a_preview(
    tmp_path: Path,
) -> None:
    """``agentreel proxy record`` with a key allowed by its sha256 (``--allow-secret``):
    a key longer than the room left in a message's preview is written whole in the
    request's text and cut in its preview; the one allowed sha256 covers both (the cut
    start alone has another sha256, which was refused). Not allowed, it is refused."""
    key = KEYS["anthropic"]
    assert len(key) > 80
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    messages: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "read the .env"},
        {"role": "assistant", "content": None, "tool_calls": [call]},  # type: ignore[list-item]
        {"role": "tool", "tool_call_id": "c1", "content": f"ANTHROPIC_API_KEY={key}\n"},
    ]
    for allow in ((secret_sha256(key),), ()):
        fixture = tmp_path / f"fixture-{len(allow)}"
        with StubServer.from_toml('[[rule]]\ntext = "ok"\n') as stub:
            async with start_proxy(
                "record", upstream=stub.base_url, fixture=fixture, allow_secrets=allow
            ) as proxy:
                client = openai.AsyncOpenAI(
                    base_url=proxy.openai_base_url, api_key="proxy-test-dummy", max_retries=0
                )
                answer = await client.chat.completions.create(model="m", messages=messages)
                await client.close()
                assert answer.choices[0].message.content == "ok"
        errors = "\n".join(proxy.errors)
        assert _leaked(errors) == []
        if allow:
            assert errors == ""
            written = (fixture / "session.jsonl").read_text()
            assert _leaked(written) == ["anthropic"]
            (header,) = [line for line in written.splitlines() if '"request/header"' in line]
            preview = json.loads(header)["data"]["messages"][2]["preview"]
            held = preview.endswith("…") and key[:40] in preview and key not in preview
            assert held, "the preview does not hold the key's start, cut"
        else:
            assert "refused to record a credential" in errors
            assert "Anthropic API Key" in errors
            assert not fixture.exists()
