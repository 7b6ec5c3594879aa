"""The sparse-index plug point: lexical retrieval over passages, as the engine uses it."""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import Protocol, runtime_checkable

__all__ = ["SparseIndex"]


@runtime_checkable
class SparseIndex(Protocol):
    """A persistent lexical index of passages (BM25): written by ingest, searched by L2.

    :class:`~pensive_core.sparse.BM25Index` (segment files beside the store) is the embedded
    implementation; :class:`~pensive_core.sparse.postgres.PostgresBM25` keeps the same scores
    in Postgres tables. :class:`pensive_core.testing.SparseIndexTests` is what both pass.

    Attributes:
        n_live: Passages indexed (committed or pending).
        rebuilt: Whether the last commit rebuilt segments that existed before it (every
            passage's length norm may have moved: cached answers cannot be trusted).
        n_terms: Distinct terms indexed (reported by ``stats()``).
        n_segments: Segments the index is kept in (reported by ``stats()``).
    """

    rebuilt: bool

    @property
    def n_live(self) -> int: ...

    @property
    def n_terms(self) -> int: ...

    @property
    def n_segments(self) -> int: ...

    def add(self, chunk_id: str, text: str) -> None:
        """Index ``text`` under ``chunk_id`` (replacing what the id held)."""
        ...

    def delete(self, chunk_ids: Sequence[str]) -> None:
        """Remove passages; unknown ids are ignored."""
        ...

    def commit(self) -> None:
        """Make every change durable (atomically)."""
        ...

    def search(
        self, query: str, k: int, allowed: Container[str] | None = None
    ) -> list[tuple[str, float]]:
        """Up to ``k`` ``(passage id, score)`` pairs, best first (only ``allowed`` ids, if
        given)."""
        ...

    def scores_for(self, query: str, chunk_ids: Sequence[str]) -> dict[str, float]:
        """The query's score of each of ``chunk_ids``."""
        ...

    def idf_shift(self, query: str) -> float:
        """The most any passage's score for ``query`` moved between the last two commits."""
        ...

    def ids(self) -> set[str]:
        """Every indexed passage id."""
        ...

    def __contains__(self, chunk_id: str) -> bool:
        """Whether the passage is indexed."""
        ...
