"""The vector backend plug point."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import InputError
from ..filters import Filter

__all__ = ["VectorBackend", "check_upsert", "check_namespace", "NAMESPACE_RE"]

#: Namespaces every backend can hold: Chroma collections, Pinecone namespaces and Weaviate
#: tenants all accept these. ``""`` is the default namespace.
NAMESPACE_RE = re.compile(r"^(|[A-Za-z0-9][A-Za-z0-9_-]{0,47})$")


@runtime_checkable
class VectorBackend(Protocol):
    """Stores unit vectors by string id, with flat metadata, in isolated namespaces.

    Scores are higher-is-better cosine similarities; each backend converts its own distances.
    Every method takes ``namespace`` (default ``""``): what is stored in one namespace is never
    seen, counted, fetched or deleted through another (tenant isolation).

    Metadata values are strings, numbers or booleans under identifier keys
    (:func:`pensive_core.filters.backend_metadata` makes them); ``where`` is a filter tree from
    :func:`pensive_core.filters.parse_filter`, which each backend translates to its own filter
    language (or evaluates with :func:`pensive_core.filters.matches`).
    """

    #: The backend's name, as ``[backend] name`` says it.
    name: str
    #: The vector dimension.
    dim: int
    #: The index structure in use: ``"flat"`` for exact search, anything else (``"hnsw"``,
    #: ``"ivfpq"``, ``"ann"``) is approximate. The hot cache relies on it: with an approximate
    #: index every insert may move other questions' results, so a commit invalidates them all.
    kind: str

    def upsert(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        metadata: Sequence[Mapping[str, Any]] | None = None,
        *,
        namespace: str = "",
    ) -> None:
        """Add vectors (and their metadata), replacing any already stored under the same ids."""
        ...

    def delete(self, ids: Sequence[str], *, namespace: str = "") -> None:
        """Remove vectors by id; ids that are not stored are ignored."""
        ...

    def search(
        self, vector: np.ndarray, k: int, *, where: Filter | None = None, namespace: str = ""
    ) -> list[tuple[str, float]]:
        """Return up to ``k`` ``(id, score)`` pairs whose metadata pass ``where``, best first."""
        ...

    def fetch(self, ids: Sequence[str], *, namespace: str = "") -> dict[str, np.ndarray]:
        """Return the stored vectors of ``ids`` (ids not stored are left out)."""
        ...

    def count(self, *, namespace: str = "") -> int:
        """Number of vectors stored in the namespace."""
        ...

    def ids(self, *, namespace: str = "") -> set[str] | None:
        """Every id stored in the namespace, or None when the backend cannot list them cheaply
        (a managed service): recovery after a crash then asks :meth:`fetch` for the ids the
        archive expects instead, and cannot find strays."""
        ...

    def persist(self) -> None:
        """Make everything written so far durable (atomically)."""
        ...

    def close(self) -> None:
        """Release resources; persists first."""
        ...


def check_namespace(namespace: str) -> str:
    """Return ``namespace`` if every backend can hold it.

    Raises:
        InputError: If it is not a string of letters, digits, ``_`` and ``-`` (at most 48,
            starting with a letter or digit).
    """
    if not isinstance(namespace, str) or not NAMESPACE_RE.match(namespace):
        raise InputError(
            f"namespace {namespace!r} is not valid: use up to 48 letters, digits, '_' or '-', "
            "starting with a letter or digit ('' is the default namespace)"
        )
    return namespace


def check_upsert(
    ids: Sequence[str],
    vectors: np.ndarray,
    metadata: Sequence[Mapping[str, Any]] | None,
    dim: int,
    namespace: str,
) -> tuple[list[str], np.ndarray, list[dict[str, Any]]]:
    """Validate an upsert's arguments (the namespace, shapes agree, metadata is one dict per id)
    and keep the last of repeated ids, so every backend treats ``upsert(["a", "a"], ...)`` alike.

    Raises:
        InputError: If the namespace is invalid or the shapes or lengths disagree.
    """
    check_namespace(namespace)
    ids = list(ids)
    vecs = np.ascontiguousarray(vectors, dtype=np.float32)
    if vecs.ndim == 1 and len(ids) == 1:
        vecs = vecs.reshape(1, -1)
    if vecs.ndim != 2 or vecs.shape != (len(ids), dim):
        raise InputError(f"expected vectors of shape ({len(ids)}, {dim}), got {vecs.shape}")
    if metadata is None:
        metas: list[dict[str, Any]] = [{} for _ in ids]
    else:
        metas = [dict(m) for m in metadata]
        if len(metas) != len(ids):
            raise InputError(f"{len(ids)} ids but {len(metas)} metadata dicts")
    last = {cid: i for i, cid in enumerate(ids)}
    if len(last) < len(ids):  # a repeated id: the last one wins
        rows = sorted(last.values())
        ids, vecs, metas = [ids[r] for r in rows], vecs[rows], [metas[r] for r in rows]
    return ids, vecs, metas
