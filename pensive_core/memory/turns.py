"""Turns and the log that keeps them: ``memory.sqlite`` in a session's folder.

The log holds every turn in order (its segment, its drift score, whether a topic shift started
with it, whether the session's index has it yet), the summaries of older turns (written by
:mod:`.segments`) and the pinned notes. A turn is written here before it is indexed, so a turn
the caller was told is stored survives a crash between the two.

The memory code sees a log as a :class:`TurnStore`, opened by the storage engine;
:class:`TurnLog` is the SQLite one.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from ..context.base import ContextRequest
from ..errors import InputError
from ..files import connect_read_only
from ..timeutil import ensure_utc, from_iso, to_iso, utcnow
from ..types import Hit
from ..validate import check_id, check_metadata, check_text

__all__ = [
    "MAX_TURN_CHARS",
    "RESERVED_KEYS",
    "SCHEMA",
    "Summary",
    "Turn",
    "TurnContext",
    "TurnLog",
    "TurnStore",
    "check_turn",
    "speaker",
    "turn_context",
    "turn_id",
]

RESERVED_KEYS = frozenset({"role", "session_id", "seq", "speaker_label"})
MAX_TURN_CHARS = 1_000_000
SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    seq INTEGER PRIMARY KEY, role TEXT NOT NULL, text TEXT NOT NULL, ts TEXT NOT NULL,
    metadata TEXT NOT NULL, segment INTEGER NOT NULL, drift REAL, shift INTEGER NOT NULL DEFAULT 0,
    indexed INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS summaries (
    id INTEGER PRIMARY KEY, segment INTEGER NOT NULL, start_seq INTEGER NOT NULL,
    end_seq INTEGER NOT NULL, text TEXT NOT NULL, method TEXT NOT NULL,
    level INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS pins (id INTEGER PRIMARY KEY, text TEXT NOT NULL, created TEXT NOT NULL);
"""
_SELECT = "SELECT seq, role, text, ts, metadata, segment, drift, shift FROM turns"


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation, as stored.

    Args:
        id: The turn's id in its session (``Hit.doc_id`` of its recall hits).
        seq: Its position, from 0.
        role: Who spoke ("user", "assistant", a name...).
        text: What was said.
        timestamp: When (UTC).
        metadata: What the caller passed to ``add``.
        segment: The topic segment it belongs to (a new one starts at each topic shift).
        drift: Its topic-shift score against the turns before it (None for the first).
        shift: Whether it started a new topic.
    """

    id: str
    seq: int
    role: str
    text: str
    timestamp: datetime
    metadata: Mapping[str, Any]
    segment: int = 0
    drift: float | None = None
    shift: bool = False

    def to_hit(self, session_id: str, score: float = 0.0) -> Hit:
        """The turn as a :class:`Hit` (metadata plus ``role``, ``session_id`` and ``seq``)."""
        meta = {**self.metadata, "role": self.role, "session_id": session_id, "seq": self.seq}
        return Hit(self.id, self.id, self.text, score, meta, self.timestamp)


@dataclass(frozen=True)
class Summary:
    """A stored summary of the turns from ``start`` to ``end``, as the story so far shows it.

    Args:
        start: The position of its first turn.
        end: The position of its last turn.
        text: The summary.
        level: 0 for a block of turns, 1 for the story so far the oldest blocks were folded into.
        began: When its first turn was said.
        ended: When its last turn was said.
    """

    start: int
    end: int
    text: str
    level: int
    began: datetime
    ended: datetime


def turn_id(seq: int) -> str:
    """The id of the turn at ``seq``."""
    return f"t{seq:06d}"


def speaker(role: str, metadata: Mapping[str, Any]) -> str:
    """Who said a turn: its ``speaker`` (or ``name``) metadata, else its role."""
    for key in ("speaker", "name"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return role


def turn_context(metadata: Mapping[str, Any]) -> str:
    """The situating context a turn is embedded with: its speaker (a turn's "I" and "you"
    need one). The turn it answers was tried too (LoCoMo, tune half of the questions): it
    helped BM25 but hurt dense and multi-hop recall; neighbours are used at query time
    instead (``[memory] neighbour_weight``)."""
    who = speaker(str(metadata.get("role", "")), metadata)
    return f"{who}:" if who else ""


class TurnContext:
    """Situates a turn for embedding: who said it."""

    name = "turn-v1"

    def generate(self, requests: Sequence[ContextRequest]) -> list[list[str]]:
        """The speaker for every passage of every turn."""
        return [[turn_context(req.document.metadata)] * len(req.chunks) for req in requests]


def check_turn(item: Any) -> tuple[str, str, datetime, dict[str, Any]]:
    """A turn as given to ``Conversation.add_many``, checked.

    Args:
        item: ``(role, text[, timestamp[, metadata]])`` or a dict with those keys.

    Returns:
        The role (stripped), the text, the time (UTC; now if none was given) and the metadata.

    Raises:
        InputError: On an empty role or text, a wrong type, text over
            :data:`MAX_TURN_CHARS` characters, an unknown field, a timestamp that cannot be
            read or lies outside the years 1 to 9999 once in UTC, a string that does not
            encode as UTF-8 (a lone surrogate), a NUL in the role, or metadata
            that is not a JSON object as documents take it (:func:`~..validate.check_metadata`)
            or uses a :data:`RESERVED_KEYS` key.
    """
    if isinstance(item, Mapping):
        unknown = set(item) - {"role", "text", "timestamp", "metadata"}
        if unknown:
            raise InputError(f"unknown turn fields {sorted(unknown)}")
        fields = (
            item.get("role"),
            item.get("text"),
            item.get("timestamp"),
            item.get("metadata"),
        )
    elif isinstance(item, tuple | list) and 2 <= len(item) <= 4:
        fields = (*item, None, None)[:4]  # type: ignore[assignment]
    else:
        raise InputError(
            f"a turn is (role, text[, timestamp[, metadata]]) or a dict, got {item!r:.80}"
        )
    role, text, ts, meta = fields
    if not isinstance(role, str) or not role.strip():
        raise InputError(f"role must be a non-empty str, got {role!r:.80}")
    check_id(role, "role")
    if not isinstance(text, str):
        raise InputError(f"turn text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise InputError("turn text is empty")
    if len(text) > MAX_TURN_CHARS:
        raise InputError(f"turn text is {len(text)} characters; the limit is {MAX_TURN_CHARS}")
    check_text(text, "turn text")
    meta = check_metadata({} if meta is None else meta, "turn metadata")
    clash = RESERVED_KEYS & set(meta)
    if clash:
        raise InputError(f"turn metadata keys {sorted(clash)} are reserved; rename them")
    try:
        json.dumps(meta)  # the log keeps plain JSON: a datetime value is refused here
    except (TypeError, ValueError) as exc:
        raise InputError(f"turn metadata is not JSON-serialisable: {exc}") from None
    try:
        when = ensure_utc(ts) if ts is not None else utcnow()
    except InputError as exc:
        raise InputError(f"bad turn timestamp: {exc}") from None
    assert when is not None
    return role.strip(), text, when, dict(meta)


class TurnStore(Protocol):
    """A session's log as the memory code uses it: turns, summaries and pins.

    The caller serialises access (a session holds its own lock). A write outside
    :meth:`transaction` is committed before it returns.
    """

    def __len__(self) -> int: ...

    def turns(self, limit: int | None = None) -> list[Turn]:
        """The turns in order (the last ``limit`` of them, if given)."""
        ...

    def turns_until(self, cutoff: datetime, k: int) -> list[Turn]:
        """The last ``k`` turns at or before ``cutoff``, in order."""
        ...

    def span(self, start: int, end: int) -> list[Turn]:
        """The turns from position ``start`` to ``end`` (both included), in order."""
        ...

    def by_seq(self, seqs: Iterable[int]) -> dict[int, Turn]:
        """The turns at ``seqs`` that exist, by position."""
        ...

    def unindexed(self) -> list[Turn]:
        """The turns the session's index does not have yet, in order."""
        ...

    def has_unindexed(self) -> bool:
        """Whether some turn is not indexed yet."""
        ...

    def last_seq(self) -> int:
        """The position of the last turn (-1 when there is none)."""
        ...

    def last_shift(self) -> int | None:
        """The position of the last turn that started a new topic, if any."""
        ...

    def segment_start(self, segment: int) -> int | None:
        """The position of ``segment``'s first turn (None if it has none)."""
        ...

    def segment_spans(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """``(segment, first, last)`` of each segment's turns from ``start`` to ``end``."""
        ...

    def open_segment_tail(self, n: int) -> list[Turn]:
        """The last ``n`` indexed turns of the newest segment, in order."""
        ...

    def counts(self) -> tuple[int, int, int, int]:
        """Turns, segments, topic shifts and summaries stored."""
        ...

    def append(self, items: Sequence[tuple[str, str, datetime, dict[str, Any]]]) -> list[Turn]:
        """Log checked turns after the last one, in the last segment, not yet indexed."""
        ...

    def settle(self, turns: Sequence[Turn]) -> None:
        """Record where indexed turns were placed: their segment, drift score and shift."""
        ...

    def mark_indexed(self, turns: Sequence[Turn]) -> None:
        """Record that the index now has ``turns``."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """One transaction: the writes inside it are committed together, or none if it raises."""
        ...

    def summarised_to(self) -> int:
        """The position of the last turn a summary covers (-1 when none does)."""
        ...

    def add_summary(self, segment: int, start: int, end: int, text: str, method: str) -> None:
        """Store the summary of a block of turns of ``segment`` (``method`` wrote it)."""
        ...

    def story_so_far(self) -> tuple[int, str] | None:
        """The newest folded story so far: the position of its last turn, and its text."""
        ...

    def block_summaries(self, after: int) -> list[tuple[int, str]]:
        """``(last turn, text)`` of the block summaries starting after ``after``, in order."""
        ...

    def fold_summaries(self, end: int, text: str, method: str) -> None:
        """Replace the story so far with ``text``, which covers the turns up to ``end``."""
        ...

    def summaries_version(self) -> int:
        """A number that grows whenever a summary is stored (0 before the first)."""
        ...

    def shown_summaries(self) -> list[Summary]:
        """The story so far as shown: the folded summary, then the later blocks in order."""
        ...

    def pin(self, text: str) -> int:
        """Store a pinned note; returns its id."""
        ...

    def unpin(self, pin_id: int) -> bool:
        """Remove a pinned note; False if there was none with that id."""
        ...

    def pins(self) -> list[str]:
        """The pinned notes, oldest first."""
        ...

    def close(self) -> None:
        """Release the log."""
        ...


class TurnLog:
    """A session's ``memory.sqlite``: its turns, summaries and pins. Plain SQLite.

    The :class:`TurnStore` of the embedded storage engine; open one with :meth:`open`. The
    caller serialises access (a session holds its own lock).

    Args:
        db: The open connection.

    Attributes:
        db: The SQLite connection (this class's own; the memory code uses the
            :class:`TurnStore` methods).
    """

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self._depth = 0  # open transaction() blocks: a write inside one must not commit it

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """A write committed when it ends, unless it is inside :meth:`transaction` (``with
        self.db`` would commit the caller's open transaction half way)."""
        if self._depth:
            yield
            return
        with self.db:
            yield

    @classmethod
    def open(cls, folder: Path, read_only: bool = False) -> TurnLog | None:
        """Open (or, when writable, create) the log in ``folder``.

        Args:
            folder: The session's folder.
            read_only: Open without writing (then never create anything).

        Returns:
            The log; None when ``read_only`` and there is none yet.
        """
        path = folder / "memory.sqlite"
        if read_only:
            if not path.is_file():
                return None
            # (on a read-only filesystem too, where mode=ro alone cannot open a log in WAL mode)
            return cls(connect_read_only(path))
        folder.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, check_same_thread=False, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(SCHEMA)
        columns = {r[1] for r in db.execute("PRAGMA table_info(summaries)")}
        if "level" not in columns:  # a log written before summaries of summaries
            db.execute("ALTER TABLE summaries ADD COLUMN level INTEGER NOT NULL DEFAULT 0")
        db.commit()
        return cls(db)

    def __len__(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM turns").fetchone()[0])

    # -- reading ------------------------------------------------------------------------------
    def turns(self, limit: int | None = None) -> list[Turn]:
        """The turns in order (the last ``limit`` of them, if given)."""
        if limit is None:
            rows = self.db.execute(f"{_SELECT} ORDER BY seq").fetchall()
        else:
            rows = self.db.execute(f"{_SELECT} ORDER BY seq DESC LIMIT ?", (limit,)).fetchall()
            rows = rows[::-1]
        return [_turn(r) for r in rows]

    def turns_until(self, cutoff: datetime, k: int) -> list[Turn]:
        """The last ``k`` turns at or before ``cutoff``, in order."""
        rows = self.db.execute(f"{_SELECT} ORDER BY seq DESC").fetchall()
        return [t for t in map(_turn, rows) if t.timestamp <= cutoff][:k][::-1]

    def span(self, start: int, end: int) -> list[Turn]:
        """The turns from position ``start`` to ``end`` (both included), in order."""
        rows = self.db.execute(
            f"{_SELECT} WHERE seq BETWEEN ? AND ? ORDER BY seq", (start, end)
        ).fetchall()
        return [_turn(r) for r in rows]

    def by_seq(self, seqs: Iterable[int]) -> dict[int, Turn]:
        """The turns at ``seqs`` that exist, by position."""
        wanted = sorted(set(seqs))
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        rows = self.db.execute(f"{_SELECT} WHERE seq IN ({marks})", wanted).fetchall()
        return {int(r[0]): _turn(r) for r in rows}

    def unindexed(self) -> list[Turn]:
        """The turns the session's index does not have yet (an interrupted add), in order."""
        rows = self.db.execute(f"{_SELECT} WHERE indexed=0 ORDER BY seq").fetchall()
        return [_turn(r) for r in rows]

    def has_unindexed(self) -> bool:
        """Whether some turn is not indexed yet."""
        return self.db.execute("SELECT 1 FROM turns WHERE indexed=0 LIMIT 1").fetchone() is not None

    def last_seq(self) -> int:
        """The position of the last turn (-1 when there is none)."""
        return int(self.db.execute("SELECT COALESCE(MAX(seq), -1) FROM turns").fetchone()[0])

    def last_shift(self) -> int | None:
        """The position of the last turn that started a new topic, if any."""
        last = self.db.execute("SELECT MAX(seq) FROM turns WHERE shift=1").fetchone()[0]
        return None if last is None else int(last)

    def segment_start(self, segment: int) -> int | None:
        """The position of ``segment``'s first turn (None if it has none)."""
        row = self.db.execute("SELECT MIN(seq) FROM turns WHERE segment=?", (segment,)).fetchone()
        return None if row[0] is None else int(row[0])

    def segment_spans(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """``(segment, first, last)`` of each segment's turns from ``start`` to ``end``."""
        rows = self.db.execute(
            "SELECT segment, MIN(seq), MAX(seq) FROM turns WHERE seq BETWEEN ? AND ? "
            "GROUP BY segment ORDER BY segment",
            (start, end),
        ).fetchall()
        return [(int(seg), int(first), int(last)) for seg, first, last in rows]

    def open_segment_tail(self, n: int) -> list[Turn]:
        """The last ``n`` indexed turns of the newest segment, in order."""
        rows = self.db.execute(
            f"{_SELECT} WHERE indexed=1 AND segment=(SELECT MAX(segment) FROM turns) "
            "ORDER BY seq DESC LIMIT ?",
            (n,),
        ).fetchall()[::-1]
        return [_turn(r) for r in rows]

    def counts(self) -> tuple[int, int, int, int]:
        """Turns, segments, topic shifts and summaries stored."""
        turns, segments, shifts = self.db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT segment), COALESCE(SUM(shift), 0) FROM turns"
        ).fetchone()
        summaries = self.db.execute("SELECT COUNT(*) FROM summaries").fetchone()[0]
        return int(turns), int(segments), int(shifts), int(summaries)

    # -- writing ------------------------------------------------------------------------------
    def append(self, items: Sequence[tuple[str, str, datetime, dict[str, Any]]]) -> list[Turn]:
        """Log checked turns (see :func:`check_turn`) after the last one, in the last segment,
        not yet indexed; committed before this returns.

        Returns:
            The logged turns (segment as logged, no drift score yet).
        """
        start = int(self.db.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM turns").fetchone()[0])
        seg_row = self.db.execute("SELECT MAX(segment) FROM turns").fetchone()[0]
        segment = 0 if seg_row is None else int(seg_row)
        stored = [
            Turn(turn_id(start + i), start + i, role, text, ts, meta, segment)
            for i, (role, text, ts, meta) in enumerate(items)
        ]
        with self._write():
            self.db.executemany(
                "INSERT INTO turns (seq, role, text, ts, metadata, segment) VALUES (?,?,?,?,?,?)",
                [
                    (t.seq, t.role, t.text, to_iso(t.timestamp), json.dumps(t.metadata), segment)
                    for t in stored
                ],
            )
        return stored

    def settle(self, turns: Sequence[Turn]) -> None:
        """Record where indexed turns were placed: their segment, drift score and shift."""
        with self._write():
            self.db.executemany(
                "UPDATE turns SET segment=?, drift=?, shift=?, indexed=1 WHERE seq=?",
                [(t.segment, t.drift, int(t.shift), t.seq) for t in turns],
            )

    def mark_indexed(self, turns: Sequence[Turn]) -> None:
        """Record that the index now has ``turns``."""
        with self._write():
            self.db.executemany("UPDATE turns SET indexed=1 WHERE seq=?", [(t.seq,) for t in turns])

    # -- summaries ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction: committed when the block ends, rolled back if it raises (a nested
        one joins the outer)."""
        if self._depth:
            yield
            return
        self._depth += 1
        try:
            with self.db:
                yield
        finally:
            self._depth -= 1

    def summarised_to(self) -> int:
        """The position of the last turn a summary covers (-1 when none does)."""
        row = self.db.execute("SELECT MAX(end_seq) FROM summaries").fetchone()[0]
        return -1 if row is None else int(row)

    def add_summary(self, segment: int, start: int, end: int, text: str, method: str) -> None:
        """Store the summary of a block of turns of ``segment`` (``method`` wrote it); called
        inside :meth:`transaction`."""
        self.db.execute(
            "INSERT INTO summaries (segment, start_seq, end_seq, text, method) VALUES (?,?,?,?,?)",
            (segment, start, end, text, method),
        )

    def story_so_far(self) -> tuple[int, str] | None:
        """The newest folded story so far: the position of its last turn, and its text."""
        row = self.db.execute(
            "SELECT end_seq, text FROM summaries WHERE level=1 ORDER BY id DESC LIMIT 1"
        ).fetchone()
        return None if row is None else (int(row[0]), row[1])

    def block_summaries(self, after: int) -> list[tuple[int, str]]:
        """``(last turn, text)`` of the block summaries starting after ``after``, in order."""
        rows = self.db.execute(
            "SELECT end_seq, text FROM summaries WHERE level=0 AND start_seq > ? ORDER BY start_seq",
            (after,),
        ).fetchall()
        return [(int(end), text) for end, text in rows]

    def fold_summaries(self, end: int, text: str, method: str) -> None:
        """Replace the story so far with ``text``, which covers the turns up to ``end``; called
        inside :meth:`transaction`."""
        # inserted before the old one is deleted, so it takes a higher id than every row
        # (a rowid freed by the delete would be reused: the summaries' version would not move)
        cur = self.db.execute(
            "INSERT INTO summaries (segment, start_seq, end_seq, text, method, level) "
            "VALUES (-1, 0, ?, ?, ?, 1)",
            (end, text, method),
        )
        self.db.execute("DELETE FROM summaries WHERE level=1 AND id < ?", (cur.lastrowid,))

    def summaries_version(self) -> int:
        """The id of the newest summary (0 before the first): it grows with every one stored."""
        return int(self.db.execute("SELECT COALESCE(MAX(id), 0) FROM summaries").fetchone()[0])

    def shown_summaries(self) -> list[Summary]:
        """The story so far as shown: the folded summary, then the later blocks in order."""
        rows = self.db.execute(
            "SELECT s.start_seq, s.end_seq, s.text, s.level, a.ts, b.ts FROM summaries s "
            "JOIN turns a ON a.seq = s.start_seq JOIN turns b ON b.seq = s.end_seq "
            "WHERE s.level = 1 OR s.start_seq > (SELECT COALESCE(MAX(end_seq), -1) "
            "FROM summaries WHERE level = 1) ORDER BY s.level DESC, s.start_seq"
        ).fetchall()
        return [
            Summary(int(start), int(end), text, int(level), _time(t0), _time(t1))
            for start, end, text, level, t0, t1 in rows
        ]

    # -- pins ---------------------------------------------------------------------------------
    def pin(self, text: str) -> int:
        """Store a pinned note; returns its id."""
        with self._write():
            cur = self.db.execute(
                "INSERT INTO pins (text, created) VALUES (?, ?)", (text, to_iso(utcnow()))
            )
        return int(cur.lastrowid or 0)

    def unpin(self, pin_id: int) -> bool:
        """Remove a pinned note; False if there was none with that id."""
        with self._write():
            return self.db.execute("DELETE FROM pins WHERE id=?", (pin_id,)).rowcount > 0

    def pins(self) -> list[str]:
        """The pinned notes, oldest first."""
        return [r[0] for r in self.db.execute("SELECT text FROM pins ORDER BY id")]

    def close(self) -> None:
        """Close the connection."""
        self.db.close()


def _turn(row: Sequence[Any]) -> Turn:
    seq, role, text, ts, meta, segment, drift, shift = row
    return Turn(
        turn_id(int(seq)),
        int(seq),
        role,
        text,
        _time(ts),
        json.loads(meta),
        int(segment),
        None if drift is None else float(drift),
        bool(shift),
    )


def _time(ts: str) -> datetime:
    when = from_iso(ts)
    assert when is not None
    return when
