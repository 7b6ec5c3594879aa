"""The archive (:class:`~pensive_core.archive.DocumentStore`) in Postgres: documents whole,
their passages, the store's metadata and the commit protocol's marks, in tables with one
prefix (one store, or one namespace), and a full-text index of whole documents.

A part of the Postgres storage engine (:mod:`pensive_core.storage.postgres`); it
passes :class:`pensive_core.testing.DocumentStoreTests`, the suite the SQLite archive passes.

Differences from the SQLite archive, by design:

* full text is a ``tsvector`` of each body (the ``simple`` configuration: lower-cased words,
  no stemming, where SQLite's archive stems with ``porter`` and folds diacritics) with a GIN
  index; a phrase matches as ``phraseto_tsquery`` reads it or as its words and numbers in
  order (:func:`word_phrase`: "1945-1949" finds "1945–1949", as in SQLite), ranked by
  ``ts_rank_cd`` (cover density) over the words asked to rank by, divided by 1 + the log of
  the document's length (SQLite: BM25, which also weighs a word by its rarity);
* :meth:`PostgresArchive.data_version` is a counter every writing call moves in its own
  transaction (SQLite's ``PRAGMA data_version`` has no Postgres twin);
* bodies, passages and contexts are ``bytea`` (UTF-8): a Postgres text column holds no NUL,
  and a document may; the ``tsvector`` is made from the text with NUL as a space;
* :meth:`PostgresArchive.damaged_documents` is always empty: the SQLite archive reads
  around damaged pages of its own file; Postgres reports a damaged page as an error (and
  detects one when the cluster has data checksums), which is the server's to repair.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..archive import ARCHIVE_ONLY, INDEXED, PENDING, StoredChunk, metadata_json, stored_chunks
from ..errors import BackendError, ConfigError
from ..timeutil import from_iso, to_iso, utcnow
from ..types import Chunk, Document
from .pg import PgConnection, first_line

__all__ = ["PostgresArchive"]

_PREFIX = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")
_WORD = re.compile(r"[^\W_]+")


def word_phrase(phrase: str) -> str:
    """A phrase as a ``to_tsquery`` text of its words and numbers in order, whatever stands
    between them ("" when it holds none), as SQLite's ``unicode61`` tokenizer reads it.

    Postgres's parser reads "1945-1949" as ``1945`` and the signed integer ``-1949``, so
    ``phraseto_tsquery`` of a question's "1945-1949" misses a document's "1945–1949" (en
    dash) or "1945 1949", which SQLite's archive finds. Each number after the first is also
    accepted with that sign, so a document's hyphen still matches.
    """
    words = _WORD.findall(phrase)
    parts = [f"('{w}' | '-{w}')" if i and w[0].isdigit() else f"'{w}'" for i, w in enumerate(words)]
    return " <-> ".join(parts)


def _b(text: str) -> bytes:
    """Text as stored: UTF-8 bytes (``bytea``), since a Postgres text column holds no NUL
    and the engine's documents may."""
    return text.encode("utf-8")


def _s(raw: Any) -> str:
    return bytes(raw).decode("utf-8")


