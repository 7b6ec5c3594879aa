"""The storage seam: where every persistent part of a store lives.

A :class:`StorageEngine` opens each part behind the protocol its own module owns: the archive
(:class:`~pensive_core.archive.DocumentStore`), the sparse index
(:class:`~pensive_core.sparse.SparseIndex`), the vectors
(:class:`~pensive_core.backends.VectorBackend`), the entity graph
(:class:`~pensive_core.graph.GraphTables`) and what it learns from use
(:class:`~pensive_core.graph.UseHistory`, :class:`~pensive_core.graph.EdgeStrengths`), the
statements (:class:`~pensive_core.temporal.TemporalTables`), the hot cache
(:class:`~pensive_core.cache.AnswerCache`), the query statistics
(:class:`~pensive_core.stats.QueryStats`), the context cache
(:class:`~pensive_core.context.cache.ContextStore`), each conversation session's log
(:class:`~pensive_core.memory.turns.TurnStore`, and which sessions exist,
:class:`~pensive_core.memory.sessions.SessionCatalog`) and the LangGraph item tables
(:class:`~pensive_core.items.ItemRecords`). The query and ingest stages, the conversation
sessions and the item store see only those protocols, so another engine (Postgres) is added
here without touching them. :class:`~pensive_core.storage.embedded.EmbeddedStorage` (SQLite
and files in one folder) is the default.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from ..archive import DocumentStore
from ..backends.base import VectorBackend
from ..cache import AnswerCache
from ..config import BM25Config, RouterConfig
from ..context.cache import ContextStore
from ..graph.learning import EdgeStrengths, LearningConfig, UseHistory
from ..graph.store import GraphTables
from ..items import ItemRecords
from ..llm_cache import LLMCacheRecords
from ..memory.sessions import SessionCatalog, SessionInfo
from ..memory.turns import TurnStore
from ..sparse.base import SparseIndex
from ..stats import QueryStats
from ..temporal.store import TemporalTables

__all__ = ["StorageEngine"]


class StorageEngine(Protocol):
    """Opens the persistent parts of one store.

    Attributes:
        name: The engine's name (``"embedded"``, ``"postgres"``).
        shared: Whether several processes write the store (then each change holds
            :meth:`writing`, and every process reloads when another commits).
        path: The store's local folder (for an engine that keeps nothing locally, a place for
            disposable caches).
        read_only: Whether the store was opened to read only.
    """

    name: str
    shared: bool
    path: Path
    read_only: bool

    def exists(self) -> bool:
        """Whether a store has been created here."""
        ...

    def lock_writer(self) -> None:
        """Take the store's single-writer lock (a no-op for a reader).

        Raises:
            PensiveError: If another writer holds it.
        """
        ...

    def unlock_writer(self) -> None:
        """Release the writer lock (a no-op if not held)."""
        ...

    @property
    def location(self) -> str:
        """Where the store is kept, for messages (a folder, or a schema on a server)."""
        ...

    def check_writing(self) -> None:
        """Before a change commits: raise if this process no longer holds the change's lock
        (a no-op where one writer holds the store for its life)."""
        ...

    def writing(self) -> AbstractContextManager[None]:
        """Held for the length of one change (ingest, delete, reindex): where several
        processes write one store, their changes run one after another (a no-op where the
        writer lock already makes this process the only writer)."""
        ...

    def open_archive(self) -> DocumentStore:
        """The archive: documents, passages, the store's metadata. Opened first."""
        ...

    def open_sparse(self, cfg: BM25Config, previous: SparseIndex | None = None) -> SparseIndex:
        """The sparse index as of the last commit (``previous``: the one this process loaded
        before, whose unchanged parts an engine may take instead of reading them again)."""
        ...

    def open_vectors(self, name: str, dim: int, options: Any, place: str) -> VectorBackend:
        """The vector backend ``name`` for ``dim``-d vectors, in ``place`` (see
        :meth:`vectors_place`)."""
        ...

    def vectors_place(self) -> str:
        """Where the current vectors live (saved in the archive's metadata)."""
        ...

    def new_vectors_place(self) -> str:
        """An unused place for a new vector index (a move to another backend)."""
        ...

    def drop_vectors_place(self, place: str) -> None:
        """Remove what a vector index left in ``place`` (best effort)."""
        ...

    def graph_exists(self) -> bool:
        """Whether the graph's tables exist."""
        ...

    def open_graph(self, max_pair_entities: int, create: bool) -> GraphTables:
        """The entity graph's tables."""
        ...

    def drop_graph(self) -> None:
        """Delete the graph's tables (to rebuild them from the archive)."""
        ...

    def open_learning(
        self, knobs: LearningConfig, read_only: bool
    ) -> tuple[UseHistory, EdgeStrengths]:
        """What the graph learns from use: passage use history and learned edge weights."""
        ...

    def temporal_exists(self) -> bool:
        """Whether the statement tables exist."""
        ...

    def open_temporal(self, create: bool) -> TemporalTables:
        """The statement and date tables."""
        ...

    def drop_temporal(self) -> None:
        """Delete the statement tables (to rebuild them from the archive)."""
        ...

    def open_answer_cache(self, cfg: RouterConfig) -> AnswerCache:
        """The L1 hot cache."""
        ...

    def open_query_stats(self) -> QueryStats:
        """Per-tier query statistics."""
        ...

    def open_context_cache(self) -> ContextStore:
        """The cache of LLM-written situating contexts."""
        ...

    def open_turn_log(self, info: SessionInfo, read_only: bool) -> TurnStore | None:
        """A conversation session's log of turns, summaries and pins.

        Args:
            info: The session's registration (its namespace, id and local folder).
            read_only: Open without writing (then never create anything).

        Returns:
            The log; None when ``read_only`` and there is none yet.
        """
        ...

    def drop_session(self, info: SessionInfo) -> None:
        """Delete what a session keeps: its log, and its own stores (turn index, windows)."""
        ...

    def session_storage(self, folder: Path) -> dict[str, Any] | None:
        """The ``[storage]`` section of a session's own store in ``folder`` (None: the
        embedded default, files in that folder)."""
        ...

    def open_session_catalog(self) -> SessionCatalog:
        """Which conversation sessions the store has (made on first use by a writer)."""
        ...

    def open_item_table(self, filename: str) -> ItemRecords:
        """A table of namespaced JSON items (:class:`~pensive_core.items.ItemStore`'s), made
        on first use.

        Args:
            filename: Its name, unique among the store's item tables.
        """
        ...

    def open_llm_cache_records(self) -> LLMCacheRecords:
        """The rows of the LLM cache (:class:`~pensive_core.llm_cache.LLMCache`)."""
        ...

    def disk_bytes(self) -> int:
        """Bytes the store takes where it is kept."""
        ...

    def close(self) -> None:
        """Release the archive's connection (the parts it opened close themselves)."""
        ...
