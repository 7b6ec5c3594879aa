"""L2 retrieval: dense (the vector backend) and sparse (BM25) candidate lists, fused."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..embedders.base import checked
from ..fusion import fuse
from .state import QueryState

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["HybridRetrieval", "steady"]

# Dense scores are float32 sums whose last bits depend on the CPU's vector instructions: an
# AVX-512 machine and an AVX2 one can differ by an ulp, and two passages 2e-9 apart then swap
# places, at a candidate list's edge too. Scores closer than this are ranked by id instead, so
# the same store ranks the same way on every machine (the scores themselves are kept).
TIE = 1e-7
_SLACK = 8  # candidates fetched past the depth, so a tie at the edge is settled by id too


def steady(scored: list[tuple[str, float]], depth: int) -> list[tuple[str, float]]:
    """A dense list (best first) with runs of scores each within :data:`TIE` of the one
    before ordered by id, cut to ``depth``. Scores are not changed."""
    out: list[tuple[str, float]] = []
    run: list[tuple[str, float]] = []
    for row in sorted(scored, key=lambda r: -r[1]):
        if run and run[-1][1] - row[1] >= TIE:
            out.extend(sorted(run, key=lambda r: r[0]))
            run = []
        run.append(row)
    out.extend(sorted(run, key=lambda r: r[0]))
    return out[:depth]


class HybridRetrieval:
    """Dense and BM25 candidates, up to ``[fusion] depth`` each, fused by ``[fusion] method``
    with ``[fusion] weights`` (a retriever at weight 0 is not asked)."""

    def __init__(self, comps: Components) -> None:
        self._comps = comps

    def run(self, state: QueryState) -> None:
        """Fill ``state.lists``, ``state.weights`` and ``state.fused`` (and ``state.qvec``)."""
        comps = self._comps
        cfg = comps.config.fusion
        depth = cfg.depth
        weights = {name: cfg.weights.get(name, 1.0) for name in ("dense", "bm25")}
        backend = comps.backend
        if weights["dense"] > 0 and backend is not None:
            if state.qvec is None:
                with state.timed("embed_ms"):
                    embedder = comps.embedder.get()
                    state.qvec = checked(
                        embedder, embedder.embed_query(state.search_text or state.text), None
                    )
            with state.timed("dense_ms"):
                found = backend.search(
                    state.qvec,
                    depth + _SLACK,
                    where=state.where,
                    namespace=comps.config.backend.namespace,
                )
                state.lists["dense"] = steady(found, depth)
        if weights["bm25"] > 0:
            with state.timed("bm25_ms"):
                state.lists["bm25"] = comps.sparse.search(
                    state.search_text or state.text, depth, state.allowed
                )
        with state.timed("fusion_ms"):
            state.fused = fuse(cfg.method, state.lists, weights, cfg.k)
        state.weights = weights
