"""The router: the one place that knows the order of the tiers.

A question goes to L1 (:mod:`.query.l1`), then, for a question that counts occurrences, to
aggregation (:mod:`.query.aggregate`), then to L2: hybrid retrieval (:mod:`.query.retrieve`),
the graph stage (:mod:`.query.graph`), the temporal stage (:mod:`.query.temporal`), hits
(:mod:`.query.hits`), the rerank stage (:mod:`.query.rerank`), and L3 when L2 lacks what was
asked or is unsure (:mod:`.query.escalate`); learning (:mod:`.query.learning`) and L1 store
what came out.

The pure helpers the router's stages use are importable from here too (they used to live
here): :func:`confidence`, :func:`exact_needles`, :func:`missing_needles`, :func:`fts_all`,
:func:`fts_any`, and :class:`RouterStats` (now in :mod:`.stats`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .cards.stage import CardStage
from .query.aggregate import AggregationStage
from .query.confidence import confidence
from .query.context import ContextStage
from .query.escalate import Escalation, exact_needles, fts_all, fts_any, missing_needles
from .query.filtering import AllowedPassages
from .query.graph import GraphStage
from .query.hits import HitBuilder
from .query.l1 import CacheStage
from .query.match import matched, verdict, with_matches
from .query.pins import Pins
from .query.request import QueryRequest
from .query.rerank import RerankStage
from .query.retrieve import HybridRetrieval
from .query.state import Answer, QueryState, elapsed_ms
from .query.temporal import TemporalStage
from .stats import RouterStats
from .types import QueryResult

if TYPE_CHECKING:
    from .cache import QueryKey
    from .components import Components

__all__ = [
    "Router",
    "RouterStats",
    "confidence",
    "exact_needles",
    "fts_all",
    "fts_any",
    "missing_needles",
]


class Router:
    """Answers questions through the tiers, with the stages built once from the store's parts.

    Args:
        comps: The open store's parts.

    Attributes:
        cache: The L1 stage.
        cards: Entity cards (L1): entity questions, cards and document summaries.
        aggregation: Counting questions.
        retrieval: L2's dense and sparse lists, fused.
        graph: The graph stage.
        temporal: The temporal stage.
        hits: Hit building.
        rerank: The rerank stage.
        escalation: L3.
        allowed: Which passages a metadata filter lets through (cached per commit).
        pins: Pinned documents and ``@`` mentions.
    """

    def __init__(self, comps: Components) -> None:
        self.comps = comps
        self.allowed = AllowedPassages(comps)
        self.temporal = TemporalStage(comps)
        self.cache = CacheStage(comps, self.temporal)
        self.aggregation = AggregationStage(comps, self.allowed)
        self.retrieval = HybridRetrieval(comps)
        self.graph = GraphStage(comps)
        self.context = ContextStage(comps)
        self.hits = HitBuilder(comps)
        self.rerank = RerankStage(comps)
        self.escalation = Escalation(comps)
        self.pins = Pins(comps)
        self.cards = CardStage(comps, self)  # last: it may check cards with the stages above

    def route(self, req: QueryRequest, t0: float) -> QueryResult:
        """The answer to a validated request (``t0``: when the call began, for latency).

        The caller holds the store's lock and has refreshed a reader's indexes. Pinned
        documents (by id or ``@`` mention) go ahead of what the tiers found, on top of ``k``
        and outside L1 (see :mod:`.query.pins`).
        """
        if not req.pins and "@" not in req.text:
            return self.tiers(req, t0)
        pinset = self.pins.resolve(req.text, req.pins)
        if not pinset.ids:
            return self.tiers(req, t0)
        if pinset.text.strip():
            res = self.tiers(dataclasses.replace(req, text=pinset.text), t0)
        else:  # nothing asked but the pins: the archive serves them
            res = QueryResult([], "L3", 1.0, 0.0, pinset.text, weak=True)
        pinned = self.pins.hits(pinset.ids, pinset.text, self.answer)
        taken = {h.chunk_id for h in pinned}
        hits = pinned + [h for h in res.hits if h.chunk_id not in taken]
        return dataclasses.replace(res, hits=hits, query=req.text, latency_ms=elapsed_ms(t0))

    def tiers(self, req: QueryRequest, t0: float) -> QueryResult:
        """L1 (an entity's card, then the cache), then :meth:`compute`: the answer to a
        request without pins."""
        carded = self.cards.answer(req, t0)  # "who is X": X's card, when it is confident
        if carded is not None:
            return carded
        qk = self.cache.key(req)
        if qk is not None:
            cached = self.cache.lookup(qk)
            if cached is not None:
                hits = list(cached.hits)  # immutable hits: shared, never copied
                scope = None
                if self.temporal.on:
                    intent = self.temporal.intent(
                        cached.source or req.text
                    )  # a variant: its source's
                    scope = self.temporal.scope(intent, req.cutoff, hits)
                kept, best, weak = verdict(hits, req.min_score)
                return QueryResult(
                    kept,
                    "L1",
                    cached.confidence,
                    elapsed_ms(t0),
                    req.text,
                    cached_from=cached.source,
                    time_scope=scope,
                    match=best,
                    weak=weak,
                )
        state = QueryState(req.text, req.k, req.cutoff, req.where, req.context)
        return self.compute(req, state, t0, qk)

    def compute(
        self, req: QueryRequest, state: QueryState, t0: float, qk: QueryKey | None = None
    ) -> QueryResult:
        """The answer L1 did not give: a count, or L2 (and L3). Learning and the L1 store
        follow, except when ``state.trace`` is set (explain changes nothing) or ``qk`` is
        None (no L1 store)."""
        comps = self.comps
        # (after L1: the check costs more than a cache hit, and counts are never cached)
        if self.aggregation.applies(req.text):
            counted = self.aggregation.run(state)
            if counted is not None:
                hits, agg = counted
                hits = matched(comps, hits, req.text)
                state.snap("aggregation", hits)
                kept, best, weak = verdict(hits, req.min_score)  # the count is kept whole
                return QueryResult(
                    kept,
                    "L2",
                    1.0,
                    elapsed_ms(t0),
                    req.text,
                    state.timings,
                    aggregation=agg,
                    match=best,
                    weak=weak,
                )
        ans = self.answer(state)
        learn = comps.learning is not None and not comps.read_only and state.trace is None
        if learn and ans.hits:
            assert comps.graph_views is not None and comps.learning is not None
            comps.learning.learn_from(ans.hits, state.seeds, comps.graph_views)
        if qk is not None and not ans.relative and state.trace is None:
            self.cache.store(qk, ans.hits, ans.confidence, ans.tier, ans.deps)
        kept, best, weak = verdict(ans.hits, req.min_score)  # after L1 stored every hit
        return QueryResult(
            kept,
            ans.tier,
            ans.confidence,
            elapsed_ms(t0),
            req.text,
            state.timings,
            time_scope=ans.scope,
            match=best,
            weak=weak,
        )

    def answer(self, state: QueryState) -> Answer:
        """L2, then L3 if called for: the answer to a question L1 did not have (also how L1
        refreshes an entry a commit invalidated, with its stored query vector)."""
        comps = self.comps
        if state.where is not None:
            state.allowed = self.allowed(state.where)
        state.intent = self.temporal.intent(state.text)
        # every indexed passage is in both indexes: no count asked of a remote backend
        if comps.sparse.n_live and (state.allowed is None or state.allowed):
            self.context.expand(state)
            self.retrieval.run(state)
            state.snap("fused", state.fused)  # explain's records: the lists computed here
            self.graph.run(state)
            state.snap("graph_fused", state.fused)
            if state.context:
                self.context.raise_scores(state)
                state.snap("context", state.fused)
            if self.temporal.on:
                self.temporal.run(state)
                state.snap("temporal", state.fused)
            if state.allowed is not None:  # a surfaced statement must pass the filter too
                state.fused = [f for f in state.fused if f.id in state.allowed]
                state.snap("filter", state.fused)
        with state.timed("fetch_ms"):
            hits = self.hits.build(state.fused, self.rerank.candidates(state.k), state.cutoff)
        state.snap("hits", hits)
        state.hits = self.rerank.run(state, hits) if self.rerank.on else hits
        if self.rerank.on:
            state.snap("rerank", state.hits)
        state.confidence = confidence(state.fused, state.lists)
        state.tier = "L2"
        self.escalation.run(state)
        state.snap("l3", state.hits)
        state.hits = with_matches(comps, state.hits, state.qvec, state.lists.get("dense", []))
        # the fused order that decides the answer: its hits' (or, reranked, its candidates')
        decides = self.rerank.candidates(state.k) if self.rerank.on else len(state.hits)
        deps = self.cache.deps(state.hits, state.fused, state.lists, state.qvec, decides)
        scope = self.temporal.scope(state.intent, state.cutoff, state.hits)
        relative = bool(state.intent and state.intent.relative)
        return Answer(state.hits, state.confidence, state.tier, deps, scope, relative)
