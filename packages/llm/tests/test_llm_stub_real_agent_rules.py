"""Stub rules that script real agents, through the official SDKs against the stub server.

Each request here is shaped like what a real agent sends (REAL-AGENTS.md): Claude Code CLI
2.1.318 ends every request with a ``role: "system"`` environment message holding its cwd;
Codex 2.6 offers ``spawn_agent`` inside the ``multi_agent_v1`` namespace of a
responses-lite ``additional_tools`` item; each agent's subagent tool has its own schema;
side lanes (title, classifier) come beside the conversation.
"""

from __future__ import annotations

import json
from typing import Any, cast

import anthropic
import openai
import pytest

from agentreel.llm.stub import StubRulesError, StubServer, parse_rules

KEY = "agentreel-stub-not-a-secret"
CWD = "/tmp/agent-work-7"
ENVIRONMENT = (
    f"<env>\nPrimary working directory: {CWD}\nPlatform: linux\nOS Version: Linux 6.1\n</env>"
)


def _anthropic(server: StubServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=server.base_url, max_retries=0)


def _openai(server: StubServer) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=server.openai_base_url, max_retries=0)


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


STRING = {"type": "string"}
CLAUDE_TASK = {
    "name": "Task",
    "description": "Launch a new agent. Available agent types:\n- general-purpose: any task\n"
    "- Explore: search the code",
    "input_schema": _schema(
        {
            "description": {"type": "string", "description": "A short (3-5 word) description"},
            "prompt": STRING,
            "subagent_type": {"type": "string", "description": "The type of agent"},
            "run_in_background": {"type": "boolean"},
        },
        ["description", "prompt"],
    ),
}
CLAUDE_READ = {"name": "Read", "description": "Read a file", "input_schema": _schema({}, [])}


def _claude_request(server: StubServer, messages: list[dict[str, Any]]) -> anthropic.types.Message:
    with (
        _anthropic(server) as client,
        client.messages.stream(
            model="claude-sonnet-4-6",
            max_tokens=1024,
            system="You are Claude Code.",
            tools=cast(Any, [CLAUDE_READ, CLAUDE_TASK]),
            # Claude Code 2.1.318: the environment as a trailing system message.
            messages=cast(Any, [*messages, {"role": "system", "content": ENVIRONMENT}]),
        ) as stream,
    ):
        return stream.get_final_message()


CLAUDE_RULES = """
[[rule]]
name = "read, the cwd from the trailing environment message"
match = { last_user = "read notes.txt", tool_offered = "Read" }
tool_calls = [{ name = "Read", arguments = { file_path = "{{cwd}}/notes.txt" }, id = "toolu_1" }]

[[rule]]
name = "delegate"
match = { last_user = "delegate" }
call_subagent = { prompt = "Count the lines of notes.txt", id = "toolu_task" }

[[rule]]
name = "answer from the file"
match = { last_tool_result = "alpha beta" }
text = "It says alpha beta."
"""


def test_claude_code_trailing_system_message_is_looked_past_and_states_the_cwd() -> None:
    user = {"role": "user", "content": "Please read notes.txt"}
    with StubServer.from_toml(CLAUDE_RULES) as server:
        first = _claude_request(server, [user])
        call = first.content[0]
        assert call.type == "tool_use"
        result = {"type": "tool_result", "tool_use_id": call.id, "content": "alpha beta"}
        second = _claude_request(
            server,
            [
                user,
                {"role": "assistant", "content": [call.model_dump()]},
                {"role": "user", "content": [result]},
            ],
        )
    assert (call.name, call.input) == ("Read", {"file_path": f"{CWD}/notes.txt"})
    assert second.content[0].type == "text"
    assert second.content[0].text == "It says alpha beta."


def test_claude_code_task_arguments_come_from_its_schema() -> None:
    with StubServer.from_toml(CLAUDE_RULES) as server:
        message = _claude_request(server, [{"role": "user", "content": "delegate it"}])
    call = message.content[0]
    assert call.type == "tool_use"
    assert (call.name, call.id) == ("Task", "toolu_task")
    # The general-purpose kind its description lists; the optional boolean left out.
    assert call.input == {
        "description": "Count the lines of notes.txt",
        "prompt": "Count the lines of notes.txt",
        "subagent_type": "general-purpose",
    }
    assert message.stop_reason == "tool_use"


