"""The L1 hot cache (:class:`~pensive_core.cache.AnswerCache`) in Postgres, shared by every
replica of a store.

The L1 logic (keys, near matching, the hot set, eviction, the freshness rules) is
:class:`~pensive_core.cache.L1Memory`'s, the same as the embedded cache's; this module gives it
rows in three tables with one prefix:

* ``{prefix}_l1_meta``: one row, the cache's commit number and a version every write moves;
* ``{prefix}_l1``: one row per entry (its id grows in commit order, see below);
* ``{prefix}_l1_docs``: the dependency index, (document id, entry key), removed with its entry.

Freshness across replicas: a replica reads the meta row (one round trip, a primary-key read)
before it serves a lookup; a version it has not seen means another replica wrote (it reads the
new rows), and a moved commit number means one invalidated (it drops what that commit dropped,
by key and row id, and reads what it stored) before answering. An answer computed at an older
commit is refused when stored and never served after the commit moved. This read, not
LISTEN/NOTIFY, is the check: a notification reaches a listener some time after the notifier's
commit returns, so a query arriving in between would be served from memory that is behind.

Writes are serialized on the meta row (``SELECT ... FOR UPDATE`` first in every write
transaction): entry ids then grow in the order writes commit, so "rows past the last id I saw"
misses nothing (a Postgres sequence alone does not promise that across concurrent
transactions). Keys, questions, document ids and hits are UTF-8 ``bytea`` (a text column holds
no NUL). A write Postgres refuses is a :class:`~pensive_core.errors.BackendError` saying it was
rolled back whole.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..cache import Deps, L1Memory, L1Row
from ..errors import BackendError
from .pg_tables import PgTables, from_bytes, to_bytes

__all__ = ["PostgresL1Cache", "PostgresL1Rows"]

_FORMAT = 1  # bump whenever the columns change: an older cache is dropped, not misread
_COLUMNS = (
    "id, key, scope, query, k, as_of, docs, qvec, dense_floor, bm25_floor, cands, bm25_scores, "
    "fused_gap, method, confidence, tier, created, freq"
)


def _row(r: Sequence[Any]) -> L1Row:
    rid, key, scope, text, k, as_of, docs, qvec, dfl, bfl, cands = r[:11]
    bm25, gap, method, conf, tier, created, freq = r[11:]
    deps = Deps(
        frozenset(json.loads(from_bytes(docs))),
        None if qvec is None else np.frombuffer(bytes(qvec), dtype=np.float32),
        float(dfl),
        float(bfl),
        np.frombuffer(bytes(cands), dtype=np.int64),
        np.frombuffer(bytes(bm25), dtype=np.float32),
        float(gap),
        method,
    )
    return L1Row(
        int(rid), from_bytes(key), scope, from_bytes(text), int(k), as_of, deps, float(conf), tier,
        float(created), int(freq),
    )  # fmt: skip


class PostgresL1Rows:
    """An :class:`~pensive_core.cache.L1Rows` in Postgres tables (see the module's notes).

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        prefix: The tables' prefix (one cache per prefix: a store, or a namespace).
        timeout_s: Connect timeout.

    Raises:
        ConfigError: If the prefix is not a lower-case identifier of at most 40 characters.
        BackendError: If Postgres cannot be reached (host and database named).
    """

    def __init__(self, dsn: str, prefix: str = "pensive", timeout_s: float = 10) -> None:
        self.tables = PgTables(
            dsn,
            prefix,
            {"meta": "l1_meta", "l1": "l1", "docs": "l1_docs", "l1_id": "l1_id",
             "docs_key": "l1_docs_key"},
            "L1 cache",
            timeout_s,
        )  # fmt: skip
        self.prefix = prefix
        self.address = self.tables.address
        self._lock = threading.RLock()  # one statement or transaction at a time per connection
        self._seen = -1  # the meta version this reader's memory is level with
        self._create()

    def _run(self, what: str, text: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return self.tables.run(what, text, params)

    def _create(self) -> None:
        tables = [
            "CREATE TABLE IF NOT EXISTS {meta} (id smallint PRIMARY KEY CHECK (id = 1), "
            "format integer NOT NULL, commit_no bigint NOT NULL, version bigint NOT NULL)",
            "CREATE TABLE IF NOT EXISTS {l1} (id bigserial NOT NULL, key bytea PRIMARY KEY, "
            "scope text NOT NULL, query bytea NOT NULL, k integer NOT NULL, as_of text, "
            "docs bytea NOT NULL, qvec bytea, dense_floor float8 NOT NULL, "
            "bm25_floor float8 NOT NULL, cands bytea NOT NULL, bm25_scores bytea NOT NULL, "
            "fused_gap float8 NOT NULL, method text NOT NULL, confidence float8 NOT NULL, "
            "tier text NOT NULL, created float8 NOT NULL, freq integer NOT NULL, "
            "hits bytea NOT NULL)",
            "CREATE INDEX IF NOT EXISTS {l1_id} ON {l1} (id)",
            "CREATE TABLE IF NOT EXISTS {docs} (doc_id bytea NOT NULL, key bytea NOT NULL "
            "REFERENCES {l1}(key) ON DELETE CASCADE, PRIMARY KEY (doc_id, key))",
            "CREATE INDEX IF NOT EXISTS {docs_key} ON {docs} (key)",
        ]
        q = self.tables.q

        def make(conn: Any) -> None:
            # one process at a time: replicas making the tables at once collide in the catalog
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.prefix,))
            for text in tables:
                conn.execute(q(text))
            row = conn.execute(q("SELECT format FROM {meta} WHERE id = 1")).fetchone()
            if row is not None and row[0] == _FORMAT:
                return
            # another release's cache (or none yet): start over, at commit 0
            for text in ("DROP TABLE {docs}", "DROP TABLE {l1}", "DELETE FROM {meta}"):
                conn.execute(q(text))
            for text in tables[1:]:
                conn.execute(q(text))
            conn.execute(q("INSERT INTO {meta} VALUES (1, %s, 0, 0)"), (_FORMAT,))

        with self._lock:
            self.tables.atomic("create its tables", make)

    # -- reading -----------------------------------------------------------------------------
    def load(self, have: Mapping[str, int]) -> tuple[int, list[L1Row], dict[str, int]]:
        """The commit, the rows not in ``have`` and every row's id, from one snapshot (a
        repeatable-read transaction): after another replica's commit only what changed
        crosses the network."""
        q = self.tables.q

        def go(conn: Any) -> tuple[int, int, list[Any], dict[str, int]]:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            meta = conn.execute(q("SELECT commit_no, version FROM {meta} WHERE id = 1")).fetchone()
            present = {
                from_bytes(k): int(i) for k, i in conn.execute(q("SELECT key, id FROM {l1}"))
            }
            want = [i for k, i in present.items() if have.get(k) != i]
            if len(want) > len(present) // 2:  # most of it (opening): one plain scan
                rows = conn.execute(q("SELECT " + _COLUMNS + " FROM {l1}")).fetchall()
                missing = set(want)
                rows = [r for r in rows if r[0] in missing]
            else:
                rows = conn.execute(
                    q("SELECT " + _COLUMNS + " FROM {l1} WHERE id = ANY(%s)"), (want,)
                ).fetchall()
            return int(meta[0]), int(meta[1]), rows, present

        with self._lock:
            commit, version, rows, present = self.tables.atomic("load its entries", go)
            self._seen = version
        return commit, [_row(r) for r in rows], present

    def changed(self) -> int | None:
        """One primary-key read: None if no other replica wrote since the last look, else
        the cache's commit number."""
        with self._lock:
            rows = self._run(
                "read its version", "SELECT commit_no, version FROM {meta} WHERE id = 1"
            )
            commit, version = int(rows[0][0]), int(rows[0][1])
            if version == self._seen:
                return None
            self._seen = version
            return commit

    def rows_after(self, row_id: int, commit: int) -> list[L1Row]:
        """Rows past ``row_id`` while the cache is at ``commit`` (one statement: one snapshot)."""
        rows = self._run(
            "read its new entries",
            "SELECT " + _COLUMNS + " FROM {l1} WHERE id > %s AND "
            "(SELECT commit_no FROM {meta} WHERE id = 1) = %s",
            (row_id, commit),
        )
        return [_row(r) for r in rows]

    def hits(self, key: str) -> str | None:
        """An entry's hits as JSON, or None."""
        rows = self._run("read an answer", "SELECT hits FROM {l1} WHERE key = %s", (to_bytes(key),))
        return None if not rows else from_bytes(rows[0][0])

    def keys_for_docs(self, doc_ids: list[str]) -> set[str]:
        """Keys of entries with a hit from these documents."""
        if not doc_ids:
            return set()
        rows = self._run(
            "read its dependency index",
            "SELECT DISTINCT key FROM {docs} WHERE doc_id = ANY(%s)",
            ([to_bytes(d) for d in doc_ids],),
        )
        return {from_bytes(r[0]) for r in rows}

    # -- writing -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def write(self) -> Iterator[_PgWriter]:
        """One write transaction, queued behind every other writer of the cache on its meta
        row; committed at the end, rolled back whole on any error.

        Raises:
            BackendError: If Postgres refuses a write inside it (nothing of it is stored).
        """
        with self._lock:
            with self.tables.transaction():  # a dropped connection is reopened first
                rows = self.tables.run(
                    "queue for a write", "SELECT version FROM {meta} WHERE id = 1 FOR UPDATE"
                )
                w = _PgWriter(self, int(rows[0][0]))
                yield w
                if w.wrote:
                    rows = self.tables.run(
                        "move its version",
                        "UPDATE {meta} SET version = version + 1 WHERE id = 1 RETURNING version",
                    )
                    w.version = int(rows[0][0])
            if w.level:  # memory holds everything up to this write: only later ones are news
                self._seen = w.version

    def save_freqs(self, freqs: list[tuple[str, int]]) -> None:
        """Persist use counts (ignored if Postgres cannot be reached)."""
        if not freqs:
            return
        with contextlib.suppress(BackendError):
            self._run(
                "save use counts",
                "UPDATE {l1} SET freq = u.f FROM unnest(%s::bytea[], %s::integer[]) AS u(k, f) "
                "WHERE {l1}.key = u.k",
                ([to_bytes(k) for k, _ in freqs], [min(n, 2**31 - 1) for _, n in freqs]),
            )

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self.tables.close()


