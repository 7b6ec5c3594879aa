"""The rerank stage (``[rerank]``, off by default): a cross-encoder reads the question with
each of L2's best candidates and orders them by its score."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..rerank import rerank_or_keep
from ..types import Hit
from .state import QueryState

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["RerankStage"]


class RerankStage:
    """Reranks ``max(k, [rerank] candidates)`` hits and keeps the best ``k``; each kept hit's
    score becomes the reranker's and its ``sources`` gain ``"rerank"`` (its new rank). A
    reranker that fails (raises, returns the wrong number of scores or a non-finite one)
    leaves L2's order, and is counted in ``stats()["rerank"]["failed"]``."""

    def __init__(self, comps: Components) -> None:
        self._comps = comps

    @property
    def on(self) -> bool:
        """Whether a reranker is configured."""
        return self._comps.reranker is not None

    def candidates(self, k: int) -> int:
        """How many hits to build for a query asking for ``k``."""
        return max(k, self._comps.config.rerank.candidates) if self.on else k

    def run(self, state: QueryState, hits: list[Hit]) -> list[Hit]:
        """The best ``state.k`` of ``hits`` by the reranker (or the first ``k`` if it fails)."""
        comps = self._comps
        reranker = comps.reranker
        if reranker is None or not hits:
            return hits[: state.k]
        counts = comps.counters["rerank"]
        with state.timed("rerank_ms"):
            ranked = rerank_or_keep(reranker, state.text, [h.text for h in hits], state.k)
        counts["runs"] += 1
        if ranked is None:
            counts["failed"] += 1
            return hits[: state.k]
        return [
            dataclasses.replace(
                hits[i], score=float(score), sources={**hits[i].sources, "rerank": r}
            )
            for r, (i, score) in enumerate(ranked, start=1)
        ]
