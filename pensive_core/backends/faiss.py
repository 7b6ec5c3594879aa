"""FAISS: exact inner product for small stores, HNSW beyond a configurable size, IVF-PQ on request.

Ids are the caller's strings, mapped to 63-bit integers by hash. Flat and HNSW indexes sit in an
``IndexIDMap2``; IVF-PQ indexes carry the ids themselves. HNSW cannot remove vectors, so deletes
there are tombstones filtered at search time and purged by a rebuild once they pass a fifth of
the index. Each namespace is its own index. Metadata is kept beside the index and filters are
evaluated in Python into an id selector that FAISS applies inside the search; a filter that few
records pass is answered by exact search over just those records, so a selective filter never
starves an approximate index of results.

Persistence writes a new generation of files and swaps a small JSON manifest by rename, so a
crash leaves the previous generation intact. A commit of a few passages does not write the
index again: each namespace's writes since its index was last written whole go to a log (the
vectors, ids and metadata of each upsert, the ids of each delete), replayed in order on load
and read alone by a reader following the writer (:meth:`FaissBackend.follow`); HNSW adds that
a log carries run on one thread after the level generator is reseeded, so a replay builds the
same graph byte for byte. The index is written whole again past 64 logs or a tenth of its
vectors, after a rebuild, and always for IVF-PQ. The manifest records each file's size and
checksum, checked when the index loads (a damaged file is a
:class:`~pensive_core.errors.CorruptStoreError` naming it), and a fingerprint of every vector
is kept beside the ids, so :meth:`FaissBackend.salvage` can tell the vectors of a damaged
index file that are intact from those that are not.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import FaissConfig
from ..errors import BackendError, CorruptStoreError, MissingDependencyError
from ..files import (
    atomic_write_bytes,
    check_file,
    corrupt,
    damaged,
    last_generation,
    load_npy,
    load_npy_checked,
    npy_bytes,
    read_checked,
    read_manifest,
    remove_stale,
    row_sums,
    write_manifest,
)
from ..filters import Filter, MetadataIndex, canonical
from .base import check_namespace, check_upsert

__all__ = ["FaissBackend", "dump_vectors", "int_id"]

log = logging.getLogger(__name__)
_HNSW_SEED = 12345  # FAISS's own seed for HNSW levels, which a loaded index restarts from
_MAX_LOGS = 64  # logs after a base before the next persist writes the index whole again
_LOG_SHARE = 0.1  # ... or once the logs add this share of the base's vectors (at least 512)


def _faiss():  # type: ignore[no-untyped-def]
    try:
        import faiss
    except ImportError as exc:
        raise MissingDependencyError("faiss", "faiss", "The FAISS vector backend") from exc
    return faiss


def int_id(sid: str) -> int:
    """The non-negative int64 key a string id is stored under in a FAISS index (part of the
    files' format: an index written by one release is read by the next)."""
    return int.from_bytes(hashlib.blake2b(sid.encode(), digest_size=8).digest(), "little") >> 1


def _pq_m(dim: int, want: int) -> int:
    """The largest divisor of ``dim`` not above ``want`` (PQ splits vectors evenly); ``want``
    0 means ``dim / 2`` bytes, the most accurate setting measured under 2 ms at 100k vectors
    (benchmarks/results/tune_ivfpq.md)."""
    want = max(1, min(dim, want or max(1, dim // 2)))
    return max(m for m in range(1, want + 1) if dim % m == 0)


@contextlib.contextmanager
def _one_thread(faiss: Any) -> Any:
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


class _Space:
    """One namespace: an index, the id map, metadata and tombstones."""

    #: Written whole at the next persist (see :meth:`FaissBackend.close`); a class default,
    #: so spaces made without ``__init__`` (a load) have it too.
    compact = False

    def __init__(self, owner: FaissBackend, kind: str) -> None:
        self.owner = owner
        self.kind = kind
        self.index = owner._new_index(kind)
        self.sid: dict[int, str] = {}
        self.meta: dict[int, dict[str, Any]] = {}
        self.tomb: set[int] = set()
        self.fp: dict[int, int] = {}  # int id -> fingerprint of its stored vector (row_sums)
        self.version = 0  # bumped on every write: cached filter selections expire
        self._selections: dict[str, np.ndarray] = {}
        self._columns: tuple[np.ndarray, MetadataIndex] | None = None
        self.init_log()

    def init_log(self) -> None:
        """Start with no base on disk: the next persist writes the whole index."""
        # what is on disk: the base's manifest entry (whole index files, None: none yet or
        # the index was rebuilt since), then the logs of the writes made after it, replayed
        # in order on load; ``pending`` holds this process's writes not yet persisted
        self.base: dict[str, Any] | None = None
        self.logs: list[dict[str, str]] = []
        self.logged = 0  # vectors the logs add
        self.pending: list[tuple[str, list[str], np.ndarray | None, list[Any] | None]] = []

    def reseed(self) -> None:
        """Restart HNSW's level generator, as a load does: writes after a base is written
        (or loaded) then build the same graph here and in a process replaying the logs."""
        if self.kind == "hnsw":
            faiss = self.owner._faiss
            faiss.downcast_index(self.index.index).hnsw.rng = faiss.RandomGenerator(_HNSW_SEED)

    # -- helpers ------------------------------------------------------------------------------
    def all_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """Live ``(int ids, vectors)`` currently stored."""
        faiss = self.owner._faiss
        if self.kind == "ivfpq":
            ids = np.fromiter(self.sid, dtype=np.int64, count=len(self.sid))
            return ids, self.reconstruct(ids)
        ids = faiss.vector_to_array(self.index.id_map).astype(np.int64)
        n = self.index.ntotal
        vecs = (
            self.index.index.reconstruct_n(0, n)
            if n
            else np.zeros((0, self.owner.dim), dtype=np.float32)
        )
        live = np.array([i not in self.tomb for i in ids.tolist()], dtype=bool)
        return ids[live], vecs[live]

    def reconstruct(self, ids: np.ndarray) -> np.ndarray:
        if not len(ids):
            return np.zeros((0, self.owner.dim), dtype=np.float32)
        return np.asarray(self.index.reconstruct_batch(np.ascontiguousarray(ids, dtype=np.int64)))

    def rebuild(self, kind: str, extra_ids: np.ndarray | None = None, extra: Any = None) -> None:
        ids, vecs = self.all_vectors()
        if extra_ids is not None and extra is not None:
            keep = ~np.isin(ids, extra_ids)
            ids = np.concatenate([ids[keep], extra_ids])
            vecs = np.concatenate([vecs[keep], extra])
        log.info("rebuilding FAISS %s index over %d vectors", kind, len(ids))
        self.base = None  # the next persist writes the rebuilt index whole
        coded = "ivfpq" in (kind, self.kind)  # PQ codes: what reads back is not what went in
        self.kind = kind
        self.index = self.owner._new_index(kind, np.ascontiguousarray(vecs, dtype=np.float32))
        self.tomb = set()
        if len(ids):
            self.index.add_with_ids(np.ascontiguousarray(vecs, dtype=np.float32), ids)
        if coded:
            self.fp = {}
            self.note(ids, vecs)

    def note(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        """Record the fingerprints of vectors just stored, as they read back."""
        if not len(ids):
            return
        stored = self.reconstruct(ids) if self.kind == "ivfpq" else vecs
        self.fp.update(zip(ids.tolist(), row_sums(stored).tolist()))

    def fingerprints(self, ids: list[int]) -> np.ndarray:
        """``[id, fingerprint]`` rows for ``ids`` (computed for any not yet known: an index
        loaded from files written before fingerprints)."""
        missing = [i for i in ids if i not in self.fp]
        for start in range(0, len(missing), 65536):
            part = np.array(missing[start : start + 65536], dtype=np.int64)
            self.note(part, self.reconstruct(part))
        out = np.zeros((len(ids), 2), dtype=np.uint64)
        if ids:
            out[:, 0] = np.array(ids, dtype=np.int64).astype(np.uint64)
            out[:, 1] = np.array([self.fp[i] for i in ids], dtype=np.uint64)
        return out

    def selection(self, where: Filter) -> np.ndarray:
        """Int ids of live records passing ``where`` (cached until the next write)."""
        key = canonical(where)
        got = self._selections.get(key)
        if got is None:
            if self._columns is None:  # built at the first filter after a write
                ids = np.fromiter(self.meta, dtype=np.int64, count=len(self.meta))
                self._columns = (ids, MetadataIndex([self.meta[i] for i in ids.tolist()]))
            ids, index = self._columns
            got = ids[index.mask(where)]
            if len(self._selections) > 64:
                self._selections.clear()
            self._selections[key] = got
        return got

    def touched(self) -> None:
        self.version += 1
        self._selections.clear()
        self._columns = None


class FaissBackend:
    """FAISS vector backend.

    Args:
        folder: Where the index files live; None keeps the index in memory only.
        dim: Vector dimension.
        options: A :class:`~pensive_core.config.FaissConfig` (defaults when None).

    Raises:
        MissingDependencyError: If ``faiss`` is not installed (extra ``faiss``).
        BackendError: If stored files are unreadable or hold vectors of another dimension.
    """

    name = "faiss"

    def __init__(self, folder: Path | None, dim: int, options: FaissConfig | None = None) -> None:
        self._faiss = _faiss()
        self.folder = folder
        self.dim = dim
        self.cfg = options or FaissConfig()
        self._spaces: dict[str, _Space] = {}
        self._gen = 0
        self._dirty = True  # whether the files lag this object (a commit with nothing new skips)
        self._sums: dict[str, Any] = {}  # file name -> size and checksum, as last written
        self._replaying = False  # applying logs from disk: not to be logged again
        manifest = read_manifest(folder, "faiss.json") if folder else None
        if manifest and folder is not None:
            with damaged(folder / "faiss.json"):
                self._load(folder, manifest)
            self._dirty = "files" not in manifest  # written before checksums: add them

    # -- construction -------------------------------------------------------------------------
    def _new_index(self, kind: str, train: np.ndarray | None = None):  # type: ignore[no-untyped-def]
        faiss = self._faiss
        if kind == "ivfpq":
            assert train is not None and len(train)
            nlist = self.cfg.ivf_nlist or max(1, int(4 * math.sqrt(len(train))))
            nlist = min(nlist, max(1, len(train) // 39))  # FAISS wants ~39 points per list
            quantizer = faiss.IndexFlatIP(self.dim)
            # 8-bit codes need 39 * 256 training points; fewer train a smaller codebook
            nbits = min(8, max(4, int(math.log2(len(train) / 39))))
            index = faiss.IndexIVFPQ(
                quantizer,
                self.dim,
                nlist,
                _pq_m(self.dim, self.cfg.pq_m),
                nbits,
                faiss.METRIC_INNER_PRODUCT,
            )
            index.train(train)
            index.nprobe = self.cfg.ivf_nprobe
            index.set_direct_map_type(faiss.DirectMap.Hashtable)  # reconstruct by id
            return index
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
        sums: dict[str, Any] = manifest.get("files") or {}
        spaces = manifest.get("spaces")
        if spaces is None:  # written before namespaces: one space, no metadata
            spaces = {"": {k: manifest[k] for k in ("kind", "index", "ids", "names")}}
            spaces[""]["tombstones"] = manifest.get("tombstones", [])
        for ns, entry in spaces.items():
            sp = _Space.__new__(_Space)
            sp.owner, sp.kind, sp.version, sp._selections = self, entry["kind"], 0, {}
            sp._columns = None
            sp.init_log()
            index_path = folder / entry["index"]
            check_file(index_path, sums.get(entry["index"]))
            try:
                sp.index = faiss.read_index(str(index_path))
            except RuntimeError as exc:
                raise corrupt(index_path, f"FAISS cannot read it ({exc})") from exc
            ids_path = folder / entry["ids"]
            ids = load_npy_checked(ids_path, sums.get(entry["ids"])).tolist()
            names_path = folder / entry["names"]
            with damaged(names_path):
                side = json.loads(read_checked(names_path, sums.get(entry["names"])))
                side.pop("checksum", None)
                names = side["names"]
                metas = side.get("meta") or [{} for _ in ids]
                if len(names) != len(ids) or len(metas) != len(ids):
                    raise ValueError(f"{len(names)} names and {len(metas)} for {len(ids)} ids")
            sp.sid = dict(zip(ids, names))
            sp.meta = dict(zip(ids, metas))
            sp.tomb = set(entry.get("tombstones", []))
            sp.fp = {}
            if entry.get("sums"):
                rows = load_npy_checked(folder / entry["sums"], sums.get(entry["sums"]))
                with damaged(folder / entry["sums"]):
                    sp.fp = dict(zip(rows[:, 0].astype(np.int64).tolist(), rows[:, 1].tolist()))
            self._check_space(sp, index_path, names_path, checked=bool(sums))
            if sp.kind == "hnsw":
                faiss.downcast_index(sp.index.index).hnsw.efSearch = self.cfg.ef_search
            elif sp.kind == "ivfpq":
                sp.index.nprobe = self.cfg.ivf_nprobe
            self._spaces[ns] = sp
            if not sums:  # written before checksums: written whole at the next commit
                continue
            sp.base = {k: v for k, v in entry.items() if k != "logs"}
            sp.base.setdefault("count", len(ids))
            sp.reseed()
            logs = entry.get("logs", [])
            read = [self._read_log(folder, lg, sums) for lg in logs]
            for lg, (ops, vecs, adds) in zip(logs, read):
                self._replay(ns, ops, vecs)
                sp.logs.append(dict(lg))
                sp.logged += adds
        self._sums = dict(sums)

    def _check_space(self, sp: _Space, index_path: Path, names_path: Path, checked: bool) -> None:
        """Refuse an index whose parts contradict each other. Files with checksums were
        checked whole; an index written before them gets the checks that catch a file
        swapped or reordered: its ids against the index's id map and its names."""
        n, total = len(sp.sid), int(sp.index.ntotal)
        if (total < n) if sp.kind == "hnsw" else (total != n):
            raise corrupt(index_path, f"it holds {total} vectors where its ids file lists {n}")
        if int(sp.index.d) != self.dim:
            raise corrupt(index_path, f"it holds {sp.index.d}-d vectors, not {self.dim}-d")
        if checked or sp.kind == "ivfpq" or not n:
            return
        id_map = self._faiss.vector_to_array(sp.index.id_map).astype(np.int64)
        ids = np.fromiter(sp.sid, dtype=np.int64, count=n)
        if not np.isin(ids, id_map).all():
            raise corrupt(index_path, "its id map does not hold the ids its ids file lists")
        if any(int_id(name) != i for i, name in sp.sid.items()):
            raise corrupt(names_path, "its names do not match the ids they are stored under")

    def _want_kind(self, n: int) -> str:
        if self.cfg.index == "ivfpq":
            return "ivfpq" if n >= self.cfg.ivf_train_min else "flat"
        if self.cfg.index != "auto":
            return self.cfg.index
        return "hnsw" if n > self.cfg.hnsw_threshold else "flat"

    def _space(self, namespace: str, create: bool = False) -> _Space | None:
        check_namespace(namespace)
        sp = self._spaces.get(namespace)
        if sp is None and create:
            kind = self._want_kind(0)
            sp = self._spaces[namespace] = _Space(self, kind)
        return sp

    # -- protocol -----------------------------------------------------------------------------
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
        sp.touched()
        if not self._replaying:
            sp.pending.append(("add", list(ids), np.array(vecs, dtype=np.float32), list(metas)))
        int_ids = np.array([int_id(s) for s in ids], dtype=np.int64)
        present = [i for i in int_ids.tolist() if i in sp.sid]
        for i, s, m in zip(int_ids.tolist(), ids, metas):
            sp.sid[i] = s
            sp.meta[i] = m
        target = self._want_kind(len(sp.sid))
        if sp.kind == "ivfpq" and self.cfg.index == "ivfpq":
            target = "ivfpq"  # trained once; grows by adding
        self._dirty = True
        if target != sp.kind or (present and sp.kind == "hnsw"):
            sp.rebuild(target, int_ids, vecs)
            sp.note(int_ids, vecs)
            return
        if present:
            sp.index.remove_ids(np.array(present, dtype=np.int64))
        sp.tomb.difference_update(int_ids.tolist())
        if sp.kind == "hnsw" and sp.base is not None:
            # a write a log will carry: one thread, so replaying it builds the same graph
            with _one_thread(self._faiss):
                sp.index.add_with_ids(vecs, int_ids)
        else:
            sp.index.add_with_ids(vecs, int_ids)
        sp.note(int_ids, vecs)

    def delete(self, ids: Sequence[str], *, namespace: str = "") -> None:
        """Remove vectors; unknown ids are ignored."""
        sp = self._space(namespace)
        if sp is None:
            return
        int_ids = [i for i in (int_id(s) for s in ids) if i in sp.sid]
        if not int_ids:
            return
        sp.touched()
        self._dirty = True
        if not self._replaying:
            sp.pending.append(("del", [sp.sid[i] for i in int_ids], None, None))
        for i in int_ids:
            del sp.sid[i]
            sp.meta.pop(i, None)
            sp.fp.pop(i, None)
        if sp.kind != "hnsw":
            sp.index.remove_ids(np.array(int_ids, dtype=np.int64))
        else:
            sp.tomb.update(int_ids)
            if len(sp.tomb) > 0.2 * max(1, sp.index.ntotal):
                sp.rebuild(self._want_kind(len(sp.sid)))

    def search(
        self, vector: np.ndarray, k: int, *, where: Filter | None = None, namespace: str = ""
    ) -> list[tuple[str, float]]:
        """Top-k by inner product (cosine for unit vectors) among records passing ``where``."""
        n = self.cfg.search_threads
        if not n:
            return self._search(vector, k, where, namespace)
        # OpenMP keeps this setting per calling thread: one query's search does not wait on
        # threads the other cores are too busy to run, and builds in this thread keep theirs
        faiss = self._faiss
        before = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(n)
        try:
            return self._search(vector, k, where, namespace)
        finally:
            faiss.omp_set_num_threads(before)

    def _search(
        self, vector: np.ndarray, k: int, where: Filter | None, namespace: str
    ) -> list[tuple[str, float]]:
        sp = self._space(namespace)
        if k <= 0 or sp is None or not sp.sid:
            return []
        q = np.ascontiguousarray(vector, dtype=np.float32).reshape(1, self.dim)
        if where is None:
            fetch = min(sp.index.ntotal, k + len(sp.tomb))
            scores, ids = sp.index.search(q, fetch)
            return self._pairs(sp, ids[0], scores[0], k)
        allowed = sp.selection(where)
        if not len(allowed):
            return []
        want = min(k, len(allowed))
        if sp.kind != "flat" and len(allowed) <= self.cfg.exact_filter_below:
            return self._exact(sp, q[0], allowed, want)
        faiss = self._faiss
        sel = faiss.IDSelectorBatch(allowed)
        if sp.kind == "ivfpq":
            params = faiss.SearchParametersIVF(sel=sel, nprobe=self.cfg.ivf_nprobe)
        elif sp.kind == "hnsw":
            params = faiss.SearchParametersHNSW(sel=sel, efSearch=max(self.cfg.ef_search, want))
        else:
            params = faiss.SearchParameters(sel=sel)
        scores, ids = sp.index.search(q, want, params=params)
        out = self._pairs(sp, ids[0], scores[0], want)
        if len(out) < want:  # the approximate search ran dry inside the filter
            return self._exact(sp, q[0], allowed, want)
        return out

    def _pairs(
        self, sp: _Space, ids: np.ndarray, scores: np.ndarray, k: int
    ) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        for i, s in zip(ids.tolist(), scores.tolist()):
            if i < 0 or i in sp.tomb:
                continue
            sid = sp.sid.get(i)
            if sid is not None:
                out.append((sid, float(s)))
                if len(out) == k:
                    break
        return out

    def _exact(
        self, sp: _Space, q: np.ndarray, allowed: np.ndarray, k: int
    ) -> list[tuple[str, float]]:
        scores = sp.reconstruct(allowed) @ q
        top = np.argsort(-scores, kind="stable")[:k]
        return [(sp.sid[int(allowed[t])], float(scores[t])) for t in top]

    def fetch(self, ids: Sequence[str], *, namespace: str = "") -> dict[str, np.ndarray]:
        """Stored vectors by id; unknown ids are left out (IVF-PQ returns its approximation)."""
        sp = self._space(namespace)
        if sp is None:
            return {}
        out = {}
        for sid in ids:
            i = int_id(sid)
            if i in sp.sid:
                out[sid] = sp.index.reconstruct(i)
        return out

    def ids(self, *, namespace: str = "") -> set[str]:
        """Every live id in the namespace (recovery reconciles them with the archive)."""
        sp = self._space(namespace)
        return set() if sp is None else set(sp.sid.values())

    def count(self, *, namespace: str = "") -> int:
        """Number of live vectors in the namespace."""
        sp = self._space(namespace)
        return 0 if sp is None else len(sp.sid)

    @property
    def kind(self) -> str:
        """``"flat"``, ``"hnsw"`` or ``"ivfpq"``: the index structure in use (the approximate one
        if namespaces differ; what a first namespace would start with when there is none)."""
        kinds = {sp.kind for sp in self._spaces.values()} or {self._want_kind(0)}
        return next((k for k in ("hnsw", "ivfpq") if k in kinds), "flat")

    def raw_index(self, *, namespace: str = "") -> Any:
        """The namespace's FAISS index object, for inspection (None when the namespace is
        empty); searching or changing it directly bypasses the id map."""
        sp = self._space(namespace)
        return None if sp is None else sp.index

    def memory_bytes(self, *, namespace: str = "") -> int:
        """Bytes the namespace's serialised index takes (the vectors and search structure)."""
        sp = self._space(namespace)
        if sp is None:
            return 0
        return int(self._faiss.serialize_index(sp.index).nbytes)

    def persist(self) -> None:
        """Write what changed since the last persist, then swap the manifest atomically
        (nothing when nothing changed).

        A namespace's writes since its index was last written whole go to a log: the
        vectors, ids and metadata of each upsert and the ids of each delete, in order,
        replayed on load. The index is written whole again (a new base, the logs dropped)
        when it was rebuilt, is IVF-PQ, or its logs have grown past :data:`_MAX_LOGS` files
        or a tenth of its vectors; so a commit of a few passages writes a few kilobytes, not
        the whole index.
        """
        if self.folder is None or not self._dirty:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self._gen += 1
        spaces: dict[str, Any] = {}
        sums: dict[str, Any] = {}
        for n, (ns, sp) in enumerate(sorted(self._spaces.items())):
            prefix = f"faiss-{self._gen}-{n}"
            adds = sum(len(ids) for op, ids, _, _ in sp.pending if op == "add")
            base_n = sp.base["count"] if sp.base is not None else 0
            written: dict[str, Any] = {}
            if sp.base is not None and not sp.pending and not sp.compact:
                pass  # unchanged: its files stay as they are
            elif (
                sp.base is not None
                and not sp.compact
                and sp.kind != "ivfpq"
                and len(sp.logs) < _MAX_LOGS
                and sp.logged + adds <= max(512, _LOG_SHARE * base_n)
            ):
                written = self._write_log(prefix, sp, adds)
            else:
                written = self._write_base(prefix, sp)
                sp.compact = False
            # known at once: a later space failing to write leaves these files on disk, and
            # the next persist names them again
            self._sums.update(written)
            sums.update(written)
            sp.pending = []
            spaces[ns] = {**(sp.base or {}), "logs": list(sp.logs)}
            for name in self._space_files(spaces[ns]):
                if name not in sums:
                    sums[name] = self._sums[name]
        write_manifest(
            self.folder,
            "faiss.json",
            {"generation": self._gen, "dim": self.dim, "spaces": spaces, "files": sums},
        )
        self._sums = sums
        self._dirty = False
        remove_stale(self.folder, "faiss-", set(sums))

    @staticmethod
    def _base_files(entry: Mapping[str, Any]) -> list[str]:
        return [entry[k] for k in ("index", "ids", "names", "sums") if entry.get(k)]

    @classmethod
    def _space_files(cls, entry: Mapping[str, Any]) -> list[str]:
        names = cls._base_files(entry)
        for lg in entry.get("logs", []):
            names += [lg["ops"], lg["vectors"]]
        return names

    def _write_base(self, prefix: str, sp: _Space) -> dict[str, Any]:
        """The space's index written whole (its new base; the logs are dropped)."""
        assert self.folder is not None
        index_name, ids_name, names_name, sums_name = (
            f"{prefix}.index",
            f"{prefix}.ids.npy",
            f"{prefix}.names.json",
            f"{prefix}.sums.npy",
        )
        # whole files under temporary names, synced and renamed: a kill mid-write never
        # leaves a torn file under a name a manifest could point to
        sums = {
            index_name: atomic_write_bytes(
                self.folder / index_name, self._faiss.serialize_index(sp.index).tobytes()
            )
        }
        keys = list(sp.sid)
        sums[ids_name] = atomic_write_bytes(
            self.folder / ids_name, npy_bytes(np.array(keys, dtype=np.int64))
        )
        side = {"names": [sp.sid[i] for i in keys], "meta": [sp.meta.get(i, {}) for i in keys]}
        sums[names_name] = atomic_write_bytes(self.folder / names_name, json.dumps(side).encode())
        sums[sums_name] = atomic_write_bytes(
            self.folder / sums_name, npy_bytes(sp.fingerprints(keys))
        )
        sp.base = {
            "kind": sp.kind,
            "index": index_name,
            "ids": ids_name,
            "names": names_name,
            "sums": sums_name,
            "tombstones": sorted(sp.tomb),
            "count": len(keys),
        }
        sp.logs, sp.logged = [], 0
        sp.reseed()  # as a load of this base will
        return sums

    def _write_log(self, prefix: str, sp: _Space, adds: int) -> dict[str, Any]:
        """The space's writes since the last persist, as one more log."""
        assert self.folder is not None
        ops: list[dict[str, Any]] = []
        parts: list[np.ndarray] = []
        row = 0
        for op, ids, vecs, metas in sp.pending:
            if op == "add":
                assert vecs is not None
                ops.append(
                    {"op": "add", "names": ids, "meta": metas, "rows": [row, row + len(ids)]}
                )
                parts.append(vecs)
                row += len(ids)
            else:
                ops.append({"op": "del", "names": ids})
        matrix = np.concatenate(parts) if parts else np.zeros((0, self.dim), dtype=np.float32)
        ops_name, vec_name = f"{prefix}.log.json", f"{prefix}.log.npy"
        sums = {
            vec_name: atomic_write_bytes(self.folder / vec_name, npy_bytes(matrix)),
            ops_name: atomic_write_bytes(
                self.folder / ops_name, json.dumps({"ops": ops, "adds": adds}).encode()
            ),
        }
        sp.logs.append({"ops": ops_name, "vectors": vec_name})
        sp.logged += adds
        return sums

    def _read_log(self, folder: Path, lg: Mapping[str, str], sums: Mapping[str, Any]) -> Any:
        """A log's operations and vectors, checked against their recorded checksums."""
        vecs = load_npy_checked(folder / lg["vectors"], sums.get(lg["vectors"]))
        path = folder / lg["ops"]
        with damaged(path):
            body = json.loads(read_checked(path, sums.get(lg["ops"])))
            ops = body["ops"]
            if vecs.ndim != 2 or vecs.shape[1] != self.dim:
                raise ValueError(f"its vectors are {vecs.shape}, not (n, {self.dim})")
        return ops, vecs, int(body.get("adds", 0))

    def _replay(self, ns: str, ops: list[dict[str, Any]], vecs: np.ndarray) -> None:
        """Apply a log's writes through the same paths that made them."""
        self._replaying = True
        try:
            for op in ops:
                if op["op"] == "add":
                    a, b = op["rows"]
                    self.upsert(op["names"], vecs[a:b], op["meta"], namespace=ns)
                else:
                    self.delete(op["names"], namespace=ns)
        finally:
            self._replaying = False

    def follow(self) -> bool:
        """Catch up in place with what a writer in another process committed since this
        object loaded: only the new logs are read and replayed (a reader's reload after a
        commit of a few passages reads kilobytes, not the whole index).

        Returns:
            False when the files changed in another way (a new base, a namespace added or
            dropped): then open the backend anew. Nothing here was changed in that case.

        Raises:
            CorruptStoreError: If a new log is damaged (nothing here was changed).
            FileNotFoundError: If a file went while reading (a newer commit: try again).
        """
        if self.folder is None:
            return False
        manifest = read_manifest(self.folder, "faiss.json")
        if manifest is None or manifest.get("dim") != self.dim or not manifest.get("files"):
            return False
        if manifest["generation"] == self._gen:
            return True
        spaces = manifest.get("spaces") or {}
        if set(spaces) != set(self._spaces):
            return False
        files = manifest["files"]
        todo = []
        for ns, entry in spaces.items():
            sp = self._spaces[ns]
            base = {k: v for k, v in entry.items() if k != "logs"}
            logs = entry.get("logs", [])
            same_base = sp.base is not None and base == sp.base
            if not same_base or logs[: len(sp.logs)] != sp.logs or sp.pending:
                return False
            if any(files.get(n) != self._sums.get(n) for n in self._base_files(entry)):
                return False
            for lg in logs[len(sp.logs) :]:
                todo.append((ns, lg, *self._read_log(self.folder, lg, files)))
        for ns, lg, ops, vecs, adds in todo:  # everything read and checked: now apply
            self._replay(ns, ops, vecs)
            self._spaces[ns].logs.append(dict(lg))
            self._spaces[ns].logged += adds
        self._gen = manifest["generation"]
        self._sums = dict(files)
        self._dirty = False
        return True

    @classmethod
    def salvage(
        cls, folder: Path, dim: int, candidates: Iterable[str], namespace: str = ""
    ) -> dict[str, np.ndarray]:
        """The vectors of a damaged index folder that are what was written, by passage id.

        A vector is kept when its fingerprint matches the one recorded beside the ids (or,
        with no fingerprints, when the index file's checksum matches its manifest); its id
        is matched to ``candidates`` (the passage ids the archive lists), so a damaged ids
        or names file costs nothing. What cannot be vouched for is left out, to be embedded
        again.

        Args:
            folder: The index folder.
            dim: The vector dimension.
            candidates: The passage ids that may be in the index.
            namespace: The namespace whose vectors to salvage.
        """
        try:
            manifest = read_manifest(folder, "faiss.json")
            files = (manifest or {}).get("files") or {}
            entry = (manifest or {}).get("spaces", {}).get(namespace)
        except CorruptStoreError:
            manifest, files, entry = None, {}, None
        if entry is None:  # no readable manifest: the newest generation's only space, if any
            g = last_generation(folder, r"faiss-(\d+)-\d+\.index")
            found = sorted(folder.glob(f"faiss-{g}-*.index")) if g else []
            if len(found) != 1:
                return {}
            base = found[0].name[: -len(".index")]
            entry = {"index": found[0].name, "sums": f"{base}.sums.npy"}
        whole = False
        with contextlib.suppress(CorruptStoreError, KeyError):
            check_file(folder / entry["index"], files[entry["index"]])
            whole = True  # the index file is exactly what was written
        recorded: dict[int, int] = {}
        with contextlib.suppress(Exception):  # a damaged record only costs its vector
            rows = load_npy(folder / entry["sums"])
            recorded = dict(zip(rows[:, 0].astype(np.int64).tolist(), rows[:, 1].tolist()))
        if not whole and not recorded:
            return {}
        names = {int_id(c): c for c in candidates}
        want = np.array([i for i in names if i in recorded or whole], dtype=np.int64)
        got = _read_vectors(folder / entry["index"], want, dim)
        if got is None:
            return {}
        ids, vecs = got
        out: dict[str, np.ndarray] = {}
        for i, vec, fp in zip(ids.tolist(), vecs, row_sums(vecs).tolist()):
            if i in names and (whole or recorded.get(i) == fp):
                out[names[i]] = np.array(vec, dtype=np.float32)
        return out

    def close(self) -> None:
        """Persist and release. An HNSW index with logs is written whole first, so the next
        process to open it replays nothing: adding the logged vectors to an HNSW graph was
        most of a new reader's open at 10M tokens (1.24 s of 1.6 s)."""
        fold = [
            sp
            for sp in self._spaces.values()
            if self.folder is not None and sp.kind == "hnsw" and sp.logs and sp.base is not None
        ]
        for sp in fold:
            sp.compact = True
        if not fold or self._dirty:  # writes pending: a failure to persist them must be seen
            self.persist()
            return
        self._dirty = True
        try:
            self.persist()
        except OSError as exc:
            # only a speed-up: the base and its logs on disk are still whole, and the next
            # open replays them as before
            log.warning("could not write the HNSW index whole at close: %s", exc)
            for sp in fold:
                sp.compact = False
            self._dirty = False


def _read_vectors(path: Path, ids: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(ids, vectors)`` that a possibly damaged index file holds under ``ids``, read in a
    child process with bounded memory: FAISS trusts the sizes a file states, so garbage
    could make it allocate without end or crash, and that must not take the caller down."""
    with tempfile.TemporaryDirectory(prefix="pensive-salvage-") as tmp:
        want = Path(tmp) / "want.npy"
        np.save(want, ids, allow_pickle=False)
        limit = 2 * path.stat().st_size + 8 * len(ids) * (dim + 2) + (4 << 30)
        code = "import sys; from pensive_core.backends.faiss import dump_vectors as d; d(*sys.argv[1:])"
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
        env.setdefault("OMP_NUM_THREADS", "1")
        proc = subprocess.run(
            [sys.executable, "-c", code, str(path), str(want), tmp, str(limit)],
            env=env,
            capture_output=True,
            timeout=3600,
            check=False,
        )
        if proc.returncode != 0:
            log.warning(
                "nothing salvaged from %s: %s", path, proc.stderr.decode(errors="replace")[-300:]
            )
            return None
        return (
            load_npy(Path(tmp) / "ids.npy"),
            load_npy(Path(tmp) / "vectors.npy"),
        )


def dump_vectors(path: str, want: str, out: str, limit: str) -> None:
    """The child side of a salvage: write ``ids.npy`` and ``vectors.npy`` into ``out`` for the
    ids of ``want`` that the index at ``path`` holds (memory capped at ``limit`` bytes)."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))
    faiss = _faiss()
    index = faiss.read_index(path)
    ids = np.load(want, allow_pickle=False)
    found: list[int] = []
    vecs: list[np.ndarray] = []
    for i in ids.tolist():
        with contextlib.suppress(RuntimeError):  # an id the index lacks
            vecs.append(np.asarray(index.reconstruct(int(i)), dtype=np.float32))
            found.append(i)
    np.save(Path(out) / "ids.npy", np.array(found, dtype=np.int64), allow_pickle=False)
    matrix = np.stack(vecs) if vecs else np.zeros((0, int(index.d)), dtype=np.float32)
    np.save(Path(out) / "vectors.npy", matrix, allow_pickle=False)
