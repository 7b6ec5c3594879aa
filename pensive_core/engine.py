"""The ``Pensive`` store: ingest, hybrid query, archive expansion, persistence."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from .archive import Archive, metadata_json
from .backends.base import VectorBackend
from .backends.registry import create_backend
from .cache import L1Cache, cache_key
from .chunking import chunk_text, content_hash
from .config import STRUCTURAL_KEYS, PensiveConfig, get_key, load_config
from .embedders.base import Embedder
from .embedders.registry import create_embedder
from .errors import ConfigError, InputError, NotFoundError, PensiveError
from .fusion import Fused, fuse
from .loaders import iter_files, load_file
from .sparse.bm25 import BM25Index
from .timeutil import ensure_utc, to_iso
from .types import Chunk, Document, Hit, IngestReport, QueryResult

__all__ = ["Pensive"]

log = logging.getLogger(__name__)

_MAX_QUERY_CHARS = 20_000
_MAX_K = 1_000
_INGEST_BATCH = 256


class Pensive:
    """A persistent hybrid retrieval store in one folder.

    Args:
        path: The store folder (created if missing).
        config: A dict shaped like ``pensive.toml``, a path to such a file, or None for the
            defaults. On an existing store, it overrides the saved config except for the keys the
            index depends on (embedder, backend, chunking, tokenisation), which must match.

    Raises:
        ConfigError: On an unknown key or a value that contradicts how the store was built.
        SchemaVersionError: If the store was written by an incompatible version.

    Example:
        >>> with Pensive("./pensive-data") as p:          # doctest: +SKIP
        ...     p.ingest([Document(id="a", text="Revenue rose 12% in Q3 2024.")])
        ...     p.query("Q3 revenue", k=3).hits[0].doc_id
        'a'
    """

    def __init__(self, path: str | os.PathLike[str], config: Any = None) -> None:
        self.path = Path(path).expanduser()
        if self.path.exists() and not self.path.is_dir():
            raise InputError(f"store path {self.path} exists and is not a folder")
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._archive = Archive(self.path / "pensive.sqlite")
        self._embedder: Embedder | None = None
        self._backend: VectorBackend | None = None
        self._l1: L1Cache | None = None
        self._changed = False  # content changed since the last commit
        self._latency: dict[str, deque[float]] = {}
        self._closed = False
        try:
            saved = self._archive.get_meta("config")
            self.config: PensiveConfig = load_config(config, base=saved)
            if saved is not None:
                self._check_structural(saved)
            else:
                self._archive.set_meta("config", self.config.model_dump())
            self._bm25 = BM25Index(self.path / "bm25", self.config.bm25)
            dim = self._archive.get_meta("dim")
            if dim is not None:
                self._open_backend(int(dim))
            if self.config.router.l1:
                self._l1 = L1Cache(
                    self.path / "l1.sqlite",
                    self.config.router.l1_capacity,
                    self.config.router.l1_ttl_s,
                )
            self._recover()
        except BaseException:
            self._closed = True  # nothing half-open is left behind
            self._archive.close()
            if self._l1 is not None:
                self._l1.close()
            raise

    # -- setup --------------------------------------------------------------------------------
    def _check_structural(self, saved: Mapping[str, Any]) -> None:
        # the effective config is saved + given + environment, so a structural key differs
        # from the saved one exactly when the caller asked for a different value
        built = load_config(base=saved, environ={})
        for key in STRUCTURAL_KEYS:
            want, have = get_key(self.config, key), get_key(built, key)
            if want != have:
                raise ConfigError(
                    f"{key} = {want!r} does not match the store at {self.path}, which was built "
                    f"with {key} = {have!r}; open it without overriding {key}, or ingest into a "
                    "new folder"
                )

    def _get_embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = create_embedder(self.config.embedder)
            saved = self._archive.get_meta("embedder")
            if saved is None:
                self._archive.set_meta(
                    "embedder", {"name": self._embedder.name, "dim": self._embedder.dim}
                )
                self._archive.set_meta("dim", self._embedder.dim)
            elif saved["dim"] != self._embedder.dim:
                raise ConfigError(
                    f"embedder {self._embedder.name!r} makes {self._embedder.dim}-d vectors but "
                    f"the store at {self.path} holds {saved['dim']}-d vectors from "
                    f"{saved['name']!r}"
                )
        return self._embedder

    def _open_backend(self, dim: int) -> VectorBackend:
        if self._backend is None:
            name = self.config.backend.name
            options = getattr(self.config.backend, name, None)
            self._backend = create_backend(name, self.path / "vectors", dim, options)
            self._archive.set_meta("backend", name)
        return self._backend

    def _check_open(self) -> None:
        if self._closed:
            raise PensiveError(f"this Pensive store ({self.path}) is closed")

    # -- ingest -------------------------------------------------------------------------------
    def ingest(self, documents: Iterable[Document], *, progress: Any = None) -> IngestReport:
        """Index documents; an id already stored is replaced, re-embedding only changed passages.

        Args:
            documents: :class:`Document` objects (any iterable; streamed in batches).
            progress: Optional callable ``(n_documents_done) -> None`` for progress display.

        Returns:
            What was added, updated, skipped, embedded and reused.

        Raises:
            InputError: If an item is not a Document.
        """
        self._check_open()
        if isinstance(documents, Document):
            documents = [documents]
        t0 = time.perf_counter()
        counts = {
            "added": 0,
            "updated": 0,
            "unchanged": 0,
            "embedded": 0,
            "reused": 0,
            "deleted": 0,
        }
        with self._lock:
            batch: dict[str, Document] = {}
            done = 0
            for doc in documents:
                if not isinstance(doc, Document):
                    raise InputError(
                        f"ingest() takes Document objects, got {type(doc).__name__}; "
                        "wrap text as Document(id=..., text=...)"
                    )
                batch[doc.id] = doc  # the same id twice in one call: the last one wins
                if len(batch) >= _INGEST_BATCH:
                    self._ingest_batch(list(batch.values()), counts)
                    done += len(batch)
                    batch = {}
                    if progress:
                        progress(done)
            if batch:
                self._ingest_batch(list(batch.values()), counts)
                done += len(batch)
                if progress:
                    progress(done)
            self._commit()
        return IngestReport(
            added=counts["added"],
            updated=counts["updated"],
            unchanged=counts["unchanged"],
            chunks_embedded=counts["embedded"],
            chunks_reused=counts["reused"],
            chunks_deleted=counts["deleted"],
            seconds=time.perf_counter() - t0,
        )

    def _ingest_batch(self, docs: list[Document], counts: dict[str, int]) -> None:
        embedder = self._get_embedder()
        backend = self._open_backend(embedder.dim)
        window = self.config.chunking.target_tokens or embedder.max_tokens
        window = min(window, embedder.max_tokens)
        plans: list[tuple[Document, str, list[Chunk]]] = []
        to_embed: list[Chunk] = []
        to_delete: list[str] = []
        for doc in docs:
            doc_hash = content_hash(doc.text)
            old = self._archive.fingerprint(doc.id)
            if old == (doc_hash, metadata_json(doc.metadata), to_iso(doc.timestamp), True):
                counts["unchanged"] += 1
                continue
            # an interrupted ingest leaves indexed=False: then nothing stored can be trusted as
            # already embedded, and every passage is indexed again (upserts replace)
            trusted = bool(old and old[3])
            chunks = chunk_text(
                doc.id,
                doc.text,
                max_tokens=window,
                count_tokens=embedder.count_tokens,
                min_tokens=self.config.chunking.min_tokens,
            )
            old_ids = set(self._archive.chunk_ids(doc.id)) if old else set()
            new_ids = {c.id for c in chunks}
            for c in chunks:
                if trusted and c.id in old_ids and c.id in self._bm25:
                    counts["reused"] += 1
                else:
                    to_embed.append(c)
            to_delete.extend(old_ids - new_ids)
            counts["updated" if old else "added"] += 1
            plans.append((doc, doc_hash, chunks))
        if to_embed:
            vectors = embedder.embed([c.text for c in to_embed])
            backend.upsert([c.id for c in to_embed], vectors)
            for c in to_embed:
                self._bm25.add(c.id, c.text)
            counts["embedded"] += len(to_embed)
        if to_delete:
            backend.delete(to_delete)
            self._bm25.delete(to_delete)
            counts["deleted"] += len(to_delete)
        if plans:
            self._archive.write(plans)
        if plans or to_delete:
            self._changed = True

    def _commit(self) -> None:
        # The archive rows are written first with indexed=0, then the indexes are persisted,
        # then the rows are marked indexed. A crash in between leaves indexed=0 rows, which the
        # next open re-indexes from the archive; a passage the indexes know but the archive does
        # not is dropped at query time, never shown.
        self._bm25.commit()
        if self._backend is not None:
            self._backend.persist()
        self._archive.mark_indexed()
        if self._l1 is not None and self._changed:
            self._l1.invalidate_all()  # any content change may change any answer
        self._changed = False

    def _recover(self) -> int:
        """Re-index documents an interrupted ingest left unconfirmed; returns how many."""
        pending = self._archive.unindexed()
        if not pending:
            return 0
        log.warning("re-indexing %d document(s) left by an interrupted ingest", len(pending))
        docs = [d for d in (self._archive.document(i) for i in pending) if d is not None]
        self.ingest(docs)
        return len(docs)

    def ingest_path(self, *paths: str | os.PathLike[str], progress: Any = None) -> IngestReport:
        """Ingest files and folders (``.txt .md .jsonl .html``), skipping unreadable ones.

        Document ids are file paths relative to the folder given (JSONL lines carry their own id).

        Args:
            paths: Files or folders; folders are walked recursively, hidden entries skipped.
            progress: Optional callable ``(n_documents_done) -> None``.

        Returns:
            The combined report; ``errors`` lists each skipped file or line with the reason.

        Raises:
            InputError: If a path does not exist.
        """
        if not paths:
            raise InputError("ingest_path() needs at least one file or folder")
        errors: list[tuple[str, str]] = []

        def docs() -> Iterable[Document]:
            for raw in paths:
                root = Path(raw).expanduser()
                for f in iter_files(root):
                    try:
                        for item in load_file(f, root):
                            if isinstance(item, InputError):
                                errors.append((str(f), str(item)))
                            else:
                                yield item
                    except (InputError, OSError) as exc:
                        errors.append((str(f), str(exc)))

        for raw in paths:
            if not Path(raw).expanduser().exists():
                raise InputError(f"no such file or folder: {raw}")
        report = self.ingest(docs(), progress=progress)
        return IngestReport(**{**report.__dict__, "errors": errors})

    # -- query --------------------------------------------------------------------------------
    def query(self, text: str, k: int = 5, *, as_of: datetime | None = None) -> QueryResult:
        """Hybrid retrieval: dense + BM25, fused.

        Args:
            text: The question.
            k: How many passages to return.
            as_of: Only passages of documents timestamped at or before this time (documents
                without a timestamp are always eligible).

        Returns:
            The hits (best first), the tier that answered, a confidence in [0, 1], and latency.

        Raises:
            InputError: On an empty or over-long query or a bad ``k``.
        """
        self._check_open()
        if self._backend is not None:
            self._get_embedder()  # a one-off model load is not query latency
        t0 = time.perf_counter()
        text = _validate_query(text)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= _MAX_K:
            raise InputError(f"k must be an int between 1 and {_MAX_K}, got {k!r}")
        cutoff = ensure_utc(as_of)
        timings: dict[str, float] = {}
        with self._lock:
            key = None
            if self._l1 is not None:
                key = cache_key(text, k, to_iso(cutoff), self._query_settings())
                cached = self._l1.get(key)
                if cached is not None:
                    hits = [_copy_hit(h) for h in cached[0]]  # callers may mutate metadata
                    return self._record(QueryResult(hits, "L1", cached[1], _ms(t0), text, {}))
            if self._bm25.n_live == 0 and (self._backend is None or self._backend.count() == 0):
                return self._record(QueryResult([], "L2", 0.0, _ms(t0), text, {}))
            fused, lists = self._retrieve(text, timings)
            t = time.perf_counter()
            hits = self._hits(fused, k, cutoff)
            timings["fetch_ms"] = _ms(t)
            confidence = _confidence(fused, lists)
            if key is not None and self._l1 is not None:
                self._l1.put(key, [_copy_hit(h) for h in hits], confidence)
        return self._record(QueryResult(hits, "L2", confidence, _ms(t0), text, timings))

    def _query_settings(self) -> dict[str, Any]:
        # everything besides the question that changes the answer belongs in the cache key
        return {"fusion": self.config.fusion.model_dump(), "bm25": self.config.bm25.model_dump()}

    def _record(self, res: QueryResult) -> QueryResult:
        self._latency.setdefault(res.tier, deque(maxlen=10_000)).append(res.latency_ms)
        return res

    def _retrieve(
        self, text: str, timings: dict[str, float]
    ) -> tuple[list[Fused], dict[str, list[tuple[str, float]]]]:
        cfg = self.config.fusion
        depth = cfg.depth
        lists: dict[str, list[tuple[str, float]]] = {}
        weights = {name: cfg.weights.get(name, 1.0) for name in ("dense", "bm25")}
        if weights["dense"] > 0 and self._backend is not None:
            t = time.perf_counter()
            qvec = self._get_embedder().embed_query(text)
            timings["embed_ms"] = _ms(t)
            t = time.perf_counter()
            lists["dense"] = self._backend.search(qvec, depth)
            timings["dense_ms"] = _ms(t)
        if weights["bm25"] > 0:
            t = time.perf_counter()
            lists["bm25"] = self._bm25.search(text, depth)
            timings["bm25_ms"] = _ms(t)
        t = time.perf_counter()
        fused = fuse(cfg.method, lists, weights, cfg.k)
        timings["fusion_ms"] = _ms(t)
        return fused, lists

    def _hits(self, fused: list[Fused], k: int, cutoff: datetime | None) -> list[Hit]:
        hits: list[Hit] = []
        start = 0
        while len(hits) < k and start < len(fused):
            # usually the first k fused ids all qualify; fetch more only when some did not
            window = fused[start : start + (k - len(hits)) + (k if cutoff is not None else 0)]
            start += len(window)
            rows = self._archive.chunks(f.id for f in window)
            for f in window:
                row = rows.get(f.id)
                if row is None:
                    continue  # indexed but not archived (an interrupted ingest): never shown
                if cutoff is not None and row.timestamp is not None and row.timestamp > cutoff:
                    continue
                hits.append(
                    Hit(
                        doc_id=row.doc_id,
                        chunk_id=row.id,
                        text=row.text,
                        score=f.score,
                        metadata=row.metadata,
                        timestamp=row.timestamp,
                        sources=f.ranks,
                    )
                )
                if len(hits) == k:
                    break
        return hits

    # -- archive (L3) -------------------------------------------------------------------------
    def get(self, doc_id: str) -> Document:
        """Return a stored document whole, from the archive.

        Raises:
            NotFoundError: If no document has that id.
        """
        self._check_open()
        doc = self._archive.document(doc_id)
        if doc is None:
            raise NotFoundError(f"no document with id {doc_id!r} in {self.path}")
        return doc

    def expand(self, hit: Hit, window: int | None = 1) -> str:
        """Expand a hit outward from its passage, using the archived document.

        Args:
            hit: A hit from :meth:`query`.
            window: Passages to include on each side; None for the whole document.

        Returns:
            The text of the document from the first to the last passage in the window, exactly
            as ingested (or the whole document).

        Raises:
            NotFoundError: If the hit's document or passage is no longer stored.
        """
        doc = self.get(hit.doc_id)
        if window is None:
            return doc.text
        row = self._archive.chunks([hit.chunk_id]).get(hit.chunk_id)
        if row is None:
            raise NotFoundError(f"passage {hit.chunk_id!r} is no longer stored (re-ingested?)")
        spans = self._archive.neighbours(hit.doc_id, row.ordinal, max(0, int(window)))
        return doc.text[spans[0][1] : spans[-1][2]]

    # -- delete, stats, lifecycle -------------------------------------------------------------
    def delete(self, doc_id: str) -> int:
        """Delete a document and all its passages.

        Returns:
            The number of passages removed.

        Raises:
            NotFoundError: If no document has that id.
        """
        self._check_open()
        with self._lock:
            if self._archive.fingerprint(doc_id) is None:
                raise NotFoundError(f"no document with id {doc_id!r} in {self.path}")
            ids = self._archive.delete(doc_id)
            self._changed = True
            if self._backend is not None:
                self._backend.delete(ids)
            self._bm25.delete(ids)
            self._commit()
        return len(ids)

    def stats(self) -> dict[str, Any]:
        """Counts and sizes: documents, passages, vectors, BM25 segments, bytes on disk."""
        self._check_open()
        docs, chunks = self._archive.counts()
        size = sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())
        return {
            "path": str(self.path),
            "documents": docs,
            "chunks": chunks,
            "vectors": self._backend.count() if self._backend else 0,
            "backend": self.config.backend.name,
            "index": getattr(self._backend, "kind", None),
            "embedder": self.config.embedder.name,
            "bm25_terms": len(self._bm25.vocab),
            "bm25_segments": len(self._bm25.segments),
            "fusion": self.config.fusion.method,
            "disk_bytes": size,
            "queries": self._tier_stats(),
            "l1": None
            if self._l1 is None
            else {
                "entries": len(self._l1),
                "hits": self._l1.hits,
                "misses": self._l1.misses,
                "evictions": self._l1.evictions,
                "generation": self._l1.generation,
            },
        }

    def _tier_stats(self) -> dict[str, Any]:
        total = sum(len(v) for v in self._latency.values())
        out: dict[str, Any] = {"total": total}
        for tier, values in sorted(self._latency.items()):
            arr = np.fromiter(values, dtype=float)
            out[tier] = {
                "count": len(arr),
                "share": round(len(arr) / total, 4),
                "p50_ms": round(float(np.percentile(arr, 50)), 4),
                "p95_ms": round(float(np.percentile(arr, 95)), 4),
                "p99_ms": round(float(np.percentile(arr, 99)), 4),
            }
        return out

    def close(self) -> None:
        """Persist and release everything; further calls raise."""
        if getattr(self, "_closed", True):
            return
        with self._lock:
            self._commit()
            if self._backend is not None:
                self._backend.close()
            if self._l1 is not None:
                self._l1.close()
            self._archive.close()
            self._closed = True

    def __enter__(self) -> Pensive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Pensive({str(self.path)!r})"


def _copy_hit(h: Hit) -> Hit:
    return Hit(
        h.doc_id, h.chunk_id, h.text, h.score, dict(h.metadata), h.timestamp, dict(h.sources)
    )


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


def _validate_query(text: Any) -> str:
    if not isinstance(text, str):
        raise InputError(f"query must be a str, got {type(text).__name__}")
    if not text.strip():
        raise InputError("query is empty")
    if len(text) > _MAX_QUERY_CHARS:
        raise InputError(f"query is {len(text)} characters; the limit is {_MAX_QUERY_CHARS}")
    return text


def _confidence(fused: list[Fused], lists: Mapping[str, list[tuple[str, float]]]) -> float:
    """A heuristic in [0, 1] from retriever agreement, dense similarity and the fused margin."""
    if not fused:
        return 0.0
    top = fused[0]
    # agreement: how many retrievers put the top passage in their own top 10
    agree = sum(1 for name in lists if top.ranks.get(name, 10**9) <= 10) / max(1, len(lists))
    dense = dict(lists.get("dense", []))
    sim = float(np.clip((dense.get(top.id, 0.0) - 0.2) / 0.5, 0.0, 1.0)) if dense else agree
    margin = (top.score - fused[1].score) / top.score if len(fused) > 1 and top.score > 0 else 1.0
    return round(float(np.clip(0.45 * agree + 0.4 * sim + 0.15 * margin, 0.0, 1.0)), 4)
