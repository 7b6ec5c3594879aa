"""The entity graph (:class:`~pensive_core.graph.GraphTables`) and what it learns from use
(:class:`~pensive_core.graph.learning.LearningRows` under :class:`BaseLevel` and
:class:`Hebbian`) in Postgres tables with one prefix (one store, or one namespace).

A part of the Postgres storage engine (issue 26). It passes the suites the SQLite tables pass
(:class:`pensive_core.testing.GraphTablesTests`, :class:`~pensive_core.testing.
LearningTablesTests`). Only the rows move: what a document adds (:func:`~pensive_core.graph.
store.plan_document`), the view built from the rows (:func:`~pensive_core.graph.store.
build_view`) and the learning arithmetic (:class:`BaseLevel`, :class:`Hebbian`) are the
embedded engine's own code.

Tables (``{prefix}_`` before each name):

* ``graph_entities`` (id, key, kind, chunks): ``chunks`` counts the passages naming the
  entity plus the documents titled after it; a row at 0 is deleted;
* ``graph_chunks`` (chunk_id, doc_id, ordinal), ``graph_mentions`` (chunk_id, entity_id,
  count), ``graph_subjects`` (doc_id, entity_id);
* ``graph_base_level`` (chunk_id, value, last), ``graph_hebbian`` (src, dst, weight, last),
  ``graph_learning`` (name, version): a counter per learning table that every write moves.

Entity keys and kinds, and learned node names (``"e:" + key``), are ``bytea`` (UTF-8): a text
column holds no NUL, and an extractor's key may. Several writers at once are safe: each
document is written in one transaction under an advisory lock of the document, and the
entities it names are locked in key order (so two documents naming the same entities queue,
never deadlock); a learning write holds its table's advisory lock for one call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, TypeVar

from ..errors import BackendError
from ..storage.pg import PgConnection
from ..storage.pg_tables import (
    check_prefix,
    create_once,
    identifiers,
    locked_write,
    table_exists,
)
from .extract import EntityExtractor
from .learning import BaseLevel, Hebbian, LearningConfig
from .store import DocumentPlan, GraphView, build_view, plan_document

__all__ = ["PostgresGraphStore", "PostgresLearningRows", "open_postgres_learning"]

T = TypeVar("T")

_GRAPH_TABLES = ("graph_entities", "graph_chunks", "graph_mentions", "graph_subjects")


def _b(text: str) -> bytes:
    return text.encode("utf-8")


def _s(raw: Any) -> str:
    return bytes(raw).decode("utf-8")


class PostgresGraphStore:
    """A :class:`~pensive_core.graph.GraphTables` in Postgres tables.

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        prefix: The tables' prefix (one graph per prefix).
        max_pair_entities: Passages naming more entities than this add no co-occurrence.
        create: Create the tables if missing (False for a reader).
        timeout_s: Connect timeout.

    Raises:
        ConfigError: If the prefix is not a lower-case identifier of at most 40 characters.
        BackendError: If Postgres cannot be reached (host and database named).
    """

    def __init__(
        self,
        dsn: str,
        prefix: str,
        max_pair_entities: int = 30,
        create: bool = True,
        timeout_s: float = 10,
    ) -> None:
        self.prefix = check_prefix(prefix, "graph")
        self.max_pair_entities = max_pair_entities
        self._pg = PgConnection(dsn, "The Postgres entity graph", timeout_s)
        self.address = self._pg.address
        self._t = identifiers(prefix, [*_GRAPH_TABLES, "graph_chunks_doc", "graph_mentions_e"])
        #: Subject keys of documents added, replaced or removed since the caller last cleared
        #: it (by this object's writes, once committed).
        self.touched_subjects: set[str] = set()
        #: Keys of entities named by passages added or removed since the caller last cleared
        #: it (by this object's writes, once committed).
        self.touched_names: set[str] = set()
        if create:
            self._create()

    # -- plumbing ----------------------------------------------------------------------------
    def _q(self, text: str) -> Any:
        from psycopg import sql

        return sql.SQL(text).format(**self._t)

    def _read(self, what: str, stmt: str, params: Sequence[Any] = ()) -> list[Any]:
        q = self._q(stmt)
        return self._pg.run(what, lambda c: c.execute(q, params).fetchall())

    def _create(self) -> None:
        ddl = [
            "CREATE TABLE IF NOT EXISTS {graph_entities} (id bigint GENERATED ALWAYS AS "
            "IDENTITY PRIMARY KEY, key bytea NOT NULL UNIQUE, kind bytea NOT NULL, "
            "chunks integer NOT NULL DEFAULT 0)",
            "CREATE TABLE IF NOT EXISTS {graph_chunks} (chunk_id text PRIMARY KEY, "
            "doc_id text NOT NULL, ordinal integer NOT NULL)",
            "CREATE INDEX IF NOT EXISTS {graph_chunks_doc} ON {graph_chunks} (doc_id, ordinal)",
            "CREATE TABLE IF NOT EXISTS {graph_mentions} (chunk_id text NOT NULL, "
            "entity_id bigint NOT NULL, count integer NOT NULL, "
            "PRIMARY KEY (chunk_id, entity_id))",
            "CREATE INDEX IF NOT EXISTS {graph_mentions_e} ON {graph_mentions} (entity_id)",
            "CREATE TABLE IF NOT EXISTS {graph_subjects} (doc_id text PRIMARY KEY, "
            "entity_id bigint NOT NULL)",
        ]

        made = [*_GRAPH_TABLES, "graph_chunks_doc", "graph_mentions_e"]
        create_once(self._pg, "create the graph tables", self.prefix,
                    [f"{self.prefix}_{n}" for n in made], [self._q(t) for t in ddl])  # fmt: skip

    def exists(self) -> bool:
        """Whether the graph's tables exist."""
        return table_exists(self._pg, f"{self.prefix}_graph_chunks")

    def drop(self) -> None:
        """Delete the graph's tables (to rebuild them from the archive)."""
        from psycopg import sql

        stmt = sql.SQL("DROP TABLE IF EXISTS {}").format(
            sql.SQL(", ").join(self._t[t] for t in _GRAPH_TABLES)
        )
        locked_write(self._pg, "drop the graph tables", f"pensive_ddl:{self.prefix}",
                     lambda c: c.execute(stmt))  # fmt: skip

    # -- writing -----------------------------------------------------------------------------
    def add_document(
        self,
        doc_id: str,
        chunks: Sequence[tuple[str, int, str]],
        extractor: EntityExtractor,
        subject: str | None = None,
    ) -> int:
        """Replace a document's part of the graph with its passages' mentions.

        Args:
            doc_id: The document.
            chunks: ``(chunk id, ordinal, text)`` of each passage.
            extractor: What finds the mentions.
            subject: What the document is about, usually its title (see
                :func:`~pensive_core.graph.store.subject_key`).

        Returns:
            The number of mentions stored.

        Raises:
            BackendError: If Postgres refuses the write (nothing of it is stored).
        """
        plan = plan_document(chunks, extractor, subject)
        self._replace(doc_id, plan)
        return sum(n for counts in plan.mentions for n in counts.values())

    def remove_document(self, doc_id: str) -> None:
        """Take a document's passages and their mentions out of the graph.

        Raises:
            BackendError: If Postgres refuses the write (nothing of it is stored).
        """
        self._replace(doc_id, DocumentPlan([], [], {}, ""))

    def _replace(self, doc_id: str, plan: DocumentPlan) -> None:
        # what the document adds to each entity's count: one per passage naming it, one for
        # its title (encoded before the transaction: a key that is no UTF-8 writes nothing)
        added: Counter[str] = Counter()
        for counts in plan.mentions:
            added.update(counts.keys())
        if plan.subject:
            added[plan.subject] += 1
        kinds = {k: _b(v) for k, v in plan.kinds.items()}
        keys = {k: _b(k) for k in added}
        mention_rows: dict[tuple[str, str], int] = Counter()
        for (cid, _), counts in zip(plan.chunks, plan.mentions):
            for key, n in counts.items():
                mention_rows[(cid, key)] += n
        chunk_rows = {cid: ordinal for cid, ordinal in plan.chunks}

        def work(conn: Any) -> tuple[set[str], set[str]]:
            removed: Counter[str] = Counter()  # per entity: the passages of ours naming it
            for (key,) in conn.execute(
                self._q(
                    "SELECT e.key FROM {graph_chunks} c JOIN {graph_mentions} m "
                    "ON m.chunk_id = c.chunk_id JOIN {graph_entities} e ON e.id = m.entity_id "
                    "WHERE c.doc_id = %s"
                ),
                (doc_id,),
            ):
                removed[_s(key)] += 1
            old_names = set(removed)
            old_subjects = {
                _s(r[0])
                for r in conn.execute(
                    self._q(
                        "SELECT e.key FROM {graph_subjects} s JOIN {graph_entities} e "
                        "ON e.id = s.entity_id WHERE s.doc_id = %s"
                    ),
                    (doc_id,),
                )
            }
            for key in old_subjects:
                removed[key] += 1
            raw = {**keys, **{k: _b(k) for k in removed}}
            # every entity this write changes, locked in one order (two writers naming the
            # same entities queue on them instead of deadlocking). An entity this document
            # alone kept alive is made again (with the kind it names now), as when the
            # embedded store deletes it before adding the document back.
            order = sorted(raw, key=lambda k: raw[k])
            if order:
                with conn.cursor() as cur:
                    cur.executemany(
                        self._q(
                            "INSERT INTO {graph_entities} AS e (key, kind, chunks) "
                            "VALUES (%s, %s, %s) ON CONFLICT (key) DO UPDATE SET "
                            "chunks = e.chunks - %s + EXCLUDED.chunks, kind = CASE WHEN "
                            "e.chunks - %s <= 0 THEN EXCLUDED.kind ELSE e.kind END"
                        ),
                        [
                            (raw[k], kinds.get(k, b""), added[k], removed[k], removed[k])
                            for k in order
                        ],
                    )
            conn.execute(
                self._q(
                    "DELETE FROM {graph_mentions} WHERE chunk_id IN "
                    "(SELECT chunk_id FROM {graph_chunks} WHERE doc_id = %s)"
                ),
                (doc_id,),
            )
            conn.execute(self._q("DELETE FROM {graph_chunks} WHERE doc_id = %s"), (doc_id,))
            conn.execute(self._q("DELETE FROM {graph_subjects} WHERE doc_id = %s"), (doc_id,))
            if removed:
                conn.execute(
                    self._q("DELETE FROM {graph_entities} WHERE key = ANY(%s) AND chunks <= 0"),
                    ([raw[k] for k in removed],),
                )
            ids = {
                _s(k): int(i)
                for k, i in conn.execute(
                    self._q("SELECT key, id FROM {graph_entities} WHERE key = ANY(%s)"),
                    (list(keys.values()),),
                )
            }  # locked by this transaction: no other writer can delete them now
            with conn.cursor() as cur:
                if chunk_rows:
                    cur.executemany(
                        self._q(
                            "INSERT INTO {graph_chunks} (chunk_id, doc_id, ordinal) "
                            "VALUES (%s, %s, %s) ON CONFLICT (chunk_id) DO UPDATE SET "
                            "doc_id = EXCLUDED.doc_id, ordinal = EXCLUDED.ordinal"
                        ),
                        [(cid, doc_id, o) for cid, o in chunk_rows.items()],
                    )
                if mention_rows:
                    cur.executemany(
                        self._q(
                            "INSERT INTO {graph_mentions} (chunk_id, entity_id, count) "
                            "VALUES (%s, %s, %s)"
                        ),
                        [(cid, ids[key], n) for (cid, key), n in mention_rows.items()],
                    )
                if plan.subject:
                    cur.execute(
                        self._q("INSERT INTO {graph_subjects} (doc_id, entity_id) VALUES (%s, %s)"),
                        (doc_id, ids[plan.subject]),
                    )
            return old_names, old_subjects

        what = f"replace document {doc_id!r} in the entity graph"
        old_names, old_subjects = locked_write(
            self._pg, what, f"pensive_graph:{self.prefix}:{doc_id}", work
        )
        # noted once committed: a refused write changed nothing a cached answer holds
        self.touched_names.update(old_names)
        self.touched_names.update(k for counts in plan.mentions for k in counts)
        self.touched_subjects.update(old_subjects)
        if plan.subject:
            self.touched_subjects.add(plan.subject)

    # -- reading -----------------------------------------------------------------------------
    def documents(self) -> dict[str, set[str]]:
        """Document -> the passage ids the graph holds (to bring it level with the archive)."""
        out: dict[str, set[str]] = {}
        for cid, did in self._read("list graph passages",
                                   "SELECT chunk_id, doc_id FROM {graph_chunks}"):  # fmt: skip
            out.setdefault(did, set()).add(cid)
        return out

    def counts(self) -> dict[str, int]:
        """Passages, entities and mentions stored."""
        row = self._read(
            "count the graph",
            "SELECT (SELECT count(*) FROM {graph_chunks}), (SELECT count(*) FROM "
            "{graph_entities}), (SELECT COALESCE(sum(count), 0) FROM {graph_mentions})",
        )[0]
        return {"chunks": int(row[0]), "entities": int(row[1]), "mentions": int(row[2])}

    def mentioning(self, keys: Iterable[str]) -> set[str]:
        """Passages that name any of the entities with these normal forms."""
        raw = [_b(k) for k in keys]
        if not raw:
            return set()
        rows = self._read(
            "find passages naming entities",
            "SELECT DISTINCT m.chunk_id FROM {graph_mentions} m JOIN {graph_entities} e "
            "ON e.id = m.entity_id WHERE e.key = ANY(%s)",
            (raw,),
        )
        return {r[0] for r in rows}

    def rare(self, keys: Iterable[str], most: int) -> set[str]:
        """Those of ``keys`` that at most ``most`` passages name (entities that are gone
        left out: their passages are gone too)."""
        raw = [_b(k) for k in keys]
        if not raw:
            return set()
        rows = self._read(
            "find rare entities",
            "SELECT key FROM {graph_entities} WHERE key = ANY(%s) AND chunks <= %s",
            (raw, int(most)),
        )
        return {_s(r[0]) for r in rows}

    def load(self) -> GraphView:
        """The whole graph as sparse matrices: four SELECTs in one snapshot (a writer's commit
        lands in the view whole or not at all)."""

        def read(conn: Any) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                return (
                    conn.execute(self._q("SELECT chunk_id, doc_id, ordinal FROM {graph_chunks}"))
                    .fetchall(),
                    conn.execute(self._q("SELECT id, key, kind FROM {graph_entities}")).fetchall(),
                    conn.execute(self._q("SELECT chunk_id, entity_id, count FROM {graph_mentions}"))
                    .fetchall(),
                    conn.execute(self._q("SELECT doc_id, entity_id FROM {graph_subjects}"))
                    .fetchall(),
                )  # fmt: skip

        chunks, entities, mentions, subjects = self._pg.run("load the entity graph", read)
        return build_view(
            chunks,
            [(eid, _s(key), _s(kind)) for eid, key, kind in entities],
            mentions,
            subjects,
            self.max_pair_entities,
        )

    @property
    def connection(self) -> PgConnection:
        """The graph's connection."""
        return self._pg

    def close(self) -> None:
        """Close the connection."""
        self._pg.close()


