"""The lane model replay and the proxy's recorder share (SPEC 11): what a lane is and how
a request finds its own — by what it is, never by when it arrived.

One caller identity holds several conversations, its *lanes*: its main conversation and its
side calls (title, router, classifier). A request belongs to the lane of its signature
(``lane_signature``: model, system prompt, tools, first message) whose previous request and
recorded reply it continues (``chain``, over ``message_digests`` and ``recorded_reply``). A
child conversation is found by what its parent handed on (``delegations``: a tool call's
argument strings, a reply text's payloads and argument blocks; ``delegated_by`` and
``wrapped_delegation``, with ``first_user_texts`` and ``restates`` telling a child from a
side call); a conversation handed over (``handoff``: a transfer call, or another's history
under a new system prompt) is the handing conversation's child; one asked again with fewer
tools (``narrows``, over ``tool_digests``) is the same conversation. Live values a request
carries are numbered and written as placeholders (``captured_values`` over
``request_strings``, ``tokenized_chunks``); ``delta_text`` is a delta chunk's text.

Replay binds by these rules (``ReplayProvider``); the proxy's record mode
(``agentreel.llm_proxy``) files each recorded call by the same ones, so what it records
binds back the same way. Most users need none of this: ``agentreel.llm_replay`` holds what
replaying takes.
"""

from agentreel.llm_replay._captures import captured_values, request_strings, tokenized_chunks
from agentreel.llm_replay._deltas import delta_text
from agentreel.llm_replay._lanes import (
    Chain,
    Delegation,
    LaneSignature,
    PartialLanes,
    Reply,
    argument_blocks,
    argument_strings,
    chain,
    delegated_by,
    delegations,
    first_user_text,
    first_user_texts,
    handoff,
    lane_signature,
    message_digests,
    narrows,
    recorded_reply,
    restates,
    tool_digests,
    wrapped_delegation,
)

__all__ = [
    "Chain",
    "Delegation",
    "LaneSignature",
    "PartialLanes",
    "Reply",
    "argument_blocks",
    "argument_strings",
    "captured_values",
    "chain",
    "delegated_by",
    "delegations",
    "delta_text",
    "first_user_text",
    "first_user_texts",
    "handoff",
    "lane_signature",
    "message_digests",
    "narrows",
    "recorded_reply",
    "request_strings",
    "restates",
    "tokenized_chunks",
    "tool_digests",
    "wrapped_delegation",
]
