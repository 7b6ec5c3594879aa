"""Tables with one prefix on one Postgres connection, as the smaller Postgres parts use them.

Two ways, one checked prefix (:func:`check_prefix`): :class:`PgTables` (the session logs and
catalog, the item tables, the LLM cache's rows, the caches) holds a connection with the tables'
names filled into its statements, writes that are one transaction each, a caller's
transaction, and the tables made once; the graph, its learning and the statements use the
functions (:func:`identifiers`, :func:`locked_write` under an advisory lock,
:func:`create_once`, :func:`table_exists`) on a connection of their own.

Every statement runs through :class:`~pensive_core.storage.pg.PgConnection`: a dropped
connection is reopened and the call run once more, outside a caller's transaction only (half
of one is never replayed). A write Postgres refuses is a
:class:`~pensive_core.errors.BackendError` saying it was rolled back whole. The session's
time zone is UTC, so a ``timestamptz`` comes back as the instant it was written, from year 1
to 9999.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from ..errors import BackendError, ConfigError
from .pg import PgConnection, first_line

__all__ = [
    "PREFIX",
    "PgTables",
    "check_prefix",
    "create_once",
    "from_bytes",
    "identifiers",
    "locked_write",
    "table_exists",
    "to_bytes",
    "utc",
]

T = TypeVar("T")
#: A table prefix: a lower-case identifier short enough that ``{prefix}_{name}`` fits
#: Postgres's 63 bytes.
PREFIX = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")


def check_prefix(prefix: object, what: str) -> str:
    """A table prefix: a lower-case SQL identifier of at most 40 characters.

    Args:
        prefix: The prefix to check.
        what: Whose tables, for the message ("session log").

    Raises:
        ConfigError: If it is not one.
    """
    if not isinstance(prefix, str) or not PREFIX.match(prefix):
        raise ConfigError(
            f"{what} table prefix {prefix!r} is not valid: use up to 40 lower-case letters, "
            "digits or '_', starting with a letter or '_'"
        )
    return prefix


def to_bytes(text: str) -> bytes:
    """Text as stored: UTF-8 ``bytea`` (a Postgres text column holds no NUL; ours may)."""
    return text.encode("utf-8")


def from_bytes(raw: Any) -> str:
    """Text stored by :func:`to_bytes`."""
    return bytes(raw).decode("utf-8")


def utc(when: datetime) -> datetime:
    """A ``timestamptz`` read back, as a :class:`datetime` in :data:`timezone.utc`."""
    return when.astimezone(timezone.utc)


def _utc_session(conn: Any) -> None:
    conn.execute("SET TIME ZONE 'UTC'")


def _read_only_session(conn: Any) -> None:
    _utc_session(conn)
    conn.execute("SET default_transaction_read_only = on")  # a stray write is refused


class PgTables:
    """The tables ``{prefix}_{name}`` of one part, on a connection of their own.

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        prefix: The tables' prefix (see :func:`check_prefix`).
        names: The tables' (and indexes') names after the prefix, each ``{name}`` in a
            statement; or a mapping from the ``{name}`` used in statements to that name.
        part: What they hold, for messages ("session log").
        timeout_s: Connect timeout.
        read_only: Open a connection on which Postgres refuses every write.
        shared: Share the process's connection to the DSN with the other parts (see
            :class:`~pensive_core.storage.pg.PgConnection`); False for a part whose
            transactions may wait on something slow (a session log's summary, written by an
            LLM inside its transaction), so that no other part waits with it.

    Raises:
        ConfigError: If the prefix is not valid.
        BackendError: If Postgres cannot be reached (host and database named).
    """

    def __init__(
        self,
        dsn: str,
        prefix: str,
        names: Sequence[str] | Mapping[str, str],
        part: str,
        timeout_s: float = 10,
        read_only: bool = False,
        shared: bool = True,
    ) -> None:
        self.prefix = check_prefix(prefix, part)
        from psycopg import sql

        self.part = part
        setup = _read_only_session if read_only else _utc_session
        self.pg = PgConnection(
            dsn, f"The Postgres {part}", timeout_s, setup=setup, shared=shared, read_only=read_only
        )
        self.address = self.pg.address
        self._suffix = dict(names) if isinstance(names, Mapping) else {n: n for n in names}
        self.names = {k: sql.Identifier(f"{prefix}_{v}") for k, v in self._suffix.items()}
        self.depth = 0  # transaction() blocks open on this connection

    def q(self, text: str) -> Any:
        """A statement with ``{name}`` replaced by the quoted table names."""
        from psycopg import sql

        return sql.SQL(text).format(**self.names)

    def run(self, what: str, stmt: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        """Run one statement (committed at once outside :meth:`transaction`); its rows."""

        def go(conn: Any) -> list[Any]:
            cur = conn.execute(self.q(stmt), params)
            return cur.fetchall() if cur.description is not None else []

        if self.depth:  # inside a transaction: no reconnect-and-retry half way through
            return go(self.pg.conn)
        return self.pg.run(what, go)

    def atomic(self, what: str, fn: Callable[[Any], T]) -> T:
        """``fn(connection)`` as one transaction (inside :meth:`transaction`, a part of it).

        Raises:
            BackendError: If Postgres refuses it (then nothing of it is stored).
        """
        if self.depth:
            return fn(self.pg.conn)
        import psycopg

        def go(conn: Any) -> T:
            try:
                with conn.transaction():
                    return fn(conn)
            except psycopg.Error as exc:
                if isinstance(exc, psycopg.OperationalError) and (conn.broken or conn.closed):
                    raise  # a dropped connection: reopened and run again whole
                raise BackendError(
                    f"Postgres at {self.address} refused to {what} in the {self.part}, rolled "
                    f"back whole ({type(exc).__name__}: {first_line(exc)})"
                ) from None

        return self.pg.run(what, go)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction (a nested block joins the outer one): committed when the block
        ends, rolled back whole if it raises.

        Raises:
            BackendError: If Postgres refuses a write inside it, or the connection drops.
        """
        if self.depth:
            yield
            return
        # a connection dropped since the last call is reopened now, not half way through
        self.pg.run("start a transaction", lambda conn: conn.execute("SELECT 1"))
        import psycopg

        try:  # held to the end: another thread's call on the shared connection waits
            with self.pg.held() as conn, conn.transaction():
                self.depth += 1
                try:
                    yield
                finally:
                    self.depth -= 1
        except psycopg.Error as exc:
            raise BackendError(
                f"Postgres at {self.address} refused a write to the {self.part}, rolled back "
                f"whole ({type(exc).__name__}: {first_line(exc)})"
            ) from None

    def exists(self, *names: str) -> bool:
        """Whether the tables ``names`` (as statements name them) all exist (never creates
        anything)."""
        rows = self.run(
            "look for its tables",
            "SELECT count(to_regclass(n)) FROM unnest(%s::text[]) AS n",
            ([f'"{self.prefix}_{self._suffix[n]}"' for n in names],),
        )
        return int(rows[0][0]) == len(names)

    def create(self, ddl: Sequence[str]) -> None:
        """Run ``CREATE ... IF NOT EXISTS`` statements in one transaction, one process at a
        time (two replicas making the tables at once would collide in the catalog)."""

        def make(conn: Any) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.prefix,))
            for text in ddl:
                conn.execute(self.q(text))

        self.atomic("create its tables", make)

    def close(self) -> None:
        """Close the connection (a later call reopens it)."""
        self.pg.close()


