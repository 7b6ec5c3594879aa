"""A numpy-only exact backend: brute-force inner product, persisted as ``.npy`` + JSON."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._files import read_manifest, remove_stale, write_manifest

__all__ = ["MemoryBackend"]


class MemoryBackend:
    """Exact search with no dependency beyond numpy; right for small stores and tests.

    Args:
        folder: Where to persist; None keeps everything in memory only.
        dim: Vector dimension.
        options: Unused.
    """

    name = "memory"

    def __init__(self, folder: Path | None, dim: int, options: Any = None) -> None:
        self.dim = dim
        self.folder = folder
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._vecs = np.zeros((0, dim), dtype=np.float32)
        self._gen = 0
        manifest = read_manifest(folder, "memory.json") if folder else None
        if manifest and folder is not None:
            self._gen = manifest["generation"]
            self._ids = list(manifest["ids"])
            self._vecs = np.load(folder / manifest["vectors"], allow_pickle=False)
            self._pos = {cid: i for i, cid in enumerate(self._ids)}

    def upsert(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Add or replace vectors."""
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        self.delete([i for i in ids if i in self._pos])
        self._vecs = np.concatenate([self._vecs, vectors]) if len(self._vecs) else vectors.copy()
        for cid in ids:
            self._pos[cid] = len(self._ids)
            self._ids.append(cid)

    def delete(self, ids: Sequence[str]) -> None:
        """Remove vectors; unknown ids are ignored."""
        drop = {self._pos[i] for i in ids if i in self._pos}
        if not drop:
            return
        keep = np.array([i for i in range(len(self._ids)) if i not in drop], dtype=np.int64)
        self._vecs = self._vecs[keep]
        self._ids = [self._ids[i] for i in keep]
        self._pos = {cid: i for i, cid in enumerate(self._ids)}

    def search(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Exact inner-product top-k."""
        if not self._ids or k <= 0:
            return []
        scores = self._vecs @ np.asarray(vector, dtype=np.float32)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self._ids[i], float(scores[i])) for i in top]

    def fetch(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by id; unknown ids are left out."""
        return {i: self._vecs[self._pos[i]].copy() for i in ids if i in self._pos}

    def count(self) -> int:
        """Number of stored vectors."""
        return len(self._ids)

    def persist(self) -> None:
        """Write vectors and ids under a new generation, then swap the manifest."""
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self._gen += 1
        vec_name = f"memory-{self._gen}.npy"
        with open(self.folder / vec_name, "wb") as fh:
            np.save(fh, self._vecs, allow_pickle=False)
        write_manifest(
            self.folder,
            "memory.json",
            {"generation": self._gen, "ids": self._ids, "vectors": vec_name},
        )
        remove_stale(self.folder, "memory-", {vec_name})

    def close(self) -> None:
        """Persist and release."""
        self.persist()
