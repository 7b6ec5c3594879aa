"""Statements and dates per passage (:class:`~pensive_core.temporal.TemporalTables`) in
Postgres tables with one prefix (one store, or one namespace).

A part of the Postgres storage engine (issue 26). It passes the suite the SQLite tables pass
(:class:`pensive_core.testing.TemporalTablesTests`). Only the rows move: what a document's
passages state (:func:`~pensive_core.temporal.store.document_rows`) and the supersession
computed over every statement (:func:`~pensive_core.temporal.store.view_from_rows`) are the
embedded engine's own code.

Tables (``{prefix}_`` before each name): ``temporal_statements`` (record time is the
identity ``id``: the order statements were written), ``temporal_dates`` and
``temporal_chunks``. Slots and values are ``bytea`` (UTF-8): a text column holds no NUL, and
a statement extractor's slot may. Several writers at once are safe: each document is
replaced in one transaction under an advisory lock of the document, and documents share no
row. Two writers' statements get record times in the order they were inserted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..storage.pg import PgConnection
from ..storage.pg_tables import (
    check_prefix,
    create_once,
    identifiers,
    locked_write,
    table_exists,
)
from .statements import StatementExtractor
from .store import TemporalView, document_rows, view_from_rows

__all__ = ["PostgresTemporalStore"]

_TABLES = ("temporal_statements", "temporal_dates", "temporal_chunks")
_INDEXES = ("temporal_statements_doc", "temporal_dates_doc", "temporal_chunks_doc")


def _b(text: str) -> bytes:
    return text.encode("utf-8")


def _s(raw: Any) -> str:
    return bytes(raw).decode("utf-8")


class PostgresTemporalStore:
    """A :class:`~pensive_core.temporal.TemporalTables` in Postgres tables.

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        prefix: The tables' prefix (one set of statements per prefix).
        create: Create the tables if missing (False for a reader).
        timeout_s: Connect timeout.

    Raises:
        ConfigError: If the prefix is not a lower-case identifier of at most 40 characters.
        BackendError: If Postgres cannot be reached (host and database named).
    """

    def __init__(self, dsn: str, prefix: str, create: bool = True, timeout_s: float = 10) -> None:
        self.prefix = check_prefix(prefix, "temporal")
        self._pg = PgConnection(dsn, "The Postgres statement tables", timeout_s)
        self.address = self._pg.address
        self._t = identifiers(prefix, [*_TABLES, *_INDEXES])
        if create:
            self._create()

    def _q(self, text: str) -> Any:
        from psycopg import sql

        return sql.SQL(text).format(**self._t)

    def _read(self, what: str, stmt: str, params: Sequence[Any] = ()) -> list[Any]:
        q = self._q(stmt)
        return self._pg.run(what, lambda c: c.execute(q, params).fetchall())

    def _create(self) -> None:
        ddl = [
            "CREATE TABLE IF NOT EXISTS {temporal_statements} (id bigint GENERATED ALWAYS AS "
            "IDENTITY PRIMARY KEY, doc_id text NOT NULL, chunk_id text NOT NULL, "
            "slot bytea NOT NULL, value bytea NOT NULL, correction boolean NOT NULL, "
            "change boolean NOT NULL, valid_from double precision, recorded_at text NOT NULL)",
            "CREATE INDEX IF NOT EXISTS {temporal_statements_doc} ON {temporal_statements} "
            "(doc_id)",
            "CREATE TABLE IF NOT EXISTS {temporal_dates} (id bigint GENERATED ALWAYS AS "
            "IDENTITY PRIMARY KEY, doc_id text NOT NULL, chunk_id text NOT NULL, "
            'start double precision NOT NULL, "end" double precision NOT NULL)',
            "CREATE INDEX IF NOT EXISTS {temporal_dates_doc} ON {temporal_dates} (doc_id)",
            "CREATE TABLE IF NOT EXISTS {temporal_chunks} (chunk_id text PRIMARY KEY, "
            "doc_id text NOT NULL)",
            "CREATE INDEX IF NOT EXISTS {temporal_chunks_doc} ON {temporal_chunks} (doc_id)",
        ]
        create_once(self._pg, "create the statement tables", self.prefix,
                    [f"{self.prefix}_{n}" for n in (*_TABLES, *_INDEXES)],
                    [self._q(t) for t in ddl])  # fmt: skip

    def exists(self) -> bool:
        """Whether the statement tables exist."""
        return table_exists(self._pg, f"{self.prefix}_temporal_statements")

    def drop(self) -> None:
        """Remove the tables (to rebuild them under a new schema)."""
        from psycopg import sql

        stmt = sql.SQL("DROP TABLE IF EXISTS {}").format(
            sql.SQL(", ").join(self._t[t] for t in _TABLES)
        )
        locked_write(self._pg, "drop the statement tables", f"pensive_ddl:{self.prefix}",
                     lambda c: c.execute(stmt))  # fmt: skip

    # -- writing -----------------------------------------------------------------------------
    def add_document(
        self,
        doc_id: str,
        passages: Sequence[tuple[str, str]],
        timestamp: datetime | None,
        extractor: StatementExtractor,
        relative: bool = True,
    ) -> None:
        """Replace what is known of a document's passages: ``(chunk_id, text)`` pairs.

        Args:
            doc_id: The document.
            passages: Its indexed passages.
            timestamp: Its timestamp: the valid time of statements that give none, and the
                reference for relative dates ("yesterday").
            extractor: Finds the statements.
            relative: Resolve relative dates against ``timestamp``.

        Raises:
            BackendError: If Postgres refuses the write (nothing of it is stored).
        """
        stmts, dates, chunks = document_rows(doc_id, passages, timestamp, extractor, relative)
        rows = [
            (d, c, _b(slot), _b(value), bool(corr), bool(chg), t, at)
            for d, c, slot, value, corr, chg, t, at in stmts
        ]
        self._replace(doc_id, chunks, dates, rows)

    def remove_document(self, doc_id: str) -> None:
        """Forget a document's passages.

        Raises:
            BackendError: If Postgres refuses the write.
        """
        self._replace(doc_id, [], [], [])

    def _replace(
        self,
        doc_id: str,
        chunks: list[tuple[str, str]],
        dates: list[tuple[str, str, float, float]],
        stmts: list[tuple[Any, ...]],
    ) -> None:
        def work(conn: Any) -> None:
            for t in _TABLES:
                conn.execute(self._q(f"DELETE FROM {{{t}}} WHERE doc_id = %s"), (doc_id,))
            with conn.cursor() as cur:
                if chunks:
                    cur.executemany(
                        self._q(
                            "INSERT INTO {temporal_chunks} (chunk_id, doc_id) VALUES (%s, %s) "
                            "ON CONFLICT (chunk_id) DO UPDATE SET doc_id = EXCLUDED.doc_id"
                        ),
                        chunks,
                    )
                if dates:
                    cur.executemany(
                        self._q(
                            'INSERT INTO {temporal_dates} (doc_id, chunk_id, start, "end") '
                            "VALUES (%s, %s, %s, %s)"
                        ),
                        dates,
                    )
                if stmts:
                    # in the order given: the identity is the statements' record time
                    cur.executemany(
                        self._q(
                            "INSERT INTO {temporal_statements} (doc_id, chunk_id, slot, value, "
                            "correction, change, valid_from, recorded_at) VALUES "
                            "(%s, %s, %s, %s, %s, %s, %s, %s)"
                        ),
                        stmts,
                    )

        locked_write(self._pg, f"replace the statements of document {doc_id!r}",
                     f"pensive_temporal:{self.prefix}:{doc_id}", work)  # fmt: skip

    # -- reading -----------------------------------------------------------------------------
    def documents(self) -> dict[str, set[str]]:
        """Document -> the passage ids known here (to bring the tables level with the archive)."""
        out: dict[str, set[str]] = defaultdict(set)
        for cid, did in self._read("list statement passages",
                                   "SELECT chunk_id, doc_id FROM {temporal_chunks}"):  # fmt: skip
            out[did].add(cid)
        return dict(out)

    def load(self) -> TemporalView:
        """Every statement and date, with supersession computed: two SELECTs in one snapshot
        (a writer's commit lands in the view whole or not at all)."""

        def read(conn: Any) -> tuple[list[Any], list[Any]]:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                stmts = conn.execute(
                    self._q(
                        "SELECT id, chunk_id, slot, value, correction, change, valid_from "
                        "FROM {temporal_statements} ORDER BY id"
                    )
                ).fetchall()
                dates = conn.execute(
                    self._q('SELECT chunk_id, start, "end" FROM {temporal_dates} ORDER BY id')
                ).fetchall()
            return stmts, dates

        stmts, dates = self._pg.run("load the statements", read)
        return view_from_rows(
            ((seq, cid, _s(slot), _s(value), corr, chg, t)
             for seq, cid, slot, value, corr, chg, t in stmts),
            dates,
        )  # fmt: skip

    def counts(self) -> dict[str, int]:
        """Statements and dates held."""
        row = self._read(
            "count the statements",
            "SELECT (SELECT count(*) FROM {temporal_statements}), "
            "(SELECT count(*) FROM {temporal_dates})",
        )[0]
        return {"statements": int(row[0]), "dates": int(row[1])}

    @property
    def connection(self) -> PgConnection:
        """The tables' connection."""
        return self._pg

    def close(self) -> None:
        """Close the connection."""
        self._pg.close()
