"""Conversation memory in Postgres: every session's log (:class:`PostgresTurnLog`, a
:class:`~pensive_core.memory.turns.TurnStore`) and the catalog of sessions
(:class:`PostgresSessionCatalog`, a :class:`~pensive_core.memory.sessions.SessionCatalog`).

Parts of the Postgres storage engine (:mod:`pensive_core.storage.postgres`); they pass
:class:`pensive_core.testing.TurnStoreTests` and :class:`pensive_core.testing.SessionCatalogTests`,
the suites the SQLite ones pass.

Differences from the SQLite ones, by design:

* all sessions of a store (one table prefix) share four tables, keyed by (namespace, session
  id): ``{prefix}_turn_logs`` (one row per session, the lock appends queue on),
  ``{prefix}_turns``, ``{prefix}_turn_summaries`` and ``{prefix}_turn_pins``; the embedded
  engine has one SQLite file per session folder. Isolation is by key, in every statement.
* several replicas may append to one session at once: an append locks the session's row, so
  turn positions stay unique and gap-free (0, 1, 2...) and no writer sees a duplicate key;
* texts (turns, summaries, pins) are UTF-8 ``bytea`` (a text column holds no NUL, a turn
  may), metadata is its JSON text, times are ``timestamptz`` read back as UTC;
* a summary's id comes from one sequence for every session: :meth:`summaries_version` grows
  as the protocol asks, though not by one;
* :meth:`PostgresTurnLog.delete` forgets a session's log (the embedded engine deletes the
  session's folder).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..storage.pg_tables import PgTables, from_bytes, to_bytes, utc
from ..timeutil import ensure_utc, to_iso, utcnow
from .sessions import SessionInfo, session_folder
from .turns import Summary, Turn, turn_id

__all__ = ["PostgresSessionCatalog", "PostgresTurnLog"]

_LOG_TABLES = ("turn_logs", "turns", "turn_summaries", "turn_pins")
_KEY = "namespace = %(ns)s AND session_id = %(sid)s"
_SELECT = "SELECT seq, role, text, ts, metadata, segment, drift, shift FROM {turns}"
_FK = "FOREIGN KEY (namespace, session_id) REFERENCES {turn_logs} ON DELETE CASCADE"
_LOG_DDL = [
    "CREATE TABLE IF NOT EXISTS {turn_logs} (namespace text NOT NULL, session_id text NOT NULL, "
    "created timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (namespace, session_id))",
    "CREATE TABLE IF NOT EXISTS {turns} (namespace text NOT NULL, session_id text NOT NULL, "
    "seq bigint NOT NULL, role text NOT NULL, text bytea NOT NULL, ts timestamptz NOT NULL, "
    "metadata text NOT NULL, segment integer NOT NULL, drift double precision, "
    "shift boolean NOT NULL DEFAULT false, indexed boolean NOT NULL DEFAULT false, "
    f"PRIMARY KEY (namespace, session_id, seq), {_FK})",
    "CREATE INDEX IF NOT EXISTS {turns_unindexed} ON {turns} (namespace, session_id, seq) "
    "WHERE NOT indexed",
    "CREATE INDEX IF NOT EXISTS {turns_segment} ON {turns} (namespace, session_id, segment)",
    "CREATE TABLE IF NOT EXISTS {turn_summaries} (id bigserial PRIMARY KEY, "
    "namespace text NOT NULL, session_id text NOT NULL, segment integer NOT NULL, "
    "start_seq bigint NOT NULL, end_seq bigint NOT NULL, text bytea NOT NULL, "
    f"method text NOT NULL, level integer NOT NULL DEFAULT 0, {_FK})",
    "CREATE INDEX IF NOT EXISTS {turn_summaries_session} ON {turn_summaries} "
    "(namespace, session_id, level, start_seq)",
    "CREATE TABLE IF NOT EXISTS {turn_pins} (id bigserial PRIMARY KEY, namespace text NOT NULL, "
    f"session_id text NOT NULL, text bytea NOT NULL, created timestamptz NOT NULL, {_FK})",
    "CREATE INDEX IF NOT EXISTS {turn_pins_session} ON {turn_pins} (namespace, session_id, id)",
]
_LOG_NAMES = (*_LOG_TABLES, "turns_unindexed", "turns_segment", "turn_summaries_session",
              "turn_pins_session")  # fmt: skip


class PostgresTurnLog:
    """One session's log (turns, summaries, pins) in the shared Postgres tables of a store.

    The caller serialises access to one log object (a session holds its own lock); other
    replicas may write to the same session at the same time. A write outside
    :meth:`transaction` is committed before it returns.

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        prefix: The store's table prefix (a lower-case identifier of at most 40 characters).
        namespace: The session's namespace.
        session_id: The session's id.
        read_only: Open without writing: nothing is created, and Postgres refuses a write.
        timeout_s: Connect timeout.

    Raises:
        ConfigError: If the prefix is not valid.
        BackendError: If Postgres cannot be reached (host and database named).
    """

    def __init__(
        self,
        dsn: str,
        prefix: str,
        namespace: str,
        session_id: str,
        *,
        read_only: bool = False,
        timeout_s: float = 10,
    ) -> None:
        self.namespace = namespace
        self.session_id = session_id
        self.read_only = read_only
        # its own connection: a summary is written by an LLM inside the log's transaction
        self._t = PgTables(
            dsn, prefix, _LOG_NAMES, "session log", timeout_s, read_only, shared=False
        )
        self._k = {"ns": namespace, "sid": session_id}
        if not read_only:
            if not self._t.exists(*_LOG_TABLES):
                self._t.create(_LOG_DDL)
            self._t.run("register the session's log", _ensure_log(), self._k)

    @property
    def tables(self) -> PgTables:
        """The tables and their connection (tools and tests reach the connection here)."""
        return self._t

    @classmethod
    def open(
        cls,
        dsn: str,
        prefix: str,
        namespace: str,
        session_id: str,
        read_only: bool = False,
        timeout_s: float = 10,
    ) -> PostgresTurnLog | None:
        """Open (or, when writable, create) a session's log, as the storage engine does.

        Returns:
            The log; None when ``read_only`` and the session has none yet.
        """
        log = cls(dsn, prefix, namespace, session_id, read_only=read_only, timeout_s=timeout_s)
        if read_only and not log.exists():
            log.close()
            return None
        return log

    def exists(self) -> bool:
        """Whether the session has a log (never creates anything)."""
        if not self._t.exists(*_LOG_TABLES):
            return False
        return bool(
            self._run("find the session's log", f"SELECT 1 FROM {{turn_logs}} WHERE {_KEY}")
        )

    def _run(self, what: str, stmt: str, **params: Any) -> list[Any]:
        return self._t.run(what, stmt, {**self._k, **params})

    def _add(self, what: str, stmt: str, **params: Any) -> list[Any]:
        """Insert a row of the session's: its log's row is made first, in the same
        transaction (another replica may have deleted the log since this one opened it)."""
        t = self._t
        values = {**self._k, **params}

        def write(conn: Any) -> list[Any]:
            conn.execute(t.q(_ensure_log()), values)
            cur = conn.execute(t.q(stmt), values)
            return cur.fetchall() if cur.description is not None else []

        return t.atomic(what, write)

    def __len__(self) -> int:
        return int(self._run("count turns", f"SELECT count(*) FROM {{turns}} WHERE {_KEY}")[0][0])

    # -- reading ------------------------------------------------------------------------------
    def turns(self, limit: int | None = None) -> list[Turn]:
        """The turns in order (the last ``limit`` of them, if given)."""
        if limit is None:
            rows = self._run("read turns", f"{_SELECT} WHERE {_KEY} ORDER BY seq")
            return [_turn(r) for r in rows]
        rows = self._run(
            "read turns",
            f"{_SELECT} WHERE {_KEY} ORDER BY seq DESC LIMIT %(n)s",
            n=max(0, int(limit)),
        )
        return [_turn(r) for r in reversed(rows)]

    def turns_until(self, cutoff: datetime, k: int) -> list[Turn]:
        """The last ``k`` turns at or before ``cutoff``, in order."""
        rows = self._run(
            "read turns",
            f"{_SELECT} WHERE {_KEY} AND ts <= %(cutoff)s ORDER BY seq DESC LIMIT %(k)s",
            cutoff=ensure_utc(cutoff),
            k=max(0, int(k)),
        )
        return [_turn(r) for r in reversed(rows)]

    def span(self, start: int, end: int) -> list[Turn]:
        """The turns from position ``start`` to ``end`` (both included), in order."""
        rows = self._run(
            "read turns",
            f"{_SELECT} WHERE {_KEY} AND seq BETWEEN %(a)s AND %(b)s ORDER BY seq",
            a=start,
            b=end,
        )
        return [_turn(r) for r in rows]

    def by_seq(self, seqs: Iterable[int]) -> dict[int, Turn]:
        """The turns at ``seqs`` that exist, by position."""
        wanted = sorted({int(s) for s in seqs})
        if not wanted:
            return {}
        rows = self._run(
            "read turns", f"{_SELECT} WHERE {_KEY} AND seq = ANY(%(seqs)s)", seqs=wanted
        )
        return {int(r[0]): _turn(r) for r in rows}

    def unindexed(self) -> list[Turn]:
        """The turns the session's index does not have yet (an interrupted add), in order."""
        rows = self._run("read turns", f"{_SELECT} WHERE {_KEY} AND NOT indexed ORDER BY seq")
        return [_turn(r) for r in rows]

    def has_unindexed(self) -> bool:
        """Whether some turn is not indexed yet."""
        stmt = f"SELECT 1 FROM {{turns}} WHERE {_KEY} AND NOT indexed LIMIT 1"
        return bool(self._run("read turns", stmt))

    def last_seq(self) -> int:
        """The position of the last turn (-1 when there is none)."""
        stmt = f"SELECT COALESCE(MAX(seq), -1) FROM {{turns}} WHERE {_KEY}"
        return int(self._run("read turns", stmt)[0][0])

    def last_shift(self) -> int | None:
        """The position of the last turn that started a new topic, if any."""
        stmt = f"SELECT MAX(seq) FROM {{turns}} WHERE {_KEY} AND shift"
        last = self._run("read turns", stmt)[0][0]
        return None if last is None else int(last)

    def segment_start(self, segment: int) -> int | None:
        """The position of ``segment``'s first turn (None if it has none)."""
        stmt = f"SELECT MIN(seq) FROM {{turns}} WHERE {_KEY} AND segment = %(seg)s"
        first = self._run("read turns", stmt, seg=segment)[0][0]
        return None if first is None else int(first)

    def segment_spans(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """``(segment, first, last)`` of each segment's turns from ``start`` to ``end``."""
        rows = self._run(
            "read segments",
            f"SELECT segment, MIN(seq), MAX(seq) FROM {{turns}} WHERE {_KEY} "
            "AND seq BETWEEN %(a)s AND %(b)s GROUP BY segment ORDER BY segment",
            a=start,
            b=end,
        )
        return [(int(seg), int(first), int(last)) for seg, first, last in rows]

    def open_segment_tail(self, n: int) -> list[Turn]:
        """The last ``n`` indexed turns of the newest segment, in order."""
        rows = self._run(
            "read turns",
            f"{_SELECT} WHERE {_KEY} AND indexed AND segment = (SELECT MAX(segment) "
            f"FROM {{turns}} WHERE {_KEY}) ORDER BY seq DESC LIMIT %(n)s",
            n=max(0, int(n)),
        )
        return [_turn(r) for r in reversed(rows)]

    def counts(self) -> tuple[int, int, int, int]:
        """Turns, segments, topic shifts and summaries stored."""
        rows = self._run(
            "count turns",
            f"SELECT (SELECT count(*) FROM {{turns}} WHERE {_KEY}), "
            f"(SELECT count(DISTINCT segment) FROM {{turns}} WHERE {_KEY}), "
            f"(SELECT count(*) FROM {{turns}} WHERE {_KEY} AND shift), "
            f"(SELECT count(*) FROM {{turn_summaries}} WHERE {_KEY})",
        )
        turns, segments, shifts, summaries = rows[0]
        return int(turns), int(segments), int(shifts), int(summaries)

    # -- writing ------------------------------------------------------------------------------
    def append(self, items: Sequence[tuple[str, str, datetime, dict[str, Any]]]) -> list[Turn]:
        """Log checked turns (see :func:`~.turns.check_turn`) after the last one, in the last
        segment, not yet indexed; committed before this returns.

        Another replica appending to the same session waits for this one (the session's row
        is locked until the commit), so positions never collide and leave no gap.

        Returns:
            The logged turns (segment as logged, no drift score yet).
        """
        if not items:
            return []
        t = self._t
        k = self._k

        def write(conn: Any) -> list[Turn]:
            conn.execute(t.q(_ensure_log()), k)
            conn.execute(t.q(f"SELECT 1 FROM {{turn_logs}} WHERE {_KEY} FOR UPDATE"), k)
            start, seg = conn.execute(
                t.q(f"SELECT COALESCE(MAX(seq), -1) + 1, MAX(segment) FROM {{turns}} WHERE {_KEY}"),
                k,
            ).fetchone()
            segment = 0 if seg is None else int(seg)
            stored = [
                Turn(turn_id(start + i), start + i, role, text, ts, meta, segment)
                for i, (role, text, ts, meta) in enumerate(items)
            ]
            with conn.cursor() as cur:
                cur.executemany(
                    t.q(
                        "INSERT INTO {turns} (namespace, session_id, seq, role, text, ts, "
                        "metadata, segment) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                    ),
                    [
                        (self.namespace, self.session_id, x.seq, x.role, to_bytes(x.text),
                         ensure_utc(x.timestamp), json.dumps(x.metadata), segment)
                        for x in stored
                    ],
                )  # fmt: skip
            return stored

        return t.atomic("append turns", write)

    def settle(self, turns: Sequence[Turn]) -> None:
        """Record where indexed turns were placed: their segment, drift score and shift."""
        if not turns:
            return
        t = self._t

        def write(conn: Any) -> None:
            with conn.cursor() as cur:
                cur.executemany(
                    t.q(
                        "UPDATE {turns} SET segment = %(seg)s, drift = %(drift)s, "
                        f"shift = %(shift)s, indexed = true WHERE {_KEY} AND seq = %(seq)s"
                    ),
                    [
                        {**self._k, "seg": x.segment, "drift": x.drift, "shift": bool(x.shift),
                         "seq": x.seq}
                        for x in turns
                    ],
                )  # fmt: skip

        t.atomic("place turns", write)

    def mark_indexed(self, turns: Sequence[Turn]) -> None:
        """Record that the index now has ``turns``."""
        self._run(
            "mark turns indexed",
            f"UPDATE {{turns}} SET indexed = true WHERE {_KEY} AND seq = ANY(%(seqs)s)",
            seqs=[x.seq for x in turns],
        )

    def transaction(self) -> AbstractContextManager[None]:
        """One transaction: committed when the block ends, rolled back whole if it raises (a
        nested one joins the outer)."""
        return self._t.transaction()

    # -- summaries ----------------------------------------------------------------------------
    def summarised_to(self) -> int:
        """The position of the last turn a summary covers (-1 when none does)."""
        stmt = f"SELECT MAX(end_seq) FROM {{turn_summaries}} WHERE {_KEY}"
        last = self._run("read summaries", stmt)[0][0]
        return -1 if last is None else int(last)

    def add_summary(self, segment: int, start: int, end: int, text: str, method: str) -> None:
        """Store the summary of a block of turns of ``segment`` (``method`` wrote it)."""
        self._add(
            "store a summary",
            "INSERT INTO {turn_summaries} (namespace, session_id, segment, start_seq, end_seq, "
            "text, method) VALUES (%(ns)s, %(sid)s, %(seg)s, %(a)s, %(b)s, %(text)s, %(m)s)",
            seg=segment,
            a=start,
            b=end,
            text=to_bytes(text),
            m=method,
        )

    def story_so_far(self) -> tuple[int, str] | None:
        """The newest folded story so far: the position of its last turn, and its text."""
        rows = self._run(
            "read the story so far",
            f"SELECT end_seq, text FROM {{turn_summaries}} WHERE {_KEY} AND level = 1 "
            "ORDER BY id DESC LIMIT 1",
        )
        return None if not rows else (int(rows[0][0]), from_bytes(rows[0][1]))

    def block_summaries(self, after: int) -> list[tuple[int, str]]:
        """``(last turn, text)`` of the block summaries starting after ``after``, in order."""
        rows = self._run(
            "read summaries",
            f"SELECT end_seq, text FROM {{turn_summaries}} WHERE {_KEY} AND level = 0 "
            "AND start_seq > %(after)s ORDER BY start_seq",
            after=after,
        )
        return [(int(end), from_bytes(text)) for end, text in rows]

    def fold_summaries(self, end: int, text: str, method: str) -> None:
        """Replace the story so far with ``text``, which covers the turns up to ``end``."""
        t = self._t
        params = {**self._k, "b": end, "text": to_bytes(text), "m": method}

        def write(conn: Any) -> None:
            conn.execute(t.q(_ensure_log()), params)
            conn.execute(t.q(f"DELETE FROM {{turn_summaries}} WHERE {_KEY} AND level = 1"), params)
            conn.execute(
                t.q(
                    "INSERT INTO {turn_summaries} (namespace, session_id, segment, start_seq, "
                    "end_seq, text, method, level) VALUES (%(ns)s, %(sid)s, -1, 0, %(b)s, "
                    "%(text)s, %(m)s, 1)"
                ),
                params,
            )

        t.atomic("fold the story so far", write)

    def summaries_version(self) -> int:
        """The id of the session's newest summary (0 before the first): ids come from one
        sequence, so it grows with every summary stored."""
        stmt = f"SELECT COALESCE(MAX(id), 0) FROM {{turn_summaries}} WHERE {_KEY}"
        return int(self._run("read summaries", stmt)[0][0])

    def shown_summaries(self) -> list[Summary]:
        """The story so far as shown: the folded summary, then the later blocks in order."""
        rows = self._run(
            "read summaries",
            "SELECT s.start_seq, s.end_seq, s.text, s.level, a.ts, b.ts FROM {turn_summaries} s "
            "JOIN {turns} a ON a.namespace = s.namespace AND a.session_id = s.session_id "
            "AND a.seq = s.start_seq "
            "JOIN {turns} b ON b.namespace = s.namespace AND b.session_id = s.session_id "
            "AND b.seq = s.end_seq "
            "WHERE s.namespace = %(ns)s AND s.session_id = %(sid)s AND (s.level = 1 OR "
            f"s.start_seq > (SELECT COALESCE(MAX(end_seq), -1) FROM {{turn_summaries}} "
            f"WHERE {_KEY} AND level = 1)) ORDER BY s.level DESC, s.start_seq",
        )
        return [
            Summary(int(start), int(end), from_bytes(text), int(level), utc(t0), utc(t1))
            for start, end, text, level, t0, t1 in rows
        ]

    # -- pins ---------------------------------------------------------------------------------
    def pin(self, text: str) -> int:
        """Store a pinned note; returns its id."""
        rows = self._add(
            "pin a note",
            "INSERT INTO {turn_pins} (namespace, session_id, text, created) "
            "VALUES (%(ns)s, %(sid)s, %(text)s, %(now)s) RETURNING id",
            text=to_bytes(text),
            now=utcnow(),
        )
        return int(rows[0][0])

    def unpin(self, pin_id: int) -> bool:
        """Remove a pinned note; False if there was none with that id."""
        rows = self._run(
            "unpin a note",
            f"DELETE FROM {{turn_pins}} WHERE {_KEY} AND id = %(id)s RETURNING id",
            id=int(pin_id),
        )
        return bool(rows)

    def pins(self) -> list[str]:
        """The pinned notes, oldest first."""
        rows = self._run("read pins", f"SELECT text FROM {{turn_pins}} WHERE {_KEY} ORDER BY id")
        return [from_bytes(r[0]) for r in rows]

    # -- the whole log ------------------------------------------------------------------------
    def delete(self) -> None:
        """Forget the session's log: its turns, summaries and pins (a later write starts a
        new one from position 0)."""
        self._run("delete the session's log", f"DELETE FROM {{turn_logs}} WHERE {_KEY}")

    def close(self) -> None:
        """Close the connection."""
        self._t.close()

    def __repr__(self) -> str:
        return (
            f"PostgresTurnLog({self._t.address!r}, prefix={self._t.prefix!r}, "
            f"namespace={self.namespace!r}, session_id={self.session_id!r})"
        )


def _ensure_log() -> str:
    return (
        "INSERT INTO {turn_logs} (namespace, session_id) VALUES (%(ns)s, %(sid)s) "
        "ON CONFLICT (namespace, session_id) DO NOTHING"
    )


def _turn(row: Sequence[Any]) -> Turn:
    seq, role, text, ts, meta, segment, drift, shift = row
    return Turn(
        turn_id(int(seq)),
        int(seq),
        role,
        from_bytes(text),
        utc(ts),
        json.loads(meta),
        int(segment),
        None if drift is None else float(drift),
        bool(shift),
    )


_CATALOG_DDL = [
    "CREATE TABLE IF NOT EXISTS {sessions} (namespace text NOT NULL, session_id text NOT NULL, "
    "user_id text, folder text NOT NULL, created timestamptz NOT NULL, "
    "PRIMARY KEY (namespace, session_id))",
    "CREATE INDEX IF NOT EXISTS {sessions_user} ON {sessions} (namespace, user_id)",
]


class PostgresSessionCatalog:
    """The sessions of a store (one table prefix) in Postgres, shared by every replica.

    A session's folder (for what it keeps locally, like its index) is under ``root``, named
    as the embedded engine names it.

    Args:
        dsn: The connection string (a password only from the environment or ``~/.pgpass``).
        prefix: The store's table prefix (a lower-case identifier of at most 40 characters).
        root: The store's local ``conversations`` folder.
        read_only: Open without writing: nothing is created, and Postgres refuses a write.
        timeout_s: Connect timeout.

    Raises:
        ConfigError: If the prefix is not valid.
        BackendError: If Postgres cannot be reached (host and database named).
    """

    def __init__(
        self,
        dsn: str,
        prefix: str,
        root: Path,
        *,
        read_only: bool = False,
        timeout_s: float = 10,
    ) -> None:
        self.root = Path(root)
        self.read_only = read_only
        self._t = PgTables(
            dsn, prefix, ("sessions", "sessions_user"), "session catalog", timeout_s, read_only
        )
        self._made = self._t.exists("sessions")
        if not read_only and not self._made:
            self._t.create(_CATALOG_DDL)
            self._made = True

    @property
    def tables(self) -> PgTables:
        """The tables and their connection (tools and tests reach the connection here)."""
        return self._t

    def _ready(self) -> bool:
        """Whether the table exists (a reader looks again until a writer has made it)."""
        if not self._made:
            self._made = self._t.exists("sessions")
        return self._made

    def _info(self, namespace: str, session_id: str, row: Sequence[Any]) -> SessionInfo:
        user, folder, created = row
        return SessionInfo(namespace, session_id, user, self.root / folder, _iso(created))

    def get(self, namespace: str, session_id: str) -> SessionInfo | None:
        """The session's registration, or None."""
        if not self._ready():
            return None
        rows = self._t.run(
            "read a session",
            "SELECT user_id, folder, created FROM {sessions} "
            "WHERE namespace = %s AND session_id = %s",
            (namespace, session_id),
        )
        return None if not rows else self._info(namespace, session_id, rows[0])

    def register(self, namespace: str, session_id: str, user: str | None) -> SessionInfo:
        """Register a session (or return it); a session keeps the user it was first given.

        Two replicas registering one session at once both get the one registration stored.

        Raises:
            InputError: If the session belongs to another user.
        """
        folder = session_folder(self.root, namespace, session_id)
        if self.read_only:
            info = self.get(namespace, session_id)
            if info is None:
                return SessionInfo(namespace, session_id, user, folder, _iso(utcnow()))
            _check_owner(info.user, user, session_id)
            return info
        t = self._t
        key = (namespace, session_id)

        def write(conn: Any) -> SessionInfo:
            conn.execute(
                t.q(
                    "INSERT INTO {sessions} (namespace, session_id, user_id, folder, created) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (namespace, session_id) DO NOTHING"
                ),
                (*key, user, str(folder.relative_to(self.root)), utcnow()),
            )
            row = conn.execute(
                t.q(
                    "SELECT user_id, folder, created FROM {sessions} "
                    "WHERE namespace = %s AND session_id = %s FOR UPDATE"
                ),
                key,
            ).fetchone()
            _check_owner(row[0], user, session_id)
            if user is not None and row[0] is None:
                conn.execute(
                    t.q(
                        "UPDATE {sessions} SET user_id = %s WHERE namespace = %s AND session_id = %s"
                    ),
                    (user, *key),
                )
                row = (user, row[1], row[2])
            return self._info(namespace, session_id, row)

        return t.atomic("register a session", write)

    def namespaces(self) -> list[str]:
        """The namespaces that have sessions, sorted."""
        if not self._ready():
            return []
        rows = self._t.run("list namespaces", "SELECT DISTINCT namespace FROM {sessions}")
        return sorted(r[0] for r in rows)

    def sessions(self, namespace: str, user: str | None = None) -> list[SessionInfo]:
        """The namespace's sessions (of one user, if given), oldest first."""
        if not self._ready():
            return []
        stmt = "SELECT session_id, user_id, folder, created FROM {sessions} WHERE namespace = %s"
        args: tuple[str, ...] = (namespace,)
        if user is not None:
            stmt += " AND user_id = %s"
            args += (user,)
        rows = self._t.run("list sessions", stmt + " ORDER BY created, session_id", args)
        return [self._info(namespace, r[0], r[1:]) for r in rows]

    def close(self) -> None:
        """Close the connection."""
        self._t.close()


def _check_owner(stored: str | None, user: str | None, session_id: str) -> None:
    if user is not None and stored is not None and stored != user:
        raise InputError(
            f"session {session_id!r} belongs to another user than {user!r}; a session "
            "keeps the user it was opened with"
        )


def _iso(when: datetime) -> str:
    return to_iso(utc(when)) or ""
