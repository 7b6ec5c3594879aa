"""Chroma vector backend: embedded (``PersistentClient``) or client/server (``HttpClient``).

Pensive embeds; the collection is created with no embedding function of Chroma's own and
cosine space, and Chroma's distances (``1 - cosine``) are turned back into similarities. The
collection records the vector dimension, so opening it with another embedder is an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import ChromaConfig
from ..errors import BackendError, ConfigError, MissingDependencyError
from ..filters import And, Filter, Or, matches, to_mongo
from .base import check_namespace, check_upsert

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
        self._colls: dict[str, Any] = {}
        self._check_dim(self._collection("", create=True))

    def _check_dim(self, coll: Any) -> None:
        stored = (coll.metadata or {}).get("pensive_dim")
        if stored is not None and int(stored) != self.dim:
            raise ConfigError(
                f"Chroma collection {coll.name!r} at {self.address} holds {stored}-d "
                f"vectors, not {self.dim}-d: use another [backend.chroma] collection"
            )

    def _name(self, namespace: str) -> str:
        # one collection per namespace: isolation is Chroma's own, and counts stay cheap
        check_namespace(namespace)
        return self.cfg.collection + (f"--{namespace}" if namespace else "")

    def _collection(self, namespace: str, create: bool = False) -> Any:
        name = self._name(namespace)
        coll = self._colls.get(name)
        if coll is not None:
            return coll
        meta = {"pensive_dim": self.dim, "hnsw:space": "cosine"}
        try:
            if create:
                coll = self.client.get_or_create_collection(
                    name=name, embedding_function=None, metadata=meta
                )
            else:
                names = {getattr(c, "name", c) for c in self.client.list_collections()}
                if name not in names:
                    return None  # nothing was ever written to this namespace
                coll = self.client.get_collection(name=name, embedding_function=None)
        except Exception as exc:
            raise BackendError(
                f"Chroma at {self.address}: cannot open collection {name!r}: {exc}"
            ) from exc
        if namespace:
            self._check_dim(coll)
        self._colls[name] = coll
        return coll

    def _step(self) -> int:
        return max(1, int(self.client.get_max_batch_size()))

    def upsert(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        metadata: Sequence[Mapping[str, Any]] | None = None,
        *,
        namespace: str = "",
    ) -> None:
        """Add vectors and their metadata, replacing any already stored under the same ids."""
        ids, vecs, metas = check_upsert(ids, vectors, metadata, self.dim, namespace)
        if not ids:
            return
        coll = self._collection(namespace, create=True)
        step = self._step()
        for i in range(0, len(ids), step):
            part = slice(i, i + step)
            # Chroma merges metadata on upsert; a record's metadata is replaced wholesale here,
            # so keys the new metadata lacks are cleared first
            old = coll.get(ids=ids[part], include=["metadatas"])
            stale = {
                cid: {key: None for key in (m or {})}
                for cid, m in zip(old["ids"], old["metadatas"] or [])
            }
            if stale:
                cids = [c for c in stale if stale[c]]
                if cids:
                    coll.update(ids=cids, metadatas=[stale[c] for c in cids])
            coll.upsert(
                ids=ids[part],
                embeddings=vecs[part],
                metadatas=[m or None for m in metas[part]],
            )

    def delete(self, ids: Sequence[str], *, namespace: str = "") -> None:
        """Remove vectors by id; ids that are not stored are ignored."""
        coll = self._collection(namespace)
        ids = list(ids)
        if coll is None or not ids:
            return
        step = self._step()
        for i in range(0, len(ids), step):
            coll.delete(ids=ids[i : i + step])

    def search(
        self, vector: np.ndarray, k: int, *, where: Filter | None = None, namespace: str = ""
    ) -> list[tuple[str, float]]:
        """Up to ``k`` ``(id, cosine similarity)`` pairs passing ``where``, best first."""
        coll = self._collection(namespace)
        if coll is None or k <= 0:
            return []
        total = int(coll.count())
        q = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        chroma_where = None if where is None else to_mongo(where)
        # Chroma lets records without a field through $ne/$nin; Pensive's filters do not, so
        # those are checked here on the returned metadata, fetching more until k pass
        recheck = where is not None and _negates(where)
        n = min(k, total)
        while n > 0:
            res = coll.query(
                query_embeddings=q,
                n_results=n,
                where=chroma_where,
                include=["distances", "metadatas"] if recheck else ["distances"],
            )
            got = list(zip(res["ids"][0], res["distances"][0]))
            if recheck and where is not None:
                metas = res["metadatas"][0]
                kept = [g for g, m in zip(got, metas) if matches(where, m or {})]
                if len(kept) < k and len(got) == n and n < total:
                    n = min(total, 4 * n)
                    continue
                got = kept
            return [(i, 1.0 - float(d)) for i, d in got[:k]]
        return []

    def fetch(self, ids: Sequence[str], *, namespace: str = "") -> dict[str, np.ndarray]:
        """The stored vectors of ``ids`` (ids not stored are left out)."""
        coll = self._collection(namespace)
        ids = list(ids)
        out: dict[str, np.ndarray] = {}
        if coll is None:
            return out
        step = self._step()
        for i in range(0, len(ids), step):
            got = coll.get(ids=ids[i : i + step], include=["embeddings"])
            for cid, vec in zip(got["ids"], got["embeddings"]):
                out[cid] = np.asarray(vec, dtype=np.float32)
        return out

    def count(self, *, namespace: str = "") -> int:
        """Number of stored vectors in the namespace."""
        coll = self._collection(namespace)
        return 0 if coll is None else int(coll.count())

    def ids(self, *, namespace: str = "") -> set[str] | None:
        """None: listing every id of a managed service is not cheap (see
        :meth:`~pensive_core.backends.VectorBackend.ids`)."""
        return None

    def persist(self) -> None:
        """Chroma writes through: nothing to do."""

    def close(self) -> None:
        """Release the client (the data stays)."""
        self._colls.clear()


def _negates(node: Filter) -> bool:
    if isinstance(node, (And, Or)):
        return any(_negates(p) for p in node.parts)
    return node.op in ("$ne", "$nin")
