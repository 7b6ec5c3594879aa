"""Persistent per-session conversation memory: ``Pensive.conversation(session_id)``.

A session is a small Pensive store of its own (in its own folder: physical isolation), holding
one document per turn, so turns are found by the same hybrid machinery as documents: dense +
BM25 fusion, the entity graph, temporal resolution (a later "I moved to Lisbon" supersedes an
earlier "I live in Porto"). Each turn is embedded with its speaker as situating context.

Beside the index, ``memory.sqlite`` keeps the log: every turn in order, the segments that topic
shifts cut the conversation into, their summaries ("the story so far") and pinned notes. A turn
is written to the log first and indexed second; a turn the index lacks (a crash in between) is
indexed when the session next opens, so nothing acknowledged is lost.

What ``context()`` hands a model, within a token budget: pinned notes and the story so far (a
stable prefix, byte-identical from turn to turn for provider prompt caching), the older turns
that bear on the question (recalled), passages from the main store if asked for, and the most
recent turns verbatim.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import shutil
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..context.base import ContextRequest
from ..embedders.base import QueryCache
from ..errors import InputError, PensiveError
from ..timeutil import ensure_utc, from_iso, to_iso, utcnow
from ..types import Document, Hit
from .sessions import SessionInfo

if TYPE_CHECKING:
    from ..engine import Pensive
    from .drift import DriftDetector, DriftSignal
    from .hypervector import HypervectorSelector
    from .prompt import BuiltPrompt, PromptItem

__all__ = ["Conversation", "Turn", "TurnContext"]

log = logging.getLogger(__name__)

Method = Literal["hybrid", "hypervector", "recent"]
RESERVED_KEYS = frozenset({"role", "session_id", "seq", "speaker_label"})
_MAX_TURN_CHARS = 1_000_000
_MAX_BLOCKS = 8  # block summaries shown before the oldest are folded into the story so far
_KEEP_BLOCKS = 4  # the newest blocks kept apart when folding
_SUMMARY_BLOCK = 2  # a summary part is written once this many x recent_turns have aged out
# words that point back at the previous exchange; a follow-up has one and hardly anything else
_ANAPHORS = frozenset(
    "he she it they them him her his hers its their theirs that this those these there then "
    "one ones".split()
)
_FILLER = frozenset(
    "and but so also what about how why when where who which really else more other same "
    "is are was were do does did can could would will the a an of to for with on in at".split()
)
_WORD_RE = re.compile(r"[A-Za-z']+")
_SCHEMA = """
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


def turn_id(seq: int) -> str:
    """The id of the turn at ``seq``."""
    return f"t{seq:06d}"


def turn_context(metadata: Mapping[str, Any]) -> str:
    """The situating context a turn is embedded with: its speaker (a turn's "I" and "you"
    need one). The turn it answers was tried too (LoCoMo, tune half of the questions): it
    helped BM25 but hurt dense and multi-hop recall; neighbours are used at query time
    instead (``[memory] neighbour_weight``)."""
    who = _speaker(str(metadata.get("role", "")), metadata)
    return f"{who}:" if who else ""


