"""Statements and dates per passage, kept in the store's SQLite file, and the supersession
chains computed from them once per commit.

Two clocks per statement: *valid time* (when it was true: a date the sentence gives, else its
document's timestamp) and *record time* (when Pensive learned it: the order statements were
written, an autoincrement id). A newer valid statement in the same slot with a different value
supersedes the older one; the older one is kept and marked, never deleted. Within one valid
time, a correction comes after what it corrects. A statement with no valid time supersedes
what was recorded before it only when it is worded as a correction or a change ("now", "new",
"moved to", "no longer"): bulk-loaded undated text never demotes itself by load order.
"""

from __future__ import annotations

import math
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from ..archive import write_transaction
from ..timeutil import ensure_utc, to_iso
from .dates import find_dates
from .statements import StatementExtractor

__all__ = [
    "SCHEMA_VERSION",
    "StatementRow",
    "TemporalStore",
    "TemporalTables",
    "TemporalView",
    "document_rows",
    "view_from_rows",
]

SCHEMA_VERSION = 4  # bumped when extraction changes: stores re-read their passages

_SCHEMA = """
CREATE TABLE IF NOT EXISTS temporal_statements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,   -- record time: the order statements were learned
    doc_id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    slot TEXT NOT NULL,
    value TEXT NOT NULL,
    correction INTEGER NOT NULL,
    change INTEGER NOT NULL,
    valid_from REAL,                        -- POSIX seconds; NULL: not known
    recorded_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS temporal_statements_doc ON temporal_statements(doc_id);
CREATE TABLE IF NOT EXISTS temporal_dates (
    doc_id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    start REAL NOT NULL,
    end REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS temporal_dates_doc ON temporal_dates(doc_id);
CREATE TABLE IF NOT EXISTS temporal_chunks (chunk_id TEXT PRIMARY KEY, doc_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS temporal_chunks_doc ON temporal_chunks(doc_id);
"""

_FUZZY_MIN = 0.67  # slot keys this similar (Jaccard), with the same numbers, are one slot
_FUZZY_POSTINGS = 400  # a word in more slot keys than this is not used to find near twins


