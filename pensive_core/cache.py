"""L1 hot cache: exact normalised-key answers, served from memory, durable in SQLite.

Keys are the query normalised for case, Unicode form, whitespace and punctuation, with
identifiers, numbers, dates and negations kept whole (so "Q3 2024" and "Q4 2024", "INV-4471"
and "INV-4472", "did X" and "did X not" are different keys), plus ``k``, ``as_of`` and the
query-time settings that shape the answer. Any change to the store's content bumps a generation
number, which empties the cache: an answer is never served after the documents behind it changed.
Eviction is least-frequently-used with aging (counts halve whenever the cache fills), and entries
expire after a TTL.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .timeutil import from_iso, to_iso
from .tokenize import TOKEN_RE
from .types import Hit

__all__ = ["L1Cache", "normalize_query", "cache_key"]


def normalize_query(text: str) -> str:
    """Normalise a question for exact-key caching.

    Case, Unicode compatibility forms, whitespace and punctuation between tokens are ignored;
    identifiers ("INV-4471"), numbers ("3.5", "2024"), "Q3" and negations stay whole.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(TOKEN_RE.findall(folded))


def cache_key(text: str, k: int, as_of: str | None, settings: Any) -> str:
    """The cache key of a query: its normal form plus everything else that shapes the answer."""
    raw = json.dumps([normalize_query(text), k, as_of, settings], sort_keys=True, default=str)
    return hashlib.blake2b(raw.encode(), digest_size=16).hexdigest()


@dataclass
class _Entry:
    hits: tuple[Hit, ...]
    confidence: float
    created: float
    freq: int


def _hit_to_json(h: Hit) -> dict[str, Any]:
    return {
        "doc_id": h.doc_id,
        "chunk_id": h.chunk_id,
        "text": h.text,
        "score": h.score,
        "metadata": dict(h.metadata),
        "timestamp": to_iso(h.timestamp),
        "sources": dict(h.sources),
    }


def _hit_from_json(d: dict[str, Any]) -> Hit:
    return Hit(
        d["doc_id"],
        d["chunk_id"],
        d["text"],
        d["score"],
        d["metadata"],
        from_iso(d["timestamp"]),
        d["sources"],
    )


class L1Cache:
    """Exact-key query cache with a memory hot set over a durable SQLite table.

    Args:
        path: The SQLite file (its own file, so cache writes never contend with the archive).
        capacity: Most entries kept; past it, the least frequently used tenth is evicted.
        ttl_s: Seconds an entry stays valid.
    """

    def __init__(self, path: Path, capacity: int = 10_000, ttl_s: float = 86_400.0) -> None:
        self.capacity = capacity
        self.ttl_s = ttl_s
        self.db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(
            "CREATE TABLE IF NOT EXISTS l1_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
            "CREATE TABLE IF NOT EXISTS l1 (key TEXT PRIMARY KEY, generation INTEGER NOT NULL,"
            " created REAL NOT NULL, freq INTEGER NOT NULL, confidence REAL NOT NULL,"
            " hits TEXT NOT NULL);"
        )
        row = self.db.execute("SELECT value FROM l1_meta WHERE key='generation'").fetchone()
        self.generation = int(row[0]) if row else 0
        self._mem: dict[str, _Entry] = {}
        self.hits = self.misses = self.evictions = 0

    def get(self, key: str) -> tuple[tuple[Hit, ...], float] | None:
        """The cached ``(hits, confidence)`` for a key, or None on a miss or an expired entry."""
        entry = self._mem.get(key)
        if entry is None:
            row = self.db.execute(
                "SELECT created, freq, confidence, hits FROM l1 WHERE key=? AND generation=?",
                (key, self.generation),
            ).fetchone()
            if row is not None:
                hits = tuple(_hit_from_json(d) for d in json.loads(row[3]))
                entry = self._mem[key] = _Entry(hits, row[2], row[0], row[1])
        if entry is None or time.time() - entry.created > self.ttl_s:
            if entry is not None:
                self._drop(key)
            self.misses += 1
            return None
        entry.freq += 1
        self.hits += 1
        return entry.hits, entry.confidence

    def put(self, key: str, hits: Sequence[Hit], confidence: float) -> None:
        """Store an answer under a key (replacing any older one)."""
        entry = _Entry(tuple(hits), confidence, time.time(), 1)
        self._mem[key] = entry
        self.db.execute(
            "INSERT OR REPLACE INTO l1 VALUES (?, ?, ?, ?, ?, ?)",
            (
                key,
                self.generation,
                entry.created,
                1,
                confidence,
                json.dumps([_hit_to_json(h) for h in hits], ensure_ascii=False),
            ),
        )
        if len(self._mem) > self.capacity:
            self._evict()

    def _evict(self) -> None:
        # LFU with aging: the least used tenth goes (oldest first among equals), and every
        # surviving count halves so that yesterday's favourites do not stay forever
        victims = sorted(self._mem, key=lambda k: (self._mem[k].freq, self._mem[k].created))
        for key in victims[: max(1, len(self._mem) // 10)]:
            self._drop(key)
            self.evictions += 1
        for entry in self._mem.values():
            entry.freq = max(1, entry.freq // 2)

    def _drop(self, key: str) -> None:
        self._mem.pop(key, None)
        self.db.execute("DELETE FROM l1 WHERE key=?", (key,))

    def invalidate_all(self) -> None:
        """Forget every answer: called whenever the store's content changes."""
        self.generation += 1
        self.db.execute(
            "INSERT OR REPLACE INTO l1_meta VALUES ('generation', ?)", (self.generation,)
        )
        self.db.execute("DELETE FROM l1 WHERE generation < ?", (self.generation,))
        self._mem.clear()

    def __len__(self) -> int:
        return len(self._mem)

    def close(self) -> None:
        """Persist entry frequencies and close the database."""
        self.db.executemany(
            "UPDATE l1 SET freq=? WHERE key=?", [(e.freq, k) for k, e in self._mem.items()]
        )
        self.db.close()
