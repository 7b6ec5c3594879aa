"""Where conversations live: one folder per (namespace, session), and a registry of them.

Each session is its own small store in its own folder, so one session's recall can never see
another's turns: isolation is physical, not a filter over shared results. The registry maps
sessions to their folders and users, for cross-session recall of one user's memory.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..errors import InputError
from ..files import connect_read_only
from ..timeutil import to_iso, utcnow
from ..validate import check_text

__all__ = ["SessionCatalog", "SessionInfo", "SessionRegistry", "check_name", "session_folder"]

_UNSAFE_RE = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_NAME = 512


def check_name(value: object, what: str) -> str:
    """A session id, namespace or user id: a non-empty str without control characters that
    encodes as UTF-8."""
    if not isinstance(value, str):
        raise InputError(f"{what} must be a str, got {type(value).__name__}")
    if not value.strip():
        raise InputError(f"{what} is empty")
    if len(value) > MAX_NAME:
        raise InputError(f"{what} is {len(value)} characters; the limit is {MAX_NAME}")
    if any(ord(c) < 32 for c in value):
        raise InputError(f"{what} {value!r} contains control characters")
    return check_text(value, what)


def _slug(value: str) -> str:
    """A file-system-safe, collision-free folder name for any string (``../x`` included)."""
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:16]
    readable = _UNSAFE_RE.sub("_", value).strip("._-")[:40]
    return f"{readable}-{digest}" if readable else digest


def session_folder(root: Path, namespace: str, session_id: str) -> Path:
    """The folder of one session under a store's ``conversations`` folder."""
    return root / _slug(namespace) / _slug(session_id)


@dataclass(frozen=True)
class SessionInfo:
    """A registered session.

    Args:
        namespace: Its namespace.
        session_id: Its id.
        user: The user it belongs to, if any.
        folder: Where its store is.
        created: When it was first opened (ISO 8601, UTC).
    """

    namespace: str
    session_id: str
    user: str | None
    folder: Path
    created: str


class SessionRegistry:
    """The sessions of a store (a small SQLite table next to their folders).

    Args:
        root: The store's ``conversations`` folder.
        read_only: Open without creating anything.
    """

    def __init__(self, root: Path, read_only: bool = False) -> None:
        self.root = root
        self.read_only = read_only
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        path = root / "sessions.sqlite"
        if read_only:  # (on a read-only filesystem too, where mode=ro alone cannot open it)
            self._db = connect_read_only(path) if path.is_file() else None
            return
        root.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS sessions (namespace TEXT NOT NULL, "
            "session_id TEXT NOT NULL, user TEXT, folder TEXT NOT NULL, created TEXT NOT NULL, "
            "PRIMARY KEY (namespace, session_id))"
        )
        self._db.execute("CREATE INDEX IF NOT EXISTS sessions_user ON sessions (namespace, user)")
        self._db.commit()

    def get(self, namespace: str, session_id: str) -> SessionInfo | None:
        """The session's registration, or None."""
        if self._db is None:
            return None
        with self._lock:
            row = self._db.execute(
                "SELECT user, folder, created FROM sessions WHERE namespace=? AND session_id=?",
                (namespace, session_id),
            ).fetchone()
        if row is None:
            return None
        return SessionInfo(namespace, session_id, row[0], self.root / row[1], row[2])

    def register(self, namespace: str, session_id: str, user: str | None) -> SessionInfo:
        """Register a session (or return it); a session keeps the user it was first given.

        Raises:
            InputError: If the session belongs to another user.
        """
        info = self.get(namespace, session_id)
        if info is not None:
            if user is not None and info.user is not None and info.user != user:
                raise InputError(
                    f"session {session_id!r} belongs to another user than {user!r}; a session "
                    "keeps the user it was opened with"
                )
            if user is not None and info.user is None and not self.read_only:
                with self._lock:
                    assert self._db is not None
                    self._db.execute(
                        "UPDATE sessions SET user=? WHERE namespace=? AND session_id=?",
                        (user, namespace, session_id),
                    )
                    self._db.commit()
                info = SessionInfo(namespace, session_id, user, info.folder, info.created)
            return info
        folder = session_folder(self.root, namespace, session_id)
        created = to_iso(utcnow()) or ""
        if self._db is not None and not self.read_only:
            with self._lock:
                self._db.execute(
                    "INSERT OR IGNORE INTO sessions VALUES (?, ?, ?, ?, ?)",
                    (namespace, session_id, user, str(folder.relative_to(self.root)), created),
                )
                self._db.commit()
        return SessionInfo(namespace, session_id, user, folder, created)

    def namespaces(self) -> list[str]:
        """The namespaces that have sessions, sorted."""
        if self._db is None:
            return []
        with self._lock:
            rows = self._db.execute("SELECT DISTINCT namespace FROM sessions").fetchall()
        return sorted(r[0] for r in rows)

    def sessions(self, namespace: str, user: str | None = None) -> list[SessionInfo]:
        """The namespace's sessions (of one user, if given), oldest first."""
        if self._db is None:
            return []
        sql = "SELECT session_id, user, folder, created FROM sessions WHERE namespace=?"
        args: tuple[str, ...] = (namespace,)
        if user is not None:
            sql += " AND user=?"
            args += (user,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY created, session_id", args).fetchall()
        return [SessionInfo(namespace, s, u, self.root / f, c) for s, u, f, c in rows]

    def close(self) -> None:
        """Release the database."""
        if self._db is not None:
            self._db.close()
            self._db = None


class SessionCatalog(Protocol):
    """Which sessions a store has, persisted. :class:`SessionRegistry` (``sessions.sqlite``
    under ``conversations/``) is the embedded implementation."""

    def get(self, namespace: str, session_id: str) -> SessionInfo | None:
        """The session, or None when it is not registered."""
        ...

    def register(self, namespace: str, session_id: str, user: str | None) -> SessionInfo:
        """Register a session (or return it); a session keeps the user it was first given."""
        ...

    def namespaces(self) -> list[str]:
        """The namespaces that have sessions, sorted."""
        ...

    def sessions(self, namespace: str, user: str | None = None) -> list[SessionInfo]:
        """The sessions of ``namespace`` (of one user, if given), oldest first."""
        ...

    def close(self) -> None:
        """Release the catalog."""
        ...
