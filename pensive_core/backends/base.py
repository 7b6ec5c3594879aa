"""The vector backend plug point."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["VectorBackend"]


@runtime_checkable
class VectorBackend(Protocol):
    """Stores unit vectors by string id and finds the nearest by inner product.

    Scores are higher-is-better cosine similarities; each backend converts its own distances.
    """

    name: str
    dim: int

    def upsert(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Add vectors, replacing any already stored under the same ids."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Remove vectors by id; ids that are not stored are ignored."""
        ...

    def search(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Return up to ``k`` ``(id, score)`` pairs, best first."""
        ...

    def fetch(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Return the stored vectors of ``ids`` (ids not stored are left out)."""
        ...

    def count(self) -> int:
        """Number of stored vectors."""
        ...

    def persist(self) -> None:
        """Make everything written so far durable (atomically)."""
        ...

    def close(self) -> None:
        """Release resources; persists first."""
        ...
