"""Routing decisions and statistics: confidence, when to escalate to L3, and per-tier figures.

The store (:mod:`pensive_core.engine`) runs the tiers; this module holds the pure parts: how
confident an L2 answer is, which exact strings a question asks for, how to ask the archive's
full-text index for them, and the latency/confidence histograms behind ``Pensive.stats()``.
"""

from __future__ import annotations

import bisect
import sqlite3
import unicodedata
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .archive import write_transaction
from .fusion import Fused
from .tokenize import DIGIT_RE, TOKEN_RE, quoted_phrases
from .types import Hit

__all__ = ["confidence", "exact_needles", "missing_needles", "fts_all", "fts_any", "RouterStats"]


def confidence(fused: Sequence[Fused], lists: Mapping[str, Sequence[tuple[str, float]]]) -> float:
    """A heuristic in [0, 1] from retriever agreement, dense similarity and the fused margin.

    Agreement is the share of retrievers that put the top passage in their own top 10; the dense
    similarity of the top passage is mapped from [0.2, 0.7] to [0, 1]; the margin is the top
    fused score's lead over the second, relative to the top.
    """
    if not fused:
        return 0.0
    top = fused[0]
    agree = sum(1 for name in lists if top.ranks.get(name, 10**9) <= 10) / max(1, len(lists))
    dense = dict(lists.get("dense", []))
    sim = float(np.clip((dense.get(top.id, 0.0) - 0.2) / 0.5, 0.0, 1.0)) if dense else agree
    margin = (top.score - fused[1].score) / top.score if len(fused) > 1 and top.score > 0 else 1.0
    return round(float(np.clip(0.45 * agree + 0.4 * sim + 0.15 * margin, 0.0, 1.0)), 4)


def exact_needles(text: str) -> list[str]:
    """The exact strings a question asks for: quoted phrases, identifiers and long numbers.

    An identifier mixes letters and digits ("INV-4471", "Q3", "BRCA1", "COVID-19"); a number
    counts when it has four or more digits or a decimal point ("2024", "3.5"). Short plain
    numbers ("5", "10%") are quantities a passage may state in other words, not strings to find:
    on SciFact, escalating for them lowered nDCG@10 (benchmarks/results/tune_router.md).
    """
    nfkc = unicodedata.normalize("NFKC", text)
    out: list[str] = quoted_phrases(nfkc)
    for tok in TOKEN_RE.findall(nfkc):
        if not DIGIT_RE.search(tok):
            continue
        has_alpha = any(ch.isalpha() for ch in tok)
        digits = sum(ch.isdigit() for ch in tok)
        if has_alpha or digits >= 4 or "." in tok:
            low = tok.casefold()
            if low not in out:
                out.append(low)
    return out


def missing_needles(needles: Iterable[str], hits: Sequence[Hit]) -> list[str]:
    """Needles that no hit's text contains (case-insensitively)."""
    needles = list(needles)
    if not needles:
        return []  # most questions: nothing to look for, no passage to fold
    texts = [unicodedata.normalize("NFKC", h.text).casefold() for h in hits]
    return [n for n in needles if not any(n in t for t in texts)]


def _phrase(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def fts_all(needles: Sequence[str]) -> str:
    """An FTS5 query for documents holding every needle as a phrase."""
    return " AND ".join(_phrase(n) for n in needles)


def fts_any(words: Sequence[str]) -> str:
    """An FTS5 query for documents holding any of the words (ranked by BM25)."""
    return " OR ".join(_phrase(w) for w in dict.fromkeys(words))


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


class RouterStats:
    """Per-tier query counts, latency and confidence histograms.

    Recent latencies (this process) are kept exactly; lifetime histograms are shared by every
    process through a SQLite table and flushed every ``flush_every`` queries and on close.

    Args:
        db: A SQLite connection (the archive's) to keep lifetime figures in; None for memory only.
        flush_every: Queries between flushes.
    """

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS router_stats (tier TEXT NOT NULL, kind TEXT NOT NULL, "
        "bucket INTEGER NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (tier, kind, bucket))"
    )

    def __init__(self, db: sqlite3.Connection | None, flush_every: int = 256) -> None:
        self.db = db
        self.flush_every = flush_every
        self.recent: dict[str, deque[float]] = {}
        self._pending: dict[tuple[str, str, int], int] = {}
        self._n_pending = 0
        if db is not None:
            db.execute(self._SCHEMA)

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
        """Add this process's unflushed counts to the shared table."""
        if self.db is None or not self._pending:
            return
        try:
            with write_transaction(self.db):
                self.db.executemany(
                    "INSERT INTO router_stats VALUES (?, ?, ?, ?) ON CONFLICT(tier, kind, bucket) "
                    "DO UPDATE SET count = count + excluded.count",
                    [(t, k, b, n) for (t, k, b), n in self._pending.items()],
                )
        except sqlite3.Error:
            return  # kept pending: the next flush tries again
        self._pending = {}
        self._n_pending = 0

    def _lifetime(self) -> dict[tuple[str, str, int], int]:
        out = dict(self._pending)
        if self.db is not None:
            for t, k, b, n in self.db.execute("SELECT tier, kind, bucket, count FROM router_stats"):
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


def _exact(values: Iterable[float]) -> dict[str, float]:
    arr = np.fromiter(values, dtype=float)
    return {
        "count": len(arr),
        "p50_ms": round(float(np.percentile(arr, 50)), 4),
        "p95_ms": round(float(np.percentile(arr, 95)), 4),
        "p99_ms": round(float(np.percentile(arr, 99)), 4),
    }
