"""A durable cache of situating contexts, in the store's own SQLite database.

An LLM context costs a model call per passage, so each one is kept under
``(doc_hash, chunk_hash, generator)``: re-ingesting an unchanged document, or a changed
document's unchanged passages, costs nothing, and a new model or prompt (a new generator name)
never reads another's contexts. A document's summary, which the LLM generator writes once for a
long document, is kept in the same table under the chunk hash :data:`SUMMARY_KEY`.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

from ..archive import write_transaction
from ..timeutil import to_iso, utcnow

__all__ = ["ContextCache", "ContextStore", "SUMMARY_KEY"]

SUMMARY_KEY = "<summary>"
"""The chunk hash a document's summary is cached under (no content hash looks like it)."""

# Document hashes per SELECT: well under SQLite's smallest host-parameter limit (999).
_BATCH = 500


class ContextCache:
    """Situating contexts keyed by document hash, passage hash and generator name.

    Args:
        db: The store's SQLite connection, opened with ``isolation_level=None`` (writes are
            explicit ``BEGIN IMMEDIATE`` transactions) and ``check_same_thread=False``. The
            ``context_cache`` table is created if absent.
    """

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS context_cache (doc_hash TEXT, chunk_hash TEXT, "
        "generator TEXT, context TEXT NOT NULL, created_at TEXT NOT NULL, "
        "PRIMARY KEY (doc_hash, chunk_hash, generator))"
    )

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        db.execute(self._SCHEMA)

    def get_many(self, keys: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
        """The cached contexts among ``keys``.

        Args:
            keys: ``(doc_hash, chunk_hash, generator)`` triples; repeats are fine.

        Returns:
            The context of every key that is cached; keys not cached are absent.
        """
        wanted = set(keys)
        # One query per generator and batch of documents: a document's passages are asked for
        # together, so reading all of its rows and keeping the wanted ones beats a query per key.
        docs_by_gen: dict[str, set[str]] = defaultdict(set)
        for doc_hash, _chunk_hash, generator in wanted:
            docs_by_gen[generator].add(doc_hash)
        found: dict[tuple[str, str, str], str] = {}
        for generator, doc_set in docs_by_gen.items():
            docs = sorted(doc_set)
            for i in range(0, len(docs), _BATCH):
                batch = docs[i : i + _BATCH]
                marks = ",".join("?" * len(batch))
                rows = self.db.execute(
                    "SELECT doc_hash, chunk_hash, context FROM context_cache "
                    f"WHERE generator = ? AND doc_hash IN ({marks})",
                    (generator, *batch),
                )
                for doc_hash, chunk_hash, context in rows:
                    key = (doc_hash, chunk_hash, generator)
                    if key in wanted:
                        found[key] = context
        return found

    def put_many(self, rows: Sequence[tuple[str, str, str, str]]) -> None:
        """Store contexts, replacing any cached under the same key.

        Args:
            rows: ``(doc_hash, chunk_hash, generator, context)`` tuples.
        """
        if not rows:
            return
        now = to_iso(utcnow())
        with write_transaction(self.db):
            self.db.executemany(
                "INSERT OR REPLACE INTO context_cache "
                "(doc_hash, chunk_hash, generator, context, created_at) VALUES (?, ?, ?, ?, ?)",
                [(d, c, g, text, now) for d, c, g, text in rows],
            )

    def count(self) -> int:
        """How many contexts (summaries included) are cached."""
        return int(self.db.execute("SELECT COUNT(*) FROM context_cache").fetchone()[0])

    def clear(self, generator: str | None = None) -> int:
        """Remove cached contexts.

        Args:
            generator: Only this generator's; None for all.

        Returns:
            How many were removed.
        """
        with write_transaction(self.db):
            if generator is None:
                cur = self.db.execute("DELETE FROM context_cache")
            else:
                cur = self.db.execute("DELETE FROM context_cache WHERE generator = ?", (generator,))
        return cur.rowcount


class ContextStore(Protocol):
    """Cached situating contexts, persisted: what an LLM context generator reads and writes.
    :class:`ContextCache` (a table in the store's SQLite file) is the embedded implementation."""

    def get_many(self, keys: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
        """The cached contexts of ``(doc_hash, chunk_hash, generator)`` keys (misses left out)."""
        ...

    def put_many(self, rows: Sequence[tuple[str, str, str, str]]) -> None:
        """Store ``(doc_hash, chunk_hash, generator, context)`` rows."""
        ...

    def count(self) -> int:
        """How many contexts are cached."""
        ...

    def clear(self, generator: str | None = None) -> int:
        """Remove cached contexts (of one generator, if given); returns how many."""
        ...
