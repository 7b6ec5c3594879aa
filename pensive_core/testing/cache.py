"""Conformance suites for the caches a storage engine keeps: the L1 hot cache
(:class:`~pensive_core.cache.AnswerCache`), the query statistics
(:class:`~pensive_core.stats.QueryStats`) and the context cache
(:class:`~pensive_core.context.cache.ContextStore`), as pytest tests an implementation inherits.

Written from the embedded implementations (SQLite) before any other engine's caches existed,
so that one (Postgres, issue 26) is held to the same behaviour. Two objects opened on the same
place stand for two processes (or two replicas) sharing one store.

The L1 suite follows the engine's calling pattern where it matters: the query stage calls
``sync()`` before ``get()`` and the ingest stage calls ``entries()`` before
``invalidate(keys, commit)`` (entries stored since the last ``entries()`` are dropped too, since
nobody examined them against the change). It also holds a ``get()`` made without a ``sync()`` to
the same freshness: no answer invalidated by another process is served.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ..cache import AnswerCache, Deps, QueryKey, make_key
from ..context.cache import SUMMARY_KEY, ContextStore
from ..stats import QueryStats
from ..types import Hit

__all__ = [
    "AnswerCacheTests",
    "CacheFactory",
    "ContextStoreTests",
    "ContextsFactory",
    "QueryStatsTests",
    "StatsFactory",
]

#: ``make_cache(place, capacity=..., ttl_s=..., hot=..., fuzzy=...)`` opens (or reopens) the L1
#: cache kept at ``place`` (a folder; keyword arguments as :class:`~pensive_core.cache.L1Cache`).
CacheFactory = Callable[..., AnswerCache]
#: ``make_stats(place, flush_every=...)`` opens (or reopens) the statistics kept at ``place``.
StatsFactory = Callable[..., QueryStats]
#: ``make_contexts(place)`` opens (or reopens) the context cache kept at ``place``.
ContextsFactory = Callable[[Path], ContextStore]

UTC = timezone.utc
ODD = "nul\x00inside, ünïcødé ✓, 東京, emoji 🦜, tab\tand\nnewline"


def _key(text: str, k: int = 5, as_of: str | None = None) -> QueryKey:
    return make_key(text, k, as_of, {})


def _hit(text: str, doc: str = "d") -> Hit:
    return Hit(doc, f"{doc}#1", f"answer to {text}", 1.0)


def _put(
    c: AnswerCache,
    text: str,
    *,
    docs: tuple[str, ...] = ("d",),
    k: int = 5,
    commit: int = 0,
    freq: int = 1,
) -> QueryKey:
    qk = _key(text, k)
    hits = [Hit(d, f"{d}#1", f"answer to {text}", 1.0) for d in docs]
    assert c.put(qk, hits, 0.5, "L2", Deps(docs=frozenset(docs)), commit, freq)
    return qk


def _get(c: AnswerCache, text: str, k: int = 5) -> Any:
    c.sync()  # as the query stage does before every lookup
    return c.get(_key(text, k))


class AnswerCacheTests:
    """What every L1 cache must do; subclass it once per implementation and give the
    ``make_cache`` fixture (see :data:`CacheFactory`). Each test has its own ``tmp_path``; an
    implementation that keeps nothing in the folder derives its own place from it (a table
    prefix), so two tests never share entries."""

    @pytest.fixture
    def make_cache(self) -> Iterator[CacheFactory]:
        """Override: ``make_cache(place, **options)`` opens the cache kept at ``place``."""
        raise NotImplementedError("subclass AnswerCacheTests and give the make_cache fixture")

    # -- put and get ------------------------------------------------------------------------
    def test_an_answer_comes_back_whole(self, make_cache, tmp_path):
        c = make_cache(tmp_path)
        hit = Hit(
            "inv",
            "inv#1",
            "Invoice INV-4471 was paid.",
            0.75,
            {"source": "inv.pdf", "n": 3, "tags": ["a", "b"]},
            datetime(2024, 3, 12, 9, 30, tzinfo=UTC),
            {"dense": 1, "bm25": 3},
        )
        qk = _key("Was invoice INV-4471 paid?", 3)
        assert c.put(qk, [hit], 0.8, "L2", Deps(docs=frozenset({"inv"})), 0)
        got = c.get(qk)
        assert got is not None
        assert got.match == "exact" and got.tier == "L2" and got.confidence == 0.8
        assert got.source == "Was invoice INV-4471 paid?"
        (h,) = got.hits
        assert (h.doc_id, h.chunk_id, h.text, h.score) == ("inv", "inv#1", hit.text, 0.75)
        assert dict(h.metadata) == {"source": "inv.pdf", "n": 3, "tags": ["a", "b"]}
        assert h.timestamp == hit.timestamp and dict(h.sources) == {"dense": 1, "bm25": 3}

    def test_a_question_never_asked_is_a_miss(self, make_cache, tmp_path):
        c = make_cache(tmp_path)
        _put(c, "arctic tern migration")
        assert _get(c, "green tea antioxidants") is None
        assert c.stats()["misses"] == 1

    @pytest.mark.parametrize(
        "stored,asked,match",
        [
            ("What was revenue in Q3 2024?", "what was REVENUE in q3 2024", "exact"),
            (
                "Which invoices did Globex pay in May?",
                "in May which invoices did Globex pay",
                "bag",
            ),
            ("What is the capital of Portugal?", "please, what is capital of Portugal", "bag"),
            (
                "Which antioxidants does green tea contain?",
                "Which antioxidents does green tea contain?",
                "fuzzy",
            ),
        ],
    )
    def test_variants_of_a_question_match(self, make_cache, tmp_path, stored, asked, match):
        c = make_cache(tmp_path)
        _put(c, stored)
        got = _get(c, asked)
        assert got is not None and got.match == match
        assert got.hits[0].text == f"answer to {stored}"

    @pytest.mark.parametrize(
        "a,b",
        [
            ("What was revenue in Q3 2024?", "What was revenue in Q4 2024?"),
            ("Was invoice INV-4471 paid?", "Was invoice INV-4472 paid?"),
            ("Did Acme ship the order?", "Did Acme not ship the order?"),
            ("Who is the CEO of Acme?", "Who was the CEO of Acme?"),
        ],
    )
    def test_near_misses_never_share_an_answer(self, make_cache, tmp_path, a, b):
        c = make_cache(tmp_path)
        _put(c, a)
        assert _get(c, b) is None
        assert _get(c, a) is not None

    def test_fuzzy_matching_can_be_switched_off(self, make_cache, tmp_path):
        c = make_cache(tmp_path, fuzzy=False)
        _put(c, "Which antioxidants does green tea contain?")
        assert _get(c, "Which antioxidents does green tea contain?") is None

    def test_the_scope_separates_k_and_as_of(self, make_cache, tmp_path):
        c = make_cache(tmp_path)
        _put(c, "arctic tern migration", k=3)
        assert _get(c, "arctic tern migration", k=3) is not None
        assert _get(c, "migration arctic tern", k=5) is None
        c.sync()
        assert c.get(_key("arctic tern migration", 3, "2024-01-01T00:00:00+00:00")) is None

    def test_odd_text_in_questions_answers_and_ids(self, make_cache, tmp_path):
        c = make_cache(tmp_path)
        question = f"What did {ODD} say about Zürich?"
        hit = Hit(f"doc {ODD}", f"doc {ODD}#1", f"text {ODD}", 1.0, {"note": ODD})
        qk = _key(question)
        assert c.put(qk, [hit], 0.5, "L2", Deps(docs=frozenset({hit.doc_id})), 0)
        assert c.keys_for_docs([hit.doc_id]) == {qk.exact}
        other = make_cache(tmp_path)  # read back from storage, not from memory
        got = other.get(qk)
        assert got is not None and got.source == question
        assert got.hits[0] == hit and dict(got.hits[0].metadata) == {"note": ODD}
        assert {e.text for e in other.entries()} == {question}

    def test_a_replaced_answer_replaces_the_old_one(self, make_cache, tmp_path):
        c = make_cache(tmp_path)
        qk = _put(c, "arctic tern", docs=("old",))
        _put(c, "arctic tern", docs=("new",))
        assert len(c.entries()) == 1 and c.get(qk).hits[0].doc_id == "new"
        assert c.keys_for_docs(["old"]) == set() and c.keys_for_docs(["new"]) == {qk.exact}
        assert make_cache(tmp_path).get(qk).hits[0].doc_id == "new"

    # -- dependencies -----------------------------------------------------------------------
    def test_entries_carry_their_dependencies(self, make_cache, tmp_path):
        c = make_cache(tmp_path)
        deps = Deps(
            docs=frozenset({"a", "b"}),
            qvec=np.asarray([0.25, -1.5, 3.0], np.float32),
            dense_floor=0.125,
            bm25_floor=2.5,
            cands=np.asarray([-7, 3, 11], np.int64),
            bm25_scores=np.asarray([9.5, 4.25], np.float32),
            fused_gap=0.0625,
            method="rrf",
        )
        qk = _key("arctic tern")
        assert c.put(qk, [_hit("arctic tern")], 0.5, "L3", deps, 0, freq=4)
        for cache in (c, make_cache(tmp_path)):
            (e,) = cache.entries()
            assert (e.key, e.text, e.k, e.as_of, e.scope) == (
                qk.exact,
                "arctic tern",
                5,
                None,
                qk.scope,
            )
            assert (e.tier, e.confidence) == ("L3", 0.5) and e.freq >= 4
            d = e.deps
            assert d.docs == {"a", "b"} and d.method == "rrf"
            assert (d.dense_floor, d.bm25_floor, d.fused_gap) == (0.125, 2.5, 0.0625)
            assert d.qvec is not None and d.qvec.tolist() == [0.25, -1.5, 3.0]
            assert d.cands.tolist() == [-7, 3, 11] and d.bm25_scores.tolist() == [9.5, 4.25]

    def test_no_query_vector_and_unbounded_floors_round_trip(self, make_cache, tmp_path):
        c = make_cache(tmp_path)
        _put(c, "arctic tern")
        (e,) = make_cache(tmp_path).entries()
        assert e.deps.qvec is None and e.deps.dense_floor == float("-inf")
        assert e.deps.fused_gap == float("inf") and len(e.deps.cands) == 0

    def test_keys_for_docs_is_the_dependency_index(self, make_cache, tmp_path):
        c = make_cache(tmp_path)
        a = _put(c, "arctic tern", docs=("bird",))
        b = _put(c, "green tea", docs=("tea", "shop"))
        both = _put(c, "tea and birds", docs=("tea", "bird"))
        assert c.keys_for_docs(["bird"]) == {a.exact, both.exact}
        assert c.keys_for_docs(["shop", "nope"]) == {b.exact}
        assert c.keys_for_docs([]) == set()
        many = [f"doc{i}" for i in range(1200)] + ["tea"]  # past any batch of parameters
        assert make_cache(tmp_path).keys_for_docs(many) == {b.exact, both.exact}

    # -- invalidation and commits -----------------------------------------------------------
    def test_invalidate_drops_the_keys_and_moves_the_commit(self, make_cache, tmp_path):
        c = make_cache(tmp_path)
        a = _put(c, "arctic tern", docs=("bird",))
        b = _put(c, "green tea", docs=("tea",))
        c.entries()  # the ingest stage looks before it invalidates
        assert c.invalidate(c.keys_for_docs(["bird"]), 1) == 1
        assert c.commit == 1 and c.get(a) is None and c.get(b) is not None
        assert c.keys_for_docs(["bird"]) == set()
        reopened = make_cache(tmp_path)
        assert reopened.commit == 1 and reopened.get(a) is None and reopened.get(b) is not None
        assert c.stats()["invalidated"] == 1

    def test_invalidate_all_empties_the_cache(self, make_cache, tmp_path):
        c = make_cache(tmp_path)
        _put(c, "arctic tern")
        _put(c, "green tea")
        assert c.invalidate_all(3) == 2
        assert c.commit == 3 and c.entries() == [] and c.stats()["entries"] == 0
        reopened = make_cache(tmp_path)
        assert reopened.commit == 3 and reopened.entries() == []
        assert reopened.keys_for_docs(["d"]) == set()

    def test_an_answer_computed_before_a_commit_is_refused(self, make_cache, tmp_path):
        c = make_cache(tmp_path)
        other = make_cache(tmp_path)
        other.invalidate_all(1)
        qk = _key("arctic tern")
        assert not c.put(qk, [_hit("arctic tern")], 0.5, "L2", Deps(), commit=0)
        c.sync()
        assert c.commit == 1 and c.get(qk) is None and other.get(qk) is None
        assert c.put(qk, [_hit("arctic tern")], 0.5, "L2", Deps(), commit=1)
        other.sync()
        assert other.get(qk) is not None

    def test_an_entry_of_an_older_commit_is_never_served(self, make_cache, tmp_path):
        a = make_cache(tmp_path)
        b = make_cache(tmp_path)
        qk = _put(a, "arctic tern")
        assert b.get(qk) is not None  # held in b's memory now
        a.entries()
        a.invalidate([qk.exact], 1)
        b.sync()
        assert b.commit == 1 and b.get(qk) is None

    def test_a_get_without_sync_sees_another_invalidation(self, make_cache, tmp_path):
        a = make_cache(tmp_path)
        b = make_cache(tmp_path)
        qk = _put(a, "arctic tern")
        kept = _put(a, "green tea")
        assert b.get(qk) is not None and b.get(kept) is not None
        a.entries()
        a.invalidate([qk.exact], 1)
        assert b.get(qk) is None  # no sync() first: the get itself catches up
        assert b.get(kept) is not None and b.commit == 1
        b.invalidate_all(2)
        assert a.get(kept) is None and a.commit == 2

    def test_a_put_by_one_is_seen_by_the_others_next_get(self, make_cache, tmp_path):
        a = make_cache(tmp_path)
        b = make_cache(tmp_path)
        assert b.get(_key("arctic tern")) is None
        qk = _put(a, "arctic tern")
        assert b.get(qk) is not None
        bag = _put(a, "Which invoices did Globex pay in May?")
        got = b.get(_key("in May which invoices did Globex pay"))
        assert got is not None and got.match == "bag" and got.source == bag.text

    def test_entries_stored_since_the_invalidator_looked_are_dropped(self, make_cache, tmp_path):
        writer = make_cache(tmp_path)
        reader = make_cache(tmp_path)
        seen = _put(writer, "arctic tern", docs=("bird",))
        writer.entries()  # examined against the change ...
        unseen = _put(reader, "green tea", docs=("tea",))  # ... this one was not
        writer.invalidate(set(), 1)
        assert writer.get(seen) is not None and writer.get(unseen) is None
        reader.sync()
        assert reader.get(seen) is not None and reader.get(unseen) is None

    def test_an_entry_stored_where_a_dropped_one_was_is_still_unseen(
        self, make_cache, tmp_path, monkeypatch
    ):
        """Entry ids must never be reused: the invalidator drops what was stored after it
        looked by id, and a new entry given a dropped entry's id would pass as examined."""
        import time as time_mod

        now = [time_mod.time()]
        monkeypatch.setattr(time_mod, "time", lambda: now[0])
        writer = make_cache(tmp_path, ttl_s=3600)
        reader = make_cache(tmp_path, ttl_s=60)  # replicas need not share a TTL
        kept = _put(writer, "arctic tern", docs=("bird",))
        last = _put(writer, "green tea", docs=("tea",))  # the newest entry
        writer.entries()  # examined against the change
        now[0] += 61
        assert reader.get(last) is None  # expired for the reader: its row is dropped
        unseen = _put(reader, "ferry timetable", docs=("ferry",))  # computed before the change
        writer.invalidate(set(), 1)
        assert writer.get(kept) is not None
        assert writer.get(unseen) is None
        reader.sync()
        assert reader.get(unseen) is None

    def test_after_another_commit_held_answers_are_kept_or_replaced_as_stored(
        self, make_cache, tmp_path
    ):
        a = make_cache(tmp_path)
        b = make_cache(tmp_path)
        kept = _put(a, "arctic tern", docs=("bird",))
        replaced = _put(a, "green tea", docs=("old",))
        gone = _put(a, "ferry timetable", docs=("ferry",))
        for qk in (kept, replaced, gone):
            assert a.get(qk) is not None  # held in a's memory, answers and all
        b.entries()
        b.invalidate([replaced.exact, gone.exact], 1)
        _put(b, "green tea", docs=("new",), commit=1)  # answered again at the new commit
        a.sync()
        assert a.commit == 1 and a.get(gone) is None
        assert a.get(replaced).hits[0].doc_id == "new"
        assert a.get(kept).hits[0].doc_id == "bird"
        assert sorted(e.text for e in a.entries()) == ["arctic tern", "green tea"]
        assert a.keys_for_docs(["old", "ferry"]) == set()

    def test_a_cache_behind_the_commit_catches_up_on_sync(self, make_cache, tmp_path):
        a = make_cache(tmp_path)
        b = make_cache(tmp_path)
        _put(a, "arctic tern")
        a.invalidate_all(1)
        fresh = _put(a, "green tea", commit=1)
        assert b.commit == 0
        b.sync()
        assert b.commit == 1 and b.get(fresh) is not None and len(b.entries()) == 1

    # -- bounds, stats, reopen --------------------------------------------------------------
    def test_eviction_keeps_the_most_used_within_capacity(self, make_cache, tmp_path):
        c = make_cache(tmp_path, capacity=10, ttl_s=3600)
        words = "zero one two three four five six seven eight nine ten".split()
        names = [f"question number {w}" for w in words]
        for q in names[:10]:
            _put(c, q)
        for q in names[1:10]:
            assert _get(c, q) is not None
        _put(c, names[10])
        assert len(c.entries()) <= 10 and c.stats()["evictions"] >= 1
        assert _get(c, names[0]) is None
        assert all(_get(c, q) is not None for q in names[1:])
        assert _get(make_cache(tmp_path, capacity=10, ttl_s=3600), names[0]) is None

    def test_the_hot_set_is_bounded_and_cold_answers_are_read_back(self, make_cache, tmp_path):
        c = make_cache(tmp_path, capacity=100, ttl_s=3600, hot=3)
        words = "alpha bravo charlie delta echo foxtrot golf hotel".split()
        for w in words:
            _put(c, f"status of project {w}")
        c.close()
        c = make_cache(tmp_path, capacity=100, ttl_s=3600, hot=3)
        assert c.stats()["hot"] == 0 and c.stats()["entries"] == len(words)
        for w in words:
            assert _get(c, f"status of project {w}").hits[0].text.endswith(w)
        assert c.stats()["hot"] <= 3

    def test_an_expired_entry_is_a_miss(self, make_cache, tmp_path, monkeypatch):
        import time as time_mod

        now = [time_mod.time()]
        monkeypatch.setattr(time_mod, "time", lambda: now[0])
        c = make_cache(tmp_path, ttl_s=60)
        qk = _put(c, "when does the ferry leave")
        now[0] += 59
        assert c.get(qk) is not None
        now[0] += 2
        assert c.get(qk) is None and c.stats()["entries"] == 0

    def test_stats_count_hits_misses_and_matches(self, make_cache, tmp_path):
        c = make_cache(tmp_path, capacity=50)
        _put(c, "Which invoices did Globex pay in May?")
        _get(c, "Which invoices did Globex pay in May?")
        _get(c, "in May which invoices did Globex pay")
        _get(c, "something else entirely")
        s = c.stats()
        assert (s["entries"], s["capacity"], s["hits"], s["misses"]) == (1, 50, 2, 1)
        assert s["hit_rate"] == round(2 / 3, 4)
        assert s["matches"] == {"exact": 1, "bag": 1, "fuzzy": 0}
        assert s["commit"] == 0 and s["evictions"] == 0 and s["invalidated"] == 0
        assert 0 <= s["hot"] <= 1

    def test_answers_survive_reopening(self, make_cache, tmp_path):
        c = make_cache(tmp_path)
        hit = Hit("d", "d#1", "t", 1.0, {}, datetime(2024, 1, 1, tzinfo=UTC), {"bm25": 1})
        qk = _key("getUserName accounts", 2)
        assert c.put(qk, [hit], 0.5, "L2", Deps(docs=frozenset({"d"})), 0)
        c.close()
        again = make_cache(tmp_path)
        got = again.get(qk)
        assert got is not None and got.hits[0].timestamp == hit.timestamp
        assert again.keys_for_docs(["d"]) == {qk.exact}