class PostgresArchive:
    """A :class:`~pensive_core.archive.DocumentStore` in Postgres tables.

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        prefix: The tables' prefix (one archive per prefix).
        timeout_s: Connect timeout.

    Raises:
        ConfigError: If the prefix is not a lower-case identifier of at most 40 characters.
        BackendError: If Postgres cannot be reached (host and database named).
    """

    def __init__(self, dsn: str, prefix: str = "pensive", timeout_s: float = 10) -> None:
        if not _PREFIX.match(prefix):
            raise ConfigError(
                f"archive table prefix {prefix!r} is not valid: use up to 40 lower-case "
                "letters, digits or '_', starting with a letter or '_'"
            )
        from psycopg import sql

        self.prefix = prefix
        self._pg = PgConnection(dsn, "The Postgres archive", timeout_s)
        self.address = self._pg.address
        self._t = {
            name: sql.Identifier(f"{prefix}_{name}") for name in ("meta", "documents", "chunks")
        }
        self._depth = 0  # transactions open on this connection (nested ones are savepoints)
        self._create()

    # -- plumbing ----------------------------------------------------------------------------
    def _q(self, text: str) -> Any:
        from psycopg import sql

        return sql.SQL(text).format(**self._t)

    def _run(self, what: str, stmt: Any, params: Sequence[Any] = ()) -> list[Any]:
        def go(conn: Any) -> list[Any]:
            cur = conn.execute(stmt, params)
            return cur.fetchall() if cur.description is not None else []

        if self._depth:  # inside a transaction: no reconnect-and-retry half way through
            return go(self._pg.conn)
        return self._pg.run(what, go)

    def _create(self) -> None:
        ddl = [
            "CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value jsonb NOT NULL)",
            "CREATE TABLE IF NOT EXISTS {documents} (id text PRIMARY KEY, hash text NOT NULL, "
            "metadata text NOT NULL, timestamp text, ingested_at text NOT NULL, "
            "n_chunks integer NOT NULL, indexed smallint NOT NULL, context_gen text NOT NULL "
            "DEFAULT '', body bytea NOT NULL, tsv tsvector NOT NULL)",
            "CREATE INDEX IF NOT EXISTS {documents_fts} ON {documents} USING gin (tsv)",
            "CREATE TABLE IF NOT EXISTS {chunks} (id text PRIMARY KEY, doc_id text NOT NULL "
            "REFERENCES {documents}(id) ON DELETE CASCADE, ordinal integer NOT NULL, "
            'start integer NOT NULL, "end" integer NOT NULL, hash text NOT NULL, '
            "text bytea NOT NULL, context bytea NOT NULL DEFAULT '')",
            "CREATE INDEX IF NOT EXISTS {chunks_doc} ON {chunks} (doc_id, ordinal)",
        ]
        from psycopg import sql

        names = {
            **self._t,
            "documents_fts": sql.Identifier(f"{self.prefix}_documents_fts"),
            "chunks_doc": sql.Identifier(f"{self.prefix}_chunks_doc"),
        }

        def make(conn: Any) -> None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.prefix,))
                for text in ddl:
                    conn.execute(sql.SQL(text).format(**names))

        self._pg.run("create the archive tables", make)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction (a nested one is a savepoint): committed on success, rolled
        back on any exception."""
        import psycopg

        try:  # held to the end: another thread's call on the shared connection waits
            with self._pg.held() as conn, conn.transaction():
                self._depth += 1
                try:
                    yield
                    if self._depth == 1:
                        self._bump()
                finally:
                    self._depth -= 1
        except psycopg.Error as exc:
            if self._depth:  # an inner savepoint: the outer transaction reports it
                raise
            raise BackendError(
                f"Postgres at {self.address} refused a write to the archive, rolled back "
                f"whole ({type(exc).__name__}: {first_line(exc)})"
            ) from None

    def _bump(self) -> None:
        """Move the data version (in the transaction that wrote)."""
        self._run(
            "move the data version",
            self._q(
                "INSERT INTO {meta} (key, value) VALUES ('__data_version', '1') ON CONFLICT "
                "(key) DO UPDATE SET value = to_jsonb((({meta}.value)::text)::bigint + 1)"
            ),
        )

    # -- metadata ----------------------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        """A JSON value from the store's metadata (None when absent)."""
        rows = self._run(
            "read metadata", self._q("SELECT value FROM {meta} WHERE key = %s"), (key,)
        )
        return None if not rows else rows[0][0]

    def set_meta(self, key: str, value: Any) -> None:
        """Write a JSON value to the store's metadata."""
        from psycopg.types.json import Jsonb

        with self.transaction():
            self._run(
                "write metadata",
                self._q(
                    "INSERT INTO {meta} (key, value) VALUES (%s, %s) ON CONFLICT (key) "
                    "DO UPDATE SET value = EXCLUDED.value"
                ),
                (key, Jsonb(value)),
            )

    def data_version(self) -> int:
        """A counter every writing transaction moves (another connection's commit too)."""
        rows = self._run(
            "read the data version",
            self._q("SELECT value FROM {meta} WHERE key = '__data_version'"),
        )
        return int(rows[0][0]) if rows else 0

    # -- the commit protocol's marks ---------------------------------------------------------
    def fingerprint(self, doc_id: str) -> tuple[str, str, str | None, int, str] | None:
        """``(hash, metadata json, timestamp, indexed flag, context generator)`` or None."""
        rows = self._run(
            "read a fingerprint",
            self._q(
                "SELECT hash, metadata, timestamp, indexed, context_gen FROM {documents} "
                "WHERE id = %s"
            ),
            (doc_id,),
        )
        if not rows:
            return None
        r = rows[0]
        return (r[0], r[1], r[2], int(r[3]), r[4])

    def mark_indexed(
        self, changed: bool, ids: Iterable[str] | None = None, synced: Iterable[str] = ()
    ) -> int:
        """Confirm pending documents (``ids``; None: all) as indexed, clear the dirty mark and
        set the meta keys ``synced`` to the commit number, in one transaction; the commit
        number, moved when ``changed``."""
        with self.transaction():
            if ids is None:
                self._run(
                    "confirm documents",
                    self._q("UPDATE {documents} SET indexed = %s WHERE indexed = %s"),
                    (INDEXED, PENDING),
                )
            else:
                self._run(
                    "confirm documents",
                    self._q(
                        "UPDATE {documents} SET indexed = %s WHERE indexed = %s AND id = ANY(%s)"
                    ),
                    (INDEXED, PENDING, list(ids)),
                )
            self._run("clear the dirty mark", self._q("DELETE FROM {meta} WHERE key = 'dirty'"))
            commit = int(self.get_meta("commit") or 0)
            if changed:
                commit += 1
                self.set_meta("commit", commit)
            for key in synced:
                self.set_meta(key, commit)
        return commit

    def mark_dirty(self) -> None:
        """Note a change in flight (cleared by :meth:`mark_indexed`)."""
        if self.get_meta("dirty") is None:
            self.set_meta("dirty", 1)

    def is_dirty(self) -> bool:
        """Whether a change was left in flight."""
        return self.get_meta("dirty") is not None

    def mark_pending(self, doc_ids: Iterable[str]) -> None:
        """Mark documents to be indexed again."""
        with self.transaction():
            self._run(
                "mark documents pending",
                self._q("UPDATE {documents} SET indexed = %s WHERE indexed = %s AND id = ANY(%s)"),
                (PENDING, INDEXED, list(doc_ids)),
            )

    def commit_number(self) -> int:
        """The number of the last commit."""
        return int(self.get_meta("commit") or 0)

    def unindexed(self) -> list[str]:
        """Ids of documents written but not confirmed as indexed."""
        rows = self._run(
            "list pending documents",
            self._q("SELECT id FROM {documents} WHERE indexed = %s ORDER BY id"),
            (PENDING,),
        )
        return [r[0] for r in rows]

    def index_chunks(self) -> dict[str, tuple[str, int]]:
        """``passage id -> (document id, indexed flag)`` of every indexed or pending passage."""
        rows = self._run(
            "list indexed passages",
            self._q(
                "SELECT c.id, c.doc_id, d.indexed FROM {chunks} c JOIN {documents} d "
                "ON d.id = c.doc_id WHERE d.indexed IN (%s, %s)"
            ),
            (PENDING, INDEXED),
        )
        return {cid: (did, int(flag)) for cid, did, flag in rows}

    # -- documents ---------------------------------------------------------------------------
    def write(
        self,
        docs: Sequence[tuple[Document, str, list[Chunk]]],
        archive_only: bool = False,
        contexts: Mapping[str, str] | None = None,
        context_gen: Mapping[str, str] | None = None,
    ) -> None:
        """Write documents and their passages in one transaction (replacing same ids)."""
        contexts = contexts or {}
        context_gen = context_gen or {}
        now = to_iso(utcnow())
        flag = ARCHIVE_ONLY if archive_only else PENDING
        with self.transaction():
            conn = self._pg.conn
            # in id order, each document's row upserted first: two writers of one document
            # queue on its row lock (the later one wins whole) and never deadlock
            for doc, doc_hash, chunks in sorted(docs, key=lambda d: d[0].id):
                conn.execute(
                    self._q(
                        "INSERT INTO {documents} (id, hash, metadata, timestamp, ingested_at, "
                        "n_chunks, indexed, context_gen, body, tsv) VALUES "
                        "(%s, %s, %s, %s, %s, %s, %s, %s, %s, to_tsvector('simple', %s)) "
                        "ON CONFLICT (id) DO UPDATE SET hash = EXCLUDED.hash, "
                        "metadata = EXCLUDED.metadata, timestamp = EXCLUDED.timestamp, "
                        "ingested_at = EXCLUDED.ingested_at, n_chunks = EXCLUDED.n_chunks, "
                        "indexed = EXCLUDED.indexed, context_gen = EXCLUDED.context_gen, "
                        "body = EXCLUDED.body, tsv = EXCLUDED.tsv"
                    ),
                    (
                        doc.id,
                        doc_hash,
                        metadata_json(doc.metadata),
                        to_iso(doc.timestamp),
                        now,
                        len(chunks),
                        flag,
                        context_gen.get(doc.id, ""),
                        _b(doc.text),
                        doc.text.replace("\x00", " "),  # a text column holds no NUL
                    ),
                )
                conn.execute(self._q("DELETE FROM {chunks} WHERE doc_id = %s"), (doc.id,))
                if chunks:
                    with conn.cursor() as cur:
                        cur.executemany(
                            self._q(
                                'INSERT INTO {chunks} (id, doc_id, ordinal, start, "end", hash, '
                                "text, context) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                                "ON CONFLICT (id) DO UPDATE SET doc_id = EXCLUDED.doc_id, "
                                "ordinal = EXCLUDED.ordinal, start = EXCLUDED.start, "
                                '"end" = EXCLUDED."end", hash = EXCLUDED.hash, '
                                "text = EXCLUDED.text, context = EXCLUDED.context"
                            ),
                            [
                                (c.id, c.doc_id, c.ordinal, c.start, c.end, c.hash, _b(c.text),
                                 _b(contexts.get(c.id, "")))
                                for c in chunks
                            ],
                        )  # fmt: skip

    def delete(self, doc_id: str) -> list[str]:
        """Delete a document; returns its passage ids."""
        ids = self.chunk_ids(doc_id)
        with self.transaction():
            self._run(
                "delete a document", self._q("DELETE FROM {documents} WHERE id = %s"), (doc_id,)
            )
        return ids

    def chunk_ids(self, doc_id: str) -> list[str]:
        """The passage ids of a document, in order."""
        rows = self._run(
            "list passages",
            self._q("SELECT id FROM {chunks} WHERE doc_id = %s ORDER BY ordinal"),
            (doc_id,),
        )
        return [r[0] for r in rows]

    def search_documents(
        self,
        all_of: Sequence[str],
        any_of: Sequence[str],
        rank_by: Sequence[str],
        limit: int,
    ) -> list[tuple[str, float]]:
        """Committed documents holding every phrase of ``all_of``, one of ``any_of`` and one
        of ``rank_by`` (each when given), best first by ``ts_rank_cd`` over the ``rank_by``
        words (over everything asked when there are none); a phrase matches as Postgres
        parses it or as its words and numbers in order (:func:`word_phrase`)."""

        def group(phrases: Sequence[str], glue: str) -> tuple[str, list[str]]:
            # each phrase as Postgres reads it, or as its words and numbers in order (see
            # word_phrase): SQLite's archive finds either
            terms, params = [], []
            for p in (p for p in phrases if p.strip()):
                words = word_phrase(p)
                if words:
                    terms.append("(phraseto_tsquery('simple', %s) || to_tsquery('simple', %s))")
                    params += [p, words]
                else:
                    terms.append("phraseto_tsquery('simple', %s)")
                    params.append(p)
            return ("(" + glue.join(terms) + ")" if terms else ""), params

        groups = [
            group(list(all_of), " && "),
            group(list(any_of), " || "),
            group(list(dict.fromkeys(rank_by)), " || "),
        ]
        asked = [g for g in groups if g[0]]
        if not asked:
            return []
        query = " && ".join(g[0] for g in asked)
        # ranked by the question's words alone: they hold the needles too (L3 escalation
        # passes every word), and a cover of the needle alone scored every document the same
        # (0.1), so documents came in id order; SQLite ranks them by BM25
        rank, rank_params = groups[2] if groups[2][0] else (query, [p for g in asked for p in g[1]])
        stmt = self._q(
            "SELECT id, ts_rank_cd(tsv, r, 1) AS s FROM {documents}, (SELECT " + query + " AS q, "
            + rank + " AS r) x WHERE indexed > 0 AND tsv @@ q ORDER BY s DESC, id LIMIT %s"
        )  # fmt: skip
        params = [p for g in asked for p in g[1]] + rank_params
        rows = self._run("search documents", stmt, (*params, int(limit)))
        return [(r[0], float(r[1])) for r in rows]

    def contexts(self, doc_id: str) -> dict[str, str]:
        """The situating context of each passage of a document."""
        rows = self._run(
            "read contexts",
            self._q("SELECT id, context FROM {chunks} WHERE doc_id = %s"),
            (doc_id,),
        )
        return {r[0]: _s(r[1]) for r in rows}

    def doc_chunks(self, doc_id: str) -> list[tuple[str, int, str]]:
        """``(passage id, ordinal, text)`` of a document's passages, in order."""
        rows = self._run(
            "read passages",
            self._q("SELECT id, ordinal, text FROM {chunks} WHERE doc_id = %s ORDER BY ordinal"),
            (doc_id,),
        )
        return [(r[0], int(r[1]), _s(r[2])) for r in rows]

    def document(self, doc_id: str) -> Document | None:
        """A stored document whole, or None."""
        rows = self._run(
            "read a document",
            self._q("SELECT body, metadata, timestamp FROM {documents} WHERE id = %s"),
            (doc_id,),
        )
        if not rows:
            return None
        body, meta, ts = rows[0]
        return Document(id=doc_id, text=_s(body), metadata=json.loads(meta), timestamp=from_iso(ts))

    def damaged_documents(self) -> list[str]:
        """Always empty (see the module's notes): a damaged page is the server's error."""
        return []

    def chunks(self, ids: Iterable[str]) -> dict[str, StoredChunk]:
        """Stored passages by id (unknown ids left out)."""
        rows = self._run(
            "read passages",
            self._q(
                "SELECT c.id, c.doc_id, c.ordinal, c.text, d.metadata, d.timestamp, d.indexed, "
                "c.context FROM {chunks} c JOIN {documents} d ON d.id = c.doc_id "
                "WHERE c.id = ANY(%s)"
            ),
            (list(ids),),
        )
        return stored_chunks(
            (cid, did, ordinal, _s(text), meta, ts, flag, _s(context))
            for cid, did, ordinal, text, meta, ts, flag, context in rows
        )

    def filter_rows(self) -> tuple[list[str], list[dict[str, Any]], list[tuple[str, str]]]:
        """Ids and metadata of documents (indexed or archive only) and their passages."""
        docs = self._run(
            "read metadata", self._q("SELECT id, metadata FROM {documents} WHERE indexed > 0")
        )
        chunks = self._run(
            "read passages",
            self._q(
                "SELECT c.id, c.doc_id FROM {chunks} c JOIN {documents} d ON d.id = c.doc_id "
                "WHERE d.indexed > 0"
            ),
        )
        return (
            [d[0] for d in docs],
            [json.loads(d[1]) for d in docs],
            [(c[0], c[1]) for c in chunks],
        )

    def neighbours(self, doc_id: str, ordinal: int, window: int) -> list[tuple[int, int, int]]:
        """``(ordinal, start, end)`` of the passages within ``window`` of ``ordinal``."""
        rows = self._run(
            "read neighbours",
            self._q(
                'SELECT ordinal, start, "end" FROM {chunks} WHERE doc_id = %s AND ordinal '
                "BETWEEN %s AND %s ORDER BY ordinal"
            ),
            (doc_id, ordinal - window, ordinal + window),
        )
        return [(int(a), int(b), int(c)) for a, b, c in rows]

    def indexed_documents(self) -> dict[str, set[str]]:
        """Passage ids of every indexed document, by document id."""
        want: dict[str, set[str]] = {}
        rows = self._run(
            "list indexed documents",
            self._q(
                "SELECT c.id, c.doc_id FROM {chunks} c JOIN {documents} d ON d.id = c.doc_id "
                "WHERE d.indexed = %s"
            ),
            (INDEXED,),
        )
        for cid, did in rows:
            want.setdefault(did, set()).add(cid)
        return want

    def indexed_passage_count(self) -> int:
        """How many passages of indexed documents the archive holds."""
        rows = self._run(
            "count indexed passages",
            self._q(
                "SELECT count(*) FROM {chunks} c JOIN {documents} d ON d.id = c.doc_id "
                "WHERE d.indexed = %s"
            ),
            (INDEXED,),
        )
        return int(rows[0][0])

    def indexed_passages(self) -> list[tuple[str, str, str, dict[str, Any], str]]:
        """``(passage id, document id, text, document metadata, context)`` of every indexed
        passage, by document and position."""
        rows = self._run(
            "read indexed passages",
            self._q(
                "SELECT c.id, c.doc_id, c.text, d.metadata, c.context FROM {chunks} c "
                "JOIN {documents} d ON d.id = c.doc_id WHERE d.indexed = %s "
                "ORDER BY c.doc_id, c.ordinal"
            ),
            (INDEXED,),
        )
        return [(r[0], r[1], _s(r[2]), json.loads(r[3]), _s(r[4])) for r in rows]

    def counts(self) -> tuple[int, int]:
        """``(documents, passages)`` stored."""
        d = self._run("count documents", self._q("SELECT count(*) FROM {documents}"))
        c = self._run("count passages", self._q("SELECT count(*) FROM {chunks}"))
        return int(d[0][0]), int(c[0][0])

    def close(self) -> None:
        """Close the connection."""
        self._pg.close()
