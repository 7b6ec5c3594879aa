"""LangChain retriever over a Pensive store: ``Hit`` in, ``Document`` out, nothing else."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator

from pensive_core.deprecation import renamed
from pensive_core.errors import InputError
from pensive_core.filters import parse_filter
from pensive_core.timeutil import to_iso
from pensive_core.types import Hit
from pensive_core.validate import MAX_K

__all__ = ["PensiveLangChainRetriever", "hit_to_document"]

# invoke-time keyword arguments honoured per call; "verbose" is LangChain's own and ignored
_CALL_ARGS = frozenset({"k", "as_of", "filters"})


def hit_to_document(hit: Hit, tier: str | None = None) -> Document:
    """A Pensive hit as a LangChain document.

    Args:
        hit: The hit.
        tier: The tier that answered the query ("L1", "L2", "L3"), recorded in the metadata.

    Returns:
        A document whose text is the hit's text, whose id is the passage id, and whose metadata
        is the hit's metadata plus ``doc_id``, ``chunk_id``, ``score``, ``tier``, ``sources``,
        ``timestamp`` (ISO 8601 or None) and, when the store knows them, ``valid_from``,
        ``valid_to`` and ``superseded_by``; ``pinned`` (True) for a document an ``@`` mention
        pinned.
    """
    meta: dict[str, Any] = {
        **hit.metadata,
        "doc_id": hit.doc_id,
        "chunk_id": hit.chunk_id,
        "score": float(hit.score),
        "tier": tier,
        "sources": dict(hit.sources),
        "timestamp": to_iso(hit.timestamp),
    }
    if hit.valid_from is not None:
        meta["valid_from"] = to_iso(hit.valid_from)
    if hit.valid_to is not None:
        meta["valid_to"] = to_iso(hit.valid_to)
    if hit.superseded_by is not None:
        meta["superseded_by"] = hit.superseded_by
    if hit.pinned:  # forced in by an @-mention, not retrieved
        meta["pinned"] = True
    return Document(page_content=hit.text, metadata=meta, id=hit.chunk_id)


class PensiveLangChainRetriever(BaseRetriever):
    """Retrieve passages from a Pensive store (L1 cache, hybrid L2, archive L3).

    Returns ``k`` documents, by default 4: LangChain's own default (``VectorStore.as_retriever()``
    and its ``similarity_search``, ``BM25Retriever``), so a retriever swapped in for another
    sends the model as many documents as before.

    Args:
        pensive: An open :class:`pensive_core.Pensive` store (the caller closes it), by
            position or keyword.
        k: How many documents to return; ``invoke(query, k=2)`` overrides it for one call.
        as_of: Only passages of documents timestamped at or before this time.
        filters: A Mongo-style metadata filter, e.g. ``{"source": "q3.pdf"}``.
        **kwargs: LangChain's retriever fields (``tags``, ``metadata``).

    Raises:
        InputError: If ``pensive`` is missing or not a store.
        pydantic.ValidationError: On a bad or unknown field (named in the message), e.g.
            ``k=0``, ``as_of="soon"``, ``filters={"$nope": 1}`` or ``top_k=3``.

    Example:
        >>> retriever = PensiveLangChainRetriever(Pensive("./pensive-data"), k=3)  # doctest: +SKIP
        >>> retriever.invoke("What was revenue in Q3 2024?")[0].metadata["doc_id"]
        'q3'
    """

    # unknown fields are refused, not dropped: a misspelt option (top_k=3) must not go unseen
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    pensive: Any
    k: int = Field(default=4, ge=1, le=MAX_K)
    as_of: datetime | None = None
    filters: dict[str, Any] | None = None

    @field_validator("filters")
    @classmethod
    def _check_filters(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        parse_filter(value)  # a malformed filter fails here, naming its field, not per query
        return value

    def __init__(self, pensive: Any = None, /, **kwargs: Any) -> None:
        # the store may come by position, as every other Pensive adapter takes it
        # (PensiveStore(p), PensiveCache(p), ...); pydantic alone takes fields by keyword only
        # and answers a positional one with a bare TypeError
        if pensive is not None and "pensive" in kwargs:
            raise InputError("pensive given twice: by position and as pensive=...")
        store = kwargs.pop("pensive", pensive)
        _check_pensive(store)
        super().__init__(pensive=store, **kwargs)

    @classmethod
    def from_path(
        cls, path: str | os.PathLike[str], config: Any = None, **kwargs: Any
    ) -> PensiveLangChainRetriever:
        """Open (or create) the store at ``path`` and retrieve from it.

        Args:
            path: The store folder.
            config: A config dict or ``pensive.toml`` path, as for :class:`Pensive`.
            **kwargs: Retriever fields (``k``, ``as_of``, ``filters``).

        Returns:
            A retriever owning a newly opened store; close it with ``retriever.pensive.close()``.
        """
        from pensive_core import Pensive

        store = Pensive(path, config)
        try:
            return cls(store, **kwargs)
        except Exception:
            store.close()  # refused options: no store left open behind the error
            raise

    def _options(self, kwargs: Mapping[str, Any]) -> tuple[int, datetime | None, Any]:
        unknown = set(kwargs) - _CALL_ARGS - {"verbose"}
        if unknown:
            raise InputError(
                f"PensiveLangChainRetriever got unknown arguments {sorted(unknown)}; "
                f"it accepts {sorted(_CALL_ARGS)}"
            )
        return (
            kwargs.get("k", self.k),
            kwargs.get("as_of", self.as_of),
            kwargs.get("filters", self.filters),
        )

    def _search(self, query: str, kwargs: Mapping[str, Any]) -> list[Document]:
        k, as_of, filters = self._options(kwargs)
        res = self.pensive.query(query, k=k, as_of=as_of, filters=filters)
        return [hit_to_document(h, res.tier) for h in res.hits]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return self._search(query, kwargs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        # the store is synchronous (SQLite, numpy): keep the event loop free
        return await asyncio.to_thread(self._search, query, kwargs)


def _check_pensive(value: Any) -> None:
    if value is None:
        raise InputError(
            "PensiveLangChainRetriever needs pensive: an open pensive_core.Pensive store, "
            "e.g. PensiveLangChainRetriever(Pensive('./pensive-data')); or use "
            "PensiveLangChainRetriever.from_path(path)"
        )
    if not callable(getattr(value, "query", None)):
        raise InputError(
            "pensive must be a pensive_core.Pensive store (or have its query method), got "
            f"{type(value).__name__}: {value!r:.80}; to open a store by its folder use "
            "PensiveLangChainRetriever.from_path(path)"
        )


def __getattr__(name: str) -> Any:
    if name == "PensiveRetriever":  # renamed: both adapters had the name, so importing
        # both in one module silently shadowed one
        return renamed(__name__, name, "PensiveLangChainRetriever", PensiveLangChainRetriever)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
