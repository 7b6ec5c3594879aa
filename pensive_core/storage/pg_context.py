"""The context cache (:class:`~pensive_core.context.cache.ContextStore`) in Postgres: the
situating contexts an LLM wrote, keyed by ``(doc_hash, chunk_hash, generator)`` in one
``{prefix}_context_cache`` table shared by every replica, so no replica pays a model call for a
passage another already situated.

Keys and contexts are UTF-8 ``bytea`` (a text column holds no NUL). A batch is written in one
transaction, in key order (two replicas writing overlapping batches queue, never deadlock); a
batch Postgres refuses is a :class:`~pensive_core.errors.BackendError` saying it was rolled back
whole.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ..timeutil import to_iso, utcnow
from .pg_tables import PgTables, from_bytes, to_bytes

__all__ = ["PostgresContextCache"]


class PostgresContextCache:
    """Situating contexts keyed by document hash, passage hash and generator name, in Postgres.

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        prefix: The table's prefix (one cache per prefix: a store, or a namespace).
        timeout_s: Connect timeout.

    Raises:
        ConfigError: If the prefix is not a lower-case identifier of at most 40 characters.
        BackendError: If Postgres cannot be reached (host and database named).
    """

    def __init__(self, dsn: str, prefix: str = "pensive", timeout_s: float = 10) -> None:
        self.tables = PgTables(dsn, prefix, {"t": "context_cache"}, "context cache", timeout_s)
        self.prefix = prefix
        self.address = self.tables.address
        self.tables.create(
            [
                "CREATE TABLE IF NOT EXISTS {t} (doc_hash bytea NOT NULL, "
                "chunk_hash bytea NOT NULL, generator bytea NOT NULL, context bytea NOT NULL, "
                "created_at text NOT NULL, PRIMARY KEY (generator, doc_hash, chunk_hash))"
            ]
        )

    def get_many(self, keys: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
        """The cached contexts among ``(doc_hash, chunk_hash, generator)`` keys (misses left
        out; repeats are fine). One query per generator: a document's passages come together."""
        wanted = set(keys)
        docs_by_gen: dict[str, set[str]] = defaultdict(set)
        for doc_hash, _chunk_hash, generator in wanted:
            docs_by_gen[generator].add(doc_hash)
        found: dict[tuple[str, str, str], str] = {}
        for generator, docs in docs_by_gen.items():
            rows = self.tables.run(
                "read cached contexts",
                "SELECT doc_hash, chunk_hash, context FROM {t} "
                "WHERE generator = %s AND doc_hash = ANY(%s)",
                (to_bytes(generator), [to_bytes(d) for d in sorted(docs)]),
            )
            for doc_hash, chunk_hash, context in rows:
                key = (from_bytes(doc_hash), from_bytes(chunk_hash), generator)
                if key in wanted:
                    found[key] = from_bytes(context)
        return found

    def put_many(self, rows: Sequence[tuple[str, str, str, str]]) -> None:
        """Store ``(doc_hash, chunk_hash, generator, context)`` rows, replacing any cached under
        the same key, in one transaction (the last of repeated keys wins).

        Raises:
            BackendError: If Postgres refused the batch (nothing of it is stored).
        """
        if not rows:
            return
        latest = {(d, c, g): text for d, c, g, text in rows}
        ordered = sorted(latest.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1]))
        now = to_iso(utcnow())
        # one statement is one transaction: all of the batch or none of it (and an upsert, so
        # the retry after a dropped connection is safe)
        self.tables.atomic(
            f"store a batch of {len(ordered)} context(s)",
            lambda conn: conn.execute(
                self.tables.q(
                    "INSERT INTO {t} (doc_hash, chunk_hash, generator, context, created_at) "
                    "SELECT d, c, g, x, %s FROM unnest(%s::bytea[], %s::bytea[], %s::bytea[], "
                    "%s::bytea[]) AS u(d, c, g, x) ON CONFLICT (generator, doc_hash, chunk_hash) "
                    "DO UPDATE SET context = EXCLUDED.context, created_at = EXCLUDED.created_at"
                ),
                (
                    now,
                    [to_bytes(d) for (d, _, _), _ in ordered],
                    [to_bytes(c) for (_, c, _), _ in ordered],
                    [to_bytes(g) for (_, _, g), _ in ordered],
                    [to_bytes(text) for _, text in ordered],
                ),
            ),
        )

    def count(self) -> int:
        """How many contexts (summaries included) are cached."""
        rows = self.tables.run("count cached contexts", "SELECT count(*) FROM {t}")
        return int(rows[0][0])

    def clear(self, generator: str | None = None) -> int:
        """Remove cached contexts (of one generator, if given); returns how many."""

        def go(conn: Any) -> int:
            if generator is None:
                cur = conn.execute(self.tables.q("DELETE FROM {t}"))
            else:
                stmt = self.tables.q("DELETE FROM {t} WHERE generator = %s")
                cur = conn.execute(stmt, (to_bytes(generator),))
            return int(cur.rowcount)

        return self.tables.atomic("clear cached contexts", go)

    def close(self) -> None:
        """Close the connection."""
        self.tables.close()
