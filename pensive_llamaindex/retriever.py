"""``PensiveLlamaIndexRetriever``: a LlamaIndex retriever over a Pensive store.

It converts each :class:`~pensive_core.types.Hit` into a ``NodeWithScore`` and nothing else;
tiers, fusion, graph and time are the store's.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pensive_core import Pensive, PensiveConfig
from pensive_core.deprecation import renamed
from pensive_core.errors import InputError, MissingDependencyError
from pensive_core.filters import parse_filter
from pensive_core.timeutil import to_iso
from pensive_core.types import Hit
from pensive_core.validate import MAX_K

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.constants import DEFAULT_SIMILARITY_TOP_K
    from llama_index.core.schema import (
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        RelatedNodeInfo,
        TextNode,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("llama_index.core", "llamaindex", "pensive_llamaindex") from exc

__all__ = ["PensiveLlamaIndexRetriever", "hit_to_node"]

#: Metadata keys the adapter adds that an LLM does not need to read (``valid_from`` and
#: ``valid_to`` stay: when a statement held is what lets it answer "now" or "as of").
_NOT_FOR_LLM = ("tier", "sources", "superseded_by", "pinned")
#: ... nor an embedding model to embed.
_NOT_FOR_EMBEDDING = (
    "doc_id",
    "tier",
    "sources",
    "superseded_by",
    "valid_from",
    "valid_to",
    "pinned",
)


def hit_to_node(hit: Hit, tier: str | None = None) -> NodeWithScore:
    """Convert one hit into a LlamaIndex node with its score.

    Args:
        hit: The hit.
        tier: The tier that answered ("L1", "L2", "L3"), stored as ``metadata["tier"]``.

    Returns:
        A ``NodeWithScore`` whose ``TextNode`` has ``id_`` = the chunk id, the hit's text, and
        metadata = the hit's metadata plus ``doc_id``, ``tier``, ``sources``, ``timestamp``,
        ``valid_from``, ``valid_to`` (ISO strings, absent when unknown) and ``superseded_by``
        (and ``pinned``: True for a document an ``@`` mention pinned); its SOURCE relationship names the document.
    """
    meta: dict[str, Any] = dict(hit.metadata)
    meta["doc_id"] = hit.doc_id
    if tier is not None:
        meta["tier"] = tier
    meta["sources"] = dict(hit.sources)
    times: Mapping[str, datetime | None] = {
        "timestamp": hit.timestamp,
        "valid_from": hit.valid_from,
        "valid_to": hit.valid_to,
    }
    for key, value in times.items():
        if value is not None:
            meta[key] = to_iso(value)
        else:
            meta.pop(key, None)
    meta["superseded_by"] = hit.superseded_by
    if hit.pinned:  # forced in by an @-mention or pins, not retrieved
        meta["pinned"] = True
    node = TextNode(
        id_=hit.chunk_id,
        text=hit.text,
        metadata=meta,
        excluded_llm_metadata_keys=[k for k in _NOT_FOR_LLM if k in meta],
        excluded_embed_metadata_keys=[k for k in _NOT_FOR_EMBEDDING if k in meta],
    )
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=hit.doc_id)
    return NodeWithScore(node=node, score=float(hit.score))


class PensiveLlamaIndexRetriever(BaseRetriever):
    """Retrieve from a Pensive store as LlamaIndex nodes.

    It takes the place of ``index.as_retriever()`` (in ``RetrieverQueryEngine``, chat engines,
    ``QueryFusionRetriever``) and, like LlamaIndex's own retrievers, returns
    ``similarity_top_k`` nodes, by default LlamaIndex's ``DEFAULT_SIMILARITY_TOP_K`` (2): a
    retriever swapped in for another sends the LLM as many passages as before. Pass
    ``similarity_top_k=5`` for as many as :meth:`Pensive.query` gives by default.

    Args:
        pensive: An open store (the caller keeps owning it).
        similarity_top_k: How many passages per query (1 to 1000).
        as_of: Only passages of documents timestamped at or before this time.
        filters: A Mongo-style metadata filter (see :meth:`Pensive.query`).
        callback_manager: LlamaIndex callbacks.
        verbose: LlamaIndex's verbose flag.
        k: Deprecated name of ``similarity_top_k`` (a ``DeprecationWarning``; removed in the
            next release).

    Raises:
        TypeError: If ``pensive`` is not a :class:`~pensive_core.Pensive`.
        InputError: If ``similarity_top_k`` is not an int from 1 to 1000, ``k`` and
            ``similarity_top_k`` disagree, ``as_of`` is not a datetime or ``filters`` is
            malformed (the message names the field).

    Example:
        >>> retriever = PensiveLlamaIndexRetriever.from_defaults(path="./pensive-data")  # doctest: +SKIP
        >>> engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
    """

    def __init__(
        self,
        pensive: Pensive,
        similarity_top_k: int = DEFAULT_SIMILARITY_TOP_K,
        as_of: datetime | None = None,
        filters: Mapping[str, Any] | None = None,
        *,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        k: int | None = None,
    ) -> None:
        if not isinstance(pensive, Pensive):
            raise TypeError(
                f"pensive must be a pensive_core.Pensive, got {type(pensive).__name__}; "
                "use PensiveLlamaIndexRetriever.from_defaults(path=...) to open a store"
            )
        if k is not None:
            warnings.warn(
                "PensiveLlamaIndexRetriever(k=...) is deprecated: use similarity_top_k=... "
                "(LlamaIndex's name); k= is removed in the next release",
                DeprecationWarning,
                stacklevel=2,
            )
            if similarity_top_k not in (k, DEFAULT_SIMILARITY_TOP_K):
                raise InputError(
                    f"k={k!r} and similarity_top_k={similarity_top_k!r} disagree: "
                    "pass only similarity_top_k"
                )
            similarity_top_k = k
        _check_top_k(similarity_top_k)
        if as_of is not None and not isinstance(as_of, datetime):
            raise InputError(f"as_of must be a datetime or None, got {type(as_of).__name__}")
        parse_filter(filters)  # a malformed filter fails here, naming its field, not per query
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.pensive = pensive
        self.similarity_top_k = similarity_top_k
        self.as_of = as_of
        self.filters = filters
        self._owned = False

    @classmethod
    def from_defaults(
        cls,
        pensive: Pensive | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        config: str | os.PathLike[str] | Mapping[str, Any] | PensiveConfig | None = None,
        similarity_top_k: int = DEFAULT_SIMILARITY_TOP_K,
        as_of: datetime | None = None,
        filters: Mapping[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> PensiveLlamaIndexRetriever:
        """A retriever over an open store or over the store at ``path``, LlamaIndex-style.

        Args:
            pensive: An open store (the caller keeps owning it); or
            path: The store folder, opened (or created) here; the retriever owns that store
                and :meth:`close` closes it.
            config: With ``path``: as for :class:`~pensive_core.Pensive`.
            similarity_top_k: How many passages per query (default LlamaIndex's
                ``DEFAULT_SIMILARITY_TOP_K``).
            as_of: Only passages of documents timestamped at or before this time.
            filters: A Mongo-style metadata filter (see :meth:`Pensive.query`).
            callback_manager: LlamaIndex callbacks.
            verbose: LlamaIndex's verbose flag.

        Returns:
            The retriever.

        Raises:
            InputError: Unless exactly one of ``pensive`` and ``path`` is given, or on
                ``config`` without ``path``.
        """
        if (pensive is None) == (path is None):
            raise InputError(
                "PensiveLlamaIndexRetriever.from_defaults needs exactly one of pensive (an open "
                f"store) or path (a store folder), got pensive={pensive!r}, path={path!r}"
            )
        if path is None and config is not None:
            raise InputError("config is read only with path=...; an open store has its own")
        options: dict[str, Any] = {
            "similarity_top_k": similarity_top_k,
            "as_of": as_of,
            "filters": filters,
            "callback_manager": callback_manager,
            "verbose": verbose,
        }
        if pensive is not None:
            return cls(pensive, **options)
        assert path is not None  # for the type checker: checked above
        _check_top_k(similarity_top_k)  # before a store is opened for nothing
        return cls._owning(Pensive(Path(path), config=config), options)

    @classmethod
    def from_path(
        cls,
        path: str | os.PathLike[str],
        config: str | os.PathLike[str] | Mapping[str, Any] | PensiveConfig | None = None,
        **kwargs: Any,
    ) -> PensiveLlamaIndexRetriever:
        """Open (or create) the store at ``path`` and retrieve from it.

        Args:
            path: The store folder.
            config: As for :class:`~pensive_core.Pensive`.
            **kwargs: ``similarity_top_k``, ``as_of``, ``filters``, ``callback_manager``,
                ``verbose`` (and the deprecated ``k``).

        Returns:
            A retriever that owns the store: :meth:`close` closes it.
        """
        return cls._owning(Pensive(Path(path), config=config), kwargs)

    @classmethod
    def _owning(cls, store: Pensive, options: Mapping[str, Any]) -> PensiveLlamaIndexRetriever:
        """A retriever that owns ``store`` (closed again if the options are refused)."""
        try:
            retriever = cls(store, **options)
        except Exception:
            store.close()
            raise
        retriever._owned = True
        return retriever

    def close(self) -> None:
        """Close the store if this retriever opened it (``from_path``)."""
        if self._owned:
            self.pensive.close()

    @property
    def k(self) -> int:
        """Deprecated: :attr:`similarity_top_k` (a ``DeprecationWarning``)."""
        warnings.warn(
            "PensiveLlamaIndexRetriever.k is deprecated: use similarity_top_k",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.similarity_top_k

    def _query(self, text: str) -> list[NodeWithScore]:
        res = self.pensive.query(
            text, k=self.similarity_top_k, as_of=self.as_of, filters=self.filters
        )
        return [hit_to_node(h, res.tier) for h in res.hits]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._query(query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # the store's query blocks (model, SQLite, FAISS): off the event loop
        return await asyncio.to_thread(self._query, query_bundle.query_str)

    def __repr__(self) -> str:
        return (
            f"PensiveLlamaIndexRetriever({self.pensive!r}, "
            f"similarity_top_k={self.similarity_top_k})"
        )


def _check_top_k(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_K:
        raise InputError(f"similarity_top_k must be an int from 1 to {MAX_K}, got {value!r}")


def __getattr__(name: str) -> Any:
    if name == "PensiveRetriever":  # renamed: both adapters had the name, so importing
        # both in one module silently shadowed one
        return renamed(__name__, name, "PensiveLlamaIndexRetriever", PensiveLlamaIndexRetriever)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
