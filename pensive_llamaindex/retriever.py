"""``PensiveRetriever``: a LlamaIndex retriever over a Pensive store.

It converts each :class:`~pensive_core.types.Hit` into a ``NodeWithScore`` and nothing else;
tiers, fusion, graph and time are the store's.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pensive_core import Pensive, PensiveConfig
from pensive_core.errors import MissingDependencyError
from pensive_core.timeutil import to_iso
from pensive_core.types import Hit

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.schema import (
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        RelatedNodeInfo,
        TextNode,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("llama_index.core", "llamaindex", "pensive_llamaindex") from exc

__all__ = ["PensiveRetriever", "hit_to_node"]

#: Metadata keys the adapter adds that an LLM does not need to read (``valid_from`` and
#: ``valid_to`` stay: when a statement held is what lets it answer "now" or "as of").
_NOT_FOR_LLM = ("tier", "sources", "superseded_by")
#: ... nor an embedding model to embed.
_NOT_FOR_EMBEDDING = ("doc_id", "tier", "sources", "superseded_by", "valid_from", "valid_to")


def hit_to_node(hit: Hit, tier: str | None = None) -> NodeWithScore:
    """Convert one hit into a LlamaIndex node with its score.

    Args:
        hit: The hit.
        tier: The tier that answered ("L1", "L2", "L3"), stored as ``metadata["tier"]``.

    Returns:
        A ``NodeWithScore`` whose ``TextNode`` has ``id_`` = the chunk id, the hit's text, and
        metadata = the hit's metadata plus ``doc_id``, ``tier``, ``sources``, ``timestamp``,
        ``valid_from``, ``valid_to`` (ISO strings, absent when unknown) and ``superseded_by``;
        its SOURCE relationship names the document.
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
    node = TextNode(
        id_=hit.chunk_id,
        text=hit.text,
        metadata=meta,
        excluded_llm_metadata_keys=[k for k in _NOT_FOR_LLM if k in meta],
        excluded_embed_metadata_keys=[k for k in _NOT_FOR_EMBEDDING if k in meta],
    )
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=hit.doc_id)
    return NodeWithScore(node=node, score=float(hit.score))


class PensiveRetriever(BaseRetriever):
    """Retrieve from a Pensive store as LlamaIndex nodes.

    Args:
        pensive: An open store (the caller keeps owning it).
        k: How many passages per query.
        as_of: Only passages of documents timestamped at or before this time.
        filters: A Mongo-style metadata filter (see :meth:`Pensive.query`).
        callback_manager: LlamaIndex callbacks.
        verbose: LlamaIndex's verbose flag.

    Raises:
        TypeError: If ``pensive`` is not a :class:`~pensive_core.Pensive`.
    """

    def __init__(
        self,
        pensive: Pensive,
        k: int = 5,
        as_of: datetime | None = None,
        filters: Mapping[str, Any] | None = None,
        *,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if not isinstance(pensive, Pensive):
            raise TypeError(
                f"pensive must be a pensive_core.Pensive, got {type(pensive).__name__}; "
                "use PensiveRetriever.from_path(path) to open a store"
            )
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.pensive = pensive
        self.k = k
        self.as_of = as_of
        self.filters = filters
        self._owned = False

    @classmethod
    def from_path(
        cls,
        path: str | os.PathLike[str],
        config: str | os.PathLike[str] | Mapping[str, Any] | PensiveConfig | None = None,
        **kwargs: Any,
    ) -> PensiveRetriever:
        """Open (or create) the store at ``path`` and retrieve from it.

        Args:
            path: The store folder.
            config: As for :class:`~pensive_core.Pensive`.
            **kwargs: ``k``, ``as_of``, ``filters``, ``callback_manager``, ``verbose``.

        Returns:
            A retriever that owns the store: :meth:`close` closes it.
        """
        retriever = cls(Pensive(Path(path), config=config), **kwargs)
        retriever._owned = True
        return retriever

    def close(self) -> None:
        """Close the store if this retriever opened it (``from_path``)."""
        if self._owned:
            self.pensive.close()

    def _query(self, text: str) -> list[NodeWithScore]:
        res = self.pensive.query(text, k=self.k, as_of=self.as_of, filters=self.filters)
        return [hit_to_node(h, res.tier) for h in res.hits]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._query(query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # the store's query blocks (model, SQLite, FAISS): off the event loop
        return await asyncio.to_thread(self._query, query_bundle.query_str)

    def __repr__(self) -> str:
        return f"PensiveRetriever({self.pensive!r}, k={self.k})"
