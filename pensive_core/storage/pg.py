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

import contextlib
import re
import threading
from collections.abc import Callable, Iterator
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


class _Physical:
    """One psycopg connection and the lock that serialises its use; shared by every
    :class:`PgConnection` of this process with the same DSN and mode (see there)."""

    def __init__(self, key: tuple[str, bool] | None) -> None:
        self.key = key
        self.conn: Any = None
        self.lock = threading.RLock()
        self.users = 0
        self.setups: list[Callable[[Any], None]] = []
        self.pending: list[Callable[[Any], None]] = []  # not run yet on the open connection


_SHARED: dict[tuple[str, bool], _Physical] = {}
_SHARED_LOCK = threading.Lock()


class PgConnection:
    """A part's use of one autocommit connection, reopened when the server drops it. It shows
    in ``pg_stat_activity`` as ``application_name = 'pensive'`` unless the DSN names another.

    The parts of a process that name the same DSN (the parts of one store, the pgvector
    backends of one server) share one connection unless ``shared=False``: each call runs
    under that connection's lock, and a transaction a part holds open across calls holds it
    too (:meth:`held`), so no other thread's statement lands inside it. A store then costs
    one connection per process, plus the change lock's own while it writes, instead of one
    per part.

    Args:
        dsn: The connection string.
        purpose: What the connection is for, in messages ("The pgvector backend").
        timeout_s: Connect timeout.
        setup: Run on every new connection (create an extension, register adapters); on a
            shared connection every sharer's setup runs.
        hint: Where the DSN comes from, for the connect error ("[backend.pgvector] dsn").
        shared: Share the connection with the process's other parts on the same DSN (False:
            a connection of its own, as a session-level advisory lock needs).
        read_only: The setup makes the session refuse writes: such connections are shared
            only among themselves.

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
        shared: bool = True,
        read_only: bool = False,
    ) -> None:
        self._psycopg = psycopg_module(purpose)
        self._dsn = dsn
        self.purpose = purpose
        self.address = describe(dsn)
        self._timeout = max(1, int(timeout_s))
        self._setup = setup
        self._hint = hint
        self._key = (dsn, read_only) if shared else None
        self._phys: _Physical | None = None
        try:
            with self.held():  # connected now: a wrong DSN fails at open, not at first use
                pass
        except BaseException:
            self._detach()
            raise

    # -- the shared connection -----------------------------------------------------------------
    def _attach(self) -> _Physical:
        if self._phys is not None:
            return self._phys
        with _SHARED_LOCK:
            phys = _SHARED.get(self._key) if self._key is not None else None
            if phys is None:
                phys = _Physical(self._key)
                if self._key is not None:
                    _SHARED[self._key] = phys
            phys.users += 1
            if self._setup is not None:
                phys.setups.append(self._setup)
                phys.pending.append(self._setup)  # (run before this part's first call)
        self._phys = phys
        return phys

    def _ready(self, phys: _Physical) -> None:
        """Under the connection's lock: connected, and every sharer's setup run on it. A
        connection the server cut since its last use (found by a setup failing on it) is
        opened again once."""
        for attempt in (0, 1):
            if phys.conn is None or phys.conn.closed:
                self._connect(phys)
                return
            try:
                while phys.pending:
                    phys.pending[0](phys.conn)
                    phys.pending.pop(0)
                return
            except Exception:
                if attempt == 0 and (phys.conn.broken or phys.conn.closed):
                    try:
                        phys.conn.close()
                    finally:
                        phys.conn = None
                    continue
                raise

    def _detach(self) -> None:
        phys, self._phys = self._phys, None
        if phys is None:
            return
        with _SHARED_LOCK:
            phys.users -= 1
            if self._setup is not None and self._setup in phys.setups:
                phys.setups.remove(self._setup)
            if self._setup is not None and self._setup in phys.pending:
                phys.pending.remove(self._setup)
            last = phys.users <= 0
            if last and phys.key is not None and _SHARED.get(phys.key) is phys:
                del _SHARED[phys.key]
        if last:
            with phys.lock:
                if phys.conn is not None:
                    phys.conn.close()
                    phys.conn = None

    @property
    def conn(self) -> Any:
        """The psycopg connection (None before the first call or after :meth:`close`)."""
        return self._phys.conn if self._phys is not None else None

    @contextlib.contextmanager
    def held(self) -> Iterator[Any]:
        """Hold the connection for a block of calls (a transaction spanning several):
        connected, and no other thread's call runs on it until the block ends."""
        phys = self._attach()
        with phys.lock:
            self._ready(phys)
            yield phys.conn

    def _connect(self, phys: _Physical) -> None:
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
        try:
            for setup in list(phys.setups):
                setup(conn)
        except Exception:
            conn.close()
            raise
        phys.conn = conn
        phys.pending.clear()

    def run(self, what: str, fn: Callable[[Any], T]) -> T:
        """``fn(connection)``; a dropped connection is reopened and ``fn`` run once more.

        Raises:
            BackendError: If it fails again, or the server refuses the statement.
        """
        psycopg = self._psycopg
        phys = self._attach()
        with phys.lock:
            for attempt in (0, 1):
                self._ready(phys)
                conn = phys.conn
                try:
                    return fn(conn)
                except psycopg.OperationalError as exc:
                    broken = conn.broken or conn.closed
                    if attempt == 0 and broken:
                        try:
                            conn.close()
                        finally:
                            phys.conn = None
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
        """This part is done with the connection: closed when no other part shares it (a
        later :meth:`run` opens it again)."""
        self._detach()
