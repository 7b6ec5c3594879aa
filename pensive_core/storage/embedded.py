"""The embedded storage engine: one folder on one machine, one writer process at a time.

``pensive.sqlite`` (WAL) holds the archive, passages, metadata, graph, statements, learning
tables, query statistics and the context cache; ``l1.sqlite`` the hot cache; ``bm25/`` the
sparse index's segments; ``vectors*/`` the vector backend's files (or nothing, for a managed
service); ``conversations/`` one folder per session (its log in ``memory.sqlite``); each item
store's table is a SQLite file of its own (``items.sqlite`` by default). Writers take an
advisory lock on ``writer.lock``; readers take none.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from ..archive import Archive
from ..backends.base import VectorBackend
from ..backends.registry import create_backend
from ..config import BM25Config, RouterConfig
from ..context.cache import ContextCache
from ..errors import CorruptStoreError, PensiveError, StorageError
from ..files import connect
from ..graph.learning import BaseLevel, Hebbian, LearningConfig
from ..graph.store import GraphStore
from ..item_table import ItemTable
from ..llm_cache import SQLiteLLMCacheRecords
from ..memory.sessions import SessionInfo, SessionRegistry
from ..memory.turns import TurnLog
from ..sparse.base import SparseIndex
from ..sparse.bm25 import BM25Index
from ..stats import RouterStats
from ..temporal.store import TemporalStore
from .sqlite_l1 import L1Cache

__all__ = ["EmbeddedStorage", "ARCHIVE_FILE", "move_aside"]

log = logging.getLogger(__name__)

ARCHIVE_FILE = "pensive.sqlite"
LOCK_GRACE_S = 0.5  # how long a writer waits for a lock that looks held before refusing


class EmbeddedStorage:
    """SQLite and files in the store's folder (see the module docstring).

    Args:
        path: The store folder.
        read_only: Open to read while another process writes.
    """

    name = "embedded"
    shared = False  # one writer process (the writer lock); readers reload on its commits

    def __init__(self, path: Path, read_only: bool) -> None:
        self.path = path
        self.read_only = read_only
        self.archive: Archive | None = None
        self._stats_db: sqlite3.Connection | None = None
        self._lock_handle: Any = None

    def exists(self) -> bool:
        """Whether the folder holds a store."""
        return (self.path / ARCHIVE_FILE).is_file()

    # -- the writer lock ------------------------------------------------------------------------
    def lock_writer(self) -> None:
        """Take the store's writer lock (released by :meth:`unlock_writer` or when the process
        ends); a reader takes none.

        Raises:
            PensiveError: If another process (or another Pensive object) holds it.
        """
        if self.read_only or self._lock_handle is not None:
            return
        try:
            import fcntl
        except ImportError:  # no advisory locks (Windows): one writer is the caller's job
            return
        try:
            handle = open(self.path / "writer.lock", "a+")  # noqa: SIM115 - held for the store's life
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            why = "is on a read-only filesystem" if exc.errno == errno.EROFS else "is not writable"
            raise StorageError(
                f"the store at {self.path} {why}, so it cannot be opened for writing; open it "
                "with read_only=True (`--read-only` where a command offers it) to read it",
                errno=exc.errno,
                file=str(self.path / "writer.lock"),
            ) from None
        # a lock just released can look held for a moment: a process forked by another thread
        # shares the closed descriptor until it execs, so a few short retries come first
        deadline = time.monotonic() + LOCK_GRACE_S
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise PensiveError(
                f"the store at {self.path} is open for writing (pid {holder}); a store has one "
                "writer at a time: close the other Pensive, or open this one with read_only=True"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock_handle = handle

    def unlock_writer(self) -> None:
        """Release the writer lock (closing the file releases the flock)."""
        if self._lock_handle is not None:
            self._lock_handle.close()
            self._lock_handle = None

    @property
    def location(self) -> str:
        """The store folder."""
        return str(self.path)

    def check_writing(self) -> None:
        """Nothing to check: the writer lock is held for the store's life."""

    def writing(self) -> contextlib.AbstractContextManager[None]:
        """Nothing to take: the writer lock already makes this process the only writer."""
        return contextlib.nullcontext()

    # -- parts -------------------------------------------------------------------------------
    def open_archive(self) -> Archive:
        """The archive (``pensive.sqlite``), whose connection the other SQLite parts share."""
        if self.archive is None:
            self._check_archive_present()
            self.archive = Archive(self.path / ARCHIVE_FILE, read_only=self.read_only)
        return self.archive

    def _check_archive_present(self) -> None:
        """Refuse a store whose indexes exist but whose archive is gone or empty: SQLite would
        take a 0-byte file for a new database, and reconciling the indexes with an empty
        archive would then remove every passage."""
        file = self.path / ARCHIVE_FILE
        wal = self.path / (ARCHIVE_FILE + "-wal")
        if file.exists() and file.stat().st_size > 0:
            return
        if wal.exists() and wal.stat().st_size > 0:
            return  # not yet checkpointed: SQLite reads it from the log
        indexes = [self.path / "bm25" / "bm25.json"]
        indexes += [
            d / m for d in self.path.glob("vectors*") for m in ("faiss.json", "memory.json")
        ]
        found = [p for p in indexes if p.exists()]
        if found:
            raise CorruptStoreError(
                f"the archive {file} is missing or empty, but the store's indexes exist "
                f"({found[0].relative_to(self.path)}): the archive, the store's source of "
                "truth, was lost or truncated. Nothing was changed; restore the store folder "
                "from a backup (`pensive repair` rebuilds indexes from the archive, not the "
                "archive)"
            )

    def _db(self) -> Any:
        if self.archive is None:
            raise PensiveError("the archive must be opened before the parts that share it")
        return self.archive.db

    def open_sparse(self, cfg: BM25Config, previous: SparseIndex | None = None) -> SparseIndex:
        """The BM25 segments under ``bm25/``.

        Raises:
            CorruptStoreError: If the archive has indexed passages but no BM25 manifest exists
                (a missing manifest would read as an empty index: silently other answers).
        """
        old = previous if isinstance(previous, BM25Index) else None
        index = BM25Index(self.path / "bm25", cfg, previous=old)
        manifest = self.path / "bm25" / "bm25.json"
        if index.n_live == 0 and not manifest.exists() and self.archive is not None:
            n = self.archive.indexed_passage_count()
            if n:
                raise CorruptStoreError(
                    f"{manifest} is missing, but the archive lists {n} indexed passages: the "
                    "BM25 index was lost; run `pensive repair` to rebuild it from the archive"
                )
        return index

    def vectors_place(self) -> str:
        """The folder of the current vector index (``vectors``, or ``vectors.N`` after a move)."""
        saved = self.open_archive().get_meta("vectors_dir")
        return str(saved) if saved else "vectors"

    def new_vectors_place(self) -> str:
        """The first ``vectors.N`` folder that does not exist."""
        n = 1
        while (self.path / f"vectors.{n}").exists():
            n += 1
        return f"vectors.{n}"

    def drop_vectors_place(self, place: str) -> None:
        """Remove a vector index's folder."""
        folder = self.path / place
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)

    def open_vectors(self, name: str, dim: int, options: Any, place: str) -> VectorBackend:
        """The named backend, its files in ``place`` under the store folder."""
        return create_backend(name, self.path / place, dim, options)

    def graph_exists(self) -> bool:
        """Whether the graph's tables exist in ``pensive.sqlite``."""
        return self._table_exists("graph_chunks")

    def open_graph(self, max_pair_entities: int, create: bool) -> GraphStore:
        """The graph's tables in ``pensive.sqlite``."""
        return GraphStore(self._db(), max_pair_entities, create=create)

    def drop_graph(self) -> None:
        """Delete the graph's tables."""
        GraphStore.drop(self._db())

    def open_learning(self, knobs: LearningConfig, read_only: bool) -> tuple[BaseLevel, Hebbian]:
        """Use history and learned edge weights, tables in ``pensive.sqlite``."""
        db = self._db()
        return (
            BaseLevel.from_config(knobs, db, read_only=read_only),
            Hebbian.from_config(knobs, db, read_only=read_only),
        )

    def temporal_exists(self) -> bool:
        """Whether the statement tables exist in ``pensive.sqlite``."""
        return self._table_exists("temporal_statements")

    def open_temporal(self, create: bool) -> TemporalStore:
        """The statement and date tables in ``pensive.sqlite``."""
        return TemporalStore(self._db(), create=create)

    def drop_temporal(self) -> None:
        """Delete the statement tables."""
        TemporalStore.drop(self._db())

    def open_answer_cache(self, cfg: RouterConfig) -> L1Cache:
        """The hot cache, in its own file (``l1.sqlite``) so its writes never contend with
        the archive's.

        A cache is never worth refusing the store for: one that does not open as SQLite (a
        damaged file) is moved aside (``l1.sqlite.damaged-<time>``) and started empty, with a
        warning; a reader that cannot write beside it (a read-only filesystem, or a damaged
        file it may not move) keeps its cache in memory.
        """
        path = self.path / "l1.sqlite"
        args = (cfg.l1_capacity, cfg.l1_ttl_s, cfg.l1_hot, cfg.l1_fuzzy)
        if self.read_only and not os.access(self.path, os.W_OK):
            return L1Cache(Path(":memory:"), *args)
        try:
            return L1Cache(path, *args)
        except sqlite3.DatabaseError as exc:
            if self.read_only:
                log.warning("the L1 cache %s does not open (%s): using one in memory", path, exc)
                return L1Cache(Path(":memory:"), *args)
            aside = move_aside(path)
            log.warning(
                "the L1 cache %s was damaged (%s): moved to %s and started empty", path, exc, aside
            )
            return L1Cache(path, *args)

    def open_query_stats(self) -> RouterStats:
        """Per-tier statistics, a table in ``pensive.sqlite``. A reader counts its queries
        there too, through a connection of its own that may write (the archive's reads only),
        unless the store cannot be written (a read-only filesystem): then in memory."""
        db = self._db()
        file = self.path / ARCHIVE_FILE
        if self.read_only and os.access(file, os.W_OK) and os.access(self.path, os.W_OK):
            try:
                self._stats_db = connect(file, timeout=5.0)
                db = self._stats_db
            except sqlite3.Error as exc:
                log.debug("query statistics stay in memory: %s", exc)
        return RouterStats(db)

    def open_context_cache(self) -> ContextCache:
        """The LLM context cache, a table in ``pensive.sqlite`` (made on first use)."""
        return ContextCache(self._db())

    def open_turn_log(self, info: SessionInfo, read_only: bool) -> TurnLog | None:
        """A session's log, ``memory.sqlite`` in its folder (see :meth:`TurnLog.open`)."""
        return TurnLog.open(info.folder, read_only)

    def drop_session(self, info: SessionInfo) -> None:
        """Delete the session's folder (its log and its stores)."""
        shutil.rmtree(info.folder, ignore_errors=True)

    def session_storage(self, folder: Path) -> dict[str, Any] | None:
        """A session's stores are files in its folder (the default engine)."""
        return None

    def open_session_catalog(self) -> SessionRegistry:
        """The session registry, ``conversations/sessions.sqlite``."""
        return SessionRegistry(self.path / "conversations", read_only=self.read_only)

    def open_item_table(self, filename: str) -> ItemTable:
        """An item table, a SQLite file of its own in the store folder (made on first use, by a
        reader too)."""
        return ItemTable(self.path / filename)

    def open_llm_cache_records(self) -> SQLiteLLMCacheRecords:
        """The LLM cache's rows, ``llm_cache.sqlite`` in the store folder."""
        return SQLiteLLMCacheRecords(self.path / "llm_cache.sqlite")

    def disk_bytes(self) -> int:
        """Bytes of every file under the store folder."""
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())

    def close(self) -> None:
        """Close the archive's connection (and a reader's statistics connection)."""
        if self._stats_db is not None:
            self._stats_db.close()
            self._stats_db = None
        if self.archive is not None:
            self.archive.close()

    def _table_exists(self, name: str) -> bool:
        row = self._db().execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone()
        return row is not None


def move_aside(path: Path) -> Path:
    """Rename a damaged SQLite file (with its ``-wal`` and ``-shm``) out of the way, to
    ``NAME.damaged-<unix time>``; returns the new name."""
    aside = path.with_name(f"{path.name}.damaged-{int(time.time())}")
    for suffix in ("", "-wal", "-shm"):
        src = path.with_name(path.name + suffix)
        if src.exists():
            os.replace(src, aside.with_name(aside.name + suffix))
    return aside
