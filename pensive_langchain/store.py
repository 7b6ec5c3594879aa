"""A LangGraph long-term memory store backed by Pensive: ``create_agent(..., store=PensiveStore(p))``.

Items are kept by :class:`pensive_core.items.ItemStore` (a SQLite table in the Pensive folder,
``langgraph_store.sqlite``); their texts are indexed in the Pensive store, so
``store.search(ns, query=...)`` is Pensive's hybrid retrieval restricted to the namespace
prefix. This module only converts LangGraph's operations and items to and from that, and
Pensive's scores to the similarities in [0, 1] that LangGraph's stores report
(:func:`similarity`).
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path

from pensive_core import Pensive
from pensive_core.errors import ConfigError
from pensive_core.items import ItemStore, ItemWrite, StoredItem, render_value

__all__ = ["PensiveStore", "similarity"]

FILENAME = "langgraph_store.sqlite"


class PensiveStore(BaseStore):
    """LangGraph's ``BaseStore`` on a Pensive store: persistent items, semantic search.

    Args:
        pensive: The Pensive store to keep items in (best one of their own: item texts share
            its index).
        index: LangGraph's index config; only ``fields`` is read (the value paths whose text is
            indexed, e.g. ``["text", "tags[*]"]``; ``"$"`` or none: the whole value as
            ``field: value`` lines). Embedding is Pensive's own, so ``dims`` and ``embed`` are
            ignored.

    Search results come best first, as Pensive ranks them; their ``score`` is a similarity in
    [0, 1] like ``InMemoryStore``'s cosine (see :func:`similarity`), None for items found
    without a query or stored without a text.

    Raises:
        ConfigError: If ``index`` is not a dict or ``fields`` is not a list of strings.

    Example:
        >>> store = PensiveStore.from_path("./memories")           # doctest: +SKIP
        >>> store.put(("users", "alice"), "home", {"text": "Alice lives in Lisbon"})
        >>> store.search(("users", "alice"), query="where does she live?")[0].key
        'home'
    """

    def __init__(self, pensive: Pensive, *, index: Mapping[str, Any] | None = None) -> None:
        if index is not None and not isinstance(index, Mapping):
            raise ConfigError(f"index must be a dict like {{'fields': [...]}}, got {index!r}")
        fields = (index or {}).get("fields") or ["$"]
        if not isinstance(fields, (list, tuple)) or not all(isinstance(f, str) for f in fields):
            raise ConfigError(f"index['fields'] must be a list of strings, got {fields!r}")
        self.pensive = pensive
        self.index_config = dict(index) if index is not None else None
        self._fields = list(fields)
        self._items = ItemStore(pensive, FILENAME)
        self._owns_pensive = False

    @classmethod
    def from_path(
        cls,
        path: str | os.PathLike[str],
        config: Any = None,
        *,
        index: Mapping[str, Any] | None = None,
    ) -> PensiveStore:
        """Open (or create) a Pensive store at ``path`` and a ``PensiveStore`` on it.

        The store owns that Pensive store: :meth:`close` closes it.
        """
        store = cls(Pensive(path, config=config), index=index)
        store._owns_pensive = True
        return store

    # -- conversion ---------------------------------------------------------------------------
    def _text(self, value: Mapping[str, Any], index: Any) -> str | None:
        if index is False:
            return None
        fields = self._fields if index is None else list(index)
        parts: list[str] = []
        for f in fields:
            if f == "$":
                parts.append(render_value(value))
            else:
                parts.extend(t for t in get_text_at_path(value, tokenize_path(f)) if t)
        text = "\n".join(p for p in parts if p.strip())
        return text or None

    def _write(self, puts: list[PutOp]) -> None:
        self._items.write(
            ItemWrite(
                op.namespace,
                op.key,
                op.value,
                None if op.value is None else self._text(op.value, op.index),
            )
            for op in puts
        )

    # -- BaseStore ------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run operations in order (a read sees every write before it in the batch)."""
        results: list[Result] = []
        pending: list[PutOp] = []
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                pending.append(op)
                results.append(None)
                continue
            if pending:
                self._write(pending)
                pending = []
            if isinstance(op, GetOp):
                got = self._items.get(op.namespace, op.key)
                results.append(None if got is None else _to_item(got))
            elif isinstance(op, SearchOp):
                found = self._items.search(
                    op.namespace_prefix,
                    query=op.query,
                    filter=op.filter,
                    limit=op.limit,
                    offset=op.offset,
                )
                results.append([_to_search_item(it) for it in found])
            elif isinstance(op, ListNamespacesOp):
                conditions = [(c.match_type, c.path) for c in op.match_conditions or ()]
                results.append(
                    self._items.namespaces(
                        conditions, max_depth=op.max_depth, limit=op.limit, offset=op.offset
                    )
                )
            else:
                raise ValueError(f"unknown store operation: {type(op).__name__}")
        if pending:
            self._write(pending)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))

    def close(self) -> None:
        """Close the item table, and the Pensive store if :meth:`from_path` opened it."""
        self._items.close()
        if self._owns_pensive:
            self.pensive.close()

    def __enter__(self) -> PensiveStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _to_item(it: StoredItem) -> Item:
    return Item(
        value=it.value,
        key=it.key,
        namespace=it.namespace,
        created_at=it.created_at,
        updated_at=it.updated_at,
    )


def similarity(score: float) -> float:
    """A Pensive score as a similarity in [0, 1]: ``1 - exp(-score)``, 0 for a score <= 0.

    Pensive's fused scores are higher-is-better but unbounded: under the default weighted
    fusion a passage both retrievers rank first scores the sum of their weights (1.7), one
    neither found scores 0. LangGraph's ``InMemoryStore`` reports cosine similarities, which
    callers threshold in [0, 1]. The map is monotone (it never reorders results; it is strictly
    increasing above 0, where every score of the default rrf and weighted fusions lies), keeps
    0 at 0, is close to the score itself for weak matches and approaches 1 for strong ones
    (1.0 -> 0.63, 1.7 -> 0.82). Negative scores (z-score fusion, a reranker's logits) all map
    to 0, as does NaN; +inf maps to 1.

    Args:
        score: A Pensive hit's score.

    Returns:
        The similarity, in [0, 1].
    """
    if math.isnan(score) or score <= 0:
        return 0.0
    return -math.expm1(-score)


def _to_search_item(it: StoredItem) -> SearchItem:
    return SearchItem(
        namespace=it.namespace,
        key=it.key,
        value=it.value,
        created_at=it.created_at,
        updated_at=it.updated_at,
        score=None if it.score is None else similarity(it.score),
    )