def _chat_tool(name: str, parameters: dict[str, Any], description: str = "") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _chat_calls(server: StubServer, tools: list[dict[str, Any]], text: str) -> list[Any]:
    with _openai(server) as client:
        completion = client.chat.completions.create(
            model="stub-model",
            tools=cast(Any, tools),
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": text},
            ],
        )
    return [
        (call.function.name, json.loads(call.function.arguments))  # type: ignore[union-attr]
        for call in completion.choices[0].message.tool_calls or []
    ]


SUBAGENT_RULES = """
[[rule]]
name = "two children at once"
match.last_user = "two"
call_subagent = [
  { prompt = "Read a.txt", agent = "alpha" },
  { prompt = "Read b.txt", agent = "beta" },
]

[[rule]]
name = "explicit tool"
match.last_user = "explicit"
call_subagent = { prompt = "Do it", tool = "delegate", arguments = { priority = 2 } }

[[rule]]
name = "one child"
match.last_user = "one"
call_subagent = { prompt = "Summarize notes.txt", description = "Summarize" }

[[rule]]
name = "no subagent tool: the rule above does not fit, this one answers"
text = "no subagent tool here"
"""


def test_opencode_task_gets_its_general_agent_and_every_required_property() -> None:
    task = _chat_tool(
        "task",
        _schema(
            {"description": STRING, "prompt": STRING, "subagent_type": STRING},
            ["description", "prompt", "subagent_type"],
        ),
        "Launch a subagent. Available agent types:\n- general: multi-step tasks\n- explore: search",
    )
    with StubServer.from_toml(SUBAGENT_RULES) as server:
        calls = _chat_calls(server, [_chat_tool("read", _schema({}, [])), task], "one child")
        plain = _chat_calls(server, [_chat_tool("read", _schema({}, []))], "one child")
        rules = [request.rule for request in server.requests]
    assert calls == [
        (
            "task",
            {
                "description": "Summarize",
                "prompt": "Summarize notes.txt",
                "subagent_type": "general",
            },
        )
    ]
    assert plain == []
    assert rules[1] == "rule 4 ('no subagent tool: the rule above does not fit, this one answers')"


def test_fast_agent_agents_as_tools_two_children_by_name() -> None:
    message = _schema({"message": STRING}, ["message"])
    tools = [_chat_tool("agent__alpha", message), _chat_tool("agent__beta", message)]
    with StubServer.from_toml(SUBAGENT_RULES) as server:
        calls = _chat_calls(server, tools, "two children")
    assert calls == [
        ("agent__alpha", {"message": "Read a.txt"}),
        ("agent__beta", {"message": "Read b.txt"}),
    ]


def test_vibe_run_typescript_spawns_through_tools_agents() -> None:
    tools = [_chat_tool("run_typescript", _schema({"code": STRING}, ["code"]))]
    rules = '[[rule]]\ncall_subagent = { prompt = "Read notes.txt", agent = "explore" }\n'
    with StubServer.from_toml(rules) as server:
        calls = _chat_calls(server, tools, "go")
    [(name, arguments)] = calls
    assert name == "run_typescript"
    assert (
        'tools.agents.spawn({"name": "explore", "message": "Read notes.txt"})'
        in (arguments["code"])
    )


def test_explicit_tool_override_and_arguments_win() -> None:
    tools = [
        _chat_tool("task", _schema({"prompt": STRING}, ["prompt"])),
        _chat_tool("delegate", _schema({"request": STRING, "priority": {"type": "integer"}}, [])),
    ]
    with StubServer.from_toml(SUBAGENT_RULES) as server:
        calls = _chat_calls(server, tools, "explicit")
    assert calls == [("delegate", {"request": "Do it", "priority": 2})]


