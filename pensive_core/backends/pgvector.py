"""Postgres + pgvector vector backend (psycopg 3 and the ``pgvector`` adapters).

Each namespace is its own table (``{table}`` for the default namespace, ``{table}__{ns}`` for
the others), so one namespace's HNSW index never returns another's rows and a query needs no
namespace predicate the index cannot use. A table holds ``id``, the vector (``vector(dim)``)
and the metadata as ``jsonb``; an HNSW index (cosine) serves unfiltered searches, and a
filtered search is exact: the filter is translated to SQL over the ``jsonb`` column and the
scan ignores the index (pgvector 0.6 filters an HNSW scan after the fact and can return fewer
than ``k`` rows that pass).

The connection string is ``[backend.pgvector] dsn`` (libpq keywords or a URL) without a
password (libpq reads it from ``PGPASSWORD`` or ``~/.pgpass``), or the whole string from the
environment variable named by ``dsn_env``: a password never enters the store's saved config.
Every write is its own transaction; a dropped connection is reopened once per call (every
call is idempotent), then reported as a :class:`~pensive_core.errors.BackendError` naming the
host and database, never the password.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..config import PgvectorConfig
from ..errors import BackendError, ConfigError, InputError, MissingDependencyError
from ..filters import And, Filter, Or
from ..storage.pg import PgConnection, describe, first_line, has_password, psycopg_module
from ..validate import check_id
from .base import check_namespace, check_upsert

T = TypeVar("T")

__all__ = ["PgvectorBackend", "filter_sql", "where_dsn"]

_BIG = 1.7976931348623157e308  # JSON holds no infinity: +-inf is stored as +-max float
_BULK = 1000  # an upsert of this many rows into an empty table builds the HNSW index after


def _adapters():  # type: ignore[no-untyped-def]
    try:
        from pgvector.psycopg import register_vector
    except ImportError as exc:
        raise MissingDependencyError("pgvector", "postgres", "The pgvector backend") from exc
    return register_vector


def where_dsn(cfg: PgvectorConfig) -> str:
    """The connection string: ``dsn_env``'s variable when set, else ``dsn``.

    Raises:
        ConfigError: If ``dsn`` (from the config) holds a password, or neither is set.
    """
    env = os.environ.get(cfg.dsn_env, "") if cfg.dsn_env else ""
    if env:
        return env
    if has_password(cfg.dsn):
        raise ConfigError(
            "[backend.pgvector] dsn holds a password, and the config is saved with the store: "
            f"put the password in PGPASSWORD or ~/.pgpass, or the whole DSN in ${cfg.dsn_env}"
        )
    if not cfg.dsn:
        raise ConfigError(
            f"the pgvector backend needs a Postgres DSN: set [backend.pgvector] dsn "
            f"(without the password) or the environment variable {cfg.dsn_env}"
        )
    return cfg.dsn


def _json_value(v: Any) -> Any:
    """A metadata or filter value as jsonb holds it, comparing as Python compares it: an
    integral float as the int it equals (the JSON text of ``float(2**63)`` is not its value),
    +-inf as +-max float (JSON has no infinity), a NUL in a string as U+2400 (jsonb refuses
    NUL; the same mapping on both sides keeps equality)."""
    if isinstance(v, float):
        if math.isinf(v):
            return math.copysign(_BIG, v)
        if v.is_integer():
            return int(v)
    if isinstance(v, str) and "\x00" in v:
        return v.replace("\x00", "\u2400")
    return v


def _ids(ids: Any, what: str) -> list[str]:
    """Ids as a list of strings Postgres can key: UTF-8, no NUL, at most 2,000 bytes (a
    B-tree key holds about 2,700).

    Raises:
        InputError: If ``ids`` is a single string, or an id is not such a string.
    """
    if isinstance(ids, (str, bytes)):
        raise InputError(f"{what} takes a list of ids, not one {type(ids).__name__}")
    out = [check_id(i, f"{what}: an id") for i in ids]
    for i in out:
        if len(i.encode("utf-8")) > 2000:
            raise InputError(f"{what}: an id of {len(i.encode('utf-8'))} bytes is over 2,000")
    return out


def _meta(m: Mapping[str, Any]) -> dict[str, Any]:
    for k in m:
        if not isinstance(k, str):
            raise InputError(f"metadata keys must be str, got {type(k).__name__} {k!r}")
        check_id(k, "a metadata key")
    return {k: _json_value(v) for k, v in m.items()}


def filter_sql(node: Filter, params: list[Any]) -> str:
    """A filter tree as a SQL condition on the ``meta`` jsonb column, with the same meaning as
    :func:`pensive_core.filters.matches`: a record without the field matches no comparison on
    it (a ``NULL`` is never true, negated or not); numbers of any type compare together,
    booleans and strings only with their own kind; ranges compare numbers only.

    Args:
        node: The filter.
        params: Parameters appended to, in the order of the returned ``%s`` placeholders.
    """
    if isinstance(node, (And, Or)):
        glue = " AND " if isinstance(node, And) else " OR "
        return "(" + glue.join(filter_sql(p, params) for p in node.parts) + ")"
    field = f"meta -> {_literal(node.field)}"
    op, x = node.op, node.value
    if op in ("$eq", "$ne"):
        params.append(json.dumps(_json_value(x)))
        cond = f"({field} = %s::jsonb)"
        return cond if op == "$eq" else f"(NOT {cond})"
    if op in ("$in", "$nin"):
        params.append([json.dumps(_json_value(v)) for v in x])
        cond = f"({field} = ANY(%s::jsonb[]))"
        return cond if op == "$in" else f"(NOT {cond})"
    sign = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[op]
    params.append(json.dumps(_json_value(x)))
    # jsonb orders across types (a boolean is above every number): compare numbers only
    return f"(jsonb_typeof({field}) = 'number' AND {field} {sign} %s::jsonb)"


def _literal(name: str) -> str:
    """A field name as a SQL string literal (names are identifiers: letters, digits, _)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name):
        raise ConfigError(f"filter field {name!r} is not an identifier")
    return f"'{name}'"


