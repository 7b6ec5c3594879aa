"""A numpy-only exact backend: brute-force inner product, persisted as ``.npy`` + JSON.

The manifest records each vector file's size and checksum (checked when the index loads: a
damaged file is a :class:`~pensive_core.errors.CorruptStoreError` naming it) and a fingerprint
of every vector, so :meth:`MemoryBackend.salvage` keeps the rows of a damaged file that are
intact.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorruptStoreError
from ..files import (
    atomic_write_bytes,
    check_file,
    corrupt,
    damaged,
    load_npy,
    load_npy_checked,
    npy_bytes,
    read_manifest,
    remove_stale,
    row_sums,
    write_manifest,
)
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

    Raises:
        CorruptStoreError: If the manifest or a vector file is damaged or missing.
    """

    name = "memory"
    kind = "flat"

    def __init__(self, folder: Path | None, dim: int, options: Any = None) -> None:
        self.dim = dim
        self.folder = folder
        self._spaces: dict[str, _Space] = {}
        self._gen = 0
        self._dirty = True  # whether the files lag this object (a commit with nothing new skips)
        manifest = read_manifest(folder, "memory.json") if folder else None
        if manifest and folder is not None:
            with damaged(folder / "memory.json"):
                self._load(folder, manifest)
            self._dirty = "files" not in manifest  # written before checksums: add them

    def _load(self, folder: Path, manifest: dict[str, Any]) -> None:
        self._gen = manifest["generation"]
        sums = manifest.get("files") or {}
        spaces = manifest.get("spaces")
        if spaces is None:  # written before namespaces: one space, no metadata
            spaces = {"": {"ids": manifest["ids"], "vectors": manifest["vectors"]}}
        for ns, entry in spaces.items():
            sp = self._spaces[ns] = _Space(self.dim)
            ids = list(entry["ids"])
            meta = entry.get("meta") or [{} for _ in ids]
            path = folder / entry["vectors"]
            vecs = load_npy_checked(path, sums.get(entry["vectors"]))
            if vecs.shape != (len(ids), self.dim) or len(meta) != len(ids):
                raise corrupt(path, f"{vecs.shape} vectors for {len(ids)} ids of {self.dim}-d")
            sp.load(ids, vecs.astype(np.float32, copy=False), list(meta))

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
        self._dirty = True
        sp.delete([cid for cid in ids if cid in sp.pos])
        sp.load(sp.ids + ids, np.concatenate([sp.vecs, vecs]), sp.meta + metas)

    def delete(self, ids: Sequence[str], *, namespace: str = "") -> None:
        """Remove vectors; unknown ids are ignored."""
        sp = self._space(namespace)
        if sp is not None and any(i in sp.pos for i in ids):
            self._dirty = True
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
        """Write every namespace under a new generation, then swap the manifest (nothing when
        nothing changed since the last one)."""
        if self.folder is None or not self._dirty:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self._gen += 1
        spaces: dict[str, Any] = {}
        sums: dict[str, Any] = {}
        for n, (ns, sp) in enumerate(sorted(self._spaces.items())):
            vec_name = f"memory-{self._gen}-{n}.npy"
            sums[vec_name] = atomic_write_bytes(self.folder / vec_name, npy_bytes(sp.vecs))
            spaces[ns] = {
                "ids": sp.ids,
                "vectors": vec_name,
                "meta": sp.meta,
                "sums": [f"{v:016x}" for v in row_sums(sp.vecs).tolist()],
            }
        write_manifest(
            self.folder,
            "memory.json",
            {"generation": self._gen, "dim": self.dim, "spaces": spaces, "files": sums},
        )
        self._dirty = False
        remove_stale(self.folder, "memory-", set(sums))

    @classmethod
    def salvage(
        cls, folder: Path, dim: int, candidates: Iterable[str], namespace: str = ""
    ) -> dict[str, np.ndarray]:
        """The vectors of a damaged index folder that are what was written, by passage id:
        the rows of the vector file whose fingerprints match those in the manifest (all of
        them when the file's checksum matches). Nothing when the manifest is unreadable (it
        holds the ids).

        Args:
            folder: The index folder.
            dim: The vector dimension.
            candidates: The passage ids that may be in the index.
            namespace: The namespace whose vectors to salvage.
        """
        try:
            manifest = read_manifest(folder, "memory.json")
            entry = (manifest or {}).get("spaces", {})[namespace]
            ids = list(entry["ids"])
            path = folder / entry["vectors"]
        except (CorruptStoreError, KeyError, TypeError, AttributeError):
            return {}
        files = (manifest or {}).get("files") or {}
        whole = False
        with contextlib.suppress(CorruptStoreError, KeyError):
            check_file(path, files[entry["vectors"]])
            whole = True
        try:
            vecs = load_npy(path).astype(np.float32)
        except (OSError, ValueError):
            return {}
        recorded = entry.get("sums") or []
        if vecs.ndim != 2 or vecs.shape[1] != dim or (not whole and not recorded):
            return {}
        wanted = set(candidates)
        got = row_sums(vecs).tolist() if recorded else []
        out: dict[str, np.ndarray] = {}
        for row, cid in enumerate(ids[: len(vecs)]):
            good = whole or (row < len(recorded) and f"{got[row]:016x}" == recorded[row])
            if cid in wanted and good:
                out[cid] = vecs[row].copy()
        return out

    def close(self) -> None:
        """Persist and release."""
        self.persist()