def _speaker(role: str, metadata: Mapping[str, Any]) -> str:
    for key in ("speaker", "name"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return role


class TurnContext:
    """Situates a turn for embedding: who said it."""

    name = "turn-v1"

    def generate(self, requests: Sequence[ContextRequest]) -> list[list[str]]:
        """The speaker for every passage of every turn."""
        return [[turn_context(req.document.metadata)] * len(req.chunks) for req in requests]


@dataclass
class _Recall:
    query: str
    hits: list[Hit]
    after_seq: int  # the last turn when it was made


class Conversation:
    """One session's memory. Get it from :meth:`Pensive.conversation`, not directly.

    Turns come back as :class:`Hit` objects: ``hit.doc_id`` is the turn id, ``hit.metadata``
    what the caller passed to :meth:`add` plus ``role``, ``session_id`` and ``seq``, and
    ``hit.timestamp`` the turn's time.

    Example:
        >>> chat = p.conversation("session-42", user="ana")           # doctest: +SKIP
        >>> chat.add("user", "I moved to Lisbon last week")
        >>> chat.recall("where do I live?", k=3)[0].text
        'I moved to Lisbon last week'
        >>> prompt = chat.context("where do I live?", token_budget=2000)
    """

    def __init__(self, owner: Pensive, info: SessionInfo) -> None:
        self._owner = owner
        self._info = info
        self.session_id = info.session_id
        self.namespace = info.namespace
        self.read_only = owner.read_only
        self._lock = threading.RLock()
        self._closed = False
        self._suspended = False
        self._store: Pensive | None = None
        self._window_store: Pensive | None = None
        self._db: sqlite3.Connection | None = None
        self._hv: HypervectorSelector | None = None
        self._drift: DriftDetector | None = None
        self._last: _Recall | None = None
        self._last_shift: int | None = None
        self._summaries_cache: tuple[int, list[str]] | None = None
        self.counts = {"followups_reused": 0, "recalls": 0}  # this process's
        self._open_log()

    # -- properties -----------------------------------------------------------------------
    @property
    def user(self) -> str | None:
        """The user this session belongs to (for cross-session recall), if any."""
        return self._info.user

    @property
    def folder(self) -> Path:
        """The session's folder (its log and its index)."""
        return self._info.folder

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (or the owning store closed)."""
        return self._closed

    def __len__(self) -> int:
        with self._lock:
            db = self._log()
            return 0 if db is None else int(db.execute("SELECT COUNT(*) FROM turns").fetchone()[0])

    def __repr__(self) -> str:
        return f"Conversation({self.session_id!r}, namespace={self.namespace!r})"

    # -- opening ----------------------------------------------------------------------------
    def _open_log(self) -> None:
        path = self.folder / "memory.sqlite"
        if self.read_only:
            if path.is_file():
                self._db = sqlite3.connect(
                    f"file:{path}?mode=ro", uri=True, check_same_thread=False, timeout=30
                )
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(summaries)")}
        if "level" not in columns:  # a log written before summaries of summaries
            self._db.execute("ALTER TABLE summaries ADD COLUMN level INTEGER NOT NULL DEFAULT 0")
        self._db.commit()
        last = self._db.execute("SELECT MAX(seq) FROM turns WHERE shift=1").fetchone()[0]
        self._last_shift = None if last is None else int(last)
        if self._db.execute("SELECT 1 FROM turns WHERE indexed=0 LIMIT 1").fetchone():
            self._catch_up()

    def _log(self) -> sqlite3.Connection | None:
        if self._closed:
            raise PensiveError(f"conversation {self.session_id!r} is closed")
        if self._db is None and (
            self._suspended or (self.read_only and (self.folder / "memory.sqlite").is_file())
        ):
            woke = self._suspended
            self._suspended = False
            self._open_log()  # suspended, or written by the writer since this reader looked
            if woke:
                self._owner._suspend_idle(self)
        return self._db

    def suspend(self) -> bool:
        """Release the session's files until it is next used (the owning store does this to
        the least recently used sessions past ``[memory] max_open_sessions``).

        Returns:
            False if another thread is using the session (it is left open).
        """
        if not self._lock.acquire(blocking=False):  # busy: never wait (no lock-order deadlock)
            return False
        try:
            if not self._closed and self._db is not None:
                self._release()
                self._suspended = True
            return True
        finally:
            self._lock.release()

    @property
    def suspended(self) -> bool:
        """Whether the session's files are released until its next use."""
        return self._suspended

    def _index(self) -> Pensive | None:
        """The session's store (opened on first use)."""
        if self._store is None:
            from ..engine import Pensive

            folder = self.folder / "index"
            if self.read_only and not (folder / "pensive.sqlite").is_file():
                return None
            self._store = Pensive(
                folder,
                session_config(self._owner.config),
                read_only=self.read_only,
                context_generator=TurnContext(),
            )
            self._store._share_embedder(_query_memo(self._owner))
        return self._store

    def _windows(self) -> Pensive | None:
        """The session's index of trailing windows (``[memory] window_turns`` turns each, the
        speakers named): a short turn is found by the exchange around it."""
        cfg = self._owner.config.memory
        if cfg.window_turns <= 1:
            return None
        if self._window_store is None:
            from ..engine import Pensive

            folder = self.folder / "windows"
            if self.read_only and not (folder / "pensive.sqlite").is_file():
                return None
            wcfg = session_config(self._owner.config)
            wcfg.update(
                graph={"enabled": False},
                temporal={"enabled": False},
                context={**wcfg["context"], "generator": "none"},
            )
            self._window_store = Pensive(folder, wcfg, read_only=self.read_only)
            self._window_store._share_embedder(_query_memo(self._owner))
            if not self.read_only:
                made = self._window_store.stats().get("documents", 0)
                if made < len(self):  # made before windows existed, or an interrupted add
                    self._index_windows(self.turns())
        return self._window_store

    def _index_windows(self, turns: Sequence[Turn]) -> None:
        store = self._windows()
        if store is None or not turns:
            return
        n = self._owner.config.memory.window_turns
        first = turns[0].seq
        known = {t.seq: t for t in turns}
        known.update(self._turn_rows(range(max(0, first - n + 1), first)))
        docs = []
        for t in turns:
            lines = [
                f"{_speaker(u.role, u.metadata)}: {u.text}"
                for s in range(max(0, t.seq - n + 1), t.seq + 1)
                if (u := known.get(s)) is not None
            ]
            docs.append(Document(f"w{t.seq:06d}", "\n".join(lines), {"seq": t.seq}, t.timestamp))
        store.ingest(docs)

    def _catch_up(self) -> None:
        """Index turns the log holds but the index lacks (an interrupted add)."""
        db = self._db
        assert db is not None
        rows = db.execute(f"{_SELECT} WHERE indexed=0 ORDER BY seq").fetchall()
        if not rows:
            return
        turns = [_turn(r) for r in rows]
        log.info(
            "session %r: indexing %d turns an interrupted add left", self.session_id, len(turns)
        )
        store = self._index()
        assert store is not None
        self._ingest(store, turns)
        db.executemany("UPDATE turns SET indexed=1 WHERE seq=?", [(t.seq,) for t in turns])
        db.commit()

    def _ingest(self, store: Pensive, turns: Sequence[Turn]) -> None:
        store.ingest([self._document(t) for t in turns])
        self._index_windows(turns)

    def _document(self, turn: Turn) -> Document:
        meta = {**turn.metadata, "role": turn.role, "session_id": self.session_id, "seq": turn.seq}
        return Document(turn.id, turn.text, meta, turn.timestamp)

    # -- adding -----------------------------------------------------------------------------
    def add(
        self,
        role: str,
        text: str,
        timestamp: datetime | str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Turn:
        """Remember one turn: it is logged, indexed, and checked for a topic shift.

        Args:
            role: Who spoke: "user", "assistant", "system", or a name.
            text: What was said.
            timestamp: When (any tz-aware datetime or ISO string; naive means UTC). Now if None.
            metadata: JSON-serialisable fields returned with the turn's hits. ``speaker`` (or
                ``name``) names the speaker for retrieval when ``role`` is generic.

        Returns:
            The stored turn (its segment and drift score included).

        Raises:
            InputError: On an empty role or text, a wrong type, text over 1,000,000
                characters, or metadata that is not a JSON-serialisable mapping or uses a
                reserved key (``role``, ``session_id``, ``seq``).
            PensiveError: If the store is open read-only or the conversation is closed.
        """
        return self.add_many([(role, text, timestamp, metadata)])[0]

    def add_many(self, turns: Iterable[Any]) -> list[Turn]:
        """Remember several turns at once (importing a transcript): one batched index update.

        Args:
            turns: ``(role, text)``, ``(role, text, timestamp)``, ``(role, text, timestamp,
                metadata)`` tuples or dicts with those keys, oldest first.

        Returns:
            The stored turns.

        Raises:
            InputError: As :meth:`add`, for any turn; then nothing is stored.
        """
        items = [self._check_turn(t) for t in turns]
        if not items:
            return []
        with self._lock:
            self._check_writable()
            db = self._log()
            assert db is not None
            start = int(db.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM turns").fetchone()[0])
            seg_row = db.execute("SELECT MAX(segment) FROM turns").fetchone()[0]
            segment = 0 if seg_row is None else int(seg_row)
            stored = [
                Turn(turn_id(start + i), start + i, role, text, ts, meta, segment)
                for i, (role, text, ts, meta) in enumerate(items)
            ]
            with db:  # logged first: an acknowledged turn is never lost
                db.executemany(
                    "INSERT INTO turns (seq, role, text, ts, metadata, segment) VALUES (?,?,?,?,?,?)",
                    [
                        (
                            t.seq,
                            t.role,
                            t.text,
                            to_iso(t.timestamp),
                            json.dumps(t.metadata),
                            segment,
                        )
                        for t in stored
                    ],
                )
            store = self._index()
            assert store is not None
            self._ingest(store, stored)
            vectors = self._drift_vectors(stored)
            out: list[Turn] = []
            for t, vec in zip(stored, vectors, strict=True):
                t = self._place(t, vec, segment)
                segment = t.segment
                out.append(t)
            with db:
                db.executemany(
                    "UPDATE turns SET segment=?, drift=?, shift=?, indexed=1 WHERE seq=?",
                    [(t.segment, t.drift, int(t.shift), t.seq) for t in out],
                )
            if self._hv is not None:
                self._hv.add([t.text for t in out], [t.id for t in out])
            self._summarise_aged(db)
            return out

    def _check_turn(self, item: Any) -> tuple[str, str, datetime, dict[str, Any]]:
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
        if not isinstance(text, str):
            raise InputError(f"turn text must be a str, got {type(text).__name__}")
        if not text.strip():
            raise InputError("turn text is empty")
        if len(text) > _MAX_TURN_CHARS:
            raise InputError(f"turn text is {len(text)} characters; the limit is {_MAX_TURN_CHARS}")
        if meta is None:
            meta = {}
        if not isinstance(meta, Mapping):
            raise InputError(f"turn metadata must be a mapping, got {type(meta).__name__}")
        clash = RESERVED_KEYS & set(meta)
        if clash:
            raise InputError(f"turn metadata keys {sorted(clash)} are reserved; rename them")
        try:
            json.dumps(dict(meta))
        except (TypeError, ValueError) as exc:
            raise InputError(f"turn metadata is not JSON-serialisable: {exc}") from None
        try:
            when = ensure_utc(ts) if ts is not None else utcnow()
        except (TypeError, ValueError) as exc:
            raise InputError(f"bad turn timestamp {ts!r}: {exc}") from None
        assert when is not None
        return role.strip(), text, when, dict(meta)

    def _drift_vectors(self, turns: Sequence[Turn]) -> list[np.ndarray | None]:
        if not self._owner.config.memory.drift:
            return [None] * len(turns)
        # the raw turn, as the detector's thresholds were tuned (the indexed text carries the
        # previous turn too, which would make every turn look like its neighbour)
        return list(self._owner._get_embedder().embed([t.text for t in turns]))

    def _detector(self) -> DriftDetector:
        if self._drift is None:
            from .drift import DriftDetector

            cfg = self._owner.config.memory
            self._drift = DriftDetector(
                window=cfg.drift_window,
                threshold=cfg.drift_threshold,
                novelty_weight=cfg.drift_novelty_weight,
            )
            db = self._db
            if db is not None:  # reopened: prime the window with the open segment's last turns
                rows = db.execute(
                    f"{_SELECT} WHERE indexed=1 AND segment=(SELECT MAX(segment) FROM turns) "
                    "ORDER BY seq DESC LIMIT ?",
                    (cfg.drift_window,),
                ).fetchall()[::-1]
                if rows:
                    vectors = self._owner._get_embedder().embed([r[2] for r in rows])
                    for r, vec in zip(rows, vectors, strict=True):
                        self._drift.update(r[2], vec)
        return self._drift

    def _place(self, turn: Turn, vector: np.ndarray | None, segment: int) -> Turn:
        """Score the turn for a topic shift; a shift (or a full segment) starts a new segment."""
        cfg = self._owner.config.memory
        signal: DriftSignal | None = None
        if cfg.drift:
            signal = self._detector().update(turn.text, vector)
            if turn.seq == 0:
                signal = None
        shift = bool(signal is not None and signal.shift)
        db = self._db
        assert db is not None
        seg_start = db.execute("SELECT MIN(seq) FROM turns WHERE segment=?", (segment,)).fetchone()[
            0
        ]
        full = seg_start is not None and turn.seq - int(seg_start) >= cfg.segment_max_turns
        if (shift or full) and turn.seq > 0:
            self._close_segment(db, segment, turn.seq - 1)
            segment += 1
        if shift:
            self._last_shift = turn.seq
        return dataclasses.replace(
            turn,
            segment=segment,
            drift=None if signal is None else float(signal.score),
            shift=shift,
        )

    # -- summaries ----------------------------------------------------------------------------
    def _summary_method(self) -> str:
        choice = self._owner.config.memory.summary
        if choice == "auto":
            return "llm" if self._owner._llm is not None else "extractive"
        return choice

    def _compress(self, parts: Sequence[Any], max_tokens: int) -> tuple[str, str]:
        """A summary of ``parts`` (speaker, text) and the method that made it."""
        from .summary import extractive_summary, llm_summary

        count = self._counter()
        if self._summary_method() == "llm" and self._owner._llm is not None:
            from ..context.llm import as_completion

            return llm_summary(parts, max_tokens, count, as_completion(self._owner._llm)), "llm"
        return extractive_summary(parts, max_tokens, count), "extractive"

    def _summarise(self, db: sqlite3.Connection, segment: int, start: int, end: int) -> None:
        if self._summary_method() == "none" or end < start:
            return
        from .summary import SummaryTurn

        rows = db.execute(
            f"{_SELECT} WHERE seq BETWEEN ? AND ? ORDER BY seq", (start, end)
        ).fetchall()
        turns = [_turn(r) for r in rows]
        parts = [SummaryTurn(_speaker(t.role, t.metadata), t.text) for t in turns]
        text, method = self._compress(parts, self._owner.config.memory.summary_tokens)
        if text:
            db.execute(
                "INSERT INTO summaries (segment, start_seq, end_seq, text, method) VALUES (?,?,?,?,?)",
                (segment, start, end, text, method),
            )
            self._condense(db)
        self._summaries_cache = None

    def _condense(self, db: sqlite3.Connection) -> None:
        """Past ``_MAX_BLOCKS`` block summaries, the oldest are folded (with the previous story
        so far) into one story-so-far summary: the story stays short however long the talk."""
        from .summary import SummaryTurn

        top = db.execute(
            "SELECT end_seq, text FROM summaries WHERE level=1 ORDER BY id DESC LIMIT 1"
        ).fetchone()
        since = -1 if top is None else int(top[0])
        blocks = db.execute(
            "SELECT end_seq, text FROM summaries WHERE level=0 AND start_seq > ? ORDER BY start_seq",
            (since,),
        ).fetchall()
        if len(blocks) <= _MAX_BLOCKS:
            return
        old = blocks[: len(blocks) - _KEEP_BLOCKS]
        parts = []
        for text in ([top[1]] if top else []) + [b[1] for b in old]:
            for line in text.splitlines():
                who, sep, said = line.partition(": ")
                if line.strip():
                    parts.append(SummaryTurn(who, said) if sep else SummaryTurn("", line))
        text, method = self._compress(parts, 2 * self._owner.config.memory.summary_tokens)
        if text:
            db.execute("DELETE FROM summaries WHERE level=1")
            db.execute(
                "INSERT INTO summaries (segment, start_seq, end_seq, text, method, level) "
                "VALUES (-1, 0, ?, ?, ?, 1)",
                (int(old[-1][0]), text, method),
            )

    def _summarised_to(self, db: sqlite3.Connection) -> int:
        row = db.execute("SELECT MAX(end_seq) FROM summaries").fetchone()[0]
        return -1 if row is None else int(row)

    def _close_segment(self, db: sqlite3.Connection, segment: int, end: int) -> None:
        with db:
            self._summarise(db, segment, self._summarised_to(db) + 1, end)

    def _summarise_aged(self, db: sqlite3.Connection) -> None:
        """Summarise the open segment's turns that have aged out of the verbatim window, in
        blocks, so the story so far changes only once per block (a stable prompt prefix)."""
        cfg = self._owner.config.memory
        block = max(2, _SUMMARY_BLOCK * max(cfg.recent_turns, 1))
        last = int(db.execute("SELECT COALESCE(MAX(seq), -1) FROM turns").fetchone()[0])
        done = self._summarised_to(db)
        aged_end = last - cfg.recent_turns  # turns up to here are no longer shown verbatim
        if aged_end - done < block:
            return
        with db:
            rows = db.execute(
                "SELECT segment, MIN(seq), MAX(seq) FROM turns WHERE seq BETWEEN ? AND ? "
                "GROUP BY segment ORDER BY segment",
                (done + 1, aged_end),
            ).fetchall()
            for segment, start, end in rows:
                self._summarise(db, int(segment), int(start), int(end))

    def summaries(self) -> list[str]:
        """The story so far: one summary per block of older turns, oldest first, each headed
        by its turn range and dates."""
        with self._lock:
            db = self._log()
            if db is None:
                return []
            version = int(db.execute("SELECT COALESCE(MAX(id), 0) FROM summaries").fetchone()[0])
            if self._summaries_cache is not None and self._summaries_cache[0] == version:
                return list(self._summaries_cache[1])
            rows = db.execute(
                "SELECT s.start_seq, s.end_seq, s.text, a.ts, b.ts, s.level FROM summaries s "
                "JOIN turns a ON a.seq = s.start_seq JOIN turns b ON b.seq = s.end_seq "
                "WHERE s.level = 1 OR s.start_seq > (SELECT COALESCE(MAX(end_seq), -1) "
                "FROM summaries WHERE level = 1) ORDER BY s.level DESC, s.start_seq"
            ).fetchall()
            out = []
            for start, end, text, t0, t1, level in rows:
                d0, d1 = (t0 or "")[:10], (t1 or "")[:10]
                when = d0 if d0 == d1 else f"{d0} to {d1}"
                head = "story so far, turns" if level else "turns"
                out.append(f"[{head} {start}-{end}, {when}]\n{text}")
            self._summaries_cache = (version, out)
            return list(out)

    # -- pins ---------------------------------------------------------------------------------
    def pin(self, text: str) -> int:
        """Pin a note (an instruction, a fact about the user): every context() carries it.

        Returns:
            The pin's id, for :meth:`unpin`.
        """
        if not isinstance(text, str) or not text.strip():
            raise InputError("a pin must be a non-empty str")
        with self._lock:
            self._check_writable()
            db = self._log()
            assert db is not None
            with db:
                cur = db.execute(
                    "INSERT INTO pins (text, created) VALUES (?, ?)", (text, to_iso(utcnow()))
                )
            return int(cur.lastrowid or 0)

    def unpin(self, pin_id: int) -> bool:
        """Remove a pin; False if there was none with that id."""
        with self._lock:
            self._check_writable()
            db = self._log()
            assert db is not None
            with db:
                return db.execute("DELETE FROM pins WHERE id=?", (pin_id,)).rowcount > 0

    def pins(self) -> list[str]:
        """The pinned notes, oldest first."""
        with self._lock:
            db = self._log()
            return (
                []
                if db is None
                else [r[0] for r in db.execute("SELECT text FROM pins ORDER BY id")]
            )

    # -- reading ------------------------------------------------------------------------------
    def history(self, limit: int | None = None) -> list[Hit]:
        """The turns in order (the last ``limit`` of them, if given), as hits with score 0."""
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise InputError(f"limit must be a non-negative int or None, got {limit!r}")
        return [t.to_hit(self.session_id) for t in self.turns(limit)]

    def turns(self, limit: int | None = None) -> list[Turn]:
        """The stored turns in order (the last ``limit`` of them, if given)."""
        with self._lock:
            db = self._log()
            if db is None:
                return []
            if limit is None:
                rows = db.execute(f"{_SELECT} ORDER BY seq").fetchall()
            else:
                rows = db.execute(f"{_SELECT} ORDER BY seq DESC LIMIT ?", (limit,)).fetchall()[::-1]
            return [_turn(r) for r in rows]

    def _turns_until(self, cutoff: datetime, k: int) -> list[Turn]:
        db = self._log()
        if db is None:
            return []
        rows = db.execute(f"{_SELECT} ORDER BY seq DESC").fetchall()
        return [t for t in map(_turn, rows) if t.timestamp <= cutoff][:k][::-1]

    def _turn_rows(self, seqs: Iterable[int]) -> dict[int, Turn]:
        db = self._log()
        wanted = sorted(set(seqs))
        if db is None or not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        rows = db.execute(f"{_SELECT} WHERE seq IN ({marks})", wanted).fetchall()
        return {int(r[0]): _turn(r) for r in rows}

    def is_followup(self, query: str) -> bool:
        """Whether ``query`` is a short follow-up leaning on the previous exchange: a few words,
        a pronoun pointing back ("and her?", "why did she do that?"), and at most one word
        of its own content (a new subject means a new search)."""
        words = [w.lower() for w in _WORD_RE.findall(query)]
        if not 0 < len(words) <= self._owner.config.memory.followup_max_words:
            return False
        if not any(w in _ANAPHORS for w in words):
            return False
        return sum(w not in _ANAPHORS and w not in _FILLER for w in words) <= 1

    def _adapted(self) -> bool:
        """Whether a recent topic shift has retrieval adapted (less recency, wider scope)."""
        if self._last_shift is None:
            return False
        last = len(self) - 1
        return last - self._last_shift < self._owner.config.memory.shift_turns

    def recall(
        self,
        query: str,
        k: int = 5,
        *,
        scope: Literal["session", "user"] | None = None,
        method: Method = "hybrid",
        as_of: datetime | None = None,
        reuse: bool | None = None,
    ) -> list[Hit]:
        """The turns that bear on ``query``, best first.

        Args:
            query: The question (or the user's new message).
            k: How many turns.
            scope: "session" (this session only) or "user" (all sessions of this session's
                user in its namespace). Default: "session", widened to ``[memory] shift_scope``
                just after a topic shift.
            method: "hybrid" (dense + BM25 + graph + time, the default), "hypervector" (the
                numpy-only selector: no model, sub-millisecond) or "recent" (the last k turns).
            as_of: Only turns at or before this time.
            reuse: Let a short pronoun-led follow-up reuse the last recall without a new search
                (default: ``[memory] followup_reuse``). Reused hits carry
                ``metadata["reused"] = True``.

        Returns:
            Hits whose ``doc_id`` is the turn id, ``metadata`` holds ``role``, ``session_id`` and
            ``seq``, and ``timestamp`` the turn's time.

        Raises:
            InputError: On an empty or over-long query, a bad ``k``, scope or method, or
                scope "user" for a session opened without a user.
        """
        from ..engine import _MAX_K, _validate_query

        query = _validate_query(query)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= _MAX_K:
            raise InputError(f"k must be an int between 1 and {_MAX_K}, got {k!r}")
        if scope not in (None, "session", "user"):
            raise InputError(f"scope must be 'session' or 'user', got {scope!r}")
        if method not in ("hybrid", "hypervector", "recent"):
            raise InputError(f"method must be 'hybrid', 'hypervector' or 'recent', got {method!r}")
        cfg = self._owner.config.memory
        with self._lock:
            self._log()
            self.counts["recalls"] += 1
            adapted = self._adapted()
            if scope is None:
                scope = cfg.shift_scope if adapted and self.user is not None else "session"
            if scope == "user" and self.user is None:
                raise InputError(
                    f"session {self.session_id!r} has no user; open it with "
                    "p.conversation(id, user=...) for cross-session recall"
                )
            use_reuse = cfg.followup_reuse if reuse is None else bool(reuse)
            last = self._last
            if (
                use_reuse
                and method == "hybrid"
                and last is not None
                and len(last.hits) >= min(k, 1)
                and not (self._last_shift is not None and self._last_shift > last.after_seq)
                and len(self) - 1 - last.after_seq <= 2
                and self.is_followup(query)
            ):
                self.counts["followups_reused"] += 1
                return [_marked(h, reused=True) for h in last.hits[:k]]
            hits = self._search(query, k, method, as_of, adapted)
            if scope != "user":
                if method == "hybrid":
                    self._last = _Recall(query, hits, len(self) - 1)
                return hits
        # the other sessions are asked without this one's lock held: two sessions recalling
        # each other from two threads would otherwise each wait for the other's lock
        hits = self._across_sessions(query, k, method, as_of, hits)
        if method == "hybrid":
            with self._lock:
                self._last = _Recall(query, hits, len(self) - 1)
        return hits

    def _search(
        self, query: str, k: int, method: str, as_of: datetime | None, adapted: bool
    ) -> list[Hit]:
        cutoff = ensure_utc(as_of)
        if method == "recent":
            turns = self.turns(k) if cutoff is None else self._turns_until(cutoff, k)
            n = len(turns)
            return [
                t.to_hit(self.session_id, 1.0 - i / max(n, 1))
                for i, t in enumerate(reversed(turns))
            ]
        if method == "hypervector":
            hv = self.hypervector()
            ranked = hv.search(query, k if cutoff is None else min(len(hv), k * 4) or k)
            rows = self._turn_rows(int(i[1:]) for i, _ in ranked)
            out = []
            for tid, score in ranked:
                t = rows.get(int(tid[1:]))
                if t is not None and (cutoff is None or t.timestamp <= cutoff):
                    out.append(t.to_hit(self.session_id, float(score)))
            return out[:k]
        if len(self) == 0:
            return []
        store = self._index()
        if store is None:
            return []
        cfg = self._owner.config.memory
        recent = [] if adapted else [t.text for t in self.turns(2)]  # off-topic after a shift
        res = store.query(query, k=min(4 * k, 1000), as_of=cutoff, context=recent or None)
        best: dict[str, Hit] = {}
        for h in res.hits:  # a long turn's passages: the turn once, at its best passage
            if h.doc_id not in best:
                meta = {key: v for key, v in h.metadata.items() if key != "context"}
                best[h.doc_id] = dataclasses.replace(h, metadata=meta)
        last = len(self) - 1
        weight = cfg.shift_recency_weight if adapted else cfg.recency_weight
        for key, h in best.items():
            age = max(0, last - int(h.metadata.get("seq", last)))
            boost = 1.0 + weight * 2.0 ** (-age / cfg.recency_half_life)
            best[key] = dataclasses.replace(h, score=float(h.score * boost))
        windows = self._windows()
        if windows is not None and cfg.window_weight > 0:
            best = self._add_windows(best, windows, query, k, cutoff)
        if cfg.neighbour_weight > 0 and best:
            best = self._spread(best, cfg.neighbour_weight, cfg.question_gain, cutoff)
        scored = list(best.values())
        if cfg.speaker_weight > 0:
            scored = [_by_speaker(h, query, cfg.speaker_weight) for h in scored]
        scored.sort(key=lambda h: (-h.score, h.doc_id))
        return scored[:k]

    def _add_windows(
        self, best: dict[str, Hit], windows: Pensive, query: str, k: int, cutoff: datetime | None
    ) -> dict[str, Hit]:
        """Each turn gains ``window_weight`` x the score of the best window holding it."""
        cfg = self._owner.config.memory
        n = cfg.window_turns
        prior: dict[int, float] = {}
        for h in windows.query(query, k=min(3 * k, 1000), as_of=cutoff).hits:
            end = int(h.metadata["seq"])
            for seq in range(max(0, end - n + 1), end + 1):
                prior[seq] = max(prior.get(seq, 0.0), h.score)
        by_seq = {int(h.metadata["seq"]): h for h in best.values()}
        rows = self._turn_rows(set(prior) - set(by_seq))
        out: dict[str, Hit] = {}
        for seq in set(by_seq) | set(prior):
            hit = by_seq.get(seq) or self._reached(rows.get(seq), cutoff, "window")
            if hit is None:
                continue
            gain = cfg.window_weight * prior.get(seq, 0.0)
            out[hit.doc_id] = dataclasses.replace(hit, score=float(hit.score + gain))
        return out

    def _reached(self, turn: Turn | None, cutoff: datetime | None, via: str) -> Hit | None:
        """A turn that neither list found but ``via`` reached, as a hit (None past the cutoff)."""
        if turn is None or (cutoff is not None and turn.timestamp > cutoff):
            return None
        return dataclasses.replace(turn.to_hit(self.session_id), sources={via: 1})

    def _spread(
        self, best: dict[str, Hit], weight: float, question_gain: float, cutoff: datetime | None
    ) -> dict[str, Hit]:
        """A turn next to a strong match gains ``weight`` x that match's score (the larger of
        its two neighbours'): an answer is found by the question just before it, and the
        reverse. After a question the gain is ``1 + question_gain`` times larger."""
        by_seq = {int(h.metadata["seq"]): h for h in best.values()}
        rows = self._turn_rows({s + d for s in by_seq for d in (-1, 0, 1)})
        out: dict[str, Hit] = {}
        for seq in sorted(set(by_seq) | set(rows)):
            hit = by_seq.get(seq) or self._reached(rows.get(seq), cutoff, "neighbour")
            if hit is None:
                continue
            before, after = by_seq.get(seq - 1), by_seq.get(seq + 1)
            gain = 0.0
            if before is not None:
                asked = (t := rows.get(seq - 1)) is not None and "?" in t.text
                gain = weight * (1.0 + question_gain * asked) * before.score
            if after is not None:
                gain = max(gain, weight * after.score)
            out[hit.doc_id] = dataclasses.replace(hit, score=float(hit.score + gain))
        return out

    def _across_sessions(
        self, query: str, k: int, method: Method, as_of: datetime | None, own: list[Hit]
    ) -> list[Hit]:
        merged = list(own)
        for info in self._owner._sessions().sessions(self.namespace, self.user):
            if info.session_id == self.session_id:
                continue
            other = self._owner.conversation(info.session_id, namespace=self.namespace)
            merged.extend(
                other.recall(query, k, scope="session", method=method, as_of=as_of, reuse=False)
            )
        merged.sort(key=lambda h: -h.score)
        return merged[:k]

    def hypervector(self) -> HypervectorSelector:
        """The session's hypervector selector (built from the log on first use)."""
        with self._lock:
            if self._hv is None:
                from .hypervector import HypervectorSelector

                cfg = self._owner.config.memory
                hv = HypervectorSelector(cfg.hv_dim, seed=cfg.hv_seed)
                turns = self.turns()
                if turns:
                    hv.add([t.text for t in turns], [t.id for t in turns])
                self._hv = hv
            return self._hv

    # -- prompts ------------------------------------------------------------------------------
    def _counter(self) -> Any:
        from .tokens import token_counter

        return token_counter(self._owner.config.memory.tokenizer).count

    def build(
        self,
        query: str,
        token_budget: int = 2000,
        *,
        system: str = "",
        pins: Sequence[str] = (),
        k: int | None = None,
        documents_k: int | None = None,
    ) -> BuiltPrompt:
        """A prompt for answering ``query``, within ``token_budget`` tokens.

        Sections, in order: ``system``; pinned notes (:meth:`pin` and ``pins``); the story so far
        (summaries of older turns) — these three form a prefix that stays byte-identical from
        turn to turn until a new block of turns is summarised, for provider prompt caching —
        then recalled older turns (each expanded outward to its neighbours when room allows),
        passages from the main store, the recent turns verbatim, and the question. Under
        pressure, the weakest recalled items are dropped first, then the largest clipped (marked
        ``[…]``), then older history compressed; pins are never dropped.

        Args:
            query: The user's message.
            token_budget: The whole prompt's budget in tokens (``[memory] tokenizer``); a share
                (``[memory] headroom``) is left unused for the answer.
            system: A system prompt, always included.
            pins: More pinned notes for this prompt only.
            k: Older turns to recall (default ``[memory] recall_k``).
            documents_k: Main-store passages to include (default ``[memory] documents_k``, or
                ``shift_documents_k`` just after a topic shift).

        Returns:
            The built prompt: ``text``, ``prefix``, ``tokens`` and what was dropped or clipped.

        Raises:
            InputError: On a bad query or budget, or pins that alone exceed the budget.
        """
        from .prompt import PromptBuilder, PromptItem

        cfg = self._owner.config.memory
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
            raise InputError(f"token_budget must be a positive int, got {token_budget!r}")
        with self._lock:
            recent = self.turns(cfg.recent_turns) if cfg.recent_turns else []
            recent_ids = {t.id for t in recent}
            hits = self.recall(query, k or cfg.recall_k) if len(self) else []
            hits = [h for h in hits if h.doc_id not in recent_ids]
            retrieved: list[PromptItem] = []
            neighbours = self._turn_rows(
                s
                for h in hits
                if h.metadata.get("session_id") == self.session_id
                for s in (int(h.metadata["seq"]) - 1, int(h.metadata["seq"]) + 1)
            )
            for h in hits:
                text = _render(h)
                expanded = None
                if h.metadata.get("session_id") == self.session_id:  # the turns either side
                    seq = int(h.metadata["seq"])
                    before, after = neighbours.get(seq - 1), neighbours.get(seq + 1)
                    parts = [_render(t.to_hit(self.session_id)) for t in (before,) if t] + [text]
                    parts += [_render(t.to_hit(self.session_id)) for t in (after,) if t]
                    expanded = "\n".join(parts) if len(parts) > 1 else None
                retrieved.append(
                    PromptItem(text=text, score=h.score, id=h.doc_id, expanded=expanded)
                )
            n_docs = documents_k
            if n_docs is None:
                n_docs = cfg.shift_documents_k if self._adapted() else cfg.documents_k
            if n_docs > 0 and self._owner.stats().get("documents", 0):
                for h in self._owner.query(query, k=n_docs).hits:
                    try:
                        wide = self._owner.expand(h, 1)
                    except PensiveError:
                        wide = None
                    retrieved.append(
                        PromptItem(
                            text=h.text, score=h.score, id=f"doc:{h.chunk_id}", expanded=wide
                        )
                    )
            history = [
                PromptItem(text=_render(t.to_hit(self.session_id)), id=t.id, role=t.role)
                for t in recent
            ]
            builder = PromptBuilder(
                self._owner.config.memory.tokenizer,
                summaries_share=cfg.summaries_share,
                retrieved_share=cfg.retrieved_share,
                history_share=cfg.history_share,
                headroom=cfg.headroom,
            )
            return builder.build(
                token_budget,
                query=query,
                system=system,
                pins=[
                    PromptItem(text=p, pinned=True, id=f"pin{i}")
                    for i, p in enumerate([*self.pins(), *pins])
                ],
                summaries=[
                    PromptItem(text=s, id=f"summary{i}") for i, s in enumerate(self.summaries())
                ],
                retrieved=retrieved,
                history=history,
            )

    def context(self, query: str, token_budget: int = 2000, **options: Any) -> str:
        """The prompt-ready text of :meth:`build` (same arguments)."""
        return self.build(query, token_budget, **options).text

    # -- lifecycle ----------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Turns, segments, summaries, shifts, follow-ups reused and recalls made."""
        with self._lock:
            db = self._log()
            turns = segments = summaries = shifts = 0
            if db is not None:
                turns, segments, shifts = db.execute(
                    "SELECT COUNT(*), COUNT(DISTINCT segment), COALESCE(SUM(shift), 0) FROM turns"
                ).fetchone()
                summaries = db.execute("SELECT COUNT(*) FROM summaries").fetchone()[0]
            return {
                "session_id": self.session_id,
                "namespace": self.namespace,
                "user": self.user,
                "turns": int(turns),
                "segments": int(segments),
                "summaries": int(summaries),
                "shifts": int(shifts),
                **self.counts,
            }

    def clear(self) -> int:
        """Forget the whole session: its log, index and summaries are deleted from disk.

        Returns:
            How many turns were forgotten. The conversation stays usable (empty).
        """
        with self._lock:
            self._check_writable()
            n = len(self)
            self._release()
            shutil.rmtree(self.folder, ignore_errors=True)
            self._hv = None
            self._drift = None
            self._last = None
            self._last_shift = None
            self._summaries_cache = None
            self._open_log()
            return n

    def _release(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._window_store is not None:
            self._window_store.close()
            self._window_store = None
        if self._db is not None:
            self._db.close()
            self._db = None

    def close(self) -> None:
        """Release the session's files (the owning store does this when it closes)."""
        with self._lock:
            if not self._closed:
                self._release()
                self._closed = True

    def _check_writable(self) -> None:
        if self._closed:
            raise PensiveError(f"conversation {self.session_id!r} is closed")
        if self.read_only:
            raise PensiveError(
                f"conversation {self.session_id!r} is read-only (its store was opened with "
                "read_only=True)"
            )


_SELECT = "SELECT seq, role, text, ts, metadata, segment, drift, shift FROM turns"


def _turn(row: Sequence[Any]) -> Turn:
    seq, role, text, ts, meta, segment, drift, shift = row
    when = from_iso(ts)
    assert when is not None
    return Turn(
        turn_id(int(seq)),
        int(seq),
        role,
        text,
        when,
        json.loads(meta),
        int(segment),
        None if drift is None else float(drift),
        bool(shift),
    )


def _query_memo(owner: Pensive) -> QueryCache:
    """The owner's embedder, remembering its last query vectors: a recall asks the turn index
    and the window index the same question, and should embed it once."""
    made = owner._get_embedder()
    if isinstance(made, QueryCache):
        return made
    memo = getattr(owner, "_session_embedder", None)
    if memo is None or memo.inner is not made:
        memo = QueryCache(made, 32)
        owner._session_embedder = memo
    return memo


def _by_speaker(hit: Hit, query: str, weight: float) -> Hit:
    """A turn whose speaker the question names ("What did Melanie paint?") gains ``weight``."""
    who = next(
        (v for k in ("speaker", "name") if isinstance(v := hit.metadata.get(k), str) and v.strip()),
        None,
    )
    if who is None or not re.search(rf"\b{re.escape(who.strip())}\b", query, re.IGNORECASE):
        return hit
    return dataclasses.replace(hit, score=float(hit.score * (1.0 + weight)))


def _marked(hit: Hit, **extra: Any) -> Hit:
    return dataclasses.replace(hit, metadata={**hit.metadata, **extra})


def _render(hit: Hit) -> str:
    """A turn as a prompt shows it: ``[2023-05-08] Caroline: text``."""
    who = _speaker(str(hit.metadata.get("role", "")), hit.metadata)
    when = f"[{hit.timestamp:%Y-%m-%d}] " if hit.timestamp is not None else ""
    return f"{when}{who}: {hit.text}" if who else f"{when}{hit.text}"


def session_config(parent: Any) -> dict[str, Any]:
    """A session store's config: the owner's, with the hot cache off (every turn would
    invalidate it), the turn-speaker context, and a local vector index."""
    cfg = parent.model_dump()
    backend = dict(cfg["backend"])
    if backend["name"] not in ("faiss", "memory"):
        backend["name"] = "faiss"  # a session is small and local: no managed index per session
    return {
        "backend": backend,
        "embedder": cfg["embedder"],
        "chunking": cfg["chunking"],
        "bm25": cfg["bm25"],
        "fusion": cfg["fusion"],
        "router": {**cfg["router"], "l1": False},
        "graph": cfg["graph"],
        "temporal": cfg["temporal"],
        "context": {**cfg["context"], "generator": "auto", "records": "same"},
    }
