"""The L1 hot cache in SQLite (``l1.sqlite`` in the store folder): the rows of
:class:`~pensive_core.cache.L1Memory` for the embedded engine. ``PRAGMA data_version`` tells
a process that another one wrote."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..archive import write_transaction
from ..cache import Deps, L1Memory, L1Row

__all__ = ["L1Cache", "SQLiteL1Rows"]

_FORMAT = 5  # bump whenever keys or columns change: an older cache is dropped, not misread
# Row ids are AUTOINCREMENT: never reused, so "stored after id N" means stored after the
# invalidator looked (a plain rowid reuses the id of a deleted last row).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS l1_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS l1 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE, scope TEXT NOT NULL, query TEXT NOT NULL,
    k INTEGER NOT NULL, as_of TEXT,
    docs TEXT NOT NULL, qvec BLOB, dense_floor REAL NOT NULL, bm25_floor REAL NOT NULL,
    cands BLOB NOT NULL, bm25_scores BLOB NOT NULL, fused_gap REAL NOT NULL, method TEXT NOT NULL,
    confidence REAL NOT NULL, tier TEXT NOT NULL, created REAL NOT NULL, freq INTEGER NOT NULL,
    hits TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS l1_created ON l1(created);
CREATE TABLE IF NOT EXISTS l1_docs (doc_id TEXT NOT NULL, key TEXT NOT NULL,
    PRIMARY KEY (doc_id, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS l1_docs_key ON l1_docs(key);
"""
_COLUMNS = (
    "id, key, scope, query, k, as_of, docs, qvec, dense_floor, bm25_floor, cands, "
    "bm25_scores, fused_gap, method, confidence, tier, created, freq"
)
# an entry is read only while the cache is at the commit the reader's memory is at
_AT_COMMIT = "COALESCE(CAST((SELECT value FROM l1_meta WHERE key='commit') AS INTEGER), 0) = ?"


def _sqlite_row(r: Sequence[Any]) -> L1Row:
    rowid, key, scope, text, k, as_of, docs, qvec, dfl, bfl, cands = r[:11]
    bm25, gap, method, conf, tier, created, freq = r[11:]
    deps = Deps(
        frozenset(json.loads(docs)),
        None if qvec is None else np.frombuffer(qvec, dtype=np.float32),
        dfl,
        bfl,
        np.frombuffer(cands, dtype=np.int64),
        np.frombuffer(bm25, dtype=np.float32),
        gap,
        method,
    )
    return L1Row(rowid, key, scope, text, k, as_of, deps, conf, tier, created, freq)


