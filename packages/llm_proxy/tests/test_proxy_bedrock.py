"""AWS Bedrock's Converse API through the proxy (issue 42, SPEC 11), with the official boto3
``bedrock-runtime`` client (``endpoint_url`` at the proxy, fake credentials, SigV4-signed):
``converse-stream`` as AWS event-stream messages (prelude and message CRC32s checked by
botocore), ``converse`` as one body. Recorded through the stub, replayed keylessly: parsed
alike, the bytes served equal; the SigV4 headers forwarded upstream and the access key id
never written; headerless children of a parent bound by content in any arrival order."""

from __future__ import annotations

import asyncio
import json
from contextlib import closing
from pathlib import Path
from typing import Any

import boto3
import httpx2
import pytest
from aiohttp import web
from botocore.config import Config
from botocore.exceptions import (
    ClientError,
    EventStreamError,
)

from agentreel.llm.stub import StubServer
from agentreel.llm.wire import EventStreamSplitter, encode_event_message
from agentreel.llm_proxy import start_proxy
from agentreel.llm_replay import read_report
from agentreel.session import (
    MASKS_VERSION,
    RECORDING_FORMAT,
)

KEY_ID = "AKIAZ7QJ3X5TESTKEY01"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz0123456789"
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"

RULES = """
[[rule]]
name = "ask"
match = { api = "bedrock", last_user = "weather" }
reasoning = "The user wants the weather."
text = "Let me check."
tool_calls = [{ id = "tooluse_w", name = "get_weather", arguments = { city = "Paris" } }]
chunk_size = 5
usage = { input_tokens = 31, output_tokens = 12 }

[[rule]]
name = "answer"
match = { api = "bedrock", last_tool_result_regex = "sunny" }
text = "It is sunny in Paris today."
chunk_size = 4
usage = { input_tokens = 55, output_tokens = 7 }

[[rule]]
name = "bytes"
match = { api = "bedrock", last_user = "bytes" }
text = "every byte as sent"
chunk_size = 5

[[rule]]
name = "flaky"
match = { api = "bedrock", last_user = "flaky" }
status = 429

[[rule]]
name = "broken"
match = { api = "bedrock", last_user = "broken" }
text = "half an answer that breaks"
chunk_size = 5
error_after = 3
error_message = "the model melted"
"""

TOOLS = {
    "tools": [
        {
            "toolSpec": {
                "name": "get_weather",
                "description": "Weather for a city",
                "inputSchema": {
                    "json": {"type": "object", "properties": {"city": {"type": "string"}}}
                },
            }
        }
    ]
}


def _client(endpoint: str) -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=endpoint,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        config=Config(retries={"max_attempts": 1}),
    )


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": text}]}


def _conversation(endpoint: str) -> list[Any]:
    """A streamed tool call, its result answered whole, a throttled call and an in-stream
    exception: everything boto3 parsed (without the HTTP metadata, which differs)."""
    with closing(_client(endpoint)) as client:
        return _converse(client)


def _converse(client: Any) -> list[Any]:
    seen: list[Any] = []
    messages: list[Any] = [_user("weather?")]
    response = client.converse_stream(
        modelId=MODEL, messages=messages, system=[{"text": "be brief"}], toolConfig=TOOLS
    )
    events = list(response["stream"])
    seen += events
    uses = [
        event["contentBlockStart"]["start"]["toolUse"]
        for event in events
        if "contentBlockStart" in event
    ]
    assert [use["name"] for use in uses] == ["get_weather"]
    messages.append(
        {
            "role": "assistant",
            "content": [
                {"text": "Let me check."},
                {"toolUse": {**uses[0], "input": {"city": "Paris"}}},
            ],
        }
    )
    messages.append(
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": uses[0]["toolUseId"],
                        "content": [{"text": "sunny, 21C"}],
                    }
                }
            ],
        }
    )
    answer = client.converse(
        modelId=MODEL, messages=messages, system=[{"text": "be brief"}], toolConfig=TOOLS
    )
    answer.pop("ResponseMetadata")
    seen.append(answer)
    try:
        client.converse(modelId=MODEL, messages=[_user("flaky")])
    except ClientError as error:
        seen.append((error.response["Error"]["Code"], error.response["Error"]["Message"]))
    text = ""
    broken = client.converse_stream(modelId=MODEL, messages=[_user("broken")])["stream"]
    try:
        for event in broken:
            text += event.get("contentBlockDelta", {}).get("delta", {}).get("text", "")
    except EventStreamError as error:
        seen.append((text, error.response["Error"]["Message"]))
    finally:
        broken.close()  # its connection, left open by the exception
    return seen


