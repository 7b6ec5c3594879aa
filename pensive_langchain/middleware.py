"""Conversation memory for ``langchain.agents.create_agent``: ``PensiveMemoryMiddleware``.

Before each model call, the turns of the session that bear on the latest user message are
recalled from :meth:`Pensive.conversation` and appended to the system prompt (one line per turn,
``[2024-05-02] user: text``, as :func:`pensive_core.render_turn` renders it); after the agent
finishes, the user's message and the agent's final reply are stored as turns. This module only
converts messages to and from Pensive turns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage

from pensive_core import Pensive, render_turns
from pensive_core.errors import InputError
from pensive_core.memory import Conversation

__all__ = ["PensiveMemoryMiddleware"]

log = logging.getLogger(__name__)


def _last(messages: Sequence[AnyMessage], kind: type) -> tuple[int, Any] | None:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], kind):
            return i, messages[i]
    return None


class PensiveMemoryMiddleware(AgentMiddleware):
    """Long-term conversation memory for an agent, kept in a Pensive store.

    Args:
        pensive: The store holding the sessions.
        session_id: The session to remember into; if None, taken per run from the runtime
            context (a ``session_id`` key or attribute), else the thread id
            (``config["configurable"]["thread_id"]``).
        user: The user the session belongs to (see :meth:`Pensive.conversation`); with a user,
            recall covers all of that user's sessions, so a new session remembers the old ones.
        namespace: The session namespace.
        k: How many remembered turns to show the model.
        header: The line above the remembered turns in the system prompt.
        store_exchange: Store each run's user message and final reply as turns.

    Raises:
        InputError: On a ``k`` that is not a positive int.
    """

    def __init__(
        self,
        pensive: Pensive,
        *,
        session_id: str | None = None,
        user: str | None = None,
        namespace: str = "default",
        k: int = 5,
        header: str = "Relevant memories:",
        store_exchange: bool = True,
    ) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InputError(f"k must be a positive int, got {k!r}")
        super().__init__()
        self.pensive = pensive
        self.session_id = session_id
        self.user = user
        self.namespace = namespace
        self.k = k
        self.header = header
        self.store_exchange = store_exchange

    # -- helpers ------------------------------------------------------------------------------
    def _session(self, runtime: Any) -> Conversation:
        sid = self.session_id
        if sid is None:
            ctx = getattr(runtime, "context", None)
            sid = (
                ctx.get("session_id")
                if isinstance(ctx, Mapping)
                else getattr(ctx, "session_id", None)
            )
        if sid is None:
            info = getattr(runtime, "execution_info", None)
            sid = getattr(info, "thread_id", None)
        if sid is None:
            try:
                from langgraph.config import get_config

                sid = get_config().get("configurable", {}).get("thread_id")
            except RuntimeError:  # outside a runnable context
                sid = None
        if sid is None:
            raise InputError(
                "PensiveMemoryMiddleware needs a session: pass session_id=..., a runtime "
                "context with session_id, or config={'configurable': {'thread_id': ...}}"
            )
        return self.pensive.conversation(str(sid), namespace=self.namespace, user=self.user)

    def _with_memories(self, request: ModelRequest, chat: Conversation) -> ModelRequest:
        last = _last(request.messages, HumanMessage)
        query = last[1].text.strip() if last else ""
        scope: Literal["session", "user"] = "user" if self.user is not None else "session"
        if not query or (scope == "session" and not len(chat)):
            return request
        hits = chat.recall(query, self.k, scope=scope)
        if not hits:
            return request
        # one line per turn, as every Pensive prompt shows turns: "[2024-05-02] user: text"
        memo = f"{self.header}\n{render_turns(hits)}"
        prompt = request.system_prompt
        text = f"{prompt}\n\n{memo}" if prompt else memo
        return request.override(system_message=SystemMessage(content=text))

    # -- AgentMiddleware ------------------------------------------------------------------------
    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> Any:
        """Add the recalled turns to the system prompt, then call the model."""
        return handler(self._with_memories(request, self._session(request.runtime)))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> Any:
        """:meth:`wrap_model_call`, recalling in a worker thread."""
        chat = self._session(request.runtime)
        request = await asyncio.to_thread(self._with_memories, request, chat)
        return await handler(request)

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Store the run's user message and final reply as turns."""
        self._remember_into(state, self._session(runtime))
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """:meth:`after_agent` in a worker thread."""
        chat = self._session(runtime)  # resolved here: the run's config is in this context
        await asyncio.to_thread(self._remember_into, state, chat)
        return None

    def _remember_into(self, state: Mapping[str, Any], chat: Conversation) -> None:
        if not self.store_exchange:
            return
        messages = list(state.get("messages") or [])
        human = _last(messages, HumanMessage)
        if human is None:
            return
        reply = _last(messages[human[0] + 1 :], AIMessage)
        turns = [("user", human[1].text)]
        if reply is not None:
            turns.append(("assistant", reply[1].text))
        turns = [(role, text) for role, text in turns if text.strip()]
        if turns:
            chat.add_many(turns)