CODEX_TOOLS = {
    "type": "additional_tools",
    "tools": [
        {"type": "function", "name": "exec_command", "parameters": _schema({}, [])},
        {
            "type": "namespace",
            "name": "multi_agent_v1",
            "description": "Subagents",
            "tools": [
                {
                    "type": "function",
                    "name": "spawn_agent",
                    "description": "Spawn a sub-agent.",
                    "parameters": _schema(
                        {
                            "message": STRING,
                            "agent_type": STRING,
                            "fork_context": {"type": "boolean"},
                        },
                        ["message"],
                    ),
                },
                {
                    "type": "function",
                    "name": "wait_agent",
                    "parameters": _schema({"targets": {"type": "array"}}, ["targets"]),
                },
            ],
        },
    ],
}

CODEX_RULES = """
[[rule]]
name = "spawn, the tool seen as ns.name"
match = { last_user = "spawn", tool_offered = "multi_agent_v1.spawn_agent" }
call_subagent = { prompt = "Read notes.txt in {{cwd}}", id = "call_spawn" }

[[rule]]
name = "wait, called by its namespaced name"
match = { last_tool_result = "agent_id", tool_offered_regex = "^(?P<wait>\\\\w+\\\\.wait_agent)$" }
tool_calls = [{ name = "{{wait}}", arguments = { targets = ["child"] }, id = "call_wait" }]
"""


def _codex_items(server: StubServer, tail: list[dict[str, Any]]) -> list[Any]:
    environment = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": f"<environment_context><cwd>{CWD}</cwd>"}],
    }
    with _openai(server) as client:
        response = client.responses.create(
            model="stub-model",
            stream=False,
            input=cast(Any, [CODEX_TOOLS, environment, *tail]),
        )
    return list(response.output)


def test_codex_namespaced_spawn_agent_is_offered_as_ns_name_and_called_by_it() -> None:
    user = {"type": "message", "role": "user", "content": "spawn a child"}
    with StubServer.from_toml(CODEX_RULES) as server:
        [spawn] = _codex_items(server, [user])
        output = {"type": "function_call_output", "call_id": "call_spawn", "output": "agent_id"}
        [wait] = _codex_items(server, [user, output])
    assert spawn.type == "function_call"
    assert (spawn.name, spawn.call_id) == ("spawn_agent", "call_spawn")
    assert spawn.namespace == "multi_agent_v1"
    assert json.loads(spawn.arguments) == {"message": f"Read notes.txt in {CWD}"}
    assert wait.type == "function_call"
    assert (wait.name, wait.namespace) == ("wait_agent", "multi_agent_v1")
    assert json.loads(wait.arguments) == {"targets": ["child"]}


LANE_RULES = """
[[rule]]
match.lane = "classifier"
text = "<severity>low</severity>"

[[rule]]
match.lane = "title"
json = { title = "Reading notes" }

[[rule]]
match.lane = "conversation"
text = "conversation"

[[rule]]
match.lane = "side"
text = "side"
"""


def test_lanes_are_matched_by_what_they_are() -> None:
    with StubServer.from_toml(LANE_RULES) as server, _anthropic(server) as client:
        classifier = client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=64,
            stop_sequences=["</severity>"],
            system="You are a security monitor. Rate the action.",
            messages=[{"role": "user", "content": "rm -rf build"}],
        )
        with client.messages.stream(
            model="claude-haiku-4-5",
            max_tokens=64,
            system="Generate a concise, sentence-case title for this conversation.",
            messages=[{"role": "user", "content": "read notes.txt"}],
        ) as stream:
            title = stream.get_final_text()
        with client.messages.stream(
            model="claude-sonnet-4-6",
            max_tokens=64,
            tools=cast(Any, [CLAUDE_READ]),
            messages=[{"role": "user", "content": "give this conversation a title"}],
        ) as stream:
            conversation = stream.get_final_text()
        with _openai(server) as chat:
            side = chat.chat.completions.create(
                model="m", stream=True, messages=[{"role": "user", "content": "suggest a reply"}]
            )
            side_text = "".join(c.choices[0].delta.content or "" for c in side if c.choices)
    assert classifier.content[0].type == "text"
    assert classifier.content[0].text == "<severity>low</severity>"
    assert json.loads(title) == {"title": "Reading notes"}
    assert conversation == "conversation"
    assert side_text == "side"


