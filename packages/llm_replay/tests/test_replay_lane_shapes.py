"""The lane model's delegation shapes (SPEC 17), as the recorder and the binder call them:
a text protocol's argument block, a task inside a template, a handoff, fewer tools."""

from __future__ import annotations

import json

from agentreel.llm import BlockEnd, TextPart, ToolCallPart
from agentreel.llm_replay.lanes import (
    Delegation,
    argument_blocks,
    delegations,
    handoff,
    lane_signature,
    narrows,
    tool_digests,
    wrapped_delegation,
)
from agentreel.session import MessageHeader, RequestHeaderData, ToolHeader

QUESTION = "How many apples are in the basket on the table?"


def _text(text: str) -> BlockEnd:
    return BlockEnd(index=0, block=TextPart(text=text))


def _call(name: str, arguments: dict[str, str]) -> BlockEnd:
    return BlockEnd(
        index=0, block=ToolCallPart(id=f"call_{name}", name=name, arguments=json.dumps(arguments))
    )


def test_an_action_input_block_and_key_value_lines_are_argument_blocks() -> None:
    """crewai's JSON ``Action Input`` and a ``key: value`` block after ``Action:``; values
    shorter than a task (a coworker's name) are not tasks."""
    block = json.dumps({"question": QUESTION, "coworker": "Apple Counter"})
    text = f"Thought: ask.\nAction: Ask question to coworker\nAction Input: {block}"
    ((said, tasks),) = argument_blocks(text)
    assert said.startswith("Ask question to coworker('{")
    assert tasks == {QUESTION}
    lines = f"Action: Delegate work to coworker\ntask: {QUESTION}\ncoworker: Apple Counter"
    assert argument_blocks(lines) == [
        ("Delegate work to coworker('" + f"{QUESTION} Apple Counter')", frozenset({QUESTION}))
    ]
    assert argument_blocks("Thought: I now know the final answer\nFinal Answer: 7") == []


def test_a_task_inside_a_template_is_found_only_as_a_block_or_for_an_agent() -> None:
    """A text protocol's task inside the coworker's template is its delegation; a tool
    call's prompt behind a prefix only for a conversation offering tools (not a title
    call quoting it)."""
    action = f"Action: Ask question to coworker\nAction Input: {json.dumps({'question': QUESTION})}"
    issued = delegations([_text(action), _call("task", {"prompt": QUESTION})])
    wrapped = frozenset({f"\nCurrent Task: {QUESTION}\n\nBegin!"})
    found = wrapped_delegation(wrapped, issued, set(), offers_tools=False)
    assert found is not None
    assert found.block
    assert found.said.startswith("text action Ask")
    tool_only = [d for d in issued if not d.in_text]
    assert wrapped_delegation(wrapped, tool_only, set(), offers_tools=False) is None
    found = wrapped_delegation(wrapped, tool_only, set(), offers_tools=True)
    assert found is not None
    assert found.tool == "task"
    every = {d.ordinal for d in issued}
    assert wrapped_delegation(wrapped, issued, every, offers_tools=True) is None


def test_a_handoff_is_the_latest_replys_transfer_call() -> None:
    """The receiver carrying the history names the handing call: a transfer-named call of
    the latest reply; a tool-less request carrying it after an ordinary call (a summary, a
    classifier judging the call) is no handoff."""
    first = delegations([_call("read_file", {"path": "notes.txt"})], call=0)
    latest = delegations(
        [_call("lookup", {"q": "x"}), _call("transfer_to_agent", {"agent_name": "alpha"})],
        len(first),
        call=1,
    )
    issued = first + latest

    def tool(
        among: list[Delegation],
        claimed: set[int],
        latest_call: int,
        *,
        continues: bool = True,
        offers_tools: bool = False,
        later: tuple[str, ...] = (),
    ) -> str | None:
        found = handoff(
            among,
            claimed,
            latest_call,
            continues=continues,
            carries_first=True,
            offers_tools=offers_tools,
            later_texts=later,
        )
        return found.tool if found is not None else None

    assert tool(issued, set(), 1) == "transfer_to_agent"
    rewritten = ("[coordinator] called tool `transfer_to_agent` with parameters: {...}",)
    assert tool(issued, set(), 1, continues=False, offers_tools=True, later=rewritten) == (
        "transfer_to_agent"
    )
    assert tool(first, set(), 0) is None  # a summary carrying it after read_file
    judged = ("## Pending tool call to classify\n\nTool: read_file",)
    assert tool(first, set(), 0, continues=False, later=judged) is None
    assert tool(issued, {2}, 1, offers_tools=True) == "lookup"
    assert tool(issued, {2}, 1) is None


def _header(tools: tuple[str, ...], system: str = "You are the lead.") -> RequestHeaderData:
    return RequestHeaderData(
        turn=0,
        step=0,
        model="m",
        system=system,
        tools=tuple(ToolHeader(name=t, digest=f"d-{t}") for t in tools),
        tools_digest="-".join(tools),
        messages=(MessageHeader(role="user", digest="u1", preview="How many?"),),
        message_count=1,
    )


def test_fewer_tools_narrow_the_same_conversation_only() -> None:
    """autogen's reflection (no tools) narrows the lead's lane; more or other tools, or
    another system prompt, do not."""
    lead = _header(("apples_agent", "pears_agent"))
    signature, tools = lane_signature(lead), tool_digests(lead)
    assert narrows(signature, tools, _header(()))
    assert narrows(signature, tools, _header(("apples_agent",)))
    assert not narrows(signature, tools, lead)
    assert not narrows(signature, tools, _header(("apples_agent", "pears_agent", "x")))
    assert not narrows(signature, tools, _header((), system="You are alpha."))
