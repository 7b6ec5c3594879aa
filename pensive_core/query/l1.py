"""The L1 stage: a question asked before (or a variant of it) answered from the hot cache,
and a new answer stored with what it depends on."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cache import Cached, Deps, QueryKey, chunk_hashes, make_key
from ..errors import BackendError
from ..filters import canonical
from ..fusion import Fused
from ..timeutil import to_iso
from ..types import Hit
from .request import QueryRequest
from .temporal import TemporalStage

if TYPE_CHECKING:
    from ..components import Components

log = logging.getLogger(__name__)

__all__ = ["CacheStage"]


def _min_gap(scores: list[float]) -> float:
    return min((a - b for a, b in zip(scores, scores[1:])), default=float("inf"))


class CacheStage:
    """Looks questions up in L1 and stores answers there (``[router] l1``).

    An answer is cached only when nothing but the question decides it: not with a context,
    not with learning on (answers change as they are used), not for a relative time ("last
    week"), and under a key that holds every query-time setting that shapes it.
    """

    def __init__(self, comps: Components, temporal: TemporalStage) -> None:
        self._comps = comps
        self._temporal = temporal

    def settings(self) -> tuple[Any, ...]:
        """Everything besides the question that changes the answer (part of the key)."""
        cfg = self._comps.config
        f, b, r = cfg.fusion, cfg.bm25, cfg.router
        out: tuple[Any, ...] = (
            (f.method, f.k, f.depth, tuple(sorted(f.weights.items()))),
            (b.method, b.k1, b.b, b.stemmer, b.stopwords),
            (r.l3_exact, r.l3_below),
            self._temporal.settings(),
        )
        if self._comps.reranker is not None:  # only then: keys made without it stay valid
            rr = cfg.rerank
            made_by = rr.model or type(self._comps.reranker).__qualname__
            out = (*out, ("rerank", made_by, rr.candidates))
        return out

    def key(self, req: QueryRequest) -> QueryKey | None:
        """The request's cache key, or None when L1 must not be used for it."""
        comps = self._comps
        l1 = comps.l1
        if l1 is None:
            return None
        # catch up with other processes (one PRAGMA, or one Postgres round trip, when none
        # wrote): their invalidations, their answers, and a cache a failed change set aside
        # (its commit moved back)
        l1.sync()
        if l1.commit != comps.commit_no or req.context or comps.learning is not None:
            return None
        settings = self.settings()
        if req.where is not None:  # a filtered answer is another question's answer
            settings = (*settings, canonical(req.where))
        return make_key(req.text, req.k, to_iso(req.cutoff), settings)

    def lookup(self, qk: QueryKey, *, peek: bool = False) -> Cached | None:
        """The cached answer under ``qk``, or None (``peek``: look only, count nothing)."""
        assert self._comps.l1 is not None
        return self._comps.l1.get(qk, peek=peek)

    def store(
        self, qk: QueryKey, hits: list[Hit], confidence: float, tier: str, deps: Deps
    ) -> None:
        """Keep an answer computed at the current commit (best effort: a cache that cannot
        be written, on a full or read-only disk, costs the next asker a computation, never
        this answer)."""
        assert self._comps.l1 is not None
        try:
            self._comps.l1.put(qk, hits, confidence, tier, deps, self._comps.commit_no)
        except (sqlite3.Error, BackendError) as exc:  # SQLite's, or a Postgres cache's
            log.warning("an answer was not cached (%s): the L1 cache could not be written", exc)

    def deps(
        self,
        hits: list[Hit],
        fused: list[Fused],
        lists: Mapping[str, list[tuple[str, float]]],
        qvec: np.ndarray | None,
        decides: int,
    ) -> Deps:
        """What an answer depends on: its documents, its query vector, the floors of its
        candidate lists, every candidate, its BM25 scores and the smallest fused margin among
        the first ``decides`` candidates (and the next one)."""
        if self._comps.l1 is None:
            return Deps()
        cfg = self._comps.config.fusion
        depth = cfg.depth
        dense, bm25 = lists.get("dense", []), lists.get("bm25", [])
        return Deps(
            docs=frozenset(h.doc_id for h in hits),
            qvec=None if qvec is None else np.asarray(qvec, dtype=np.float32),
            dense_floor=dense[-1][1] if len(dense) >= depth else float("-inf"),
            bm25_floor=bm25[-1][1] if len(bm25) >= depth else 0.0,
            cands=chunk_hashes({i for lst in lists.values() for i, _ in lst}),
            bm25_scores=np.asarray([sc for _, sc in bm25], dtype=np.float32),
            fused_gap=_min_gap([f.score for f in fused[: decides + 1]]),
            method=cfg.method,
        )
