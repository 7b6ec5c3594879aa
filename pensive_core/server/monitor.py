"""What the dashboard shows: per-tier counts and latency percentiles, the last queries with the
tier that answered and each hit's sources, and the ingest jobs with their progress.

Kept in memory per namespace, for the server's lifetime (``pensive stats`` has the store's
lifetime figures).
"""

from __future__ import annotations

import threading
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

__all__ = ["Job", "Monitor"]

_TIERS = ("L1", "L2", "L3")
_WINDOW = 10_000  # latencies kept per tier for percentiles
_JOBS_KEPT = 200


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


@dataclass
class Job:
    """One ingest, upload or delete sent to the writer.

    Args:
        id: ``j-`` and a random hex id.
        namespace: The namespace it writes to (only that namespace's keys can see it).
        kind: ``ingest``, ``upload`` or ``delete``.
        total: Documents in it.
    """

    id: str
    namespace: str
    kind: str
    total: int
    state: str = "queued"  # queued | running | done | failed
    done: int = 0
    report: dict[str, Any] | None = None
    error: dict[str, str] | None = None
    created: str = field(default_factory=_now)
    started: str | None = None
    finished: str | None = None

    def view(self) -> dict[str, Any]:
        """The job as the API returns it."""
        return {
            "id": self.id,
            "kind": self.kind,
            "state": self.state,
            "total": self.total,
            "done": self.done,
            "report": self.report,
            "error": self.error,
            "created": self.created,
            "started": self.started,
            "finished": self.finished,
        }


class Monitor:
    """Live figures of one namespace, safe to update from many threads.

    Args:
        recent: How many of the last queries to keep.
    """

    def __init__(self, recent: int = 50) -> None:
        self._lock = threading.Lock()
        self._recent: deque[dict[str, Any]] = deque(maxlen=max(recent, 0) or None)
        self._keep_recent = recent > 0
        self._latency: dict[str, deque[float]] = {t: deque(maxlen=_WINDOW) for t in _TIERS}
        self._count = dict.fromkeys(_TIERS, 0)
        self._jobs: dict[str, Job] = {}

    # -- queries --------------------------------------------------------------------------------
    def record_query(self, text: str, result: Any) -> None:
        """Count a query result (a :class:`~pensive_core.types.QueryResult`)."""
        tier = result.tier if result.tier in self._count else "L2"
        entry = {
            "time": _now(),
            "text": text[:500],
            "tier": tier,
            "latency_ms": round(float(result.latency_ms), 3),
            "confidence": round(float(result.confidence), 4),
            "hits": [
                {
                    "doc_id": h.doc_id,
                    "chunk_id": h.chunk_id,
                    "score": round(float(h.score), 6),
                    "sources": dict(h.sources),
                }
                for h in result.hits
            ],
        }
        with self._lock:
            self._count[tier] += 1
            self._latency[tier].append(float(result.latency_ms))
            if self._keep_recent:
                self._recent.appendleft(entry)

    def queries(self) -> dict[str, Any]:
        """Per-tier and overall counts, shares and latency percentiles (ms)."""
        with self._lock:
            counts = dict(self._count)
            lat = {t: np.asarray(self._latency[t], dtype=np.float64) for t in _TIERS}
        total = sum(counts.values())
        tiers: dict[str, dict[str, float | None]] = {
            t: {
                "count": counts[t],
                "share": round(counts[t] / total, 4) if total else 0.0,
                **_percentiles(lat[t]),
            }
            for t in _TIERS
        }
        every = np.concatenate(list(lat.values()))
        return {"count": total, **_percentiles(every), "tiers": tiers}

    def recent(self) -> list[dict[str, Any]]:
        """The last queries, newest first."""
        with self._lock:
            return list(self._recent)

    # -- jobs -----------------------------------------------------------------------------------
    def new_job(self, namespace: str, kind: str, total: int) -> Job:
        """Register a job (the oldest finished ones are forgotten past a few hundred)."""
        job = Job(f"j-{uuid.uuid4().hex[:16]}", namespace, kind, total)
        with self._lock:
            self._jobs[job.id] = job
            if len(self._jobs) > _JOBS_KEPT:
                for jid in [j.id for j in self._jobs.values() if j.finished][: _JOBS_KEPT // 4]:
                    del self._jobs[jid]
        return job

    def job(self, job_id: str) -> Job | None:
        """A job by id."""
        with self._lock:
            return self._jobs.get(job_id)

    def jobs(self) -> list[Job]:
        """The jobs kept, newest first."""
        with self._lock:
            return sorted(self._jobs.values(), key=lambda j: j.created, reverse=True)

    def update(self, job: Job, **changes: Any) -> None:
        """Change a job's fields under the lock."""
        with self._lock:
            for name, value in changes.items():
                setattr(job, name, value)


def _percentiles(values: np.ndarray) -> dict[str, float | None]:
    if not len(values):
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None}
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {
        "p50_ms": round(float(p50), 3),
        "p95_ms": round(float(p95), 3),
        "p99_ms": round(float(p99), 3),
    }
