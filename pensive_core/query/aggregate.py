"""Aggregation questions ("how many times did I meet Lena?", "list every ..."): answered from
the entity graph by counting every passage naming the entities the question names. Never
cached: a count changes with any ingest."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from ..graph import is_aggregation, parse_aggregation
from ..tokenize import Tokenizer
from ..types import Aggregation, Hit
from .state import QueryState

if TYPE_CHECKING:
    from ..components import Components
    from .filtering import AllowedPassages

__all__ = ["AggregationStage"]


class AggregationStage:
    """Every passage naming the entities an aggregation question names, oldest first, with
    their count (``[graph] aggregate``, at most ``aggregate_limit`` passages returned)."""

    def __init__(self, comps: Components, allowed: AllowedPassages) -> None:
        self._comps = comps
        self._allowed = allowed
        self._words: Tokenizer | None = None  # stemmed words of aggregation questions

    def applies(self, text: str) -> bool:
        """Whether ``text`` is an aggregation question the store answers by counting."""
        comps = self._comps
        return comps.graph is not None and comps.config.graph.aggregate and is_aggregation(text)

    def run(self, state: QueryState) -> tuple[list[Hit], Aggregation] | None:
        """The passages and the count; None when the question names no entity the graph
        knows (the question goes on to L2)."""
        comps = self._comps
        assert comps.graph_views is not None
        with state.timed("aggregate_ms"):
            got = self._count(state)
        if got is None:
            state.timings.pop("aggregate_ms", None)
        return got

    def _count(self, state: QueryState) -> tuple[list[Hit], Aggregation] | None:
        comps = self._comps
        assert comps.graph_views is not None
        text, cutoff, where = state.text, state.cutoff, state.where
        view, _, index, _ = comps.graph_views.state()
        if self._words is None:
            self._words = Tokenizer(comps.config.bm25.stemmer, comps.config.bm25.stopwords)
        words = self._words
        views = comps.graph_views
        ask = parse_aggregation(
            text, lambda key: bool(views.named_as(view, index, key)), words.tokenize,
            comps.words.stopwords,
        )  # fmt: skip
        if ask is None:
            return None
        linked = views.naming(view)[0]
        found: set[int] | None = None
        named = {key: views.named_as(view, index, key) for key in ask.entities}
        for key in ask.entities:
            cols: set[int] = set()
            for entity in named[key]:  # its own name, and longer names ending with it
                row = linked.getrow(entity)
                cols |= set(row.indices[row.data > 0].tolist())
            found = cols if found is None else found & cols
        ids = sorted(view.nodes[i] for i in found or ())
        if where is not None:
            allowed = self._allowed(where)
            ids = [c for c in ids if c in allowed]
        rows = comps.archive.chunks(ids)
        kept = []
        for cid in ids:
            row = rows.get(cid)
            if row is None or row.archive_only:
                continue
            if cutoff is not None and row.timestamp is not None and row.timestamp > cutoff:
                continue
            if ask.terms and not set(ask.terms) <= set(words.tokenize(row.text)):
                continue
            kept.append(row)
        never = datetime.max.replace(tzinfo=timezone.utc)
        kept.sort(key=lambda r: (r.timestamp or never, r.doc_id, r.ordinal))
        mentions = view.edges["mentions"]
        total = 0
        for r in kept:
            i = index[r.id]
            total += int(sum(mentions[i, e] for key in ask.entities for e in named[key]))
        limit = comps.config.graph.aggregate_limit
        hits = [
            Hit(
                doc_id=r.doc_id,
                chunk_id=r.id,
                text=r.text,
                score=1.0,
                metadata=r.metadata,
                timestamp=r.timestamp,
                sources={"graph": n},
            )
            for n, r in enumerate(kept[:limit], start=1)
        ]
        agg = Aggregation(
            entities=ask.entities,
            terms=ask.terms,
            count=len(kept),
            documents=len({r.doc_id for r in kept}),
            mentions=total,
            truncated=len(kept) > limit,
        )
        return hits, agg
