"""``PensiveMemoryBlock``: long-term memory for ``llama_index.core.memory.Memory``.

Messages that ``Memory`` flushes out of its short-term queue are added as turns of a Pensive
conversation; on each ``get`` the block answers with what that conversation recalls for the
latest user message. Recalled turns read as everywhere in Pensive,
``[2024-05-02] user: text`` (:func:`pensive_core.render_turn`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pensive_core import Conversation, Pensive, render_turn, render_turns
from pensive_core.errors import InputError, MissingDependencyError

try:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.bridge.pydantic import Field
    from llama_index.core.memory import BaseMemoryBlock
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("llama_index.core", "llamaindex", "pensive_llamaindex") from exc

__all__ = ["PensiveMemoryBlock", "render_turn"]


def _text(message: ChatMessage) -> str:
    content = message.content
    return content.strip() if isinstance(content, str) else ""


def _role(message: ChatMessage) -> str:
    role = message.role
    return role.value if isinstance(role, MessageRole) else str(role)


class PensiveMemoryBlock(BaseMemoryBlock[str]):
    """A memory block backed by ``pensive.conversation(session_id)``.

    Args:
        pensive: The open store holding the conversation.
        session_id: The Pensive session; None uses the ``Memory``'s own session id.
        user: The user the session belongs to (see :meth:`Pensive.conversation`).
        namespace: The Pensive namespace of the session.
        mode: ``"context"``: :meth:`Conversation.context` for the last user message within
            ``token_budget`` (summaries, recalled turns, recent turns; not the message itself,
            which ``Memory`` already sends); ``"recall"``: the ``k`` recalled turns, one per
            line.
        token_budget: Tokens for ``"context"``.
        strategy: How ``"context"`` shows recalled turns (``"weighted"``, ``"recency"``...,
            see :mod:`pensive_core.memory.strategies`); None: ``[memory] prompt_strategy``.
        k: Turns for ``"recall"``.
        name: The block's name in the memory template.
    """

    name: str = Field(default="pensive_memory", description="The memory block's name.")
    pensive: Pensive = Field(description="The Pensive store holding the conversation.")
    session_id: str | None = Field(default=None, description="Pensive session id.")
    user: str | None = Field(default=None, description="The session's user.")
    namespace: str = Field(default="default", description="The session's namespace.")
    mode: Literal["context", "recall"] = Field(default="context", description="What aget gives.")
    token_budget: int = Field(default=1000, gt=0, description="Tokens for mode 'context'.")
    k: int = Field(default=5, gt=0, description="Turns for mode 'recall'.")
    strategy: str | None = Field(default=None, description="Prompt strategy for 'context'.")

    def conversation(self, session_id: str | None = None) -> Conversation:
        """The Pensive conversation this block reads and writes.

        Args:
            session_id: The ``Memory``'s session id, used when the block names none.

        Raises:
            InputError: If neither the block nor the caller names a session.
        """
        sid = self.session_id or session_id
        if not sid:
            raise InputError(
                "PensiveMemoryBlock needs a session: pass session_id=... or use it inside a "
                "llama_index Memory (which passes its own session id)"
            )
        return self.pensive.conversation(sid, namespace=self.namespace, user=self.user)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        turns = [(_role(m), _text(m)) for m in messages if _text(m)]
        if not turns:
            return
        sid = next(
            (m.additional_kwargs.get("session_id") for m in messages if m.additional_kwargs),
            None,
        )
        conv = self.conversation(sid)
        await asyncio.to_thread(conv.add_many, turns)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = next(
            (_text(m) for m in reversed(messages or []) if _role(m) == "user" and _text(m)),
            "",
        )
        if not query:
            return ""
        conv = self.conversation(block_kwargs.get("session_id"))
        if not conv.history(limit=1):
            return ""
        if self.mode == "context":
            # the user's message is in Memory's chat already: not repeated as a question
            return await asyncio.to_thread(
                conv.context, query, self.token_budget, show_query=False, strategy=self.strategy
            )
        hits = await asyncio.to_thread(conv.recall, query, self.k)
        return render_turns(hits)
