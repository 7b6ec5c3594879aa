"""The Postgres storage engine: every persistent part of a store in one Postgres with
pgvector, shared by any number of processes on any number of machines.

``[storage] engine = "postgres"`` with ``dsn`` (or ``PENSIVE_STORAGE__DSN``). A store is a
Postgres *schema* (``[storage] schema_name``; a namespace's store under ``--store X`` is the schema
``{schema}__{namespace}``), so namespaces never share a table, and the store's local folder
holds nothing the processes must share: two replicas with different (even empty) folders
and the same config open the same store.

Writers: there is no lock held for a process's life. Each change (an ingest, a delete, a
reindex) takes the store's change lock, a session-level advisory lock on its own connection,
for the length of the change only, so changes from different replicas run one after another
and every commit number is one store's sequence. When the lock's holder dies (a killed
replica) Postgres ends its session and releases the lock; the next writer finds the dirty
mark and finishes the change from the archive, as the embedded engine's next open does.

Freshness: every process compares the archive's data version (one indexed read) before a
query and, when another process committed, reloads what it keeps in memory (the BM25
statistics, the graph and statement views are keyed by the commit number), so a commit on
one replica is seen by the next query on every other.

The schema is versioned (``{schema}.pensive_schema``): a store written by a newer Pensive is
refused with a clear error rather than misread.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..backends.base import VectorBackend
from ..backends.registry import create_backend
from ..config import LOCAL_BACKENDS, BM25Config, StorageConfig, local_backend_refused
from ..errors import ConfigError, StorageError
from ..memory.sessions import SessionInfo
from .pg import PgConnection, describe, psycopg_module
from .pg_archive import PostgresArchive

__all__ = [
    "SCHEMA_VERSION",
    "PostgresStorage",
    "namespace_of",
    "scoped_dsn",
    "store_schema",
]

log = logging.getLogger(__name__)

#: The layout this Pensive writes. A store with a higher number was written by a newer one.
SCHEMA_VERSION = 1
_PREFIX = "p"  # every part's table prefix inside the store's schema
_NS = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
# backends whose vectors live in the store's local folder: replicas could not share them


def namespace_of(path: Path) -> str:
    """The namespace a store folder belongs to: ``NAME`` for ``ROOT/namespaces/NAME`` (the
    layout of :func:`pensive_core.namespaces.namespace_path`), else ``"default"``."""
    if path.parent.name == "namespaces" and _NS.fullmatch(path.name):
        return path.name
    return "default"


def store_schema(cfg: StorageConfig, path: Path) -> str:
    """The Postgres schema of the store at ``path``: ``[storage] schema_name`` for the default
    namespace, ``{schema}__{namespace}`` for another (at most 63 bytes, Postgres's limit)."""
    ns = namespace_of(path)
    name = cfg.schema_name if ns == "default" else f"{cfg.schema_name}__{ns}"
    if len(name.encode()) > 63:
        raise ConfigError(
            f"the Postgres schema {name!r} of namespace {ns!r} is longer than 63 bytes: use a "
            "shorter [storage] schema_name or namespace name"
        )
    return name


def scoped_dsn(dsn: str, schema: str) -> str:
    """``dsn`` with ``search_path`` set to ``schema`` then ``public`` (where the ``vector``
    extension lives), so every part's unqualified tables are the store's."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        have = conninfo_to_dict(dsn).get("options") or ""
    except Exception:  # malformed: the connect that follows says so without echoing it
        return dsn
    # the schema's name is checked (no quote, no space): it needs no escaping for libpq
    return make_conninfo(dsn, options=f'{have} -c search_path="{schema}",public'.strip())


def where_dsn(cfg: StorageConfig) -> str:
    """The engine's connection string.

    Raises:
        ConfigError: If none is given.
    """
    if not cfg.dsn:
        raise ConfigError(
            'storage.engine = "postgres" needs a connection string: set [storage] dsn (without '
            "the password: libpq reads PGPASSWORD or ~/.pgpass) or the environment variable "
            "PENSIVE_STORAGE__DSN"
        )
    return cfg.dsn


class PostgresStorage:
    """Every persistent part in one Postgres schema (see the module docstring).

    Args:
        path: The store's local folder (nothing in it is shared; it may be empty).
        read_only: Open to read only (nothing is created).
        cfg: The ``[storage]`` section.

    Raises:
        MissingDependencyError: If psycopg is not installed (extra ``postgres``).
        StorageError: If Postgres cannot be reached (host and database named, never the
            password), or the store was written by a newer Pensive.
    """

    name = "postgres"
    #: Several processes write: each change takes :meth:`writing`, and every process reloads
    #: when another commits (see :meth:`pensive_core.components.Components.refresh`).
    shared = True

    def __init__(self, path: Path, read_only: bool, cfg: StorageConfig) -> None:
        psycopg_module("The Postgres storage engine")
        self.path = path
        self.read_only = read_only
        self.cfg = cfg
        self.schema = store_schema(cfg, path)
        self._base_dsn = where_dsn(cfg)
        self.address = describe(self._base_dsn)
        self.dsn = scoped_dsn(self._base_dsn, self.schema)
        self.archive: PostgresArchive | None = None
        self._sparse: Any = None
        self._vectors: dict[tuple[str, str], VectorBackend] = {}
        self._lock_pg: PgConnection | None = None
        self._parts: list[Any] = []  # opened here, closed with the engine
        self._lock_depth = 0
        self._holder: int | None = None  # the backend pid that took the change lock
        self._lock_mutex = threading.RLock()
        self._pg = self._connect("The Postgres storage engine")
        self._check_schema()

    # -- connections and the schema --------------------------------------------------------
    def _connect(self, purpose: str, shared: bool = True) -> PgConnection:
        try:
            return PgConnection(
                self.dsn, purpose, self.cfg.connect_timeout_s, hint="[storage] dsn", shared=shared
            )
        except Exception as exc:
            raise StorageError(str(exc)) from None

    def _run(self, what: str, fn: Any) -> Any:
        try:
            return self._pg.run(what, fn)
        except Exception as exc:
            if isinstance(exc, StorageError):
                raise
            raise StorageError(str(exc)) from None

    def _schema_version(self, conn: Any) -> int | None:
        row = conn.execute(
            "SELECT to_regclass(format('%%I.pensive_schema', %s::text))", (self.schema,)
        ).fetchone()
        if row is None or row[0] is None:
            return None
        got = conn.execute(
            f'SELECT max(version) FROM "{self._q()}".pensive_schema'  # noqa: S608 - quoted
        ).fetchone()
        return int(got[0]) if got and got[0] is not None else None

    def _q(self) -> str:
        return self.schema.replace('"', '""')

    def _check_schema(self) -> None:
        """Create the schema and its version table (a writer), or check the version."""

        def check(conn: Any) -> tuple[int | None, int]:
            server = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
            return self._schema_version(conn), int(server[0])

        version, server = self._run("read the schema version", check)
        if server < 150000:
            raise StorageError(
                f"Postgres at {self.address} is version {server // 10000}; the Postgres storage "
                "engine needs Postgres 15 or later (with pgvector 0.5 or later)"
            )
        if version is not None and version > SCHEMA_VERSION:
            raise StorageError(
                f"the Pensive store in schema {self.schema!r} at {self.address} was written by "
                f"a newer Pensive (schema version {version}; this one reads up to "
                f"{SCHEMA_VERSION}): upgrade pensive on this machine"
            )
        if version == SCHEMA_VERSION or self.read_only:
            return

        def create(conn: Any) -> None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('pensive schema'))")
                # pgvector's type lives in public, where every store's search_path finds it
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self._q()}"')
                conn.execute(
                    f'CREATE TABLE IF NOT EXISTS "{self._q()}".pensive_schema '
                    "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
                )
                got = conn.execute(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                ).fetchone()
                if got is None or tuple(int(x) for x in got[0].split(".")[:2]) < (0, 5):
                    raise StorageError(
                        f"Postgres at {self.address} has pgvector "
                        f"{got[0] if got else '(none)'}; the Postgres storage engine needs "
                        "pgvector 0.5 or later (ALTER EXTENSION vector UPDATE)"
                    )
                # migrations from older versions go here, one step per version
                conn.execute(
                    f'INSERT INTO "{self._q()}".pensive_schema (version) VALUES (%s) '
                    "ON CONFLICT DO NOTHING",
                    (SCHEMA_VERSION,),
                )

        try:
            self._run("create the store's schema", create)
        except StorageError as exc:
            if "vector" in str(exc) and "pgvector" not in str(exc):
                raise StorageError(
                    f"Postgres at {self.address} has no usable pgvector extension ({exc}); "
                    "install pgvector >= 0.5 and run CREATE EXTENSION vector as a superuser"
                ) from None
            raise

    def exists(self) -> bool:
        """Whether the schema holds a store (an archive that has saved its config)."""

        def look(conn: Any) -> bool:
            if self._schema_version(conn) is None:
                return False
            row = conn.execute(
                "SELECT to_regclass(format('%%I.%%I', %s::text, %s::text))",
                (self.schema, f"{_PREFIX}_meta"),
            ).fetchone()
            if row is None or row[0] is None:
                return False
            got = conn.execute(
                f'SELECT 1 FROM "{self._q()}".{_PREFIX}_meta WHERE key = %s',  # noqa: S608
                ("config",),
            ).fetchone()
            return got is not None

        return bool(self._run("look for the store", look))

    # -- writers -------------------------------------------------------------------------------
    def lock_writer(self) -> None:
        """Nothing to hold for the process's life: each change takes :meth:`writing`."""

    def unlock_writer(self) -> None:
        """See :meth:`lock_writer`."""

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the store's change lock for one change (re-entrant in this process).

        A session-level advisory lock on a connection of its own: another process's change
        waits for this one; a process that dies holding it releases it with its session.
        """
        with self._lock_mutex:
            if self._lock_depth == 0:
                if self._lock_pg is None:
                    # (a connection of its own: the lock is its session's)
                    self._lock_pg = self._connect("The Postgres store's change lock", False)
                key = f"pensive change:{self.schema}"
                try:
                    self._holder = self._lock_pg.run(
                        "take the store's change lock",
                        lambda c: c.execute(
                            "SELECT pg_advisory_lock(hashtext(%s)), pg_backend_pid()", (key,)
                        ).fetchone()[1],
                    )
                except Exception as exc:
                    raise StorageError(str(exc)) from None
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
                if self._lock_depth == 0:
                    self._release(f"pensive change:{self.schema}")

    @property
    def location(self) -> str:
        """The store's schema and server."""
        return f"schema {self.schema!r} at {self.address}"

    @property
    def lock_holder(self) -> int | None:
        """The Postgres backend pid that took the change lock held now (None when none)."""
        return self._holder if self._lock_depth else None

    def check_writing(self) -> None:
        """Before a change commits: the change lock is still this process's. A connection cut
        while a change ran (a Postgres restart) took the lock with its session, and another
        replica may have changed the store since; the change is then abandoned (its documents
        stay pending, finished by the next change) rather than committed unprotected.

        Raises:
            StorageError: If the lock was lost (retry the request).
        """
        pg = self._lock_pg
        if self._lock_depth == 0 or pg is None:
            return
        pid = None
        with contextlib.suppress(Exception):  # a cut connection raises: the lock is gone
            if pg.conn is not None and not pg.conn.closed:
                pid = pg.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        if pid is None or pid != self._holder:
            raise StorageError(
                f"the connection to Postgres at {self.address} holding the store's change lock "
                "was cut during the change, so the change was not committed (its documents are "
                "finished by the next change); retry the request"
            )

    def _release(self, key: str) -> None:
        pg = self._lock_pg
        if pg is None:
            return
        try:
            pg.run(
                "release the store's change lock",
                lambda c: c.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,)),
            )
        except Exception as exc:  # noqa: BLE001 - the session is gone, and the lock with it
            log.warning("the change lock could not be released (%s): closing its session", exc)
            with contextlib.suppress(Exception):
                pg.close()

    # -- parts ---------------------------------------------------------------------------------
    def open_archive(self) -> PostgresArchive:
        """The archive's tables in the store's schema."""
        if self.archive is None:
            self.archive = PostgresArchive(self.dsn, _PREFIX, self.cfg.connect_timeout_s)
        return self.archive

    def open_sparse(self, cfg: BM25Config, previous: Any = None) -> Any:
        """BM25 postings in the store's schema; opened once, its statistics re-read on each
        later open (another process may have committed)."""
        if self._sparse is None:
            from ..sparse.postgres import PostgresBM25

            self._sparse = PostgresBM25(self.dsn, cfg, _PREFIX, self.cfg.connect_timeout_s)
        else:
            self._sparse.reload()
        return self._sparse

    def vectors_place(self) -> str:
        """Vectors live in the store's schema: the place names the pgvector table."""
        saved = self.open_archive().get_meta("vectors_dir")
        return str(saved) if saved else "vectors"

    def new_vectors_place(self) -> str:
        """A place no vector table of this store uses yet."""
        current = self.vectors_place()
        n = int(current.rsplit(".", 1)[1]) + 1 if "." in current else 1
        return f"vectors.{n}"

    def drop_vectors_place(self, place: str) -> None:
        """Drop the table a vector index left in ``place`` (best effort)."""
        backend = self._vectors.pop(("pgvector", place), None)
        if backend is not None:
            with contextlib.suppress(Exception):
                backend.close()
        table = _vector_table(place)

        def drop(conn: Any) -> None:
            conn.execute(f'DROP TABLE IF EXISTS "{table}"')

        with contextlib.suppress(Exception):
            self._run("drop an old vector table", drop)

    def open_vectors(self, name: str, dim: int, options: Any, place: str) -> VectorBackend:
        """pgvector in the store's schema (a managed backend, Pinecone or Weaviate, as
        configured); a backend of local files is refused: replicas could not share it."""
        if name in LOCAL_BACKENDS:
            raise local_backend_refused(name, self.name)
        key = (name, place)
        if key in self._vectors:
            return self._vectors[key]
        if name == "pgvector":
            from ..backends.pgvector import PgvectorBackend
            from ..config import PgvectorConfig

            opts = options if isinstance(options, PgvectorConfig) else PgvectorConfig()
            opts = opts.model_copy(update={"table": _vector_table(place)})
            backend: VectorBackend = PgvectorBackend(None, dim, opts, dsn=self.dsn)
        else:
            backend = create_backend(name, self.path / place, dim, options)
        self._vectors[key] = backend
        return backend

    def graph_exists(self) -> bool:
        """Whether the graph's tables exist."""
        return self._table_exists(f"{_PREFIX}_graph_chunks")

    def open_graph(self, max_pair_entities: int, create: bool) -> Any:
        """The entity graph's tables."""
        from ..graph.pg_store import PostgresGraphStore

        return self._keep(
            PostgresGraphStore(
                self.dsn, _PREFIX, max_pair_entities, create=create, timeout_s=self._timeout
            )
        )

    def drop_graph(self) -> None:
        """Delete the graph's tables."""
        from ..graph.pg_store import PostgresGraphStore

        graph = PostgresGraphStore(self.dsn, _PREFIX, create=False, timeout_s=self._timeout)
        try:
            graph.drop()
        finally:
            graph.close()

    def open_learning(self, knobs: Any, read_only: bool) -> tuple[Any, Any]:
        """Use history and learned edge weights."""
        from ..graph.pg_store import open_postgres_learning

        history, edges = open_postgres_learning(self.dsn, _PREFIX, knobs, read_only, self._timeout)
        self._keep(history)
        self._keep(edges)
        return history, edges

    def temporal_exists(self) -> bool:
        """Whether the statement tables exist."""
        return self._table_exists(f"{_PREFIX}_temporal_statements")

    def open_temporal(self, create: bool) -> Any:
        """The statement and date tables."""
        from ..temporal.pg_store import PostgresTemporalStore

        return self._keep(
            PostgresTemporalStore(self.dsn, _PREFIX, create=create, timeout_s=self._timeout)
        )

    def drop_temporal(self) -> None:
        """Delete the statement tables."""
        from ..temporal.pg_store import PostgresTemporalStore

        tables = PostgresTemporalStore(self.dsn, _PREFIX, create=False, timeout_s=self._timeout)
        try:
            tables.drop()
        finally:
            tables.close()

    def open_answer_cache(self, cfg: Any) -> Any:
        """The L1 hot cache, shared by every process: one version read per lookup tells a
        replica another committed (see :mod:`pensive_core.storage.pg_cache`)."""
        from .pg_cache import PostgresL1Cache

        return PostgresL1Cache(
            self.dsn,
            _PREFIX,
            cfg.l1_capacity,
            cfg.l1_ttl_s,
            cfg.l1_hot,
            cfg.l1_fuzzy,
            timeout_s=self._timeout,
        )

    def open_query_stats(self) -> Any:
        """Per-tier statistics, every process's in one table."""
        from .pg_stats import PostgresQueryStats

        return self._keep(PostgresQueryStats(self.dsn, _PREFIX, timeout_s=self._timeout))

    def open_context_cache(self) -> Any:
        """The LLM context cache, shared: no replica pays for a context another wrote."""
        from .pg_context import PostgresContextCache

        return self._keep(PostgresContextCache(self.dsn, _PREFIX, timeout_s=self._timeout))

    def open_turn_log(self, info: SessionInfo, read_only: bool) -> Any:
        """A session's log: rows of the store's shared session tables, keyed by namespace and
        session id."""
        from ..memory.pg_store import PostgresTurnLog

        return PostgresTurnLog.open(
            self.dsn,
            _PREFIX,
            info.namespace,
            info.session_id,
            read_only=read_only,
            timeout_s=self._timeout,
        )

    def session_storage(self, folder: Path) -> dict[str, Any]:
        """A session's own store (its turn index, its windows) is a schema of its own, named
        by this store's schema and the folder's place under the store, so every replica
        finds the same one whatever its local folder."""
        try:
            where = folder.relative_to(self.path).as_posix()
        except ValueError:
            where = folder.as_posix()
        key = f"{self.schema}/{self._store_id()}/{where}"
        digest = hashlib.blake2b(key.encode(), digest_size=10).hexdigest()
        return {
            "engine": "postgres",
            "dsn": self.cfg.dsn,
            "schema_name": f"c{digest}",
            "connect_timeout_s": self.cfg.connect_timeout_s,
        }

    def _store_id(self) -> str:
        """A random id the store gets when first opened for writing: a store made again
        under the same schema name (after a DROP SCHEMA) never finds the old one's sessions."""
        archive = self.open_archive()
        got = archive.get_meta("store_id")
        if got is None and not self.read_only:
            import uuid

            with archive.transaction():
                got = archive.get_meta("store_id")
                if got is None:
                    got = uuid.uuid4().hex
                    archive.set_meta("store_id", got)
        return str(got or "")

    def drop_session(self, info: SessionInfo) -> None:
        """Delete a session's log rows and drop its stores' schemas."""
        turns = self.open_turn_log(info, read_only=False)
        if turns is not None:
            try:
                turns.delete()
            finally:
                turns.close()
        for sub in ("index", "windows"):
            schema = self.session_storage(info.folder / sub)["schema_name"]

            def drop(conn: Any, schema: str = schema) -> None:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

            self._run("drop a session's store", drop)

    def open_session_catalog(self) -> Any:
        """Which sessions the store has."""
        from ..memory.pg_store import PostgresSessionCatalog

        return PostgresSessionCatalog(
            self.dsn,
            _PREFIX,
            self.path / "conversations",
            read_only=self.read_only,
            timeout_s=self._timeout,
        )

    def open_item_table(self, filename: str) -> Any:
        """An item table (named after ``filename``, without its extension)."""
        from ..pg_items import PostgresItemTable, table_for

        return PostgresItemTable(self.dsn, _PREFIX, table_for(filename), timeout_s=self._timeout)

    def open_llm_cache_records(self) -> Any:
        """The LLM cache's rows, shared by every replica."""
        from ..pg_items import PostgresLLMCacheRecords

        return PostgresLLMCacheRecords(self.dsn, _PREFIX, timeout_s=self._timeout)

    def _keep(self, part: Any) -> Any:
        self._parts.append(part)
        return part

    @property
    def _timeout(self) -> float:
        return self.cfg.connect_timeout_s

    def disk_bytes(self) -> int:
        """Bytes the store's tables and indexes take in Postgres."""

        def size(conn: Any) -> int:
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
                (self.schema,),
            ).fetchone()
            return int(row[0]) if row else 0

        return int(self._run("measure the store", size))

    def close(self) -> None:
        """Close every connection this engine opened (the change lock's releases it)."""
        for backend in self._vectors.values():
            with contextlib.suppress(Exception):
                backend.close()
        self._vectors.clear()
        for part in (*self._parts, self._sparse, self.archive, self._lock_pg, self._pg):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.close()
        self._parts.clear()
        self._sparse = None
        self.archive = None
        self._lock_pg = None

    def _table_exists(self, name: str) -> bool:
        def look(conn: Any) -> bool:
            row = conn.execute(
                "SELECT to_regclass(format('%%I.%%I', %s::text, %s::text))", (self.schema, name)
            ).fetchone()
            return row is not None and row[0] is not None

        return bool(self._run(f"look for table {name}", look))


def _vector_table(place: str) -> str:
    """The pgvector table of a place: ``vectors`` -> ``p_vec``, ``vectors.N`` -> ``p_vecN``."""
    n = place.rsplit(".", 1)[1] if "." in place else ""
    if n and not n.isdigit():
        raise ConfigError(f"vector place {place!r} is not one this engine made")
    return f"{_PREFIX}_vec{n}"