class SQLiteL1Rows:
    """L1 rows in a SQLite file of their own, shared by every process that opens it; another
    process's commit is noticed through ``PRAGMA data_version`` (no table read).

    Args:
        path: The SQLite file (``:memory:`` for a private cache).
    """

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(
            str(path), check_same_thread=False, isolation_level=None, timeout=30.0
        )
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(_SCHEMA)
            row = self.db.execute("SELECT value FROM l1_meta WHERE key='format'").fetchone()
            if row is None or row[0] != _FORMAT:  # written by another release: start over
                self.db.executescript(
                    "DROP TABLE l1; DROP TABLE l1_docs; DELETE FROM l1_meta;" + _SCHEMA
                )
                self.db.execute("INSERT INTO l1_meta VALUES ('format', ?)", (_FORMAT,))
        except BaseException:
            self.db.close()
            raise
        self._data_version = -1

    def _version(self) -> int:
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def _commit(self) -> int:
        row = self.db.execute("SELECT value FROM l1_meta WHERE key='commit'").fetchone()
        return int(row[0]) if row else 0

    def load(self, have: Mapping[str, int]) -> tuple[int, list[L1Row], dict[str, int]]:
        """The commit, the rows not in ``have`` and every row's id, in one read transaction."""
        # one snapshot: the commit and the rows that belong to it (another process may
        # invalidate and store answers of the next commit between two statements)
        self.db.execute("BEGIN")
        try:
            commit = self._commit()
            present = {k: int(i) for k, i in self.db.execute("SELECT key, id FROM l1")}
            want = [i for k, i in present.items() if have.get(k) != i]
            if len(want) > len(present) // 2:
                missing = set(want)
                cur = self.db.execute("SELECT " + _COLUMNS + " FROM l1")
                rows = [_sqlite_row(r) for r in cur if r[0] in missing]
            else:
                rows = []
                for i in range(0, len(want), 500):
                    part = want[i : i + 500]
                    sql = f"SELECT {_COLUMNS} FROM l1 WHERE id IN ({','.join('?' * len(part))})"
                    rows += [_sqlite_row(r) for r in self.db.execute(sql, part)]
            self._data_version = self._version()
        finally:
            self.db.execute("COMMIT")
        return commit, rows, present

    def changed(self) -> int | None:
        """The commit when another connection committed since the last look, else None."""
        version = self._version()
        if version == self._data_version:
            return None
        self._data_version = version
        return self._commit()

    def rows_after(self, row_id: int, commit: int) -> list[L1Row]:
        """Rows past ``row_id`` while the cache is at ``commit``."""
        sql = "SELECT " + _COLUMNS + " FROM l1 WHERE id > ? AND " + _AT_COMMIT
        return [_sqlite_row(r) for r in self.db.execute(sql, (row_id, commit))]

    def hits(self, key: str) -> str | None:
        """An entry's hits as JSON, or None."""
        row = self.db.execute("SELECT hits FROM l1 WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def keys_for_docs(self, doc_ids: list[str]) -> set[str]:
        """Keys of entries with a hit from these documents."""
        out: set[str] = set()
        for i in range(0, len(doc_ids), 500):
            part = doc_ids[i : i + 500]
            sql = f"SELECT key FROM l1_docs WHERE doc_id IN ({','.join('?' * len(part))})"
            out.update(r[0] for r in self.db.execute(sql, part))
        return out

    @contextlib.contextmanager
    def write(self) -> Iterator[_SQLiteWriter]:
        """``BEGIN IMMEDIATE``: one writer at a time, committed at the end."""
        with write_transaction(self.db):
            yield _SQLiteWriter(self)

    def save_freqs(self, freqs: list[tuple[str, int]]) -> None:
        """Persist use counts (ignored if the file cannot be written)."""
        with contextlib.suppress(sqlite3.Error):
            self.db.executemany("UPDATE l1 SET freq=? WHERE key=?", [(n, k) for k, n in freqs])

    def close(self) -> None:
        """Close the database."""
        self.db.close()


class _SQLiteWriter:
    def __init__(self, rows: SQLiteL1Rows) -> None:
        self._rows = rows
        self.db = rows.db

    def commit(self) -> int:
        return self._rows._commit()

    def others_wrote(self) -> bool:
        return self._rows._version() != self._rows._data_version

    def rows_after(self, row_id: int) -> list[L1Row]:
        sql = "SELECT " + _COLUMNS + " FROM l1 WHERE id > ?"
        return [_sqlite_row(r) for r in self.db.execute(sql, (row_id,))]

    def keys_after(self, row_id: int) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT key FROM l1 WHERE id > ?", (row_id,))]

    def store(self, row: L1Row, hits: str) -> int:
        deps = row.deps
        qvec = None if deps.qvec is None else np.asarray(deps.qvec, np.float32).tobytes()
        self.db.execute("DELETE FROM l1_docs WHERE key=?", (row.key,))
        self.db.execute(
            "INSERT OR REPLACE INTO l1 (key, scope, query, k, as_of, docs, qvec, dense_floor, "
            "bm25_floor, cands, bm25_scores, fused_gap, method, confidence, tier, created, freq, "
            "hits) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.key, row.scope, row.text, row.k, row.as_of, json.dumps(sorted(deps.docs)),
                qvec, deps.dense_floor, deps.bm25_floor,
                np.asarray(deps.cands, np.int64).tobytes(),
                np.asarray(deps.bm25_scores, np.float32).tobytes(),
                deps.fused_gap, deps.method, row.confidence, row.tier, row.created, row.freq, hits,
            ),
        )  # fmt: skip
        self.db.executemany(
            "INSERT OR IGNORE INTO l1_docs VALUES (?, ?)", [(d, row.key) for d in deps.docs]
        )
        return int(self.db.execute("SELECT id FROM l1 WHERE key=?", (row.key,)).fetchone()[0])

    def delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            marks = ",".join("?" * len(part))
            self.db.execute(f"DELETE FROM l1 WHERE key IN ({marks})", part)
            self.db.execute(f"DELETE FROM l1_docs WHERE key IN ({marks})", part)

    def delete_all(self) -> int:
        n = int(self.db.execute("SELECT COUNT(*) FROM l1").fetchone()[0])
        self.db.execute("DELETE FROM l1")
        self.db.execute("DELETE FROM l1_docs")
        return n

    def set_commit(self, commit: int) -> None:
        self.db.execute("INSERT OR REPLACE INTO l1_meta VALUES ('commit', ?)", (commit,))

    def caught_up(self) -> None:
        self._rows._data_version = self._rows._version()


class L1Cache(L1Memory):
    """Query cache: a memory hot set over a durable SQLite table shared by every process.

    Args:
        path: The SQLite file (its own file, so cache writes never contend with the archive).
        capacity: Most entries kept; past it, the least frequently used tenth is evicted.
        ttl_s: Seconds an entry stays valid.
        hot: Most entries whose hits are held in memory.
        fuzzy: Whether near-duplicate (typo-level) matching is on.
    """

    def __init__(
        self,
        path: Path,
        capacity: int = 10_000,
        ttl_s: float = 86_400.0,
        hot: int = 2_000,
        fuzzy: bool = True,
    ) -> None:
        self._sqlite = SQLiteL1Rows(path)
        self.db = self._sqlite.db
        super().__init__(self._sqlite, capacity, ttl_s, hot, fuzzy)