class QueryStatsTests:
    """What every query-statistics store must do; subclass it and give ``make_stats`` (see
    :data:`StatsFactory`). Two objects on one place are two processes counting into one store."""

    @pytest.fixture
    def make_stats(self) -> Iterator[StatsFactory]:
        """Override: ``make_stats(place, flush_every=256)`` opens the statistics at ``place``."""
        raise NotImplementedError("subclass QueryStatsTests and give the make_stats fixture")

    def test_nothing_counted_is_an_empty_summary(self, make_stats, tmp_path):
        assert make_stats(tmp_path).summary() == {"total": 0}

    def test_counts_shares_and_confidence_per_tier(self, make_stats, tmp_path):
        s = make_stats(tmp_path)
        for _ in range(3):
            s.record("L1", 0.2, 0.95)
        s.record("L2", 40.0, 0.55)
        out = s.summary()  # unflushed counts are part of it
        assert out["total"] == 4
        assert out["L1"]["count"] == 3 and out["L1"]["share"] == 0.75
        assert out["L1"]["confidence"] == [0] * 9 + [3]
        assert out["L2"]["confidence"][5] == 1 and sum(out["L2"]["confidence"]) == 1
        assert out["L1"]["recent"]["count"] == 3 and out["L2"]["recent"]["p50_ms"] == 40.0

    def test_confidence_of_one_is_in_the_top_bin(self, make_stats, tmp_path):
        s = make_stats(tmp_path)
        s.record("L2", 1.0, 1.0)
        s.record("L2", 1.0, 0.0)
        assert s.summary()["L2"]["confidence"] == [1] + [0] * 8 + [1]

    def test_lifetime_percentiles_are_close(self, make_stats, tmp_path):
        s = make_stats(tmp_path)
        for ms in [10.0] * 50 + [100.0] * 45 + [1000.0] * 5:
            s.record("L2", ms, 0.5)
        s.flush()
        t = make_stats(tmp_path).summary()["L2"]
        assert abs(t["p50_ms"] - 10.0) / 10.0 < 0.07
        assert abs(t["p95_ms"] - 100.0) / 100.0 < 0.07
        assert abs(t["p99_ms"] - 1000.0) / 1000.0 < 0.07
        assert t["recent"] is None  # another process: only lifetime figures

    def test_flushed_counts_are_shared_and_add_up(self, make_stats, tmp_path):
        a = make_stats(tmp_path)
        b = make_stats(tmp_path)
        a.record("L1", 0.1, 0.9)
        b.record("L1", 0.1, 0.9)
        b.record("L3", 200.0, 0.2)
        assert make_stats(tmp_path).summary() == {"total": 0}  # nothing flushed yet
        a.flush()
        b.flush()
        b.flush()  # nothing pending: counts nothing twice
        out = make_stats(tmp_path).summary()
        assert out["total"] == 3 and out["L1"]["count"] == 2 and out["L3"]["count"] == 1
        assert a.summary()["total"] == 3

    def test_a_flush_happens_every_flush_every_queries(self, make_stats, tmp_path):
        s = make_stats(tmp_path, flush_every=4)
        for _ in range(3):
            s.record("L2", 5.0, 0.5)
        assert make_stats(tmp_path).summary() == {"total": 0}
        s.record("L2", 5.0, 0.5)
        assert make_stats(tmp_path).summary()["L2"]["count"] == 4

    def test_odd_tier_names_and_extreme_latencies(self, make_stats, tmp_path):
        s = make_stats(tmp_path)
        s.record("L2/ünï", 0.0, 0.5)
        s.record("L2/ünï", 1e9, 0.5)  # past the last edge
        s.flush()
        t = make_stats(tmp_path).summary()["L2/ünï"]
        assert t["count"] == 2 and t["p99_ms"] > 1e4


