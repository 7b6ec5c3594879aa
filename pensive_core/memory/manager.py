"""The conversation sessions of one store: :meth:`Pensive.conversation` hands its work here.

:class:`Sessions` keeps the open sessions (one object per session, asked for again or not),
their registry, the release of idle ones past ``[memory] max_open_sessions`` and the embedder
the sessions share. :class:`StoreHost` is what each session is given of the store: a
:class:`~.host.SessionHost` made of the store's public API alone.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..embedders.base import Embedder, QueryCache
from ..errors import NotFoundError, PensiveError
from .sessions import SessionCatalog, SessionInfo, check_name

if TYPE_CHECKING:
    from ..config import PensiveConfig
    from ..context.base import ContextGenerator
    from ..engine import Pensive
    from ..types import Hit, QueryResult
    from .conversation import Conversation
    from .turns import TurnStore

__all__ = ["Sessions", "StoreHost"]

_QUERY_MEMO = 32  # query vectors the sessions' embedder remembers


class Sessions:
    """The conversation sessions of one store.

    Sessions have locks of their own, and this one is apart from the store's: opening a
    session never waits for an ingest in flight. Nothing is opened until a session (or the
    list of them) is asked for.

    Args:
        store: The owning store (only its public API is used).

    Attributes:
        host: What every session of the store is given of it.
    """

    def __init__(self, store: Pensive) -> None:
        self._store = store
        self._lock = threading.RLock()
        self._open: dict[tuple[str, str], Conversation] = {}
        self._registry: SessionCatalog | None = None
        self._memo: QueryCache | None = None
        self._closed = False
        self.host = StoreHost(store, self)

    def open(
        self,
        session_id: str,
        *,
        namespace: str = "default",
        user: str | None = None,
        create: bool = True,
    ) -> Conversation:
        """The session ``session_id`` of ``namespace``, registered if new (the same object
        while it is open). See :meth:`Pensive.conversation`.

        Raises:
            InputError: On an empty or non-string id, namespace or user, or a user that
                contradicts the session's.
            NotFoundError: If ``create`` is False and the session is not registered (nothing
                is created, on disk or in the registry).
            PensiveError: If the store is closed.
        """
        if self._closed:
            raise PensiveError(f"this Pensive store ({self._store.path}) is closed")
        session_id = check_name(session_id, "session_id")
        namespace = check_name(namespace, "namespace")
        if user is not None:
            user = check_name(user, "user")
        with self._lock:
            # asked for by a read: look it up in the registry (a read-only store keeps
            # unregistered sessions open too), and never register or make a folder
            if not create and self.registry.get(namespace, session_id) is None:
                where = "" if namespace == "default" else f" in namespace {namespace!r}"
                raise NotFoundError(
                    f"no session {session_id!r}{where}; adding a turn to it creates it"
                )
            key = (namespace, session_id)
            conv = self._open.get(key)
            if conv is not None and not conv.closed:
                self.mark_used(conv)
                if user is not None and conv.user != user:
                    conv.update_info(self.registry.register(namespace, session_id, user))
                return conv
            from .conversation import Conversation

            info = self.registry.register(namespace, session_id, user)
            conv = Conversation(self.host, info)
            self._open[key] = conv
            self.mark_used(conv)
            return conv

    def ids(self, namespace: str = "default", user: str | None = None) -> list[str]:
        """The session ids registered in ``namespace`` (of one user, if given), oldest first."""
        with self._lock:
            return [s.session_id for s in self.registry.sessions(namespace, user)]

    @property
    def registry(self) -> SessionCatalog:
        """The registry of the store's sessions (opened on first use, through the storage
        engine)."""
        with self._lock:
            if self._registry is None:
                self._registry = self._store.components.storage.open_session_catalog()
            return self._registry

    @property
    def embedder(self) -> Embedder:
        """The store's embedder as its sessions share it: remembering its last query vectors
        (a recall asks the turn index and the window index the same question, and should
        embed it once), unless the store's already does."""
        made = self._store.embedder
        if isinstance(made, QueryCache):
            return made
        memo = self._memo
        if memo is None or memo.inner is not made:
            memo = QueryCache(made, _QUERY_MEMO)
            self._memo = memo
        return memo

    def mark_used(self, keep: Conversation) -> None:
        """``keep`` is the most recently used session; past ``[memory] max_open_sessions``
        open ones, the least recently used release their files (they reopen on next use;
        one in use by another thread is skipped, never waited for)."""
        with self._lock:
            key = (keep.namespace, keep.session_id)
            if self._open.get(key) is keep:
                self._open[key] = self._open.pop(key)
            live = [c for c in self._open.values() if not c.closed and not c.suspended]
            excess = len(live) - self._store.config.memory.max_open_sessions
            for conv in live:
                if excess <= 0:
                    break
                if conv is not keep and conv.suspend():
                    excess -= 1

    def close(self) -> None:
        """Close every open session and the registry (the store is closing)."""
        self._closed = True
        for conv in list(self._open.values()):
            conv.close()
        self._open.clear()
        if self._registry is not None:
            self._registry.close()


