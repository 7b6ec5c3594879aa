"""The session host plug point: what a conversation session needs from the store that owns it.

A :class:`~pensive_core.memory.conversation.Conversation` never reaches into its owner. It is
given a host, and everything it uses of the owning store goes through these members: the
configuration, whether the store is read-only, the model and LLM it shares, a way to open its
own small stores and its log (through the owner's storage engine), the registry of the other
sessions (for a user's cross-session recall), the main store's passages (for
``documents_k``), and a way to say it was used (so the owner can release idle sessions).
:class:`~pensive_core.memory.manager.StoreHost` is the host of a :class:`~pensive_core.Pensive`
store; a test can give a fake.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..config import PensiveConfig
    from ..context.base import ContextGenerator
    from ..embedders.base import Embedder
    from ..engine import Pensive
    from ..types import Hit, QueryResult
    from .conversation import Conversation
    from .sessions import SessionInfo
    from .turns import TurnStore

__all__ = ["SessionHost"]


class SessionHost(Protocol):
    """What a conversation session needs from the store that owns it."""

    @property
    def config(self) -> PensiveConfig:
        """The owner's configuration: ``[memory]`` steers the session, and a session's own
        stores inherit the rest (see :func:`~pensive_core.memory.index.session_config`)."""
        ...

    @property
    def read_only(self) -> bool:
        """Whether the owner was opened read-only (then so is every session)."""
        ...

    @property
    def embedder(self) -> Embedder:
        """The owner's model as its sessions share it, loaded on first use: a session embeds
        its turns with it (for drift too) and its stores are opened with it."""
        ...

    @property
    def llm(self) -> Any:
        """The owner's LLM (None when there is none): summaries use it when configured."""
        ...

    def open_store(
        self,
        folder: Path,
        config: Mapping[str, Any],
        *,
        context_generator: ContextGenerator | None = None,
    ) -> Pensive:
        """Open one of a session's own stores (its turns, its windows) in ``folder``.

        Args:
            folder: Where the store lives (inside the session's folder).
            config: The store's configuration.
            context_generator: How its passages are situated, if not by ``config``.

        Returns:
            The store, read-only when the owner is, sharing :attr:`embedder`.
        """
        ...

    def check_writable(self) -> None:
        """Raise if the owner's store no longer takes writes (``pensive migrate`` moved it
        while this process had it open)."""
        ...

    def store_exists(self, folder: Path, config: Mapping[str, Any]) -> bool:
        """Whether one of a session's own stores in ``folder`` has been made (a read-only
        session does not make one).

        Args:
            folder: Where the store lives.
            config: The store's configuration (as for :meth:`open_store`).
        """
        ...

    def drop_session(self, info: SessionInfo) -> None:
        """Delete what a session keeps: its log and its own stores."""
        ...

    def open_turn_log(self, info: SessionInfo) -> TurnStore | None:
        """Open (or, unless read-only, create) a session's log of turns, summaries and pins.

        Args:
            info: The session's registration.

        Returns:
            The log, read-only when the owner is; None when read-only and there is none yet.
        """
        ...

    def sessions(self, namespace: str, user: str | None = None) -> list[SessionInfo]:
        """The registered sessions of ``namespace`` (of one user, if given), oldest first."""
        ...

    def session(self, session_id: str, namespace: str) -> Conversation:
        """Another session of the owner (for recall across one user's sessions).

        Raises:
            PensiveError: If the owner is closed.
        """
        ...

    def mark_used(self, conversation: Conversation) -> None:
        """Say ``conversation`` was just used (woken from suspension): the owner may release
        the files of the least recently used sessions."""
        ...

    def documents(self) -> int:
        """How many documents the owner's main store holds."""
        ...

    def query(self, text: str, k: int) -> QueryResult:
        """Ask the owner's main store (``documents_k`` passages in a session's prompt)."""
        ...

    def expand(self, hit: Hit, window: int | None = 1) -> str:
        """A main-store hit expanded to its neighbouring passages (see
        :meth:`~pensive_core.Pensive.expand`)."""
        ...
