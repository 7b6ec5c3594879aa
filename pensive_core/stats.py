"""Query statistics: per-tier counts, latency and confidence histograms behind
``Pensive.stats()["queries"]``, shared by every process that opens the store."""

from __future__ import annotations

import bisect
import sqlite3
from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .archive import write_transaction

if TYPE_CHECKING:
    from .engine import Pensive

__all__ = [
    "CountRows",
    "QueryStats",
    "RouterStats",
    "SQLiteCountRows",
    "TierStats",
    "store_stats",
]


class QueryStats(Protocol):
    """Where answered queries are counted. :class:`RouterStats` (a table in the store's
    SQLite file, flushed in batches) is the embedded implementation."""

    def record(self, tier: str, latency_ms: float, confidence: float) -> None:
        """Count one answered query."""
        ...

    def flush(self) -> None:
        """Persist what was counted since the last flush."""
        ...

    def summary(self) -> dict[str, Any]:
        """Lifetime and recent figures per tier."""
        ...


# Latency histogram: 20 log-spaced buckets per decade from 1 microsecond to 100 seconds.
_LAT_EDGES = 10.0 ** np.arange(-3.0, 5.0 + 1e-9, 0.05)
_CONF_BINS = 10


_LAT_EDGE_LIST = _LAT_EDGES.tolist()


def _lat_bucket(ms: float) -> int:
    return bisect.bisect_left(_LAT_EDGE_LIST, ms)


def _hist_percentile(counts: Mapping[int, int], q: float) -> float:
    total = sum(counts.values())
    if not total:
        return 0.0
    target = q / 100.0 * total
    seen = 0
    for b in sorted(counts):
        seen += counts[b]
        if seen >= target:
            lo = _LAT_EDGES[max(0, b - 1)] if b > 0 else 0.0
            hi = _LAT_EDGES[min(b, len(_LAT_EDGES) - 1)]
            return float(np.sqrt(lo * hi)) if lo > 0 else float(hi)
    return float(_LAT_EDGES[-1])


class CountRows(Protocol):
    """Where lifetime counts are kept, shared by every process: ``(tier, kind, bucket, count)``
    rows, ``kind`` being ``"latency"`` or ``"confidence"``. :class:`SQLiteCountRows` is the
    embedded one."""

    def add(self, counts: list[tuple[str, str, int, int]]) -> bool:
        """Add counts to the stored ones in one transaction; False if they could not be
        written (the caller keeps them for the next try)."""
        ...

    def read(self) -> list[tuple[str, str, int, int]]:
        """Every stored count."""
        ...


class SQLiteCountRows:
    """Lifetime counts in a ``router_stats`` table of a SQLite connection (made if absent).

    Args:
        db: A connection opened with ``isolation_level=None``.
    """

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS router_stats (tier TEXT NOT NULL, kind TEXT NOT NULL, "
        "bucket INTEGER NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (tier, kind, bucket))"
    )

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        db.execute(self._SCHEMA)

    def add(self, counts: list[tuple[str, str, int, int]]) -> bool:
        """Add counts (False when SQLite refuses: a locked or full database)."""
        try:
            with write_transaction(self.db):
                self.db.executemany(
                    "INSERT INTO router_stats VALUES (?, ?, ?, ?) ON CONFLICT(tier, kind, bucket) "
                    "DO UPDATE SET count = count + excluded.count",
                    counts,
                )
        except sqlite3.Error:
            return False
        return True

    def read(self) -> list[tuple[str, str, int, int]]:
        """Every stored count."""
        return [
            (t, k, int(b), int(n))
            for t, k, b, n in self.db.execute("SELECT tier, kind, bucket, count FROM router_stats")
        ]


