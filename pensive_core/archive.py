"""The store's SQLite side: metadata, the L3 archive of whole documents, and passage rows.

Documents are kept whole, zlib-compressed, with a content hash; passages keep their character
offsets into the document so a hit can be expanded to its neighbours or the whole document.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from .errors import SchemaVersionError
from .files import connect, corrupt
from .timeutil import from_iso, to_iso, utcnow
from .types import Chunk, Document

__all__ = [
    "ARCHIVE_ONLY",
    "INDEXED",
    "PENDING",
    "Archive",
    "DocumentStore",
    "SCHEMA_VERSION",
    "StoredChunk",
    "metadata_json",
    "write_transaction",
]

SCHEMA_VERSION = 3  # 2: full-text index over whole documents; 3: situating contexts

# indexed flag values
PENDING, INDEXED, ARCHIVE_ONLY = 0, 1, 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- body is the last column: reading metadata for a hit never walks the body's overflow pages
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY,
    hash TEXT NOT NULL,
    metadata TEXT NOT NULL,
    timestamp TEXT,
    ingested_at TEXT NOT NULL,
    n_chunks INTEGER NOT NULL,
    indexed INTEGER NOT NULL DEFAULT 0,  -- 1 once its passages' indexes persist; 2 archive only
    context_gen TEXT NOT NULL DEFAULT '',  -- the context generator its passages were indexed with
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT PRIMARY KEY,
    doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    hash TEXT NOT NULL,
    text TEXT NOT NULL,
    context TEXT NOT NULL DEFAULT ''  -- embedded and BM25-indexed with the text, never shown as it
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id, ordinal);
-- L3 search over whole documents: exact phrases and identifiers, and BM25. Contentless: the text
-- lives once, compressed, in documents.body; rows are keyed by documents.rowid.
"""
_FTS_SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS documents_fts USING fts5(
    body, content='', tokenize='porter unicode61 remove_diacritics 2'
)
"""


@dataclass(frozen=True)
class StoredChunk:
    """A passage row joined with its document's metadata and timestamp."""

    id: str
    doc_id: str
    ordinal: int
    text: str
    metadata: dict[str, Any]
    timestamp: datetime | None
    archive_only: bool = False
    context: str = ""
    pending: bool = False  # its document's change has not committed: not to be shown yet