def identifiers(prefix: str, names: Iterable[str]) -> dict[str, Any]:
    """``name -> sql.Identifier("{prefix}_{name}")`` for formatting statements."""
    from psycopg import sql

    return {name: sql.Identifier(f"{prefix}_{name}") for name in names}


def locked_write(pg: PgConnection, what: str, lock_key: str, work: Callable[[Any], T]) -> T:
    """``work(connection)`` in one transaction that first takes the advisory lock of
    ``lock_key`` (held until it commits or rolls back).

    Args:
        pg: The part's connection.
        what: The write, for messages ("replace document 'a' in the entity graph").
        lock_key: What to serialise on (a document of one prefix, or a whole table).
        work: The statements; may run twice (see the module's notes).

    Returns:
        What ``work`` returned.

    Raises:
        BackendError: If Postgres refuses a statement or the commit (nothing is stored).
    """

    def run(conn: Any) -> T:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (lock_key,))
            return work(conn)

    return pg.run(f"{what}; rolled back whole", run)


def create_once(
    pg: PgConnection, what: str, prefix: str, relations: Sequence[str], ddl: Sequence[Any]
) -> None:
    """Run ``ddl`` unless every one of ``relations`` (tables and indexes, unquoted names)
    exists, checked again under the prefix's DDL lock.

    Not ``IF NOT EXISTS`` alone: ``CREATE INDEX IF NOT EXISTS`` takes a share lock on its
    table before it looks, so a process opening the store while another writes to two of
    its tables deadlocks with it (found by the two-writer test).

    Args:
        pg: The part's connection.
        what: For messages ("create the graph tables").
        prefix: The tables' prefix (its DDL is serialised).
        relations: What the DDL makes.
        ddl: The statements, run in order in one transaction.
    """
    check = "SELECT count(*) FROM unnest(%s::text[]) n WHERE to_regclass(quote_ident(n)) IS NULL"
    names = list(relations)

    def missing(conn: Any) -> int:
        return int(conn.execute(check, (names,)).fetchone()[0])

    def make(conn: Any) -> None:
        if missing(conn):
            for stmt in ddl:
                conn.execute(stmt)

    if pg.run(f"look for the tables ({what})", missing):
        locked_write(pg, what, f"pensive_ddl:{prefix}", make)


def table_exists(pg: PgConnection, name: str) -> bool:
    """Whether the table ``name`` (unquoted, as made) exists in the search path."""
    row = pg.run(
        f"look for table {name}",
        lambda c: c.execute("SELECT to_regclass(%s) IS NOT NULL", (f'"{name}"',)).fetchone(),
    )
    return bool(row[0])
