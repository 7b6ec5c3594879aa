"""L2 retrieval: dense (the vector backend) and sparse (BM25) candidate lists, fused."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..embedders.base import checked
from ..fusion import fuse
from .state import QueryState

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["HybridRetrieval"]


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
                state.lists["dense"] = backend.search(
                    state.qvec, depth, where=state.where, namespace=comps.config.backend.namespace
                )
        if weights["bm25"] > 0:
            with state.timed("bm25_ms"):
                state.lists["bm25"] = comps.sparse.search(
                    state.search_text or state.text, depth, state.allowed
                )
        with state.timed("fusion_ms"):
            state.fused = fuse(cfg.method, state.lists, weights, cfg.k)
        state.weights = weights
