"""L1 invalidation at commit: drop exactly the cached answers a commit could change (all of
them, for a bulk change), then answer the most used of them again at once."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..cache import Deps, EntryView, chunk_hashes, make_key
from ..deadline import DeadlineExceeded
from ..query.escalate import exact_needles
from ..query.graph import padded_key, says_any
from ..query.state import Answer, QueryState
from ..timeutil import from_iso
from .changes import ChangeSet

if TYPE_CHECKING:
    from ..components import Components
    from ..router import Router

__all__ = ["L1Invalidation", "graph_is_local"]


def graph_is_local(comps: Components) -> bool:
    """Whether the graph's part of an answer can change only through passages it already
    depends on: off, or activation that only goes from candidate passages to the passages
    about the entities they name (the default; the focused hop also goes to the passages
    naming a rare name they name, and a commit touching such a name drops the answers whose
    candidates name it). Otherwise, spreading from the question's names or along every
    mention can reach anything."""
    if comps.graph is None or comps.config.graph.weight == 0:
        return True
    g = comps.config.graph
    spreading = {name for name, w in g.edges.items() if w > 0}
    return g.query_entities == 0 and spreading <= {"mentions", "about"}


class L1Invalidation:
    """Decides which cached answers a commit could change, drops them, and refreshes the most
    used (with their stored query vectors, through the router's L2/L3 path).

    Args:
        comps: The store's parts.
        router: Answers refreshed entries again (set once the router exists).
    """

    #: Answer the dropped entries again within the commit (the default), or owe them to
    #: :meth:`refresh_owed`: a server's writer acknowledges an ingest at its commit and
    #: answers them again once no other change waits (the next commit would drop them again).
    defer: bool = False
    #: While deferring, keep the dropped entries owed (False: just drop them; the next
    #: question asked again is answered by whoever asks it, and cached again).
    owe: bool = True

    def __init__(self, comps: Components, router: Callable[[], Router]) -> None:
        self.comps = comps
        self._router = router
        #: The entries dropped while deferring, by key (the most used :data:`l1_refresh` kept).
        self.owed: dict[str, EntryView] = {}
        comps.invalidation = self

    def router(self) -> Router:
        """The router (for what else a commit updates through it: entity cards)."""
        return self._router()

    def invalidate(self, commit: int, changes: ChangeSet) -> None:
        """Drop exactly the cached answers this commit could change (all, for a bulk change).

        An answer can change when: a document it returned was replaced or deleted; a passage
        in either of its candidate lists was removed; a new passage scores at or above the
        lowest score in its dense or BM25 candidate list (so it would enter the list, and
        fusion would see it); a new document contains an identifier, figure or quote the
        question asks for (the archive search would find it); or it came from the archive or
        was escalated for low confidence (archive searches depend on every document). A
        commit that changes more than ``router.l1_bulk_fraction`` of the passages, rebuilds
        BM25 segments (length norms of old passages move), or changes an approximate index
        (an insert moves other queries' search paths) affects every entry.
        """
        comps = self.comps
        l1 = comps.l1
        assert l1 is not None
        router = comps.config.router
        changed = len(changes.added) + len(changes.removed)
        # an approximate index (HNSW, IVF, a service's ANN): inserts move search paths (and
        # with no vector index at all nothing says the answers are exact)
        approximate = comps.backend is None or comps.backend.kind != "flat"
        approximate = approximate or not graph_is_local(comps)
        bulk = changed > router.l1_bulk_fraction * max(1, comps.sparse.n_live)
        # the cache missed a commit (its invalidation failed, or another writer's did): its
        # entries were never examined against that change, so none is carried past this one
        l1.sync()
        missed = l1.commit != commit - 1
        if comps.sparse.rebuilt or bulk or approximate or missed:
            self.refresh(l1.entries(), None, commit)  # every entry is affected
            return
        victims = l1.keys_for_docs(changes.docs)
        entries = l1.entries()
        victims.update(self.affected([e for e in entries if e.key not in victims], changes))
        self.refresh([e for e in entries if e.key in victims], victims, commit)

    def refresh(self, affected: list[EntryView], victims: set[str] | None, commit: int) -> None:
        """Drop the affected entries, then answer the most used of them again at once.

        Up to ``router.l1_refresh`` entries (most used first) are recomputed with their stored
        query vectors (no embedding) and stored under the new commit: popular questions stay
        cached through ingestion, with answers that reflect it. While :attr:`defer` is set
        they are owed to :meth:`refresh_owed` instead (dropped now all the same).
        """
        comps = self.comps
        l1 = comps.l1
        assert l1 is not None
        l1.invalidate(victims, commit)
        if self.defer:
            if not self.owe:
                return
            owed = {**self.owed, **{e.key: e for e in affected}}
            keep = sorted(owed.values(), key=lambda e: -e.freq)[: comps.config.router.l1_refresh]
            self.owed = {e.key: e for e in keep}
            return
        self._answer_again(affected, commit)

    def refresh_owed(self, stop: Callable[[], bool] | None = None) -> int:
        """Answer again the entries owed while deferring (most used first, within
        ``router.l1_refresh`` and ``router.l1_refresh_ms``), against the store as it stands
        now; an entry another process has stored again meanwhile is skipped.

        Args:
            stop: Asked before each entry; True leaves the rest owed (a change is waiting).

        Returns:
            How many answers were stored.
        """
        comps = self.comps
        with comps.lock:
            owed, self.owed = list(self.owed.values()), {}
            l1 = comps.l1
            if not owed or l1 is None or comps.closed:
                return 0
            l1.sync()
            settings = self._router().cache.settings()
            todo = [
                e
                for e in owed
                if l1.get(make_key(e.text, e.k, e.as_of, settings), peek=True) is None
            ]
            stored, rest = self._answer_again(todo, l1.commit, stop)
            self.owed = {**{e.key: e for e in rest}, **self.owed}
            return stored

    def _answer_again(
        self,
        affected: list[EntryView],
        commit: int,
        stop: Callable[[], bool] | None = None,
    ) -> tuple[int, list[EntryView]]:
        """Answer the most used of ``affected`` again and store them under ``commit``;
        returns how many were stored, and the entries ``stop`` left unanswered."""
        comps = self.comps
        l1 = comps.l1
        assert l1 is not None
        stored = 0
        budget = comps.config.router.l1_refresh
        # a time budget too: a small ingest into a store with a warm cache must not hold the
        # writer for seconds answering hundreds of questions again (the rest are just dropped)
        deadline = time.perf_counter() + comps.config.router.l1_refresh_ms / 1000.0
        router = self._router()
        settings = router.cache.settings()
        dense = comps.config.fusion.weights.get("dense", 0.0) > 0 and comps.backend is not None
        order = sorted(affected, key=lambda e: -e.freq)
        for i, e in enumerate(order):
            if stop is not None and stop():
                return stored, order[i:]
            if budget <= 0 or time.perf_counter() > deadline:
                break
            qk = make_key(e.text, e.k, e.as_of, settings)
            if qk.scope != e.scope or (dense and e.deps.qvec is None):
                continue  # asked under other settings, or would need the embedder
            state = QueryState(e.text, e.k, from_iso(e.as_of), qvec=e.deps.qvec)
            try:
                ans: Answer = router.answer(state)
            except DeadlineExceeded:
                break  # the caller's time limit: the rest are just dropped, as past the budget
            if l1.put(qk, ans.hits, ans.confidence, ans.tier, ans.deps, commit, e.freq):
                stored += 1
            comps.counters["l1_refreshed"] += 1
            budget -= 1
        return stored, []

    def affected(self, entries: list[EntryView], changes: ChangeSet) -> set[str]:
        """Keys of the entries the change could alter (besides those of replaced documents)."""
        comps = self.comps
        removed_ids = list(changes.removed)
        if comps.temporal_views is not None:
            # passages a new statement superseded, or whose superseder went: answers that
            # held them (or fused them) would now order differently
            removed_ids += comps.temporal_views.superseded_changes()
        graph = comps.graph
        if graph is not None and graph.touched_subjects:
            # a document about an entity came or went: passages naming it now lead elsewhere
            removed_ids += graph.mentioning(graph.touched_subjects)
        g = comps.config.graph
        names: list[str] = []
        if graph is not None and g.focus > 0 and graph.touched_names:
            # a passage naming a rare name came or went: the focused hop from any passage
            # naming it may now lead elsewhere, and a question saying it lists the passages
            # naming it (one more passage: it may have just become rare)
            rare = graph.rare(graph.touched_names, g.bridge_max + 1)
            removed_ids += graph.mentioning(rare)
            names = [padded_key(k) for k in rare]
        if graph is not None and g.relay > 0 and g.relay_naming > 0 and graph.touched_names:
            # the relay leads from a passage naming a name at most relay_fanout passages name
            # to the others naming it: one came or went (or the name just became rare)
            removed_ids += graph.mentioning(graph.rare(graph.touched_names, g.relay_fanout + 1))
        removed = chunk_hashes(removed_ids)
        vectors = np.concatenate(changes.vectors) if changes.vectors else None
        texts = [t.casefold() for t in changes.texts]
        return {
            e.key
            for e in entries
            if self.could_change(e, removed, vectors, texts, changes)
            or (names and says_any(e.text, names))
        }

    def could_change(
        self,
        e: EntryView,
        removed: np.ndarray,
        vectors: np.ndarray | None,
        texts: list[str],
        changes: ChangeSet,
    ) -> bool:
        """Whether this commit could change the answer entry ``e`` holds."""
        comps = self.comps
        d = e.deps
        if e.tier == "L3" or e.confidence < comps.config.router.l3_below:
            return True  # archive searches depend on every document
        if len(removed) and np.isin(removed, d.cands).any():
            return True  # a candidate it was fused from is gone
        if texts and any(n in t for n in exact_needles(e.text) for t in texts):
            return True  # a new document holds what it asks for verbatim
        if self.order_could_change(d, comps.sparse.idf_shift(e.text)):
            return True  # document frequencies moved enough to reorder its passages
        if not changes.added:
            return False
        # would a new passage enter either candidate list?
        if d.dense_floor == float("-inf") and comps.backend is not None:
            return True  # the dense list was short: every new passage enters it
        if (
            vectors is not None
            and d.qvec is not None
            and len(vectors)
            and float(np.max(vectors @ d.qvec)) >= d.dense_floor
        ):
            return True
        scores = comps.sparse.scores_for(e.text, changes.added)
        return any(s > 0 and s >= d.bm25_floor for s in scores.values())

    def order_could_change(self, d: Deps, delta: float) -> bool:
        """Whether BM25 scores moving by up to ``delta`` could reorder a cached answer."""
        scores = np.asarray(d.bm25_scores, dtype=np.float64)
        if delta <= 0 or len(scores) < 2:
            return False  # one passage normalises to a constant whatever its score
        if d.method == "rrf":  # fused from ranks: any swap in the BM25 list counts
            return 2 * delta >= float(np.min(-np.diff(scores)))
        w = self.comps.config.fusion.weights.get("bm25", 1.0)
        if d.method in ("zscore", "zscale"):  # zscale moves by at most a third of this
            std = float(scores.std())
            zmax = float(np.max(np.abs(scores - scores.mean()))) / std if std > 0 else 0.0
            eps = w * (2 + zmax) * delta / max(std - delta, 1e-12)
        else:  # min-max normalised: every normalised score moves by at most this
            eps = w * 4 * delta / max(float(scores.max() - scores.min()) - 2 * delta, 1e-12)
        return 2 * eps >= d.fused_gap
