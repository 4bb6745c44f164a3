"""The model conversation, rebuilt from session events.

An agent loop feeds every event it appends, and a fork child feeds its seed (the parent's
events up to its last completed turn), through the same ``apply``: a fork child therefore
sees exactly the conversation its parent had at the end of its last completed turn. Which
events count: ``user/message`` (a user message), ``assistant/message`` (the assistant's
completed blocks) and ``tool/result`` (one tool message per result); everything else is
ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agentreel.brand import SessionId
from agentreel.llm import GenerateOptions, Message, ToolResultPart, ToolSpec
from agentreel.session._events import AssistantMessage, Event, ToolResult, UserMessage
from agentreel.session._store import Session


class Conversation:
    """Messages for the next model call: user messages, assistant messages, tool results.

    ``Conversation(session.events)`` rebuilds a fork child's conversation from its seed.
    """

    __slots__ = ("_messages",)

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._messages: list[Message] = []
        for event in events:
            self.apply(event)

    def apply(self, event: Event) -> None:
        """Add what ``event`` contributes to the conversation (most events add nothing)."""
        if isinstance(event, UserMessage):
            self._messages.append(Message.user(event.data.text))
        elif isinstance(event, AssistantMessage):
            self._messages.append(event.data.message)
        elif isinstance(event, ToolResult):
            # One tool message per result: every provider wire format accepts that.
            part = ToolResultPart(
                call_id=event.data.call_id, content=event.data.content, is_error=event.data.is_error
            )
            self._messages.append(Message(role="tool", content=(part,)))

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self._messages)

    def __len__(self) -> int:
        return len(self._messages)


def call_options(
    session: Session,
    *,
    model: str,
    tools: Sequence[ToolSpec] = (),
    system: str | None = None,
    messages: Sequence[Message] | None = None,
) -> GenerateOptions:
    """The ``GenerateOptions`` of ``session``'s next model call, identity included.

    ``session_id``, ``parent_session_id`` and ``spawn_index`` come from the session's
    header — what replay binds the caller by. ``messages`` defaults to the conversation
    rebuilt from the session's events so far.
    """
    header = session.header
    return GenerateOptions(
        model=model,
        messages=tuple(messages) if messages is not None else Conversation(session.events).messages,
        system=system,
        tools=tuple(tools),
        session_id=session.id,
        parent_session_id=SessionId(header.parent_session) if header.parent_session else None,
        spawn_index=header.spawn_index,
    )