async def _raw(endpoint: str) -> bytes:
    body = {"messages": [_user("bytes")]}
    async with httpx2.AsyncClient() as http:
        answer = await http.post(f"{endpoint}/model/{MODEL}/converse-stream", json=body)
    assert answer.headers["content-type"].startswith("application/vnd.amazon.eventstream")
    return answer.content


def _written(directory: Path) -> str:
    return "".join(path.read_text() for path in directory.rglob("*") if path.is_file())


def test_event_stream_messages_carry_both_crcs_and_are_checked() -> None:
    message = encode_event_message({":event-type": "messageStop"}, b'{"stopReason":"end_turn"}')
    splitter = EventStreamSplitter()
    events = splitter.feed(message[:7]) + splitter.feed(message[7:])
    assert [(event.name, event.data) for event in events] == [
        ("messageStop", '{"stopReason":"end_turn"}')
    ]
    broken = message[:-5] + bytes([message[-5] ^ 1]) + message[-4:]
    with pytest.raises(ValueError, match="CRC"):
        EventStreamSplitter().feed(broken)


async def _threaded_conversation(endpoint: str) -> list[Any]:
    return await asyncio.to_thread(_conversation, endpoint)


@pytest.mark.asyncio
async def test_bedrock_record_then_replay_parse_alike_and_serve_the_same_bytes(
    wire_round_trip: Any,
) -> None:
    seen = await wire_round_trip(RULES, _threaded_conversation, _raw)
    recorded = seen.recorded
    signed = [r.headers.get("x-amz-date") for r in seen.requests]
    assert all(signed[:3]), "the SigV4 headers are forwarded upstream"
    assert f"/model/{MODEL}/converse-stream" in [r.path for r in seen.requests]
    reasoning = "".join(
        event["contentBlockDelta"]["delta"].get("reasoningContent", {}).get("text", "")
        for event in recorded
        if isinstance(event, dict) and "contentBlockDelta" in event
    )
    assert reasoning == "The user wants the weather."
    whole = next(item for item in recorded if isinstance(item, dict) and "output" in item)
    assert whole["output"]["message"]["content"] == [{"text": "It is sunny in Paris today."}]
    assert whole["usage"]["inputTokens"] == 55
    assert ("ThrottlingException", "agentreel stub server: rule 4 ('flaky') injected HTTP 429") in [
        item for item in recorded if isinstance(item, tuple)
    ]
    assert recorded[-1] == ("half an an", "the model melted")
    assert KEY_ID not in seen.written
    assert SECRET not in seen.written
    assert '"api":"bedrock-converse"' in seen.written


MAIN = "You are the main agent. Delegate counting to subagents."
COUNTER = "You are a counting subagent. Answer with a count."
QUESTION = "How many apples and pears are in the baskets?"
PROMPTS = ("Count the apples in basket.txt.", "Count the pears in basket.txt.")

TASK = {
    "tools": [
        {
            "toolSpec": {
                "name": "task",
                "inputSchema": {
                    "json": {"type": "object", "properties": {"prompt": {"type": "string"}}}
                },
            }
        }
    ]
}


async def _agent(endpoint: str, *, children_reversed: bool = False) -> str:
    with closing(_client(endpoint)) as client:
        return await _delegate(client, endpoint, children_reversed)


async def _delegate(client: Any, endpoint: str, children_reversed: bool) -> str:
    messages: list[Any] = [_user(QUESTION)]
    system = [{"text": MAIN}]
    plan = await asyncio.to_thread(
        client.converse, modelId=MODEL, messages=messages, system=system, toolConfig=TASK
    )
    content = plan["output"]["message"]["content"]
    uses = [block["toolUse"] for block in content if "toolUse" in block]
    prompts = [use["input"]["prompt"] for use in uses]
    assert prompts == list(PROMPTS)
    order = list(reversed(prompts)) if children_reversed else prompts

    async def child(position: int, prompt: str) -> str:
        await asyncio.sleep(0.2 * position)  # arrivals in the order asked for
        with closing(_client(endpoint)) as own:
            answer = await asyncio.to_thread(
                own.converse, modelId=MODEL, messages=[_user(prompt)], system=[{"text": COUNTER}]
            )
        return str(answer["output"]["message"]["content"][0]["text"])

    answers = dict(
        zip(order, await asyncio.gather(*(child(n, p) for n, p in enumerate(order))), strict=True)
    )
    messages.append({"role": "assistant", "content": content})
    results = [
        {"toolResult": {"toolUseId": use["toolUseId"], "content": [{"text": answers[prompt]}]}}
        for use, prompt in zip(uses, prompts, strict=True)
    ]
    messages.append({"role": "user", "content": results})
    final = await asyncio.to_thread(
        client.converse, modelId=MODEL, messages=messages, system=system, toolConfig=TASK
    )
    return str(final["output"]["message"]["content"][0]["text"])


