"""LangChain chat message history backed by a Pensive conversation session."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
)

from pensive_core.errors import InputError
from pensive_core.types import Hit

__all__ = ["PensiveChatMessageHistory", "message_to_turn", "hit_to_message"]

_ROLES: dict[type[BaseMessage], str] = {
    HumanMessage: "user",
    AIMessage: "assistant",
    SystemMessage: "system",
}
_MESSAGES: dict[str, type[BaseMessage]] = {role: cls for cls, role in _ROLES.items()}
# what a turn keeps of a message beyond its role and text (``name`` also names the speaker)
_KEPT = ("id", "name")


def message_to_turn(message: BaseMessage) -> tuple[str, str, None, dict[str, Any]]:
    """A LangChain message as a Pensive turn ``(role, text, timestamp, metadata)``.

    Human, AI and system messages become "user", "assistant" and "system"; a
    :class:`ChatMessage` keeps its own role; any other message its type ("tool", ...).
    """
    if isinstance(message, ChatMessage):
        role = message.role
    else:
        role = next((r for cls, r in _ROLES.items() if isinstance(message, cls)), message.type)
    meta = {key: getattr(message, key) for key in _KEPT if getattr(message, key, None)}
    return role, message.text, None, meta


def hit_to_message(hit: Hit) -> BaseMessage:
    """A stored turn (from ``Conversation.history()``) as a LangChain message."""
    role = str(hit.metadata.get("role", ""))
    kept = {key: hit.metadata[key] for key in _KEPT if hit.metadata.get(key)}
    cls = _MESSAGES.get(role)
    if cls is None:
        return ChatMessage(content=hit.text, role=role, **kept)
    return cls(content=hit.text, **kept)


class PensiveChatMessageHistory(BaseChatMessageHistory):
    """The messages of one conversation session, kept in a Pensive store.

    The turns are Pensive conversation turns, so the same session also serves
    ``pensive.conversation(session_id).recall(...)`` and ``.context(...)``.

    Args:
        pensive: An open :class:`pensive_core.Pensive` store (the caller closes it).
        session_id: The session.
        namespace: The tenant or application namespace of the session.
        user: The user the session belongs to (for cross-session recall).

    Raises:
        InputError: On an empty session id, namespace or user, or a ``pensive`` without
            conversations.

    Examples:
        >>> history = PensiveChatMessageHistory(store, "session-42")  # doctest: +SKIP
        >>> history.add_messages([HumanMessage("Hi"), AIMessage("Hello!")])
        >>> [m.type for m in history.messages]
        ['human', 'ai']
    """

    def __init__(
        self,
        pensive: Any,
        session_id: str,
        *,
        namespace: str = "default",
        user: str | None = None,
    ) -> None:
        if not callable(getattr(pensive, "conversation", None)):
            raise InputError(
                f"pensive must be a pensive_core.Pensive store, got {type(pensive).__name__}"
            )
        super().__init__()
        self.pensive = pensive
        self.session_id = session_id
        self.conversation = pensive.conversation(session_id, namespace=namespace, user=user)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message of the session, oldest first."""
        return [hit_to_message(h) for h in self.conversation.history()]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store messages as turns, in one batch (nothing is stored if any is invalid).

        Raises:
            InputError: On a message without text.
        """
        if messages:
            self.conversation.add_many([message_to_turn(m) for m in messages])

    def clear(self) -> None:
        """Forget the session's messages (and its index and summaries)."""
        self.conversation.clear()

    def __repr__(self) -> str:
        return f"PensiveChatMessageHistory(session_id={self.session_id!r})"
