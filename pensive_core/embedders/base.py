"""The embedder plug point."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import EmbedderError

__all__ = ["Embedder", "QueryCache", "checked"]


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


def checked(embedder: Embedder, out: Any, n: int | None) -> np.ndarray:
    """What an embedder returned, as float32, if it is what it promised: ``(n, dim)`` rows
    (``n`` None: one ``(dim,)`` query vector) of finite numbers. A plug-in's NaN vector would
    otherwise be stored and turn every score near it into NaN.

    Raises:
        EmbedderError: Naming the embedder and what was wrong.
    """
    arr = np.asarray(out, dtype=np.float32)
    want = (embedder.dim,) if n is None else (n, embedder.dim)
    if arr.shape != want:
        raise EmbedderError(
            f"the embedder {embedder.name!r} returned an array of shape {arr.shape}, "
            f"expected {want}"
        )
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).any(axis=-1).sum()) if n is not None else 1
        raise EmbedderError(
            f"the embedder {embedder.name!r} returned non-finite values (NaN or infinity) "
            f"in {bad} vector(s); nothing of them was stored"
        )
    return arr


class QueryCache:
    """An embedder that remembers its last ``size`` query vectors (least recently used out).

    A question asked again (a different filter or ``as_of``, the L1 cache off, a conversation
    recall that asks two indexes) is not embedded twice; with one torch thread a query
    embedding is most of an L2 query's time. Passages are never cached here: ingest reuses
    stored vectors by content hash instead.
    """

    def __init__(self, inner: Embedder, size: int = 1024) -> None:
        self.inner = inner
        self.name, self.dim, self.max_tokens = inner.name, inner.dim, inner.max_tokens
        self.size = size
        self.hits = 0
        self._last: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            vec = self._last.get(text)
            if vec is not None:
                self._last.move_to_end(text)
                self.hits += 1
                return vec
        vec = np.asarray(self.inner.embed_query(text), dtype=np.float32)
        vec.flags.writeable = False  # shared by every caller that asks the same question
        with self._lock:
            self._last[text] = vec
            while len(self._last) > self.size:
                self._last.popitem(last=False)
        return vec

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def __getattr__(self, name: str) -> Any:  # the model's own extras (close, batch_size...)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