def _ts(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


@dataclass
class StatementRow:
    """One statement as the temporal view holds it (its passage, slot, value, flags, when it
    held, and what supersedes it)."""

    seq: int
    chunk: str
    slot: str
    value: str
    correction: bool
    change: bool
    t: float | None  # valid from
    valid_to: float | None = None
    superseded_by: int | None = None  # index of the superseding statement
    chain: int = -1  # index of the slot's chain


@dataclass
class ChunkTime:
    """What the resolver knows of one passage's time."""

    statements: list[int] = field(default_factory=list)  # indices into the view's statements
    dates: list[tuple[float, float]] = field(default_factory=list)


class TemporalView:
    """Supersession computed over every statement: loaded once per commit, read-only."""

    def __init__(
        self, rows: list[StatementRow], dates: dict[str, list[tuple[float, float]]]
    ) -> None:
        self.rows = rows
        self.chunks: dict[str, ChunkTime] = defaultdict(ChunkTime)
        for i, r in enumerate(rows):
            self.chunks[r.chunk].statements.append(i)
        for cid, spans in dates.items():
            self.chunks[cid].dates = spans
        self.chunks = dict(self.chunks)
        self.chains: list[list[int]] = []
        self._supersede()
        # how rare each slot word is among the statements: a question names a slot by its
        # rare words ("Heron" among many "error budget" slots)
        df: dict[str, int] = defaultdict(int)
        for r in rows:
            for w in set(r.slot.split()):
                df[w] += 1
        n = max(1, len(rows))
        self._weight = {w: math.log(1 + n / c) for w, c in df.items()}

    @classmethod
    def from_statements(
        cls, statements: Sequence[tuple[str, Any, datetime | None]]
    ) -> TemporalView:
        """Supersession over statements given in record order, outside any store.

        Args:
            statements: ``(passage id, statement, valid from)``, oldest record first; a
                statement has ``slot``, ``value``, ``correction`` and ``change``.
        """
        rows = [
            StatementRow(
                i,
                cid,
                st.slot,
                st.value,
                st.correction,
                st.change,
                None if t is None else t.timestamp(),
            )
            for i, (cid, st, t) in enumerate(statements)
        ]
        return cls(rows, {})

    def slot_match(self, i: int, words: frozenset[str]) -> float:
        """How much of statement ``i``'s slot the question's words name, weighted by how rare
        each slot word is, in [0, 1]."""
        slot = [w for w in self.rows[i].slot.split() if w not in ("q", "r")]
        total = sum(self._weight.get(w, 0.0) for w in slot)
        if total <= 0:
            return 0.0
        return sum(self._weight.get(w, 0.0) for w in slot if w in words) / total

    # -- building ----------------------------------------------------------------------------
    def _slots(self) -> dict[str, str]:
        """Slot key -> the key of its group: equal keys, and near twins (same numbers, most
        words shared: "northwind q3 2024 revenu" ~ "northwind q3 2024 revenu total")."""
        keys = sorted({r.slot for r in self.rows})
        parent = {k: k for k in keys}

        def find(k: str) -> str:
            while parent[k] != k:
                parent[k] = parent[parent[k]]
                k = parent[k]
            return k

        words = {k: frozenset(k.split()) for k in keys}
        postings: dict[str, list[str]] = defaultdict(list)
        for k in keys:
            for w in words[k]:
                postings[w].append(k)
        for k in keys:
            ws = words[k]
            if len(ws) < 3:
                continue  # too few words to tell near twins from different slots
            nums = {w for w in ws if any(c.isdigit() for c in w)}
            rare = min(ws, key=lambda w: len(postings[w]))
            if len(postings[rare]) > _FUZZY_POSTINGS:
                continue
            for other in postings[rare]:
                if other <= k or other[:2] != k[:2]:
                    continue
                ow = words[other]
                if {w for w in ow if any(c.isdigit() for c in w)} != nums:
                    continue
                if len(ws & ow) / len(ws | ow) >= _FUZZY_MIN:
                    parent[find(other)] = find(k)
        return {k: find(k) for k in keys}

    def _supersede(self) -> None:
        groups: dict[str, list[int]] = defaultdict(list)
        group_of = self._slots()
        for i, r in enumerate(self.rows):
            groups[group_of[r.slot]].append(i)
        for members in groups.values():
            chain_no = len(self.chains)
            rows = self.rows
            # a passage correcting the slot comes after others of its time; inside one
            # passage, statements keep their order ("no longer at X; she joined Y")
            fixing = {rows[i].chunk for i in members if rows[i].correction}
            dated = sorted(
                (i for i in members if rows[i].t is not None),
                key=lambda i: (rows[i].t, rows[i].chunk in fixing, rows[i].seq),
            )
            current: int | None = None
            for i in dated:
                if current is not None and rows[i].value != rows[current].value:
                    rows[current].superseded_by = i
                    rows[current].valid_to = rows[i].t
                if current is None or rows[i].value != rows[current].value:
                    current = i
            # an undated correction or change supersedes what was recorded before it
            for i in sorted(members, key=lambda i: rows[i].seq):
                r = rows[i]
                if r.t is not None or not (r.correction or r.change):
                    continue
                for j in members:
                    o = rows[j]
                    if o.seq < r.seq and o.superseded_by is None and o.value != r.value:
                        o.superseded_by = i
            order = sorted(
                members,
                key=lambda i: (rows[i].t if rows[i].t is not None else float("inf"), rows[i].seq),
            )
            for i in order:
                rows[i].chain = chain_no
            self.chains.append(order)

    # -- reading -----------------------------------------------------------------------------
    def validity(self, chunk: str) -> tuple[datetime | None, datetime | None, str | None]:
        """(valid_from, valid_to, superseded_by) of a passage: from the earliest statement it
        makes; ended and superseded only when every statement in it is."""
        info = self.chunks.get(chunk)
        if info is None or not info.statements:
            return None, None, None
        rows = [self.rows[i] for i in info.statements]
        starts = [r.t for r in rows if r.t is not None]
        vf = ensure_utc(min(starts)) if starts else None
        if any(r.superseded_by is None for r in rows):
            return vf, None, None
        last = max(rows, key=lambda r: r.valid_to if r.valid_to is not None else float("inf"))
        assert last.superseded_by is not None
        return vf, ensure_utc(last.valid_to), self.rows[last.superseded_by].chunk

    def signature(self) -> dict[str, tuple[str | None, ...]]:
        """Per passage, what supersedes its statements: compared across commits to find the
        passages a commit demoted or freed (the L1 cache drops answers that hold them)."""
        out: dict[str, tuple[str | None, ...]] = {}
        for cid, info in self.chunks.items():
            if info.statements:
                out[cid] = tuple(
                    None if (s := self.rows[i].superseded_by) is None else self.rows[s].chunk
                    for i in info.statements
                )
        return out

    def dates_of(self, chunk: str) -> list[tuple[float, float]]:
        """The time spans a passage names (dates in its text, and when its statements hold)."""
        info = self.chunks.get(chunk)
        if info is None:
            return []
        spans = list(info.dates)
        for i in info.statements:
            r = self.rows[i]
            if r.t is not None:
                spans.append((r.t, r.valid_to if r.valid_to is not None else float("inf")))
        return spans


StatementValues = tuple[str, str, str, str, int, int, float | None, str | None]
DateValues = tuple[str, str, float, float]


def document_rows(
    doc_id: str,
    passages: Sequence[tuple[str, str]],
    timestamp: datetime | None,
    extractor: StatementExtractor,
    relative: bool = True,
) -> tuple[list[StatementValues], list[DateValues], list[tuple[str, str]]]:
    """What a document's passages put in the tables (the same for every engine).

    Args:
        doc_id: The document.
        passages: ``(chunk id, text)`` of its indexed passages.
        timestamp: Its timestamp (valid time of undated statements, reference of relative
            dates).
        extractor: Finds the statements.
        relative: Resolve relative dates against ``timestamp``.

    Returns:
        ``(statements, dates, passages)``: statements as ``(doc id, chunk id, slot, value,
        correction, change, valid from, recorded at)`` in record order, dates as ``(doc id,
        chunk id, start, end)``, passages as ``(chunk id, doc id)``.
    """
    ref = timestamp if relative else None
    doc_t = _ts(timestamp)
    now = to_iso(datetime.now(timezone.utc))
    stmts: list[StatementValues] = []
    dates: list[DateValues] = []
    chunks: list[tuple[str, str]] = []
    for cid, text in passages:
        chunks.append((cid, doc_id))
        for d in find_dates(text, ref):
            dates.append((doc_id, cid, d.start.timestamp(), d.end.timestamp()))
        for s in extractor.extract(text, ref):
            t = _ts(s.valid_from) if s.valid_from is not None else doc_t
            stmts.append((doc_id, cid, s.slot, s.value, int(s.correction), int(s.change), t, now))
    return stmts, dates, chunks


def view_from_rows(
    statements: Iterable[tuple[int, str, str, str, Any, Any, float | None]],
    dates: Iterable[tuple[str, float, float]],
) -> TemporalView:
    """The view from the stored rows (whatever engine holds them).

    Args:
        statements: ``(record id, chunk id, slot, value, correction, change, valid from)``
            in record order.
        dates: ``(chunk id, start, end)`` in the order written.
    """
    rows = [
        StatementRow(int(seq), cid, slot, value, bool(corr), bool(chg), t)
        for seq, cid, slot, value, corr, chg, t in statements
    ]
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for cid, start, end in dates:
        spans[cid].append((start, end))
    return TemporalView(rows, spans)


class TemporalStore:
    """Statements and dates of every indexed passage, in the store's SQLite file.

    Args:
        db: The archive's connection (writes commit with the archive's own transactions).
        create: Create the tables (a writer); a reader only reads.
    """

    def __init__(self, db: sqlite3.Connection, create: bool = True) -> None:
        self.db = db
        if create:
            db.executescript(_SCHEMA)

    @staticmethod
    def drop(db: sqlite3.Connection) -> None:
        """Remove the tables (to rebuild them under a new schema)."""
        for t in ("temporal_statements", "temporal_dates", "temporal_chunks"):
            db.execute(f"DROP TABLE IF EXISTS {t}")

    def add_document(
        self,
        doc_id: str,
        passages: Sequence[tuple[str, str]],
        timestamp: datetime | None,
        extractor: StatementExtractor,
        relative: bool = True,
    ) -> None:
        """Replace what is known of a document's passages: ``(chunk_id, text)`` pairs.

        Args:
            doc_id: The document.
            passages: Its indexed passages.
            timestamp: Its timestamp: the valid time of statements that give none, and the
                reference for relative dates ("yesterday").
            extractor: Finds the statements.
            relative: Resolve relative dates against ``timestamp``.
        """
        stmts, dates, chunks = document_rows(doc_id, passages, timestamp, extractor, relative)
        with write_transaction(self.db):
            self._remove(doc_id)
            self.db.executemany("INSERT OR REPLACE INTO temporal_chunks VALUES (?, ?)", chunks)
            self.db.executemany("INSERT INTO temporal_dates VALUES (?, ?, ?, ?)", dates)
            self.db.executemany(
                "INSERT INTO temporal_statements (doc_id, chunk_id, slot, value, correction, "
                "change, valid_from, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                stmts,
            )

    def remove_document(self, doc_id: str) -> None:
        """Forget a document's passages."""
        with write_transaction(self.db):
            self._remove(doc_id)

    def _remove(self, doc_id: str) -> None:
        for t in ("temporal_statements", "temporal_dates", "temporal_chunks"):
            self.db.execute(f"DELETE FROM {t} WHERE doc_id = ?", (doc_id,))

    def documents(self) -> dict[str, set[str]]:
        """Document -> the passage ids known here (to bring the tables level with the archive)."""
        out: dict[str, set[str]] = defaultdict(set)
        for cid, did in self.db.execute("SELECT chunk_id, doc_id FROM temporal_chunks"):
            out[did].add(cid)
        return dict(out)

    def load(self) -> TemporalView:
        """Every statement and date, with supersession computed."""
        statements = self.db.execute(
            "SELECT id, chunk_id, slot, value, correction, change, valid_from "
            "FROM temporal_statements ORDER BY id"
        )
        dates = self.db.execute("SELECT chunk_id, start, end FROM temporal_dates ORDER BY rowid")
        return view_from_rows(statements, dates)

    def counts(self) -> dict[str, int]:
        """Sizes, for ``stats()``."""
        (n,) = self.db.execute("SELECT COUNT(*) FROM temporal_statements").fetchone()
        (d,) = self.db.execute("SELECT COUNT(*) FROM temporal_dates").fetchone()
        return {"statements": int(n), "dates": int(d)}


def spans_fit(spans: Iterable[tuple[float, float]], start: float | None, end: float | None) -> bool:
    """Whether any span overlaps ``[start, end)`` (an open side is unbounded)."""
    lo = float("-inf") if start is None else start
    hi = float("inf") if end is None else end
    return any(s < hi and e > lo for s, e in spans)


class TemporalTables(Protocol):
    """Statements and dates, persisted, as the engine uses them. :class:`TemporalStore`
    (tables in the store's SQLite file) is the embedded implementation."""

    def add_document(
        self,
        doc_id: str,
        passages: Sequence[tuple[str, str]],
        timestamp: datetime | None,
        extractor: StatementExtractor,
        relative: bool = True,
    ) -> None:
        """Replace a document's statements and dates with those of its passages."""
        ...

    def remove_document(self, doc_id: str) -> None:
        """Forget a document's statements and dates."""
        ...

    def documents(self) -> dict[str, set[str]]:
        """Document -> the passage ids known here."""
        ...

    def load(self) -> TemporalView:
        """Every statement and date, with supersession computed."""
        ...

    def counts(self) -> dict[str, int]:
        """Statements and dates held."""
        ...
