"""What the Postgres tables of the graph, its learning and the statements share: a checked
table prefix, the tables' quoted names, and one write transaction under an advisory lock.

Every write runs through :meth:`~pensive_core.storage.pg.PgConnection.run`: a connection the
server dropped is reopened and the whole transaction run once more (it reads what it
replaces inside, so a second run is the same write); a statement Postgres refuses is a
:class:`~pensive_core.errors.BackendError` saying the write was rolled back whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from ..errors import ConfigError
from .pg import PgConnection

__all__ = [
    "PREFIX",
    "check_prefix",
    "create_once",
    "identifiers",
    "locked_write",
    "table_exists",
]

T = TypeVar("T")

#: A table prefix: a lower-case identifier short enough that ``{prefix}_{name}`` fits
#: Postgres's 63 bytes.
PREFIX = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")


def check_prefix(prefix: str, what: str) -> str:
    """``prefix`` if it can start a table name.

    Args:
        prefix: The tables' prefix (one store, or one namespace).
        what: Whose tables, for the message ("graph").

    Raises:
        ConfigError: If it is not a lower-case identifier of at most 40 characters.
    """
    if not isinstance(prefix, str) or not PREFIX.match(prefix):
        raise ConfigError(
            f"{what} table prefix {prefix!r} is not valid: use up to 40 lower-case letters, "
            "digits or '_', starting with a letter or '_'"
        )
    return prefix


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