class TierStats:
    """Per-tier query counts, latency and confidence histograms over any :class:`CountRows`.

    Recent latencies (this process) are kept exactly; lifetime histograms are shared by every
    process through the rows, added to them every ``flush_every`` queries and on close.

    Args:
        rows: Where lifetime counts are kept; None for memory only.
        flush_every: Queries between flushes.
    """

    def __init__(self, rows: CountRows | None, flush_every: int = 256) -> None:
        self.rows = rows
        self.flush_every = flush_every
        self.recent: dict[str, deque[float]] = {}
        self._pending: dict[tuple[str, str, int], int] = {}
        self._n_pending = 0

    def record(self, tier: str, latency_ms: float, confidence: float) -> None:
        """Count one answered query."""
        self.recent.setdefault(tier, deque(maxlen=10_000)).append(latency_ms)
        for kind, bucket in (
            ("latency", _lat_bucket(latency_ms)),
            ("confidence", min(_CONF_BINS - 1, int(confidence * _CONF_BINS))),
        ):
            key = (tier, kind, bucket)
            self._pending[key] = self._pending.get(key, 0) + 1
        self._n_pending += 1
        if self._n_pending >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Add this process's unflushed counts to the shared rows (kept pending if they cannot
        be written: the next flush tries again)."""
        if self.rows is None or not self._pending:
            return
        if not self.rows.add([(t, k, b, n) for (t, k, b), n in sorted(self._pending.items())]):
            return
        self._pending = {}
        self._n_pending = 0

    def _lifetime(self) -> dict[tuple[str, str, int], int]:
        out = dict(self._pending)
        if self.rows is not None:
            for t, k, b, n in self.rows.read():
                out[(t, k, b)] = out.get((t, k, b), 0) + n
        return out

    def summary(self) -> dict[str, Any]:
        """Lifetime and recent figures per tier.

        Returns:
            ``{"total": n, "L1": {...}, "L2": {...}, "L3": {...}}`` where each tier has ``count``,
            ``share``, ``p50_ms``/``p95_ms``/``p99_ms`` (lifetime, from the histogram, within
            about 6%), ``recent`` (exact percentiles over this process's last 10,000 queries) and
            ``confidence`` (counts per tenth of [0, 1]).
        """
        life = self._lifetime()
        counts: dict[str, int] = {}
        lat: dict[str, dict[int, int]] = {}
        conf: dict[str, list[int]] = {}
        for (tier, kind, bucket), n in life.items():
            if kind == "latency":
                counts[tier] = counts.get(tier, 0) + n
                lat.setdefault(tier, {})[bucket] = n
            else:
                conf.setdefault(tier, [0] * _CONF_BINS)[bucket] += n
        total = sum(counts.values())
        out: dict[str, Any] = {"total": total}
        for tier in sorted(counts):
            recent = self.recent.get(tier)
            out[tier] = {
                "count": counts[tier],
                "share": round(counts[tier] / total, 4) if total else 0.0,
                "p50_ms": round(_hist_percentile(lat[tier], 50), 4),
                "p95_ms": round(_hist_percentile(lat[tier], 95), 4),
                "p99_ms": round(_hist_percentile(lat[tier], 99), 4),
                "recent": _exact(recent) if recent else None,
                "confidence": conf.get(tier, [0] * _CONF_BINS),
            }
        return out


class RouterStats(TierStats):
    """Per-tier query statistics with lifetime counts in the store's SQLite file.

    Args:
        db: A SQLite connection (the archive's) to keep lifetime figures in; None for memory only.
        flush_every: Queries between flushes.
    """

    def __init__(self, db: sqlite3.Connection | None, flush_every: int = 256) -> None:
        super().__init__(None if db is None else SQLiteCountRows(db), flush_every)
        self.db = db


def _exact(values: Iterable[float]) -> dict[str, float]:
    arr = np.fromiter(values, dtype=float)
    return {
        "count": len(arr),
        "p50_ms": round(float(np.percentile(arr, 50)), 4),
        "p95_ms": round(float(np.percentile(arr, 95)), 4),
        "p99_ms": round(float(np.percentile(arr, 99)), 4),
    }


def store_stats(store: Pensive, *, disk: bool = True) -> dict[str, Any]:
    """What :meth:`Pensive.stats <pensive_core.Pensive.stats>` returns, for an open store."""
    comps = store.components
    with comps.lock:
        # a reader reloads what the writer committed since its last look, as a query
        # does: the vector and BM25 counts are then as current as the archive's
        comps.refresh()
        docs, chunks = comps.archive.counts()
    backend = comps.backend
    return {
        "path": str(store.path),
        "read_only": store.read_only,
        "commit": comps.commit_no,
        "documents": docs,
        "chunks": chunks,
        "vectors": backend.count(namespace=comps.config.backend.namespace) if backend else 0,
        "namespace": comps.config.backend.namespace,
        "backend": comps.config.backend.name,
        "index": None if backend is None else backend.kind,
        "embedder": comps.config.embedder.name,
        "bm25_terms": comps.sparse.n_terms,
        "bm25_segments": comps.sparse.n_segments,
        "fusion": comps.config.fusion.method,
        "disk_bytes": comps.storage.disk_bytes() if disk else None,
        "queries": comps.stats.summary(),
        "l1": None if comps.l1 is None else {**comps.l1.stats(), "refreshed": store.l1_refreshed},
        "l3": dict(store.l3_counts),
        "graph": None if comps.graph is None else comps.graph.counts(),
        "temporal": None if comps.temporal is None else comps.temporal.counts(),
        "context": {
            kind: None if gen is None else gen.name for kind, gen in comps.contexts.items()
        },
        "rerank": None if comps.reranker is None else dict(comps.counters["rerank"]),
    }
