"""The model conversation, rebuilt from session events.

The live loop feeds every event it appends, and a fork child feeds its seed, through the
same ``apply``: a fork child therefore sees exactly the conversation its parent had at the
end of its last completed turn.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentreel.llm import Message, ToolResultPart
from agentreel.session import AssistantMessage, Event, ToolResult, UserMessage


class Conversation:
    """Messages for the next model call: user messages, assistant messages, tool results."""

    __slots__ = ("_messages",)

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._messages: list[Message] = []
        for event in events:
            self.apply(event)

    def apply(self, event: Event) -> None:
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