class ContextStoreTests:
    """What every context cache must do; subclass it and give ``make_contexts`` (see
    :data:`ContextsFactory`)."""

    @pytest.fixture
    def make_contexts(self) -> Iterator[ContextsFactory]:
        """Override: ``make_contexts(place)`` opens the context cache kept at ``place``."""
        raise NotImplementedError("subclass ContextStoreTests and give the make_contexts fixture")

    def test_put_then_get_with_misses_left_out(self, make_contexts, tmp_path):
        c = make_contexts(tmp_path)
        c.put_many([("d1", "c1", "llm", "ctx one"), ("d1", "c2", "llm", "ctx two")])
        keys = [("d1", "c1", "llm"), ("d1", "c1", "llm"), ("d1", "c3", "llm"), ("d2", "c1", "llm")]
        assert c.get_many(keys) == {("d1", "c1", "llm"): "ctx one"}
        assert c.get_many([]) == {} and c.count() == 2

    def test_generators_never_read_each_others_contexts(self, make_contexts, tmp_path):
        c = make_contexts(tmp_path)
        c.put_many([("d", "c", "gpt-a", "from a"), ("d", "c", "gpt-b", "from b")])
        assert c.get_many([("d", "c", "gpt-a"), ("d", "c", "gpt-b"), ("d", "c", "gpt-c")]) == {
            ("d", "c", "gpt-a"): "from a",
            ("d", "c", "gpt-b"): "from b",
        }

    def test_a_put_replaces_the_same_key(self, make_contexts, tmp_path):
        c = make_contexts(tmp_path)
        c.put_many([("d", "c", "g", "old")])
        c.put_many([("d", "c", "g", "new")])
        assert c.get_many([("d", "c", "g")]) == {("d", "c", "g"): "new"} and c.count() == 1

    def test_summaries_live_beside_contexts(self, make_contexts, tmp_path):
        c = make_contexts(tmp_path)
        c.put_many([("d", SUMMARY_KEY, "g", "a summary"), ("d", "c", "g", "ctx")])
        got = c.get_many([("d", SUMMARY_KEY, "g"), ("d", "c", "g")])
        assert got == {("d", SUMMARY_KEY, "g"): "a summary", ("d", "c", "g"): "ctx"}

    def test_clear_one_generator_or_all(self, make_contexts, tmp_path):
        c = make_contexts(tmp_path)
        c.put_many([("d", str(i), "a", "x") for i in range(3)] + [("d", "0", "b", "y")])
        assert c.clear("none-such") == 0
        assert c.clear("a") == 3 and c.count() == 1
        assert c.get_many([("d", "0", "b")]) == {("d", "0", "b"): "y"}
        assert c.clear() == 1 and c.count() == 0

    def test_many_documents_at_once(self, make_contexts, tmp_path):
        c = make_contexts(tmp_path)
        rows = [(f"doc{i}", f"c{j}", "g", f"ctx {i} {j}") for i in range(1100) for j in range(2)]
        c.put_many(rows)
        keys = [(d, ch, g) for d, ch, g, _ in rows] + [("doc1", "c9", "g")]
        got = c.get_many(keys)
        assert len(got) == 2200 and got[("doc1099", "c1", "g")] == "ctx 1099 1"
        assert c.count() == 2200

    def test_odd_text_round_trips(self, make_contexts, tmp_path):
        c = make_contexts(tmp_path)
        c.put_many([(f"h{ODD}", f"c{ODD}", f"g{ODD}", ODD), ("d", "c", "g", "")])
        other = make_contexts(tmp_path)
        assert other.get_many([(f"h{ODD}", f"c{ODD}", f"g{ODD}"), ("d", "c", "g")]) == {
            (f"h{ODD}", f"c{ODD}", f"g{ODD}"): ODD,
            ("d", "c", "g"): "",
        }
        assert other.clear(f"g{ODD}") == 1

    def test_an_empty_put_is_nothing(self, make_contexts, tmp_path):
        c = make_contexts(tmp_path)
        c.put_many([])
        assert c.count() == 0

    def test_two_openers_share_one_cache(self, make_contexts, tmp_path):
        a = make_contexts(tmp_path)
        b = make_contexts(tmp_path)
        a.put_many([("d", "c", "g", "written by a")])
        assert b.get_many([("d", "c", "g")]) == {("d", "c", "g"): "written by a"}
        assert b.clear() == 1 and a.count() == 0