@pytest.mark.asyncio
async def test_concurrent_bedrock_children_bind_by_content_in_reverse_order(
    children_round_trip: Any, counting_rules: Any
) -> None:
    rules = counting_rules("bedrock", QUESTION, PROMPTS, ("tooluse_apples", "tooluse_pears"))
    replayed = await children_round_trip(rules, _agent, QUESTION, PROMPTS)
    assert sorted((s.calls, s.consumed) for s in replayed.scripts) == [(1, 1), (1, 1), (2, 2)]


def _upstream_frames() -> bytes:
    """A ConverseStream as Bedrock sends it: ``p`` padding in every event, a latency the
    re-encoding would not know — only a verbatim replay serves these bytes again."""
    events = [
        ("messageStart", {"p": "abcdefghijkl", "role": "assistant"}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}, "p": "abcd"}),
        ("contentBlockStop", {"contentBlockIndex": 0, "p": "abcdefgh"}),
        ("messageStop", {"p": "abcdefghijklmnop", "stopReason": "end_turn"}),
        (
            "metadata",
            {
                "metrics": {"latencyMs": 321},
                "p": "abc",
                "usage": {"inputTokens": 9, "outputTokens": 1, "totalTokens": 10},
            },
        ),
    ]
    return b"".join(
        encode_event_message(
            {":event-type": name, ":content-type": "application/json", ":message-type": "event"},
            json.dumps(payload, separators=(",", ":")).encode(),
        )
        for name, payload in events
    )


@pytest.mark.asyncio
async def test_bedrock_streams_replay_the_upstreams_bytes_verbatim(
    fixture_dir: Path, tmp_path: Path
) -> None:
    sent = _upstream_frames()

    async def converse_stream(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(
            headers={"content-type": "application/vnd.amazon.eventstream"}
        )
        await response.prepare(request)
        await response.write(sent)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/model/{model}/converse-stream", converse_stream)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with start_proxy(
            "record", upstream=f"http://127.0.0.1:{port}", fixture=fixture_dir
        ) as proxy:
            recorded = await _raw(proxy.base_url)
    finally:
        await runner.cleanup()
    assert recorded == sent
    # The binary answer's wire.ndjson carries the format stamp first, as every other's does
    # (SPEC 15), and the reader skips it.
    stamp, *answers = (fixture_dir / "wire.ndjson").read_bytes().splitlines()
    assert json.loads(stamp) == {"format": RECORDING_FORMAT, "masks": MASKS_VERSION}
    assert [json.loads(line)["binary"] for line in answers] == [True]
    async with start_proxy("replay", fixture=fixture_dir, report=tmp_path / "r.json") as proxy:
        replayed = await _raw(proxy.base_url)
    assert replayed == sent  # the padding and the latency too: not a re-encoding
    events = EventStreamSplitter().feed(replayed)
    assert [event.name for event in events][-1] == "metadata"
    assert read_report(tmp_path / "r.json").ok


INVOKE_RULES = """
[[rule]]
match = { api = "bedrock", last_user = "invoke" }
reasoning = "Thinking it over."
text = "Invoked, streamed."
chunk_size = 4
usage = { input_tokens = 12, output_tokens = 5 }
"""


