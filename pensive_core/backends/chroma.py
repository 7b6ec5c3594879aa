"""Chroma vector backend: embedded (``PersistentClient``) or client/server (``HttpClient``).

Pensive embeds; the collection is created with no embedding function of Chroma's own and
cosine space, and Chroma's distances (``1 - cosine``) are turned back into similarities. The
collection records the vector dimension, so opening it with another embedder is an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import ChromaConfig
from ..errors import BackendError, ConfigError, MissingDependencyError

__all__ = ["ChromaBackend"]


def _chromadb():  # type: ignore[no-untyped-def]
    try:
        import chromadb
    except ImportError as exc:
        raise MissingDependencyError("chromadb", "chroma", "The Chroma vector backend") from exc
    return chromadb


class ChromaBackend:
    """Vectors in a Chroma collection.

    Args:
        folder: The store's vector folder (the embedded database lives in it).
        dim: Vector dimension.
        options: The ``[backend.chroma]`` section.

    Raises:
        MissingDependencyError: If ``chromadb`` is not installed (extra ``chroma``).
        BackendError: If the server cannot be reached (the message names the address).
        ConfigError: If the collection holds vectors of another dimension.
    """

    name = "chroma"
    kind = "hnsw"  # Chroma searches an HNSW graph: approximate

    def __init__(self, folder: Path | None, dim: int, options: ChromaConfig | None = None) -> None:
        chromadb = _chromadb()
        self.cfg = options or ChromaConfig()
        self.dim = dim
        if self.cfg.mode == "http":
            self.address = (
                f"{'https' if self.cfg.ssl else 'http'}://{self.cfg.host}:{self.cfg.port}"
            )
            try:
                self.client = chromadb.HttpClient(
                    host=self.cfg.host, port=self.cfg.port, ssl=self.cfg.ssl
                )
                self.client.heartbeat()
            except Exception as exc:  # the client raises several types for a dead server
                raise BackendError(
                    f"cannot reach the Chroma server at {self.address} ({type(exc).__name__}: "
                    f"{exc}); start it with `chroma run --host {self.cfg.host} --port "
                    f"{self.cfg.port} --path DIR` or fix [backend.chroma] host/port"
                ) from None
        else:
            if folder is None:
                raise ConfigError("the embedded Chroma backend needs a store folder")
            folder.mkdir(parents=True, exist_ok=True)
            self.address = str(folder / "chroma")
            self.client = chromadb.PersistentClient(path=self.address)
        self.coll = self._collection(self.cfg.collection)
        stored = (self.coll.metadata or {}).get("pensive_dim")
        if stored is not None and int(stored) != dim:
            raise ConfigError(
                f"Chroma collection {self.cfg.collection!r} at {self.address} holds {stored}-d "
                f"vectors, not {dim}-d: use another [backend.chroma] collection"
            )

    def _collection(self, name: str) -> Any:
        meta = {"pensive_dim": self.dim, "hnsw:space": "cosine"}
        try:
            return self.client.get_or_create_collection(
                name=name, embedding_function=None, metadata=meta
            )
        except Exception as exc:
            raise BackendError(
                f"Chroma at {self.address}: cannot open collection {name!r}: {exc}"
            ) from exc

    def _batches(self, n: int) -> range:
        return range(0, n, max(1, int(self.client.get_max_batch_size())))

    def upsert(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Add vectors, replacing any already stored under the same ids."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ValueError(f"expected vectors of shape (n, {self.dim}), got {vectors.shape}")
        ids = list(ids)
        for i in self._batches(len(ids)):
            part = slice(i, i + int(self.client.get_max_batch_size()))
            self.coll.upsert(ids=ids[part], embeddings=vectors[part])

    def delete(self, ids: Sequence[str]) -> None:
        """Remove vectors by id; ids that are not stored are ignored."""
        ids = list(ids)
        for i in self._batches(len(ids)):
            self.coll.delete(ids=ids[i : i + int(self.client.get_max_batch_size())])

    def search(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Up to ``k`` ``(id, cosine similarity)`` pairs, best first."""
        n = min(k, self.count())
        if n <= 0:
            return []
        res = self.coll.query(
            query_embeddings=np.asarray(vector, dtype=np.float32).reshape(1, -1),
            n_results=n,
            include=["distances"],
        )
        return [(i, 1.0 - float(d)) for i, d in zip(res["ids"][0], res["distances"][0])]

    def fetch(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of ``ids`` (ids not stored are left out)."""
        ids = list(ids)
        out: dict[str, np.ndarray] = {}
        for i in self._batches(len(ids)):
            got = self.coll.get(
                ids=ids[i : i + int(self.client.get_max_batch_size())], include=["embeddings"]
            )
            for cid, vec in zip(got["ids"], got["embeddings"]):
                out[cid] = np.asarray(vec, dtype=np.float32)
        return out

    def count(self) -> int:
        """Number of stored vectors."""
        return int(self.coll.count())

    def persist(self) -> None:
        """Chroma writes through: nothing to do."""

    def close(self) -> None:
        """Release the client (the data stays)."""
        self.coll = None
