"""Stub rules for real agents, through the official SDKs: match on model, header, an offered
tool or a structured-output request; answer with JSON; call a tool the request names; and
answer non-streaming requests with the same content.

Real agents send title and classifier calls on another model, identity in headers, tools
under their own names and JSON-schema requests; a rules file must be able to answer each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from pydantic import BaseModel

from agentreel.llm.stub import StubRulesError, StubServer, load_rules, parse_rules

KEY = "agentreel-stub-not-a-secret"

ROUTING = """
[[rule]]
name = "title"
match = { model_regex = "^(?P<family>haiku|mini)-", structured_output = true }
json = { title = "A {{family}} title" }

[[rule]]
name = "child"
match = { header = { "X-Agentreel-Session-Id" = "child-" } }
text = "child answer"

[[rule]]
name = "classifier"
match = { model = "classifier", stream = false }
text = "<severity>low</severity>"

[[rule]]
name = "read with the agent's own tool"
match.tool_offered_regex = "^(?P<read>Read|read|read_file)$"
match.system_regex = "Working directory: (?P<cwd>\\\\S+)"
match.last_user = "read notes"
tool_calls = [{ name = "{{read}}", arguments = { file_path = "{{cwd}}/notes.txt" } }]

[[rule]]
name = "call the tool the user names"
match = { last_user_regex = "call the (?P<tool>\\\\w+) tool with (?P<arg>\\\\w+)" }
text = "Calling {{tool}}."
tool_calls = [{ name = "{{tool}}", arguments = { value = "{{arg}}" }, id = "call_{{arg}}" }]

