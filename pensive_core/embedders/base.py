"""The embedder plug point."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder"]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised float32 vectors.

    Attributes:
        name: Identifies the model; saved with a store so it reopens with the same embedder.
        dim: Vector dimension.
        max_tokens: The most tokens the model reads per text (special tokens excluded);
            chunking keeps every passage within it.
    """

    name: str
    dim: int
    max_tokens: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed passages: returns an ``(len(texts), dim)`` float32 array of unit rows."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query: returns a ``(dim,)`` float32 unit vector."""
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Count the model's tokens in each text, special tokens excluded."""
        ...