class Archive:
    """SQLite (WAL) storage for documents, passages and store metadata.

    Args:
        path: The database file.
        read_only: Open it to read only: nothing is written or created beside it (a store on
            a read-only filesystem opens), and a store that needs migrating is refused.

    Raises:
        SchemaVersionError: If the store's schema is not this release's (or, read only, needs
            migrating).
        CorruptStoreError: If a document body is damaged (when one is read).
    """

    def __init__(self, path: Path, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self.db = connect(path, read_only=read_only, timeout=5.0)
        if read_only:
            version = self._schema_version()
            if version != SCHEMA_VERSION:
                self.db.close()
                raise SchemaVersionError(
                    f"store {path.parent} has schema version {version}, this Pensive reads "
                    f"version {SCHEMA_VERSION}; open it once for writing to migrate it"
                )
            return
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        version = self._schema_version()
        if version == 1:
            self._migrate_from_1()
            version = 2
        if version == 2:
            self._migrate_from_2()
            version = SCHEMA_VERSION
        if version is not None and version != SCHEMA_VERSION:
            self.db.close()
            raise SchemaVersionError(
                f"store {path.parent} has schema version {version}, this Pensive reads version "
                f"{SCHEMA_VERSION}; re-ingest into a new folder or use a matching Pensive release"
            )
        self.db.executescript(_SCHEMA)
        self.db.execute(_FTS_SCHEMA)
        if version is None:
            self.set_meta("schema_version", SCHEMA_VERSION)

    def _migrate_from_1(self) -> None:
        # version 1 had no full-text index: build it from the stored documents
        with self.transaction():
            if self._schema_version() != 1:
                return  # another process migrated it while this one waited for the lock
            self.db.execute(_FTS_SCHEMA)
            rows = self.db.execute("SELECT rowid, body FROM documents").fetchall()
            self.db.executemany(
                "INSERT INTO documents_fts(rowid, body) VALUES (?, ?)",
                [(rowid, zlib.decompress(body).decode("utf-8")) for rowid, body in rows],
            )
            self.set_meta("schema_version", 2)

    def _migrate_from_2(self) -> None:
        # version 2 had no contexts: its passages were indexed bare, which '' says
        with self.transaction():
            if self._schema_version() != 2:
                return
            for table, column in (("documents", "context_gen"), ("chunks", "context")):
                have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
                if column not in have:  # a version-1 store migrated here was created anew
                    self.db.execute(
                        f"ALTER TABLE {table} ADD COLUMN {column} TEXT NOT NULL DEFAULT ''"
                    )
            self.set_meta("schema_version", SCHEMA_VERSION)

    def _schema_version(self) -> int | None:
        has = self.db.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
        ).fetchone()
        if not has:
            return None
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return None if row is None else int(json.loads(row[0]))

    # -- meta ---------------------------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        """Read a JSON value from the meta table (None when absent)."""
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        """Write a JSON value to the meta table."""
        self.db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value))
        )

    # -- documents ----------------------------------------------------------------------------
    def fingerprint(self, doc_id: str) -> tuple[str, str, str | None, int, str] | None:
        """``(hash, metadata json, timestamp, indexed flag, context generator)`` of a stored
        document, or None."""
        row = self.db.execute(
            "SELECT hash, metadata, timestamp, indexed, context_gen FROM documents WHERE id=?",
            (doc_id,),
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2], int(row[3]), row[4])

    def mark_indexed(
        self, changed: bool, ids: Iterable[str] | None = None, synced: Iterable[str] = ()
    ) -> int:
        """Record that written documents' passages are now in the persisted indexes.

        Args:
            changed: Whether the content changed since the last commit (bumps the commit number).
            ids: The documents the change wrote (None: every pending one). Others stay
                pending: a document a failed change left, not yet indexed again, is not
                confirmed by a later change's commit.
            synced: Meta keys set to the new commit number in the same transaction (the
                derived tables kept in step by this change), so no write follows the commit
                point: a full disk then fails the commit whole, never after it.

        Returns:
            The store's commit number: every process reading the store reloads when it moves.
        """
        with self.transaction():
            if ids is None:
                self.db.execute("UPDATE documents SET indexed=1 WHERE indexed=0")
            else:
                todo = list(ids)
                for i in range(0, len(todo), 500):
                    part = todo[i : i + 500]
                    self.db.execute(
                        "UPDATE documents SET indexed=1 WHERE indexed=0 AND id IN "
                        f"({','.join('?' * len(part))})",
                        part,
                    )
            self.db.execute("DELETE FROM meta WHERE key='dirty'")  # every change is persisted
            commit = int(self.get_meta("commit") or 0)
            if changed:
                commit += 1
                self.set_meta("commit", commit)
            for key in synced:
                self.set_meta(key, commit)
        return commit

    def mark_dirty(self) -> None:
        """Record that a change to the indexes is in flight (cleared by :meth:`mark_indexed`).

        A store opened with the marker set was interrupted between a change and its commit:
        its BM25 and vector files may hold passages the archive no longer lists (a delete or a
        replacement whose archive side committed), so the opener reconciles them.
        """
        if self.get_meta("dirty") is None:
            self.set_meta("dirty", 1)

    def is_dirty(self) -> bool:
        """Whether a change was in flight when the store was last closed (see :meth:`mark_dirty`)."""
        return self.get_meta("dirty") is not None

    def mark_pending(self, doc_ids: Iterable[str]) -> None:
        """Mark documents as not confirmed indexed: the next recovery indexes them again."""
        ids = list(doc_ids)
        with self.transaction():
            for i in range(0, len(ids), 500):
                part = ids[i : i + 500]
                self.db.execute(
                    f"UPDATE documents SET indexed=0 WHERE indexed=1 AND id IN "
                    f"({','.join('?' * len(part))})",
                    part,
                )

    def index_chunks(self) -> dict[str, tuple[str, int]]:
        """Passage id -> ``(document id, indexed flag)`` of every passage that belongs in the
        L2 indexes (documents indexed or pending; archive-only ones are left out)."""
        return {
            cid: (did, int(flag))
            for cid, did, flag in self.db.execute(
                "SELECT c.id, c.doc_id, d.indexed FROM chunks c JOIN documents d "
                "ON d.id = c.doc_id WHERE d.indexed IN (0, 1)"
            )
        }

    def commit_number(self) -> int:
        """The store's commit number (see :meth:`mark_indexed`)."""
        return int(self.get_meta("commit") or 0)

    def data_version(self) -> int:
        """SQLite's data version: changes when another connection commits."""
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def unindexed(self) -> list[str]:
        """Ids of documents written but not confirmed indexed (an ingest was interrupted)."""
        return [r[0] for r in self.db.execute("SELECT id FROM documents WHERE indexed=0")]

    def chunk_ids(self, doc_id: str) -> list[str]:
        """Passage ids of a document, in order."""
        return [
            r[0]
            for r in self.db.execute(
                "SELECT id FROM chunks WHERE doc_id=? ORDER BY ordinal", (doc_id,)
            )
        ]

    def write(
        self,
        docs: Sequence[tuple[Document, str, list[Chunk]]],
        archive_only: bool = False,
        contexts: Mapping[str, str] | None = None,
        context_gen: Mapping[str, str] | None = None,
    ) -> None:
        """Store documents (replacing same ids) and their passages, in one transaction.

        Args:
            docs: ``(document, content hash, passages)``.
            archive_only: Mark them as held by the archive alone (not in the L2 indexes).
            contexts: Each passage's situating context, by passage id (absent: none).
            context_gen: The context generator's name, by document id (absent: none).
        """
        contexts = contexts or {}
        context_gen = context_gen or {}
        now = to_iso(utcnow())
        flag = ARCHIVE_ONLY if archive_only else PENDING
        with self.transaction():
            for doc, doc_hash, chunks in docs:
                self._unindex_text(doc.id)
                self.db.execute("DELETE FROM chunks WHERE doc_id=?", (doc.id,))
                cur = self.db.execute(
                    "INSERT OR REPLACE INTO documents(id, hash, metadata, timestamp, ingested_at, "
                    "n_chunks, indexed, context_gen, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        doc.id,
                        doc_hash,
                        metadata_json(doc.metadata),
                        to_iso(doc.timestamp),
                        now,
                        len(chunks),
                        flag,
                        context_gen.get(doc.id, ""),
                        zlib.compress(doc.text.encode("utf-8"), 6),
                    ),
                )
                self.db.execute(
                    "INSERT INTO documents_fts(rowid, body) VALUES (?, ?)",
                    (cur.lastrowid, doc.text),
                )
                self.db.executemany(
                    'INSERT OR REPLACE INTO chunks(id, doc_id, ordinal, start, "end", hash, text, '
                    "context) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            c.id,
                            c.doc_id,
                            c.ordinal,
                            c.start,
                            c.end,
                            c.hash,
                            c.text,
                            contexts.get(c.id, ""),
                        )
                        for c in chunks
                    ],
                )

    def delete(self, doc_id: str) -> list[str]:
        """Delete a document and its passages; returns the passage ids removed."""
        ids = self.chunk_ids(doc_id)
        with self.transaction():
            self._unindex_text(doc_id)
            self.db.execute("DELETE FROM chunks WHERE doc_id=?", (doc_id,))
            self.db.execute("DELETE FROM documents WHERE id=?", (doc_id,))
        return ids

    def _unindex_text(self, doc_id: str) -> None:
        # a contentless FTS5 row is deleted by giving back the text it was indexed with
        row = self.db.execute("SELECT rowid, body FROM documents WHERE id=?", (doc_id,)).fetchone()
        if row is not None:
            self.db.execute(
                "INSERT INTO documents_fts(documents_fts, rowid, body) VALUES ('delete', ?, ?)",
                (row[0], self._body(doc_id, row[1])),
            )

    def search_documents(
        self,
        all_of: Sequence[str],
        any_of: Sequence[str],
        rank_by: Sequence[str],
        limit: int,
    ) -> list[tuple[str, float]]:
        """Whole documents holding every phrase of ``all_of``, one of ``any_of`` and one of
        ``rank_by`` (each when given), best BM25 first: ``(doc id, score)``. A document still
        pending (its change not committed) is not searched. Here an FTS5 MATCH expression.

        Args:
            all_of: Phrases every document must hold (a missing identifier).
            any_of: Phrases of which it must hold one.
            rank_by: Words of which it must hold one; they rank it, with the phrases.
            limit: Most documents returned.
        """
        match = fts_match(all_of, any_of, rank_by)
        if not match:
            return []
        rows = self.db.execute(
            "SELECT d.id, -bm25(documents_fts) AS s FROM documents_fts "
            "JOIN documents d ON d.rowid = documents_fts.rowid "
            "WHERE documents_fts MATCH ? AND d.indexed > 0 "
            "ORDER BY bm25(documents_fts) LIMIT ?",
            (match, limit),
        ).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def contexts(self, doc_id: str) -> dict[str, str]:
        """The situating context each passage of a document was indexed with, by passage id."""
        return dict(self.db.execute("SELECT id, context FROM chunks WHERE doc_id=?", (doc_id,)))

    def doc_chunks(self, doc_id: str) -> list[tuple[str, int, str]]:
        """``(passage id, ordinal, text)`` of a document's passages, in order."""
        return list(
            self.db.execute(
                "SELECT id, ordinal, text FROM chunks WHERE doc_id=? ORDER BY ordinal", (doc_id,)
            )
        )

    def document(self, doc_id: str) -> Document | None:
        """The whole stored document, or None."""
        row = self.db.execute(
            "SELECT body, metadata, timestamp FROM documents WHERE id=?", (doc_id,)
        ).fetchone()
        if row is None:
            return None
        return Document(
            id=doc_id,
            text=self._body(doc_id, row[0]),
            metadata=json.loads(row[1]),
            timestamp=from_iso(row[2]),
        )

    def _body(self, doc_id: str, blob: bytes) -> str:
        try:
            return zlib.decompress(blob).decode("utf-8")
        except (zlib.error, UnicodeDecodeError) as exc:
            raise corrupt(self.path, f"document {doc_id!r} does not decompress ({exc})") from exc

    def damaged_documents(self) -> list[str]:
        """Ids of documents a damaged page hit: a body that does not decompress, metadata
        that is not JSON, or a passage's text or context that is not UTF-8 (every row is read
        as bytes, so a flipped byte cannot stop the scan). A damaged id is given with its bad
        bytes replaced."""
        bad: dict[str, None] = {}
        docs = "SELECT CAST(id AS BLOB), body, CAST(metadata AS BLOB) FROM documents"
        for raw_id, blob, meta in self.db.execute(docs):
            doc_id = bytes(raw_id).decode("utf-8", "replace")
            try:
                bytes(raw_id).decode("utf-8")
                zlib.decompress(blob).decode("utf-8")
                json.loads(bytes(meta).decode("utf-8"))
            except (zlib.error, UnicodeDecodeError, ValueError):
                bad[doc_id] = None
        rows = "SELECT CAST(doc_id AS BLOB), CAST(text AS BLOB), CAST(context AS BLOB) FROM chunks"
        for raw_id, text, context in self.db.execute(rows):
            try:
                for value in (raw_id, text, context):
                    bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                bad[bytes(raw_id).decode("utf-8", "replace")] = None
        return list(bad)

    def drop_unreadable(self) -> list[str]:
        """Remove the documents whose passages' text, context or metadata no longer decode
        (a damaged page: nothing can index or show them), matched by their raw bytes; returns
        their ids (bad bytes replaced) for the caller to report, to be ingested again."""
        rows = self.db.execute(
            "SELECT CAST(d.id AS BLOB), CAST(d.metadata AS BLOB), CAST(c.text AS BLOB), "
            "CAST(c.context AS BLOB) FROM documents d LEFT JOIN chunks c ON c.doc_id = d.id"
        ).fetchall()
        bad: dict[bytes, None] = {}
        for raw_id, meta, text, context in rows:
            try:
                for value in (raw_id, meta, text or b"", context or b""):
                    bytes(value).decode("utf-8")
                json.loads(bytes(meta).decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                bad[bytes(raw_id)] = None
        with self.transaction():
            for raw in bad:
                with contextlib.suppress(sqlite3.DatabaseError, zlib.error, UnicodeDecodeError):
                    self._unindex_text(raw.decode("utf-8"))  # its full-text row, if readable
                self.db.execute("DELETE FROM chunks WHERE CAST(doc_id AS BLOB) = ?", (raw,))
                self.db.execute("DELETE FROM documents WHERE CAST(id AS BLOB) = ?", (raw,))
        return [raw.decode("utf-8", "replace") for raw in bad]

    def chunks(self, ids: Iterable[str]) -> dict[str, StoredChunk]:
        """Passages by id, joined with their document's metadata (missing ids are absent)."""
        ids = list(ids)
        out: dict[str, StoredChunk] = {}
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            q = (
                "SELECT c.id, c.doc_id, c.ordinal, c.text, d.metadata, d.timestamp, d.indexed, "
                "c.context "
                "FROM chunks c JOIN documents d ON d.id = c.doc_id "
                f"WHERE c.id IN ({','.join('?' * len(part))})"
            )
            out.update(stored_chunks(self.db.execute(q, part)))
        return out

    def filter_rows(self) -> tuple[list[str], list[dict[str, Any]], list[tuple[str, str]]]:
        """What metadata filters run over: ids and metadata of documents (indexed or archive
        only), and ``(passage id, document id)`` of their passages."""
        docs = self.db.execute("SELECT id, metadata FROM documents WHERE indexed>0").fetchall()
        chunks = self.db.execute(
            "SELECT c.id, c.doc_id FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE d.indexed>0"
        ).fetchall()
        return [d[0] for d in docs], [json.loads(d[1]) for d in docs], chunks

    def neighbours(self, doc_id: str, ordinal: int, window: int) -> list[tuple[int, int, int]]:
        """``(ordinal, start, end)`` of passages within ``window`` of ``ordinal`` in a document."""
        return list(
            self.db.execute(
                'SELECT ordinal, start, "end" FROM chunks WHERE doc_id=? AND ordinal BETWEEN ? AND ? '
                "ORDER BY ordinal",
                (doc_id, ordinal - window, ordinal + window),
            )
        )

    def indexed_documents(self) -> dict[str, set[str]]:
        """The passage ids of every indexed document, by document id (what the graph and the
        statements must hold)."""
        want: dict[str, set[str]] = {}
        for cid, did in self.db.execute(
            "SELECT c.id, c.doc_id FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE d.indexed = 1"
        ):
            want.setdefault(did, set()).add(cid)
        return want

    def indexed_passage_count(self) -> int:
        """How many passages of indexed documents the archive holds (what BM25 and the vectors
        must each hold, once the last commit is level)."""
        return int(
            self.db.execute(
                "SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.doc_id "
                "WHERE d.indexed = 1"
            ).fetchone()[0]
        )

    def indexed_passages(self) -> list[tuple[str, str, str, dict[str, Any], str]]:
        """``(passage id, document id, text, document metadata, context)`` of every indexed
        passage, by document and position (what a move of the vectors copies)."""
        rows = self.db.execute(
            "SELECT c.id, c.doc_id, c.text, d.metadata, c.context FROM chunks c "
            "JOIN documents d ON d.id = c.doc_id WHERE d.indexed = 1 "
            "ORDER BY c.doc_id, c.ordinal"
        ).fetchall()
        return [(r[0], r[1], r[2], json.loads(r[3]), r[4]) for r in rows]

    def counts(self) -> tuple[int, int]:
        """``(documents, passages)`` stored."""
        d = self.db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        c = self.db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        return int(d), int(c)

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """One write transaction: committed on success, rolled back on any exception."""
        return write_transaction(self.db)

    def close(self) -> None:
        """Close the database."""
        self.db.close()


class DocumentStore(Protocol):
    """The L3 archive and the store's bookkeeping, as the engine uses them: documents whole,
    their passages, metadata, the commit protocol's marks and the full-text search of whole
    documents. :class:`Archive` (SQLite) is the embedded implementation."""

    def get_meta(self, key: str) -> Any:
        """A JSON value from the store's metadata (None when absent)."""
        ...

    def set_meta(self, key: str, value: Any) -> None:
        """Write a JSON value to the store's metadata."""
        ...

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """One write transaction (writes inside it land together or not at all)."""
        ...

    def fingerprint(self, doc_id: str) -> tuple[str, str, str | None, int, str] | None:
        """``(hash, metadata json, timestamp, indexed flag, context generator)`` or None."""
        ...

    def mark_indexed(
        self, changed: bool, ids: Iterable[str] | None = None, synced: Iterable[str] = ()
    ) -> int:
        """Confirm the pending documents ``ids`` (None: all) as indexed, clear the dirty mark
        and set the meta keys ``synced`` to the commit number, in one transaction; returns
        the commit number (moved when ``changed``)."""
        ...

    def mark_dirty(self) -> None:
        """Note a change in flight (cleared by :meth:`mark_indexed`)."""
        ...

    def is_dirty(self) -> bool:
        """Whether a change was left in flight."""
        ...

    def mark_pending(self, doc_ids: Iterable[str]) -> None:
        """Mark documents to be indexed again."""
        ...

    def index_chunks(self) -> dict[str, tuple[str, int]]:
        """``passage id -> (document id, indexed flag)`` of every indexed or pending passage."""
        ...

    def commit_number(self) -> int:
        """The number of the last commit."""
        ...

    def data_version(self) -> int:
        """A number that moves whenever another connection commits."""
        ...

    def unindexed(self) -> list[str]:
        """Ids of documents written but not confirmed as indexed."""
        ...

    def chunk_ids(self, doc_id: str) -> list[str]:
        """The passage ids of a document."""
        ...

    def write(
        self,
        docs: Sequence[tuple[Document, str, list[Chunk]]],
        archive_only: bool = False,
        contexts: Mapping[str, str] | None = None,
        context_gen: Mapping[str, str] | None = None,
    ) -> None:
        """Write documents and their passages (replacing any stored under the same ids)."""
        ...

    def delete(self, doc_id: str) -> list[str]:
        """Delete a document; returns its passage ids."""
        ...

    def search_documents(
        self,
        all_of: Sequence[str],
        any_of: Sequence[str],
        rank_by: Sequence[str],
        limit: int,
    ) -> list[tuple[str, float]]:
        """Full-text search of whole documents: those holding every phrase of ``all_of``, one
        of ``any_of`` and one of ``rank_by`` (each when given), ``(document id, score)``, best
        first by BM25 over those phrases; each engine speaks its own full-text language."""
        ...

    def contexts(self, doc_id: str) -> dict[str, str]:
        """The situating context of each passage of a document."""
        ...

    def doc_chunks(self, doc_id: str) -> list[tuple[str, int, str]]:
        """``(passage id, ordinal, text)`` of a document's passages, in order."""
        ...

    def document(self, doc_id: str) -> Document | None:
        """A stored document whole, or None."""
        ...

    def damaged_documents(self) -> list[str]:
        """Ids of documents a damaged page hit (body, metadata or a passage's text)."""
        ...

    def chunks(self, ids: Iterable[str]) -> dict[str, StoredChunk]:
        """Stored passages by id (unknown ids left out)."""
        ...

    def filter_rows(self) -> tuple[list[str], list[dict[str, Any]], list[tuple[str, str]]]:
        """Every document's id and metadata and every indexed passage's document, for
        metadata filters."""
        ...

    def neighbours(self, doc_id: str, ordinal: int, window: int) -> list[tuple[int, int, int]]:
        """``(ordinal, start, end)`` of the passages within ``window`` of ``ordinal``."""
        ...

    def indexed_documents(self) -> dict[str, set[str]]:
        """Passage ids of every indexed document, by document id."""
        ...

    def indexed_passage_count(self) -> int:
        """How many passages of indexed documents the archive holds."""
        ...

    def indexed_passages(self) -> list[tuple[str, str, str, dict[str, Any], str]]:
        """``(passage id, document id, text, document metadata, context)`` of every indexed
        passage."""
        ...

    def counts(self) -> tuple[int, int]:
        """``(documents, passages)`` stored."""
        ...

    def close(self) -> None:
        """Release the store."""
        ...


@contextlib.contextmanager
def write_transaction(db: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` (the write lock up front, so readers never upgrade into a deadlock);
    committed on success, rolled back on any exception. For connections opened with
    ``isolation_level=None``."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _phrase(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def fts_all(needles: Sequence[str]) -> str:
    """An FTS5 query for documents holding every needle as a phrase."""
    return " AND ".join(_phrase(n) for n in needles)


def fts_any(words: Sequence[str]) -> str:
    """An FTS5 query for documents holding any of the words (ranked by BM25)."""
    return " OR ".join(_phrase(w) for w in dict.fromkeys(words))


def fts_match(all_of: Sequence[str], any_of: Sequence[str], rank_by: Sequence[str]) -> str:
    """The FTS5 expression of :meth:`Archive.search_documents` ("" when nothing is asked)."""
    parts = []
    if all_of:
        parts.append(fts_all(all_of))
    if any_of:
        parts.append(f"({fts_any(any_of)})")
    if rank_by:
        parts.append(f"({fts_any(rank_by)})" if parts else fts_any(rank_by))
    return " AND ".join(parts)


def stored_chunks(
    rows: Iterable[tuple[str, str, int, str, str, str | None, int, str]],
) -> dict[str, StoredChunk]:
    """``(id, doc id, ordinal, text, metadata json, timestamp, indexed flag, context)`` rows
    as passages by id, each document's metadata parsed once (every archive reads them so)."""
    parsed: dict[str, tuple[dict[str, Any], datetime | None]] = {}
    out: dict[str, StoredChunk] = {}
    for cid, did, ordinal, text, meta, ts, flag, context in rows:
        if did not in parsed:  # passages of one document share its metadata: parse once
            parsed[did] = (json.loads(meta), from_iso(ts))
        doc_meta, doc_ts = parsed[did]
        flag = int(flag)
        out[cid] = StoredChunk(
            cid, did, int(ordinal), text, dict(doc_meta), doc_ts,
            flag == ARCHIVE_ONLY, context, flag == PENDING,
        )  # fmt: skip
    return out


def metadata_json(metadata: Any) -> str:
    """Serialise metadata deterministically (sorted keys; datetimes as ISO strings)."""
    return json.dumps(metadata, sort_keys=True, default=_json_default, ensure_ascii=False)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return to_iso(value)
    raise TypeError(
        f"metadata value {value!r} of type {type(value).__name__} is not JSON-serialisable"
    )
