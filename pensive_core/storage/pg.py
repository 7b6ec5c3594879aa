"""One Postgres connection as every Postgres part uses it (psycopg 3).

A part (the pgvector backend, the BM25 postings) holds a :class:`PgConnection` and runs each
call through :meth:`PgConnection.run`: a connection the server dropped (a restart, an idle
timeout, ``pg_terminate_backend``) is reopened and the call run once more (every call a part
makes is idempotent or one transaction), then a failure is a
:class:`~pensive_core.errors.BackendError` that names host and database, never the user's
password. A DSN in the config must not hold a password (the config is saved with the store):
libpq reads it from ``PGPASSWORD`` or ``~/.pgpass``, or the whole DSN comes from an
environment variable.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import BackendError, MissingDependencyError

__all__ = ["PgConnection", "describe", "first_line", "has_password", "psycopg_module"]

T = TypeVar("T")
# "password=..." among libpq keywords, or "user:secret@" in a URL (an empty one is none)
_PASSWORD = re.compile(r"(?:^|\s)password\s*=\s*\S|://[^/@\s:]*:[^/@\s]+@", re.IGNORECASE)


def psycopg_module(purpose: str) -> Any:
    """``psycopg``, or a :class:`MissingDependencyError` naming the ``postgres`` extra."""
    try:
        import psycopg
    except ImportError as exc:
        raise MissingDependencyError("psycopg", "postgres", purpose) from exc
    return psycopg


def has_password(dsn: str) -> bool:
    """Whether a DSN (libpq keywords, or a URL with the password before ``@`` or as a
    ``?password=`` parameter) spells out a password. A DSN libpq cannot parse fails to
    connect with a message that does not show it."""
    if _PASSWORD.search(dsn) or re.search(r"[?&]password=[^&]", dsn, re.IGNORECASE):
        return True
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return False
    try:
        return bool(conninfo_to_dict(dsn).get("password"))
    except Exception:
        return False


def describe(dsn: str) -> str:
    """``host[:port]/dbname`` of a DSN, for messages (no user, no password)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(dsn)
    except Exception:  # a malformed string: say so without echoing it (it may hold secrets)
        return "a malformed DSN"
    host = str(info.get("host") or "localhost")
    port = f":{info['port']}" if info.get("port") else ""
    return f"{host}{port}/{info.get('dbname') or info.get('user') or 'postgres'}"


def first_line(exc: BaseException) -> str:
    """An exception's first line (a server message can run to a hint and a context)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class PgConnection:
    """One autocommit connection, reopened when the server drops it. It shows in
    ``pg_stat_activity`` as ``application_name = 'pensive'`` unless the DSN names another.

    Args:
        dsn: The connection string.
        purpose: What the connection is for, in messages ("The pgvector backend").
        timeout_s: Connect timeout.
        setup: Run on every new connection (create an extension, register adapters).
        hint: Where the DSN comes from, for the connect error ("[backend.pgvector] dsn").

    Raises:
        MissingDependencyError: If psycopg is not installed.
        BackendError: If the server cannot be reached (names host and database).
    """

    def __init__(
        self,
        dsn: str,
        purpose: str,
        timeout_s: float = 10.0,
        setup: Callable[[Any], None] | None = None,
        hint: str = "the DSN",
    ) -> None:
        self._psycopg = psycopg_module(purpose)
        self._dsn = dsn
        self.purpose = purpose
        self.address = describe(dsn)
        self._timeout = max(1, int(timeout_s))
        self._setup = setup
        self._hint = hint
        self._lock = threading.RLock()
        self.conn: Any = None
        self._connect()

    def _connect(self) -> None:
        psycopg = self._psycopg
        try:
            extra = {} if "application_name" in self._dsn else {"application_name": "pensive"}
            conn = psycopg.connect(
                self._dsn, autocommit=True, connect_timeout=self._timeout, **extra
            )
        except psycopg.OperationalError as exc:  # the server's or the network's answer
            raise BackendError(
                f"cannot connect to Postgres at {self.address} ({self.purpose}; "
                f"{type(exc).__name__}: {first_line(exc)}); check {self._hint}"
            ) from None
        except psycopg.Error as exc:  # libpq could not parse the DSN: its text may hold secrets
            raise BackendError(
                f"cannot connect to Postgres ({self.purpose}): the DSN is malformed "
                f"({type(exc).__name__}; not shown, it may hold a password); check {self._hint}"
            ) from None
        if self._setup is not None:
            try:
                self._setup(conn)
            except Exception:
                conn.close()
                raise
        self.conn = conn

    def run(self, what: str, fn: Callable[[Any], T]) -> T:
        """``fn(connection)``; a dropped connection is reopened and ``fn`` run once more.

        Raises:
            BackendError: If it fails again, or the server refuses the statement.
        """
        psycopg = self._psycopg
        with self._lock:
            for attempt in (0, 1):
                if self.conn is None or self.conn.closed:
                    self._connect()
                try:
                    return fn(self.conn)
                except psycopg.OperationalError as exc:
                    broken = self.conn.broken or self.conn.closed
                    if attempt == 0 and broken:
                        try:
                            self.conn.close()
                        finally:
                            self.conn = None
                        continue
                    # a lost connection, a deadlock or serialization failure, a shutdown:
                    # worth retrying; a limit (a key too long) is not
                    state = getattr(exc, "sqlstate", None) or ""
                    transient = broken or state[:2] in ("08", "40", "53", "57")
                    raise BackendError(
                        f"Postgres at {self.address} failed to {what} ({first_line(exc)})"
                        + ("; retry the request" if transient else "")
                    ) from None
                except psycopg.Error as exc:
                    raise BackendError(
                        f"Postgres at {self.address} refused to {what} "
                        f"({type(exc).__name__}: {first_line(exc)})"
                    ) from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the connection (a later :meth:`run` reopens it)."""
        with self._lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None