class _PgWriter:
    """Inside :meth:`PostgresL1Rows.write`'s transaction (statements run on its connection)."""

    def __init__(self, rows: PostgresL1Rows, version: int) -> None:
        self._rows = rows
        self._t = rows.tables
        self._start = version
        self.version = version  # after this write (moved at commit when it wrote)
        self.wrote = False
        # nobody else wrote since this reader last looked: its memory stays level
        self.level = version == rows._seen

    def _x(self, text: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._t.run("write", text, params)

    def commit(self) -> int:
        return int(self._x("SELECT commit_no FROM {meta} WHERE id = 1")[0][0])

    def others_wrote(self) -> bool:
        return self._start != self._rows._seen

    def rows_after(self, row_id: int) -> list[L1Row]:
        return [
            _row(r) for r in self._x("SELECT " + _COLUMNS + " FROM {l1} WHERE id > %s", (row_id,))
        ]

    def keys_after(self, row_id: int) -> list[str]:
        return [from_bytes(r[0]) for r in self._x("SELECT key FROM {l1} WHERE id > %s", (row_id,))]

    def store(self, row: L1Row, hits: str) -> int:
        deps = row.deps
        key = to_bytes(row.key)
        self.wrote = True
        self._x("DELETE FROM {l1} WHERE key = %s", (key,))  # a new id: others see it as new
        qvec = None if deps.qvec is None else np.asarray(deps.qvec, np.float32).tobytes()
        rid = self._x(
            "INSERT INTO {l1} (key, scope, query, k, as_of, docs, qvec, dense_floor, bm25_floor, "
            "cands, bm25_scores, fused_gap, method, confidence, tier, created, freq, hits) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "RETURNING id",
            (
                key, row.scope, to_bytes(row.text), row.k, row.as_of,
                to_bytes(json.dumps(sorted(deps.docs), ensure_ascii=False)), qvec,
                float(deps.dense_floor), float(deps.bm25_floor),
                np.asarray(deps.cands, np.int64).tobytes(),
                np.asarray(deps.bm25_scores, np.float32).tobytes(),
                float(deps.fused_gap), deps.method, float(row.confidence), row.tier,
                row.created, row.freq, to_bytes(hits),
            ),
        )[0][0]  # fmt: skip
        if deps.docs:
            self._x(
                "INSERT INTO {docs} (doc_id, key) SELECT d, %s FROM unnest(%s::bytea[]) AS d "
                "ON CONFLICT DO NOTHING",
                (key, [to_bytes(d) for d in sorted(deps.docs)]),
            )
        return int(rid)

    def delete(self, keys: list[str]) -> None:
        if keys:
            self.wrote = True
            self._x("DELETE FROM {l1} WHERE key = ANY(%s)", ([to_bytes(k) for k in keys],))

    def delete_all(self) -> int:
        self.wrote = True
        n = int(self._x("SELECT count(*) FROM {l1}")[0][0])
        self._x("DELETE FROM {l1}")  # the index rows go with their entries
        return n

    def set_commit(self, commit: int) -> None:
        self.wrote = True
        self._x("UPDATE {meta} SET commit_no = %s WHERE id = 1", (commit,))

    def caught_up(self) -> None:
        self.level = True


class PostgresL1Cache(L1Memory):
    """The L1 hot cache in Postgres: :class:`~pensive_core.cache.L1Memory` over
    :class:`PostgresL1Rows`, shared by every replica that opens the same prefix.

    A hit costs one round trip (the meta row's version, read before serving); a miss, or a
    cold answer (outside the hot set), one more.

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        prefix: The tables' prefix (one cache per prefix: a store, or a namespace).
        capacity: Most entries kept; past it, the least frequently used tenth is evicted.
        ttl_s: Seconds an entry stays valid.
        hot: Most entries whose hits are held in memory.
        fuzzy: Whether near-duplicate (typo-level) matching is on.
        timeout_s: Connect timeout.

    Raises:
        ConfigError: If the prefix is not a lower-case identifier of at most 40 characters.
        BackendError: If Postgres cannot be reached (host and database named).
    """

    def __init__(
        self,
        dsn: str,
        prefix: str = "pensive",
        capacity: int = 10_000,
        ttl_s: float = 86_400.0,
        hot: int = 2_000,
        fuzzy: bool = True,
        timeout_s: float = 10,
    ) -> None:
        self.prefix = prefix
        super().__init__(PostgresL1Rows(dsn, prefix, timeout_s), capacity, ttl_s, hot, fuzzy)