def _invocations(endpoint: str) -> list[Any]:
    """InvokeModelWithResponseStream and InvokeModel with an Anthropic payload: every
    Messages event boto3 hands over, then the whole message."""

    def body(prompt: str) -> str:
        messages = [{"role": "user", "content": prompt}]
        return json.dumps(
            {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 100, "messages": messages}
        )

    with closing(_client(endpoint)) as client:
        streamed = client.invoke_model_with_response_stream(
            modelId=MODEL, body=body("invoke, streamed")
        )
        seen: list[Any] = [json.loads(event["chunk"]["bytes"]) for event in streamed["body"]]
        whole = client.invoke_model(modelId=MODEL, body=body("invoke, whole"))
        seen.append(json.loads(whole["body"].read()))
    return seen


@pytest.mark.asyncio
async def test_bedrock_invoke_model_with_an_anthropic_payload_replays_alike(
    fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(INVOKE_RULES) as stub:
        direct = await asyncio.to_thread(_invocations, stub.base_url)
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await asyncio.to_thread(_invocations, proxy.base_url)
        paths = [r.path for r in stub.requests]
    assert recorded == direct
    assert f"/model/{MODEL.replace(':', '%3A')}/invoke-with-response-stream" in paths
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        replayed = await asyncio.to_thread(_invocations, proxy.base_url)
    assert replayed == recorded
    assert recorded[0]["type"] == "message_start"
    assert recorded[-1]["content"][-1] == {"type": "text", "text": "Invoked, streamed."}
    assert recorded[-1]["model"] == MODEL
    assert read_report(report).ok
    assert '"api":"bedrock-invoke"' in _written(fixture_dir)


LISTED_RULES = f"""
[[rule]]
name = "listed"  # the model the stub lists (its rules' ``match.model``)
match = {{ api = "bedrock", model = "{MODEL}", last_user = "never asked" }}
text = "Unused."

[[rule]]
match = {{ api = "bedrock", last_user = "invoke" }}
text = "Listed, then invoked."
"""


def _listings(endpoint: str) -> list[Any]:
    """Bedrock's control-plane listings (ListInferenceProfiles, ListFoundationModels) by
    boto3's ``bedrock`` client, then one InvokeModel: what boto3 parsed of each."""
    with closing(
        boto3.client(
            "bedrock",
            region_name="us-east-1",
            endpoint_url=endpoint,
            aws_access_key_id=KEY_ID,
            aws_secret_access_key=SECRET,
            config=Config(retries={"max_attempts": 1}),
        )
    ) as control:
        profiles = control.list_inference_profiles(typeEquals="SYSTEM_DEFINED")
        models = control.list_foundation_models()
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "invoke"}],
    }
    with closing(_client(endpoint)) as client:
        whole = json.loads(client.invoke_model(modelId=MODEL, body=json.dumps(body))["body"].read())
    return [
        profiles["inferenceProfileSummaries"],
        models["modelSummaries"],
        whole["content"],
    ]


@pytest.mark.asyncio
async def test_bedrock_model_listings_are_recorded_and_replayed_as_recorded(
    fixture_dir: Path, tmp_path: Path
) -> None:
    with StubServer.from_toml(LISTED_RULES) as stub:
        direct = await asyncio.to_thread(_listings, stub.base_url)
        async with start_proxy("record", upstream=stub.base_url, fixture=fixture_dir) as proxy:
            recorded = await asyncio.to_thread(_listings, proxy.base_url)
    assert recorded == direct
    assert recorded[0][0]["inferenceProfileId"] == MODEL
    assert recorded[1] == [{"modelId": MODEL, "modelName": MODEL}]
    assert proxy.errors == []
    assert proxy.warnings == []  # both listings spoken: nothing named at record
    kept = json.loads((fixture_dir / "models.json").read_text())["listings"]
    assert sorted(kept) == [
        "bedrock-converse/inference-profiles:type=SYSTEM_DEFINED",  # boto3: ?type=
        "bedrock-converse:",
    ]
    assert KEY_ID not in (fixture_dir / "models.json").read_text()
    report = tmp_path / "report.json"
    async with start_proxy("replay", fixture=fixture_dir, report=report) as proxy:
        assert await asyncio.to_thread(_listings, proxy.base_url) == recorded
    assert read_report(report).ok
    # A recording without the listings kept lists its calls' models in each listing's shape.
    (fixture_dir / "models.json").unlink()
    async with start_proxy("replay", fixture=fixture_dir) as proxy:
        profiles, models, _ = await asyncio.to_thread(_listings, proxy.base_url)
    assert [profile["inferenceProfileId"] for profile in profiles] == [MODEL]
    assert models == [{"modelId": MODEL, "modelName": MODEL}]