class StoreHost:
    """The :class:`~.host.SessionHost` of a :class:`~pensive_core.Pensive` store's sessions,
    made of the store's public API and its :class:`Sessions`.

    Args:
        store: The owning store.
        sessions: Its sessions.
    """

    def __init__(self, store: Pensive, sessions: Sessions) -> None:
        self._store = store
        self._sessions = sessions

    @property
    def config(self) -> PensiveConfig:
        """The store's configuration."""
        return self._store.config

    @property
    def read_only(self) -> bool:
        """Whether the store is read-only."""
        return self._store.read_only

    @property
    def embedder(self) -> Embedder:
        """The store's embedder as its sessions share it (see :attr:`Sessions.embedder`)."""
        return self._sessions.embedder

    @property
    def llm(self) -> Any:
        """The store's LLM, if any."""
        return self._store.llm

    def open_store(
        self,
        folder: Path,
        config: Mapping[str, Any],
        *,
        context_generator: ContextGenerator | None = None,
    ) -> Pensive:
        """A session's own store in ``folder``, read-only when the owner is, sharing its model."""
        from ..engine import Pensive

        return Pensive(
            folder,
            self.store_config(folder, config),
            read_only=self.read_only,
            context_generator=context_generator,
            embedder=self.embedder,
        )

    def store_config(self, folder: Path, config: Mapping[str, Any]) -> dict[str, Any]:
        """A session store's config with the storage engine the owner's engine gives it (on
        Postgres, a schema of its own and pgvector: replicas share every session)."""
        storage = self._store.components.storage.session_storage(folder)
        if storage is None:
            return dict(config)
        backend = dict(config.get("backend", {}))
        backend["name"] = "pgvector"
        return {**config, "storage": storage, "backend": backend}

    def store_exists(self, folder: Path, config: Mapping[str, Any]) -> bool:
        """Whether a session's own store in ``folder`` was made (a reader never makes one)."""
        from ..config import load_config
        from ..storage import store_exists

        return store_exists(
            load_config(self.store_config(folder, config), environ={}).storage, folder
        )

    def check_writable(self) -> None:
        """On an engine several processes write, the store may have been moved since it was
        opened (one read); the embedded engine's writer lock rules that out."""
        comps = self._store.components
        if comps.storage.shared:
            from ..components import check_not_moved

            check_not_moved(comps.archive, comps.path)

    def open_turn_log(self, info: SessionInfo) -> TurnStore | None:
        """A session's log, opened by the store's storage engine, read-only when the store is."""
        return self._store.components.storage.open_turn_log(info, self.read_only)

    def drop_session(self, info: SessionInfo) -> None:
        """Delete what a session keeps, wherever the store's engine keeps it."""
        self._store.components.storage.drop_session(info)

    def sessions(self, namespace: str, user: str | None = None) -> list[SessionInfo]:
        """The registered sessions of ``namespace`` (of one user, if given), oldest first."""
        return self._sessions.registry.sessions(namespace, user)

    def session(self, session_id: str, namespace: str) -> Conversation:
        """Another session of the store."""
        return self._sessions.open(session_id, namespace=namespace)

    def mark_used(self, conversation: Conversation) -> None:
        """See :meth:`Sessions.mark_used`."""
        self._sessions.mark_used(conversation)

    def documents(self) -> int:
        """How many documents the store holds."""
        return int(self._store.stats(disk=False).get("documents", 0))

    def query(self, text: str, k: int) -> QueryResult:
        """Ask the store."""
        return self._store.query(text, k=k)

    def expand(self, hit: Hit, window: int | None = 1) -> str:
        """Expand a hit of the store."""
        return self._store.expand(hit, window)
