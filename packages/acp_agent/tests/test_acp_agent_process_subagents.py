"""Process subagents (SPEC 6): with ``--subagent-runner process`` each spawned child is an
agent process of its own, driven over ACP by its parent.

The reference agent runs as a subprocess driven by the official ACP client, against the
stub model server. What must hold: two children run as two agent processes; each writes
its own log with the lineage its parent announced (so the sessions root harvests as one
tree, children in spawn order); a child's write asks the editor through its parent;
``--max-depth`` bounds the nesting across processes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.schema import AllowedOutcome, RequestPermissionResponse

from agentreel.llm.stub import StubServer
from agentreel.session import (
    RequestHeader,
    SubagentStart,
    ToolResult,
    TurnEnd,
    harvest_session_logs,
)

RULES = """
[[rule]]
name = "fan out to two processes"
match = { last_user = "fan out" }
interleave = true
[[rule.tool_calls]]
id = "p1"
name = "subagent"
arguments = { description = "a", prompt = "task alpha: write alpha.txt", mode = "process" }
[[rule.tool_calls]]
id = "p2"
name = "subagent"
arguments = { description = "b", prompt = "task beta", mode = "spawn" }

[[rule]]
name = "parent merges"
match = { last_tool_result = "beta result", any_message = "alpha wrote its file" }
text = "merged alpha and beta"

[[rule]]
name = "child alpha writes"
match = { last_user = "task alpha" }
[[rule.tool_calls]]
id = "w1"
name = "write_file"
arguments = { path = "alpha.txt", content = "from a child process" }

[[rule]]
name = "child alpha answers"
match = { last_tool_result = "wrote" }
text = "alpha wrote its file"
delay_ms = 30

[[rule]]
name = "child beta answers"
match = { last_user = "task beta" }
text = "beta result"
delay_ms = 30

[[rule]]
name = "nest deeper"
match = { last_user = "go deeper" }
[[rule.tool_calls]]
id = "d1"
name = "subagent"
arguments = { description = "d", prompt = "go deeper still", mode = "process" }

[[rule]]
name = "refused nesting reported"
match = { last_tool_result = "nesting is limited" }
text = "could not nest"

[[rule]]
name = "inner child answers"
match = { last_tool_result = "could not nest" }
text = "outer done"
"""


class Editor:
    def __init__(self) -> None:
        self.permissions: list[Any] = []
        self.text = ""

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **_: Any
    ) -> RequestPermissionResponse:
        self.permissions.append(tool_call)
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="allow")
        )

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        if getattr(update, "session_update", None) == "agent_message_chunk":
            self.text += update.content.text


async def _run(tmp_path: Path, stub: StubServer, prompt_text: str, *flags: str) -> Editor:
    workspace = tmp_path / "work"
    workspace.mkdir()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "NO_PROXY": "127.0.0.1,localhost",
        "AGENTREEL_PROVIDER": "stub",
        "AGENTREEL_STUB_URL": stub.base_url,
        "AGENTREEL_SESSIONS_ROOT": str(tmp_path / "sessions"),
    }
    editor = Editor()
    with (tmp_path / "agent.stderr").open("wb") as stderr:
        async with acp.spawn_agent_process(
            editor,  # type: ignore[arg-type]
            sys.executable,
            "-m",
            "agentreel.acp_agent",
            "--subagent-runner",
            "process",
            *flags,
            env=env,
            cwd=str(tmp_path),
            transport_kwargs={"stderr": stderr, "shutdown_timeout": 30.0},
        ) as (conn, _process):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            result = await conn.prompt(
                session_id=session.session_id, prompt=[acp.text_block(prompt_text)]
            )
            assert result.stop_reason == "end_turn", (tmp_path / "agent.stderr").read_text()
    return editor


@pytest.mark.asyncio
async def test_two_process_children_run_concurrently_and_log_one_tree(tmp_path: Path) -> None:
    with StubServer.from_toml(RULES, source="process subagent rules") as stub:
        editor = await _run(tmp_path, stub, "fan out, please")
        requests = stub.requests
    assert editor.text == "merged alpha and beta"
    # The child's write asked the editor, through the parent process.
    assert len(editor.permissions) == 1
    assert "alpha.txt" in json.dumps(editor.permissions[0].raw_input)
    assert (tmp_path / "work" / "alpha.txt").read_text() == "from a child process"

    main, first, second = harvest_session_logs(tmp_path / "sessions")
    assert main.header.parent_session is None
    starts = [e.data for e in main.events if isinstance(e, SubagentStart)]
    assert [(s.child_session, s.spawn_index) for s in starts] == [
        (first.header.id, 0),
        (second.header.id, 1),
    ]
    for index, child in enumerate((first, second)):
        assert child.header.parent_session == main.header.id
        assert child.header.spawn_index == index
        assert child.header.origin == "spawn"
        assert isinstance(child.events[-1], TurnEnd)
        assert child.events[-1].data.reason == "completed"
    # Only with process subagents is mode "process" offered (the schema is recorded).
    headers = [e.data for e in main.events if isinstance(e, RequestHeader)]
    assert headers
    assert all(h.tools for h in headers)
    sent_modes = requests[0].body["tools"][-1]["function"]["parameters"]["properties"]["mode"]
    assert sent_modes["enum"] == ["spawn", "fork", "process"]
    results = [e.data.content for e in main.events if isinstance(e, ToolResult)]
    assert results == ["alpha wrote its file", "beta result"]


@pytest.mark.asyncio
async def test_max_depth_bounds_nesting_across_processes(tmp_path: Path) -> None:
    with StubServer.from_toml(RULES, source="process subagent rules") as stub:
        editor = await _run(tmp_path, stub, "go deeper", "--max-depth", "1")
    assert editor.text == "outer done"
    main, child = harvest_session_logs(tmp_path / "sessions")
    assert child.header.parent_session == main.header.id
    refused = [e.data for e in child.events if isinstance(e, ToolResult)]
    assert len(refused) == 1
    assert refused[0].is_error
    assert "nesting is limited to depth 1" in refused[0].content