def test_cwd_rule_does_not_fit_a_request_stating_no_cwd() -> None:
    rules = (
        '[[rule]]\nmatch.last_user = "read"\ntext = "in {{cwd}}"\n'
        '[[rule]]\ntext = "no cwd stated"\n'
    )
    with StubServer.from_toml(rules) as server, _openai(server) as client:
        stated, unstated = (
            client.chat.completions.create(
                model="m",
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": "read it"},
                ],
            )
            .choices[0]
            .message.content
            for system in ("Working directory: /srv/app.", "Be brief.")
        )
    # The sentence's period is not part of the path.
    assert (stated, unstated) == ("in /srv/app", "no cwd stated")


def test_any_message_regex_captures_from_a_trailing_system_message() -> None:
    rules = (
        '[[rule]]\nmatch.any_message_regex = "OS Version: (?P<os>[^\\\\n]+)"\ntext = "on {{os}}"\n'
    )
    with StubServer.from_toml(rules) as server:
        message = _claude_request(server, [{"role": "user", "content": "hi"}])
    assert message.content[0].type == "text"
    assert message.content[0].text == "on Linux 6.1"


@pytest.mark.parametrize(
    ("rules", "fragment"),
    [
        ('[[rule]]\ncall_subagent = { prompt = " " }', "call_subagent[1].prompt is empty"),
        ('[[rule]]\ncall_subagent = { promt = "x" }', "promt"),
        ('[[rule]]\ncall_subagent = { prompt = "{{who}}" }', "call_subagent[1].prompt uses"),
        ('[[rule]]\nmatch.lane = "titel"\ntext = "x"', "match.lane"),
    ],
)
def test_new_keys_are_validated_strictly(rules: str, fragment: str) -> None:
    with pytest.raises(StubRulesError) as caught:
        parse_rules(rules, source="interop/fixtures/x/stub-rules.toml")
    assert "interop/fixtures/x/stub-rules.toml" in str(caught.value)
    assert fragment in str(caught.value)


def test_cwd_is_a_built_in_placeholder() -> None:
    rules = parse_rules('[[rule]]\ntext = "{{cwd}}"', source="r.toml")
    assert rules.rules[0].placeholders() == [("text", "cwd")]


def test_any_message_regex_sees_tool_results_of_every_api() -> None:
    # A tool result earlier in the conversation (not the last message): Chat Completions'
    # role "tool", Messages' tool_result, Responses' function_call_output and Gemini's
    # functionResponse all count as message text.
    from agentreel.llm.stub._rules import request_view

    result = "listing: secret-plans.txt"
    tool_result = {"type": "tool_result", "tool_use_id": "c1", "content": result}
    views = [
        request_view(
            "/v1/chat/completions",
            {
                "messages": [
                    {"role": "user", "content": "ls"},
                    {"role": "tool", "tool_call_id": "c1", "content": result},
                    {"role": "user", "content": "and now?"},
                ]
            },
        ),
        request_view(
            "/v1/messages",
            {
                "messages": [
                    {"role": "user", "content": "ls"},
                    {"role": "user", "content": [tool_result]},
                    {"role": "user", "content": "and now?"},
                ]
            },
        ),
        request_view(
            "/v1/responses",
            {
                "input": [
                    {"role": "user", "content": "ls"},
                    {"type": "function_call_output", "call_id": "c1", "output": result},
                    {"role": "user", "content": "and now?"},
                ]
            },
        ),
        request_view(
            "/v1beta/models/stub-model:streamGenerateContent",
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "ls"}]},
                    {
                        "role": "user",
                        "parts": [
                            {"functionResponse": {"name": "ls", "response": {"output": result}}}
                        ],
                    },
                    {"role": "user", "parts": [{"text": "and now?"}]},
                ]
            },
        ),
    ]
    assert [view.api for view in views] == ["openai", "anthropic", "responses", "gemini"]
    assert [result in view.all_text for view in views] == [True] * 4
