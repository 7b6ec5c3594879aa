"""A model-free embedder: signed feature hashing of words and character trigrams.

It needs nothing but numpy, loads instantly and is deterministic, which makes it right for tiny
installs and fast tests. It captures lexical overlap only; use a real model for semantics.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

__all__ = ["HashEmbedder"]

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Feature-hashing embedder.

    Args:
        dim: Output dimension.
        max_tokens: Window used for chunking (counted in words).
    """

    def __init__(self, dim: int = 384, max_tokens: int = 256) -> None:
        self.dim = dim
        self.max_tokens = max_tokens
        self.name = f"hash-{dim}"

    def _bucket(self, feature: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        return h % self.dim, (1.0 if (h >> 63) & 1 else -1.0)

    def _one(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            i, s = self._bucket("w:" + word)
            vec[i] += s
            padded = f"#{word}#"
            for j in range(len(padded) - 2):
                i, s = self._bucket("t:" + padded[j : j + 3])
                vec[i] += 0.5 * s
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm > 0 else vec

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed passages into unit vectors (zero vector for text with no words)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._one(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query."""
        return self._one(text)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Count words (this embedder has no sub-word vocabulary)."""
        return [len(_WORD.findall(t)) for t in texts]