[[rule]]
name = "main"
text = "main answer"
"""


class Title(BaseModel):
    title: str


def _openai(server: StubServer, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(
        api_key=KEY, base_url=server.openai_base_url, max_retries=0, default_headers=headers
    )


def _anthropic(server: StubServer, **headers: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key=KEY, base_url=server.base_url, max_retries=0, default_headers=headers
    )


def _openai_stream_text(client: openai.OpenAI, model: str, text: str) -> str:
    stream = client.chat.completions.create(
        model=model, stream=True, messages=[{"role": "user", "content": text}]
    )
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def test_structured_output_request_on_a_small_model_gets_json_both_sdks() -> None:
    with StubServer.from_toml(ROUTING) as server:
        parsed = (
            _openai(server)
            .chat.completions.parse(
                model="mini-1",
                messages=[{"role": "user", "content": "name this chat"}],
                response_format=Title,
            )
            .choices[0]
            .message.parsed
        )
        message = _anthropic(server).messages.parse(
            model="haiku-4",
            max_tokens=64,
            messages=[{"role": "user", "content": "name this chat"}],
            output_format=Title,
        )
        # The same model without a JSON schema is not the title rule.
        plain = _openai_stream_text(_openai(server), "mini-1", "name this chat")
        rules = [request.rule for request in server.requests]
    assert parsed == Title(title="A mini title")
    assert message.parsed_output == Title(title="A haiku title")
    assert plain == "main answer"
    assert rules == ["rule 1 ('title')", "rule 1 ('title')", "rule 6 ('main')"]


def test_header_match_is_case_insensitive_and_needs_the_header() -> None:
    with StubServer.from_toml(ROUTING) as server:
        child = _openai_stream_text(
            _openai(server, **{"x-agentreel-session-id": "child-7"}), "m", "hi"
        )
        other = _openai_stream_text(
            _openai(server, **{"x-agentreel-session-id": "main-1"}), "m", "hi"
        )
        none = _openai_stream_text(_openai(server), "m", "hi")
        with _anthropic(server, **{"X-AGENTREEL-SESSION-ID": "child-2"}).messages.stream(
            model="m", max_tokens=32, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            anthropic_child = stream.get_final_text()
    assert (child, other, none, anthropic_child) == (
        "child answer",
        "main answer",
        "main answer",
        "child answer",
    )


def test_non_streaming_requests_get_the_whole_answer_as_one_body() -> None:
    with StubServer.from_toml(ROUTING) as server:
        completion = _openai(server).chat.completions.create(
            model="classifier", messages=[{"role": "user", "content": "rate it"}]
        )
        message = _anthropic(server).messages.create(
            model="classifier",
            max_tokens=64,
            stop_sequences=["</severity>"],
            messages=[{"role": "user", "content": "rate it"}],
        )
        # A streaming request on the same model is not the non-streaming classifier rule.
        streamed = _openai_stream_text(_openai(server), "classifier", "rate it")
    assert completion.choices[0].message.content == "<severity>low</severity>"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.completion_tokens >= 1
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "<severity>low</severity>"  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert streamed == "main answer"


def _read_tools(name: str) -> Any:
    schema = {"type": "object", "properties": {"file_path": {"type": "string"}}}
    return [
        {"type": "function", "function": {"name": "Bash", "parameters": schema}},
        {"type": "function", "function": {"name": name, "parameters": schema}},
    ]


@pytest.mark.parametrize("tool", ["Read", "read_file"])
def test_an_offered_tool_is_called_by_its_own_name_with_captured_arguments(tool: str) -> None:
    with StubServer.from_toml(ROUTING) as server:
        stream = _openai(server).chat.completions.create(
            model="m",
            stream=True,
            tools=_read_tools(tool),
            messages=[
                {"role": "system", "content": "Working directory: /tmp/work-42\nBe brief."},
                {"role": "user", "content": "please read notes"},
            ],
        )
        names: list[str] = []
        arguments = ""
        finish = None
        for chunk in stream:
            for choice in chunk.choices:
                for call in choice.delta.tool_calls or []:
                    if call.function and call.function.name:
                        names.append(call.function.name)
                    if call.function and call.function.arguments:
                        arguments += call.function.arguments
                finish = choice.finish_reason or finish
    assert names == [tool]
    assert json.loads(arguments) == {"file_path": "/tmp/work-42/notes.txt"}
    assert finish == "tool_calls"


def test_a_tool_named_in_the_request_is_called_streaming_and_not() -> None:
    prompt = [{"role": "user", "content": "please call the lookup tool with zebra"}]
    with StubServer.from_toml(ROUTING) as server:
        with _anthropic(server).messages.stream(
            model="m",
            max_tokens=64,
            messages=prompt,  # type: ignore[arg-type]
        ) as stream:
            streamed = stream.get_final_message()
        whole = _anthropic(server).messages.create(
            model="m",
            max_tokens=64,
            messages=prompt,  # type: ignore[arg-type]
        )
    for message in (streamed, whole):
        assert [block.type for block in message.content] == ["text", "tool_use"]
        assert message.content[0].text == "Calling lookup."  # type: ignore[union-attr]
        call = message.content[1]
        assert call.type == "tool_use"
        assert (call.name, call.id, call.input) == ("lookup", "call_zebra", {"value": "zebra"})
        assert message.stop_reason == "tool_use"


def test_non_streaming_tool_calls_through_the_openai_sdk() -> None:
    with StubServer.from_toml(ROUTING) as server:
        completion = _openai(server).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "call the grep tool with TODO"}]
        )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Calling grep."
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [  # type: ignore[union-attr]
        ("call_TODO", "grep", {"value": "TODO"})
    ]


def test_non_streaming_anthropic_answer_with_raw_arguments_is_a_named_error() -> None:
    rules = '[[rule]]\nname = "raw"\ntool_calls = [{ name = "t", arguments = "{not json" }]\n'
    with StubServer.from_toml(rules) as server:
        with pytest.raises(anthropic.InternalServerError) as caught:
            _anthropic(server).messages.create(
                model="m", max_tokens=8, messages=[{"role": "user", "content": "x"}]
            )
        # Streaming keeps raw argument text as it is (to test clients on malformed JSON).
        events = _anthropic(server).messages.create(
            model="m", max_tokens=8, stream=True, messages=[{"role": "user", "content": "x"}]
        )
        pieces = [
            event.delta.partial_json
            for event in events
            if event.type == "content_block_delta" and event.delta.type == "input_json_delta"
        ]
    assert "rule 1 ('raw')" in str(caught.value)
    assert "not JSON" in str(caught.value)
    assert "".join(pieces) == "{not json"


def test_non_streaming_faults_reach_the_client() -> None:
    rules = (
        '[[rule]]\nmatch.last_user = "cut"\ntext = "never whole"\ncut_after = 1\n'
        '[[rule]]\nmatch.last_user = "err"\ntext = "x"\nerror_after = 0\n'
    )
    with StubServer.from_toml(rules) as server:
        client = _openai(server)
        with pytest.raises(openai.APIConnectionError):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "cut"}])
        with pytest.raises(openai.InternalServerError, match="error_after"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "err"}])
        assert server.wait_for_requests(2)  # the server marks an outcome after replying
        outcomes = [request.outcome for request in server.requests]
    assert outcomes == ["cut", "error"]


@pytest.mark.parametrize(
    ("rules", "fragments"),
    [
        (
            '[[rule]]\nmatch.last_user_regex = "(?P<who>\\\\w+)"\ntext = "hi {{whom}}"',
            ["text uses {{whom}}", "group named 'whom'", "named groups here: who"],
        ),
        (
            '[[rule]]\ntool_calls = [{ name = "{{tool}}" }]',
            ["tool_calls[1].name uses {{tool}}", "none (add a named group"],
        ),
        (
            '[[rule]]\nmatch.model = "m"\njson = { a = "{{x}}" }',
            ["json.a uses {{x}}"],
        ),
        ('[[rule]]\ntext = "a"\njson = { a = 1 }', ["either text or json"]),
        ('[[rule]]\nmatch.header_regex = { x-id = "(" }', ["match.header_regex.x-id", "regex"]),
        ('[[rule]]\nmatch.tool_offered_regex = "["', ["match.tool_offered_regex"]),
        ('[[rule]]\nmatch.header = "x-id"', ["rule[1].match.header", "object"]),
        (
            "[[rule]]\nmatch.header = { x-id = 3 }",
            ["rule[1].match.header", "Expected `str`, got `int`"],
        ),
        ("[[rule]]\nmatch.streaming = false", ["streaming", "stream"]),
        ("[[rule]]\njson = 3", ["rule[1].json"]),
    ],
)
def test_new_rule_keys_are_validated_strictly(rules: str, fragments: list[str]) -> None:
    with pytest.raises(StubRulesError) as caught:
        parse_rules(rules, source="fixtures/x/stub-rules.toml")
    message = str(caught.value)
    assert "fixtures/x/stub-rules.toml" in message
    for fragment in fragments:
        assert fragment in message, message


def test_rules_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "stub-rules.toml"
    path.write_text('[[rule]]\nmatch.last_user = "x"\ntext = "{{nope}}"\n')
    with pytest.raises(StubRulesError, match=str(path)):
        load_rules(path)


def test_unmatched_request_summary_says_streaming_and_structured_output() -> None:
    rules = '[[rule]]\nmatch.model = "only-this"\ntext = "x"\n'
    with StubServer.from_toml(rules) as server, pytest.raises(openai.BadRequestError) as caught:
        _openai(server).chat.completions.parse(
            model="other",
            messages=[{"role": "user", "content": "hello"}],
            response_format=Title,
        )
    message = str(caught.value)
    assert "not streaming" in message
    assert "structured output" in message
    assert "'other'" in message
