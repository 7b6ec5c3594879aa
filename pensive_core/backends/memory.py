"""A numpy-only exact backend: brute-force inner product, persisted as ``.npy`` + JSON."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..files import load_npy, read_manifest, remove_stale, write_manifest
from ..filters import Filter, MetadataIndex
from .base import check_namespace, check_upsert

__all__ = ["MemoryBackend"]


class _Space:
    """One namespace: ids, their vectors (rows) and metadata."""

    def __init__(self, dim: int) -> None:
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.vecs = np.zeros((0, dim), dtype=np.float32)
        self.meta: list[dict[str, Any]] = []
        self.columns: MetadataIndex | None = None

    def load(self, ids: list[str], vecs: np.ndarray, meta: list[dict[str, Any]]) -> None:
        self.ids, self.vecs, self.meta = ids, vecs, meta
        self.pos = {cid: i for i, cid in enumerate(ids)}
        self.columns = None  # built at the first filter after a write

    def delete(self, ids: Sequence[str]) -> None:
        drop = {self.pos[i] for i in ids if i in self.pos}
        if not drop:
            return
        keep = [i for i in range(len(self.ids)) if i not in drop]
        self.load(
            [self.ids[i] for i in keep],
            self.vecs[np.array(keep, dtype=np.int64)],
            [self.meta[i] for i in keep],
        )


class MemoryBackend:
    """Exact search with no dependency beyond numpy; right for small stores and tests.

    Args:
        folder: Where to persist; None keeps everything in memory only.
        dim: Vector dimension.
        options: Unused.
    """

    name = "memory"
    kind = "flat"

    def __init__(self, folder: Path | None, dim: int, options: Any = None) -> None:
        self.dim = dim
        self.folder = folder
        self._spaces: dict[str, _Space] = {}
        self._gen = 0
        manifest = read_manifest(folder, "memory.json") if folder else None
        if manifest and folder is not None:
            self._gen = manifest["generation"]
            spaces = manifest.get("spaces")
            if spaces is None:  # written before namespaces: one space, no metadata
                spaces = {"": {"ids": manifest["ids"], "vectors": manifest["vectors"]}}
            for ns, entry in spaces.items():
                sp = self._spaces[ns] = _Space(dim)
                meta = entry.get("meta") or [{} for _ in entry["ids"]]
                vecs = load_npy(folder / entry["vectors"])
                sp.load(list(entry["ids"]), vecs, list(meta))

    def _space(self, namespace: str, create: bool = False) -> _Space | None:
        check_namespace(namespace)
        sp = self._spaces.get(namespace)
        if sp is None and create:
            sp = self._spaces[namespace] = _Space(self.dim)
        return sp

    def upsert(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        metadata: Sequence[Mapping[str, Any]] | None = None,
        *,
        namespace: str = "",
    ) -> None:
        """Add or replace vectors and their metadata."""
        ids, vecs, metas = check_upsert(ids, vectors, metadata, self.dim, namespace)
        if not ids:
            return
        sp = self._space(namespace, create=True)
        assert sp is not None
        sp.delete([cid for cid in ids if cid in sp.pos])
        sp.load(sp.ids + ids, np.concatenate([sp.vecs, vecs]), sp.meta + metas)

    def delete(self, ids: Sequence[str], *, namespace: str = "") -> None:
        """Remove vectors; unknown ids are ignored."""
        sp = self._space(namespace)
        if sp is not None:
            sp.delete(list(ids))

    def search(
        self, vector: np.ndarray, k: int, *, where: Filter | None = None, namespace: str = ""
    ) -> list[tuple[str, float]]:
        """Exact inner-product top-k among the records passing ``where``."""
        sp = self._space(namespace)
        if sp is None or not sp.ids or k <= 0:
            return []
        scores = sp.vecs @ np.asarray(vector, dtype=np.float32).reshape(-1)
        rows = np.arange(len(sp.ids))
        if where is not None:
            if sp.columns is None:
                sp.columns = MetadataIndex(sp.meta)
            rows = rows[sp.columns.mask(where)]
            if not len(rows):
                return []
        k = min(k, len(rows))
        sub = scores[rows]
        top = np.argpartition(-sub, k - 1)[:k]
        top = top[np.argsort(-sub[top], kind="stable")]
        return [(sp.ids[rows[i]], float(sub[i])) for i in top]

    def fetch(self, ids: Sequence[str], *, namespace: str = "") -> dict[str, np.ndarray]:
        """Stored vectors by id; unknown ids are left out."""
        sp = self._space(namespace)
        if sp is None:
            return {}
        return {i: sp.vecs[sp.pos[i]].copy() for i in ids if i in sp.pos}

    def count(self, *, namespace: str = "") -> int:
        """Number of stored vectors in the namespace."""
        sp = self._space(namespace)
        return 0 if sp is None else len(sp.ids)

    def ids(self, *, namespace: str = "") -> set[str] | None:
        """Every stored id in the namespace (recovery reconciles them with the archive)."""
        sp = self._space(namespace)
        return set() if sp is None else set(sp.ids)

    def persist(self) -> None:
        """Write every namespace under a new generation, then swap the manifest."""
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self._gen += 1
        spaces: dict[str, Any] = {}
        keep: set[str] = set()
        for n, (ns, sp) in enumerate(sorted(self._spaces.items())):
            vec_name = f"memory-{self._gen}-{n}.npy"
            with open(self.folder / vec_name, "wb") as fh:
                np.save(fh, sp.vecs, allow_pickle=False)
            spaces[ns] = {"ids": sp.ids, "vectors": vec_name, "meta": sp.meta}
            keep.add(vec_name)
        write_manifest(
            self.folder,
            "memory.json",
            {"generation": self._gen, "dim": self.dim, "spaces": spaces},
        )
        remove_stale(self.folder, "memory-", keep)

    def close(self) -> None:
        """Persist and release."""
        self.persist()
