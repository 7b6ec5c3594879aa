"""FAISS: exact inner product for small stores, HNSW beyond a configurable size.

Ids are the caller's strings, mapped to 63-bit integers by hash inside an ``IndexIDMap2``.
HNSW cannot remove vectors, so deletes there are tombstones filtered at search time and purged
by a rebuild once they pass a fifth of the index. Persistence writes a new generation of files
and swaps a small JSON manifest by rename, so a crash leaves the previous generation intact.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import FaissConfig
from ..errors import BackendError, MissingDependencyError
from ._files import read_manifest, remove_stale, write_manifest

__all__ = ["FaissBackend"]

log = logging.getLogger(__name__)


def _faiss():  # type: ignore[no-untyped-def]
    try:
        import faiss
    except ImportError as exc:
        raise MissingDependencyError("faiss", "faiss", "The FAISS vector backend") from exc
    return faiss


def _int_id(sid: str) -> int:
    return int.from_bytes(hashlib.blake2b(sid.encode(), digest_size=8).digest(), "little") >> 1


class FaissBackend:
    """FAISS vector backend.

    Args:
        folder: Where the index files live; None keeps the index in memory only.
        dim: Vector dimension.
        options: A :class:`~pensive_core.config.FaissConfig` (defaults when None).
    """

    name = "faiss"

    def __init__(self, folder: Path | None, dim: int, options: FaissConfig | None = None) -> None:
        self._faiss = _faiss()
        self.folder = folder
        self.dim = dim
        self.cfg = options or FaissConfig()
        self._sid: dict[int, str] = {}
        self._tomb: set[int] = set()
        self._gen = 0
        manifest = read_manifest(folder, "faiss.json") if folder else None
        if manifest and folder is not None:
            self._load(folder, manifest)
        else:
            self._kind = "hnsw" if self.cfg.index == "hnsw" else "flat"
            self._index = self._new_index(self._kind)

    # -- construction -------------------------------------------------------------------------
    def _new_index(self, kind: str):  # type: ignore[no-untyped-def]
        faiss = self._faiss
        if kind == "hnsw":
            inner = faiss.IndexHNSWFlat(self.dim, self.cfg.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            inner.hnsw.efConstruction = self.cfg.ef_construction
            inner.hnsw.efSearch = self.cfg.ef_search
        else:
            inner = faiss.IndexFlatIP(self.dim)
        return faiss.IndexIDMap2(inner)

    def _load(self, folder: Path, manifest: dict[str, Any]) -> None:
        faiss = self._faiss
        if manifest["dim"] != self.dim:
            raise BackendError(
                f"FAISS index in {folder} holds {manifest['dim']}-d vectors but the embedder "
                f"makes {self.dim}-d ones; re-index the store with the embedder that built it"
            )
        self._gen = manifest["generation"]
        self._kind = manifest["kind"]
        try:
            self._index = faiss.read_index(str(folder / manifest["index"]))
        except RuntimeError as exc:
            raise BackendError(
                f"cannot read FAISS index {folder / manifest['index']}: {exc}"
            ) from exc
        ids = np.load(folder / manifest["ids"], allow_pickle=False)
        names = read_manifest(folder, manifest["names"]) or {"names": []}
        self._sid = dict(zip(ids.tolist(), names["names"]))
        self._tomb = set(manifest.get("tombstones", []))
        if self._kind == "hnsw":
            faiss.downcast_index(self._index.index).hnsw.efSearch = self.cfg.ef_search

    def _all_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """Live ``(int ids, vectors)`` currently stored."""
        faiss = self._faiss
        ids = faiss.vector_to_array(self._index.id_map).astype(np.int64)
        n = self._index.ntotal
        vecs = (
            self._index.index.reconstruct_n(0, n)
            if n
            else np.zeros((0, self.dim), dtype=np.float32)
        )
        live = np.array([i not in self._tomb for i in ids.tolist()], dtype=bool)
        return ids[live], vecs[live]

    def _rebuild(
        self, kind: str, extra_ids: np.ndarray | None = None, extra_vecs: np.ndarray | None = None
    ) -> None:
        ids, vecs = self._all_vectors()
        if extra_ids is not None and extra_vecs is not None:
            keep = ~np.isin(ids, extra_ids)
            ids = np.concatenate([ids[keep], extra_ids])
            vecs = np.concatenate([vecs[keep], extra_vecs])
        log.info("rebuilding FAISS %s index over %d vectors", kind, len(ids))
        self._kind = kind
        self._index = self._new_index(kind)
        self._tomb = set()
        if len(ids):
            self._index.add_with_ids(np.ascontiguousarray(vecs, dtype=np.float32), ids)

    def _want_kind(self, n: int) -> str:
        if self.cfg.index != "auto":
            return self.cfg.index
        return "hnsw" if n > self.cfg.hnsw_threshold else "flat"

    # -- protocol -----------------------------------------------------------------------------
    def upsert(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Add or replace vectors."""
        if not len(ids):
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        int_ids = np.array([_int_id(s) for s in ids], dtype=np.int64)
        present = [i for i in int_ids.tolist() if i in self._sid]
        for i, s in zip(int_ids.tolist(), ids):
            self._sid[i] = s
        target = self._want_kind(len(self._sid))
        if target != self._kind or (present and self._kind == "hnsw"):
            self._rebuild(target, int_ids, vectors)
            return
        if present:
            self._index.remove_ids(np.array(present, dtype=np.int64))
        self._tomb.difference_update(int_ids.tolist())
        self._index.add_with_ids(vectors, int_ids)

    def delete(self, ids: Sequence[str]) -> None:
        """Remove vectors; unknown ids are ignored."""
        int_ids = [i for i in (_int_id(s) for s in ids) if i in self._sid]
        if not int_ids:
            return
        for i in int_ids:
            del self._sid[i]
        if self._kind == "flat":
            self._index.remove_ids(np.array(int_ids, dtype=np.int64))
        else:
            self._tomb.update(int_ids)
            if len(self._tomb) > 0.2 * max(1, self._index.ntotal):
                self._rebuild(self._want_kind(len(self._sid)))

    def search(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Top-k by inner product (cosine for unit vectors)."""
        if k <= 0 or not self._sid:
            return []
        q = np.ascontiguousarray(vector, dtype=np.float32).reshape(1, self.dim)
        fetch = min(self._index.ntotal, k + len(self._tomb))
        scores, ids = self._index.search(q, fetch)
        out: list[tuple[str, float]] = []
        for i, s in zip(ids[0].tolist(), scores[0].tolist()):
            if i < 0 or i in self._tomb:
                continue
            sid = self._sid.get(i)
            if sid is not None:
                out.append((sid, float(s)))
                if len(out) == k:
                    break
        return out

    def fetch(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by id; unknown ids are left out."""
        out = {}
        for sid in ids:
            i = _int_id(sid)
            if i in self._sid:
                out[sid] = self._index.reconstruct(i)
        return out

    def count(self) -> int:
        """Number of live vectors."""
        return len(self._sid)

    @property
    def kind(self) -> str:
        """``"flat"`` or ``"hnsw"``: the index structure in use."""
        return self._kind

    def persist(self) -> None:
        """Write a new generation of index files, then swap the manifest atomically."""
        if self.folder is None:
            return
        faiss = self._faiss
        self.folder.mkdir(parents=True, exist_ok=True)
        self._gen += 1
        g = self._gen
        index_name, ids_name, names_name = (
            f"faiss-{g}.index",
            f"faiss-{g}.ids.npy",
            f"faiss-{g}.names.json",
        )
        faiss.write_index(self._index, str(self.folder / index_name))
        keys = list(self._sid)
        with open(self.folder / ids_name, "wb") as fh:
            np.save(fh, np.array(keys, dtype=np.int64), allow_pickle=False)
        write_manifest(self.folder, names_name, {"names": [self._sid[i] for i in keys]})
        write_manifest(
            self.folder,
            "faiss.json",
            {
                "generation": g,
                "kind": self._kind,
                "dim": self.dim,
                "index": index_name,
                "ids": ids_name,
                "names": names_name,
                "tombstones": sorted(self._tomb),
            },
        )
        remove_stale(self.folder, "faiss-", {index_name, ids_name, names_name})

    def close(self) -> None:
        """Persist and release."""
        self.persist()