# -- what the graph learns from use -------------------------------------------------------------
_LEARNING = {
    "base_level": (("chunk_id",), "value"),
    "hebbian": (("src", "dst"), "weight"),
}


class PostgresLearningRows:
    """One learning table in Postgres, the :class:`~pensive_core.graph.learning.LearningRows`
    that :class:`BaseLevel` (``table="base_level"``) or :class:`Hebbian` (``"hebbian"``) is
    given instead of a SQLite connection.

    Args:
        dsn: The connection string.
        prefix: The tables' prefix (the graph's).
        table: Which table.
        create: Create the tables if missing (False for a reader: a missing table reads as
            empty).
        timeout_s: Connect timeout.
        connection: A connection to share with another part (the other learning table);
            None opens one.

    Raises:
        ConfigError: If the prefix is not a lower-case identifier of at most 40 characters.
        BackendError: If Postgres cannot be reached.
    """

    def __init__(
        self,
        dsn: str,
        prefix: str,
        table: Literal["base_level", "hebbian"],
        create: bool = True,
        timeout_s: float = 10,
        connection: PgConnection | None = None,
    ) -> None:
        self.prefix = check_prefix(prefix, "graph learning")
        if table not in _LEARNING:
            raise ValueError(f"table must be 'base_level' or 'hebbian', got {table!r}")
        self.table = table
        keys, value = _LEARNING[table]
        self._keys = keys
        self._pg = connection or PgConnection(dsn, "The Postgres graph learning tables", timeout_s)
        self.address = self._pg.address
        self._t = identifiers(prefix, ["graph_base_level", "graph_hebbian", "graph_learning"])
        self._t["rows"] = self._t[f"graph_{table}"]
        cols = ", ".join(keys)
        self._select = f"SELECT {cols}, {value}, last FROM {{rows}}"
        self._upsert = (
            f"INSERT INTO {{rows}} ({cols}, {value}, last) VALUES "
            f"({', '.join(['%s'] * (len(keys) + 2))}) ON CONFLICT ({cols}) DO UPDATE SET "
            f"{value} = EXCLUDED.{value}, last = EXCLUDED.last"
        )
        self._delete = f"DELETE FROM {{rows}} WHERE {' AND '.join(k + ' = %s' for k in keys)}"
        self._conn: Any = None  # the connection of the write transaction in progress
        self._after: int | None = None
        self._exists = False
        if create:
            self._create()

    def _q(self, text: str) -> Any:
        from psycopg import sql

        return sql.SQL(text).format(**self._t)

    def _create(self) -> None:
        ddl = [
            "CREATE TABLE IF NOT EXISTS {graph_base_level} (chunk_id bytea PRIMARY KEY, "
            "value double precision NOT NULL, last double precision NOT NULL)",
            "CREATE TABLE IF NOT EXISTS {graph_hebbian} (src bytea NOT NULL, dst bytea NOT NULL, "
            "weight double precision NOT NULL, last double precision NOT NULL, "
            "PRIMARY KEY (src, dst))",
            "CREATE TABLE IF NOT EXISTS {graph_learning} (name text PRIMARY KEY, "
            "version bigint NOT NULL)",
            "INSERT INTO {graph_learning} (name, version) VALUES ('base_level', 0), "
            "('hebbian', 0) ON CONFLICT DO NOTHING",
        ]

        made = ["graph_base_level", "graph_hebbian", "graph_learning"]
        create_once(self._pg, "create the graph learning tables", self.prefix,
                    [f"{self.prefix}_{n}" for n in made], [self._q(t) for t in ddl])  # fmt: skip
        self._exists = True

    def _run(self, what: str, fn: Callable[[Any], T]) -> T:
        if self._conn is not None:  # inside the write: no reconnect half way through
            return fn(self._conn)
        return self._pg.run(what, fn)

    def _ready(self) -> bool:
        """Whether the table exists (a reader may come before any writer made it)."""
        if not self._exists and self._conn is None:
            self._exists = table_exists(self._pg, f"{self.prefix}_graph_learning")
        return self._exists or self._conn is not None

    def version(self) -> int:
        """The table's write counter (moved by every write, this connection's too)."""
        if not self._ready():
            return 0
        stmt = self._q("SELECT version FROM {graph_learning} WHERE name = %s")
        row = self._run("read the learning version",
                        lambda c: c.execute(stmt, (self.table,)).fetchone())  # fmt: skip
        return int(row[0]) if row else 0

    def read(self) -> list[tuple[Any, ...]]:
        """Every row, node names decoded."""
        if not self._ready():
            return []
        stmt = self._q(self._select)
        rows = self._run("read the learning table", lambda c: c.execute(stmt).fetchall())
        n = len(self._keys)
        return [(*(_s(r[i]) for i in range(n)), float(r[n]), float(r[n + 1])) for r in rows]

    def transact(self, work: Callable[[], T]) -> T:
        """``work()`` in one transaction under the table's advisory lock; the write counter
        moved in it.

        Raises:
            BackendError: If Postgres refuses a statement (nothing of the write is stored).
        """
        if self._conn is not None:
            raise BackendError("a learning write is already in progress on this connection")
        bump = self._q(
            "UPDATE {graph_learning} SET version = version + 1 WHERE name = %s RETURNING version"
        )

        def run(conn: Any) -> tuple[T, int]:
            self._conn = conn
            try:
                out = work()
                row = conn.execute(bump, (self.table,)).fetchone()
                return out, int(row[0])
            finally:
                self._conn = None

        out, self._after = locked_write(
            self._pg, f"write the learning table {self.table}",
            f"pensive_learn:{self.prefix}:{self.table}", run,
        )  # fmt: skip
        return out

    def upsert(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert or replace rows (inside :meth:`transact`)."""
        n = len(self._keys)
        params = [(*(_b(r[i]) for i in range(n)), r[n], r[n + 1]) for r in rows]
        with self._conn.cursor() as cur:
            cur.executemany(self._q(self._upsert), params)

    def delete(self, keys: Sequence[tuple[Any, ...]]) -> None:
        """Delete rows by their key columns (inside :meth:`transact`)."""
        with self._conn.cursor() as cur:
            cur.executemany(self._q(self._delete), [tuple(_b(k) for k in key) for key in keys])

    def version_after_write(self) -> int | None:
        """The counter as this connection's last write left it."""
        return self._after

    @property
    def connection(self) -> PgConnection:
        """The connection (to share with the other learning table)."""
        return self._pg

    def close(self) -> None:
        """Close the connection."""
        self._pg.close()


def open_postgres_learning(
    dsn: str,
    prefix: str,
    knobs: LearningConfig,
    read_only: bool = False,
    timeout_s: float = 10,
) -> tuple[BaseLevel, Hebbian]:
    """The use history and learned edge weights of the graph with ``prefix``, in Postgres
    (what :meth:`~pensive_core.storage.base.StorageEngine.open_learning` returns).

    Args:
        dsn: The connection string.
        prefix: The tables' prefix.
        knobs: The ``[graph.learning]`` knobs.
        read_only: Create nothing; every write raises.
        timeout_s: Connect timeout.

    Returns:
        ``(BaseLevel, Hebbian)`` over Postgres rows (one connection between them).
    """
    create = not read_only
    base = PostgresLearningRows(dsn, prefix, "base_level", create, timeout_s)
    heb = PostgresLearningRows(dsn, prefix, "hebbian", create, timeout_s, base.connection)
    return (
        BaseLevel.from_config(knobs, base, read_only=read_only),
        Hebbian.from_config(knobs, heb, read_only=read_only),
    )