class PgvectorBackend:
    """Vectors in Postgres tables with pgvector.

    Args:
        folder: Unused (nothing is kept locally); accepted like every backend's.
        dim: Vector dimension.
        options: The ``[backend.pgvector]`` section.
        dsn: A connection string that overrides the section's (the Postgres storage engine
            passes its own, scoped to the store's schema).

    Raises:
        MissingDependencyError: If ``psycopg`` or ``pgvector`` is not installed (extra
            ``postgres``).
        BackendError: If the server cannot be reached or refuses (the message names host
            and database).
        ConfigError: If no DSN is given, the config's DSN holds a password, or the table
            holds vectors of another dimension.
    """

    name = "pgvector"
    kind = "hnsw"  # unfiltered searches walk an HNSW graph: approximate

    def __init__(
        self,
        folder: Path | None,
        dim: int,
        options: PgvectorConfig | Mapping[str, Any] | None,
        dsn: str | None = None,
    ) -> None:
        psycopg_module("The pgvector backend")
        register = _adapters()
        if isinstance(options, Mapping):
            options = PgvectorConfig(**options)
        self.cfg = options or PgvectorConfig()
        self.dim = dim
        conninfo = dsn if dsn is not None else where_dsn(self.cfg)

        def setup(conn: Any) -> None:
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                register(conn)
            except Exception as exc:
                raise BackendError(
                    f"Postgres at {describe(conninfo)} has no usable pgvector extension "
                    f"({first_line(exc)}); install pgvector >= 0.5 and run CREATE EXTENSION "
                    "vector"
                ) from None

        self._pg = PgConnection(
            conninfo,
            "The pgvector backend",
            self.cfg.connect_timeout_s,
            setup,
            f"[backend.pgvector] dsn / ${self.cfg.dsn_env}",
        )
        self.address = self._pg.address
        self._known: set[str] = set()  # tables known to exist
        self._indexed: set[str] = set()  # tables known to have their HNSW index
        self._table("", create=True)

    def _run(self, what: str, fn: Callable[[Any], T]) -> T:
        return self._pg.run(what, fn)

    # -- tables ------------------------------------------------------------------------------
    def _name(self, namespace: str) -> str:
        return self.cfg.table if not namespace else f"{self.cfg.table}__{namespace}"

    def _table(self, namespace: str, create: bool) -> Any | None:
        """The namespace's table as an SQL identifier, or None when it does not exist and
        ``create`` is false. A table of another dimension is refused."""
        from psycopg import sql

        name = self._name(namespace)
        ident = sql.Identifier(name)
        if name in self._known:
            return ident

        def look(conn: Any) -> int | None:
            row = conn.execute(
                "SELECT a.atttypmod FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) "
                "AND a.attname = 'embedding'",
                (sql.Identifier(name).as_string(conn),),
            ).fetchone()
            return None if row is None else int(row[0])

        stored = self._run("look up a table", look)
        if stored is None and not create:
            return None
        if stored is None:

            def make(conn: Any) -> None:
                with conn.transaction():
                    # two processes creating one table at once collide in the catalog
                    # (CREATE ... IF NOT EXISTS is not atomic): one at a time
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"ddl:{name}",))
                    conn.execute(
                        sql.SQL(
                            "CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY, "
                            "embedding vector({}) NOT NULL, meta jsonb NOT NULL DEFAULT '{{}}')"
                        ).format(ident, sql.Literal(self.dim))
                    )
                    if self.cfg.hnsw_threshold == 0:
                        conn.execute(self._index_sql(ident, self._index_name(namespace)))

            self._run("create a table", make)
            stored = self._run("look up a table", look)
        if stored != self.dim:
            raise ConfigError(
                f"the pgvector table {name!r} at {self.address} holds {stored}-d vectors, "
                f"not {self.dim}-d: use another [backend.pgvector] table or the same embedder"
            )
        self._known.add(name)
        return ident

    def _has_index(self, conn: Any, namespace: str) -> bool:
        """Whether the namespace's HNSW index exists (remembered once seen: only a first
        bulk load into an empty table drops it, and that load forgets it)."""
        name = self._name(namespace)
        if name in self._indexed:
            return True
        index = f"{self.cfg.table}_i_{_digest(name)}"
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f'"{index}"',)).fetchone()
        if row[0]:
            self._indexed.add(name)
        return bool(row[0])

    def _index_name(self, namespace: str) -> Any:
        """The namespace's HNSW index: ``{table}_i_`` + a hash of its table name (index names
        share the schema with tables, and these never read as a table's: no "__")."""
        from psycopg import sql

        return sql.Identifier(f"{self.cfg.table}_i_{_digest(self._name(namespace))}")

    def _index_sql(self, table: Any, index: Any) -> Any:
        from psycopg import sql

        return sql.SQL(
            "CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding vector_cosine_ops) "
            "WITH (m = {}, ef_construction = {})"
        ).format(index, table, sql.Literal(self.cfg.m), sql.Literal(self.cfg.ef_construction))

    # -- the protocol ------------------------------------------------------------------------
    def upsert(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        metadata: Sequence[Mapping[str, Any]] | None = None,
        *,
        namespace: str = "",
    ) -> None:
        """Add vectors, replacing any stored under the same ids (metadata replaced whole)."""
        from psycopg import sql
        from psycopg.types.json import Jsonb

        check_namespace(namespace)
        ids = _ids(ids, "upsert")
        ids, vecs, metas = check_upsert(ids, vectors, metadata, self.dim, namespace)
        if not ids:
            return
        # rows in id order: two writers upserting the same ids lock them in the same order
        # (no deadlock)
        rows = sorted(
            ((cid, vecs[i], Jsonb(_meta(metas[i]))) for i, cid in enumerate(ids)),
            key=lambda r: r[0],
        )
        table = self._table(namespace, create=True)
        index = self._index_name(namespace)
        stmt = sql.SQL(
            "INSERT INTO {} (id, embedding, meta) VALUES (%s, %s, %s) ON CONFLICT (id) "
            "DO UPDATE SET embedding = EXCLUDED.embedding, meta = EXCLUDED.meta"
        ).format(table)

        threshold = self.cfg.hnsw_threshold

        def write(conn: Any) -> None:
            with conn.transaction(), conn.cursor() as cur:
                copied = False
                if len(rows) >= _BULK:
                    # a first load into an empty table: copy the rows, and build the HNSW
                    # graph once after (row by row into the graph ran 225 vectors/s on
                    # SciFact, one bulk upsert 1,700)
                    cur.execute(sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(table))
                    empty = cur.execute(
                        sql.SQL("SELECT NOT EXISTS (SELECT 1 FROM {})").format(table)
                    ).fetchone()[0]
                    if empty:
                        self._indexed.discard(self._name(namespace))
                        cur.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(index))
                        copy = sql.SQL("COPY {} (id, embedding, meta) FROM STDIN").format(table)
                        with cur.copy(copy) as cp:
                            for row in rows:
                                cp.write_row(row)
                        copied = True
                if not copied:
                    cur.executemany(stmt, rows)
                # exact scans up to hnsw_threshold rows; past it the index is built once
                if copied or not self._has_index(conn, namespace):
                    n = cur.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()[0]
                    if n >= threshold:
                        cur.execute(self._index_sql(table, index))

        self._run("store vectors", write)

    def delete(self, ids: Sequence[str], *, namespace: str = "") -> None:
        """Remove vectors by id; unknown ids are ignored."""
        from psycopg import sql

        check_namespace(namespace)
        ids = sorted(set(_ids(ids, "delete")))
        table = self._table(namespace, create=False)
        if table is None or not ids:
            return
        stmt = sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(table)
        self._run("delete vectors", lambda conn: conn.execute(stmt, (ids,)))

    def search(
        self, vector: np.ndarray, k: int, *, where: Filter | None = None, namespace: str = ""
    ) -> list[tuple[str, float]]:
        """Up to ``k`` (id, cosine) pairs best first; exact when filtered."""
        from psycopg import sql

        check_namespace(namespace)
        table = self._table(namespace, create=False)
        if table is None or k <= 0:
            return []
        stmt, params, exact = self.search_sql(table, vector, k, where)

        def find(conn: Any) -> list[tuple[str, float]]:
            with conn.transaction():
                if exact:
                    conn.execute("SET LOCAL enable_indexscan = off")
                else:
                    conn.execute(
                        sql.SQL("SET LOCAL hnsw.ef_search = {}").format(
                            sql.Literal(max(int(k), self.cfg.ef_search))
                        )
                    )
                rows = conn.execute(stmt, params).fetchall()
            return [(str(cid), float(score)) for cid, score in rows]

        return self._run("search", find)

    @staticmethod
    def search_sql(
        table: Any, vector: np.ndarray, k: int, where: Filter | None
    ) -> tuple[Any, list[Any], bool]:
        """The statement of a search, its parameters, and whether it is exact.

        Unfiltered (and ``k`` <= 1000, ``hnsw.ef_search``'s limit) it orders by distance
        alone, which the HNSW index serves; filtered, or past that ``k``, it is an exact scan
        (ties broken by id)."""
        from psycopg import sql

        q = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
        params: list[Any] = [q]
        cond = sql.SQL("")
        if where is not None:
            cond = sql.SQL(" WHERE " + filter_sql(where, params))  # only %s placeholders
        exact = where is not None or k > 1000
        params += [q, min(int(k), 2**31 - 1)]
        order = ", id" if exact else ""  # a second sort key keeps the planner off the index
        stmt = sql.SQL(
            "SELECT id, 1 - (embedding <=> %s) FROM {}{} ORDER BY embedding <=> %s" + order
            + " LIMIT %s"
        ).format(table, cond)  # fmt: skip
        return stmt, params, exact

    def fetch(self, ids: Sequence[str], *, namespace: str = "") -> dict[str, np.ndarray]:
        """The stored vectors of ``ids`` (unknown ids left out)."""
        from psycopg import sql

        check_namespace(namespace)
        ids = _ids(ids, "fetch")
        table = self._table(namespace, create=False)
        if table is None or not ids:
            return {}
        stmt = sql.SQL("SELECT id, embedding FROM {} WHERE id = ANY(%s)").format(table)
        rows = self._run("fetch vectors", lambda conn: conn.execute(stmt, (ids,)).fetchall())
        return {str(cid): _array(v) for cid, v in rows}

    def count(self, *, namespace: str = "") -> int:
        """Vectors stored in the namespace."""
        from psycopg import sql

        check_namespace(namespace)
        table = self._table(namespace, create=False)
        if table is None:
            return 0
        stmt = sql.SQL("SELECT count(*) FROM {}").format(table)
        return int(self._run("count vectors", lambda conn: conn.execute(stmt).fetchone()[0]))

    def ids(self, *, namespace: str = "") -> set[str] | None:
        """Every id stored in the namespace."""
        from psycopg import sql

        check_namespace(namespace)
        table = self._table(namespace, create=False)
        if table is None:
            return set()
        stmt = sql.SQL("SELECT id FROM {}").format(table)
        return {str(r[0]) for r in self._run("list ids", lambda c: c.execute(stmt).fetchall())}

    def persist(self) -> None:
        """A no-op: every write is committed in its own transaction."""

    def close(self) -> None:
        """Close the connection."""
        self._pg.close()


def _digest(name: str) -> str:
    return hashlib.blake2b(name.encode("utf-8"), digest_size=8).hexdigest()


def _array(v: Any) -> np.ndarray:
    """A fetched vector as float32 (the adapters give a ``Vector`` or an array)."""
    return np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)
