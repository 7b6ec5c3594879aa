"""The L1 exact-key cache: discrimination, invalidation, eviction, persistence, routing."""

from datetime import datetime, timezone

import pytest

from pensive_core import Document, Pensive
from pensive_core.cache import L1Cache, cache_key, normalize_query
from pensive_core.types import Hit
from tests.conftest import HASH_CONFIG, docs_corpus

L1_CONFIG = {**HASH_CONFIG, "router": {"l1": True}}

NEAR_MISSES = [
    ("What was revenue in Q3 2024?", "What was revenue in Q4 2024?"),
    ("Was invoice INV-4471 paid?", "Was invoice INV-4472 paid?"),
    ("Did Acme ship the order?", "Did Acme not ship the order?"),
    ("Who ran Acme in 2021?", "Who ran Globex in 2021?"),
    ("Revenue was 3.5 million", "Revenue was 35 million"),
    ("Meeting on 2024-05-02", "Meeting on 2024-05-03"),
]
VARIANTS = [
    ("What was revenue in Q3 2024?", "  what WAS revenue in q3 2024 "),
    ("Was invoice INV-4471 paid?", "was invoice inv-4471 paid!!"),
    ("Who is the CEO?", "who is the ceo"),
]


@pytest.mark.parametrize("a,b", NEAR_MISSES)
def test_near_miss_questions_are_different_keys(a, b):
    assert normalize_query(a) != normalize_query(b)
    assert cache_key(a, 5, None, {}) != cache_key(b, 5, None, {})


@pytest.mark.parametrize("a,b", VARIANTS)
def test_surface_variants_share_a_key(a, b):
    assert cache_key(a, 5, None, {}) == cache_key(b, 5, None, {})


def test_k_as_of_and_settings_are_part_of_the_key():
    base = cache_key("q", 5, None, {"fusion": "rrf"})
    assert base != cache_key("q", 6, None, {"fusion": "rrf"})
    assert base != cache_key("q", 5, "2024-01-01T00:00:00+00:00", {"fusion": "rrf"})
    assert base != cache_key("q", 5, None, {"fusion": "zscore"})


def test_repeat_is_served_from_l1_with_the_same_hits(tmp_path):
    with Pensive(tmp_path, config=L1_CONFIG) as p:
        p.ingest(docs_corpus())
        first = p.query("Was invoice INV-4471 paid?", k=3)
        again = p.query("was invoice inv-4471 paid", k=3)
        assert (first.tier, again.tier) == ("L2", "L1")
        assert [h.chunk_id for h in again.hits] == [h.chunk_id for h in first.hits]
        assert again.confidence == first.confidence
        other = p.query("Was invoice INV-4472 paid?", k=3)
        assert other.tier == "L2" and other.hits[0].doc_id == "inv2"
        again.hits[0].metadata["mutated"] = True  # a caller's change must not reach the cache
        assert "mutated" not in p.query("Was invoice INV-4471 paid?", k=3).hits[0].metadata
        stats = p.stats()
        assert stats["l1"]["hits"] == 2 and stats["queries"]["L1"]["count"] == 2
        assert stats["queries"]["L2"]["count"] == 2
        assert stats["queries"]["L1"]["p50_ms"] < stats["queries"]["L2"]["p50_ms"]


@pytest.mark.parametrize("change", ["add", "replace", "delete"])
def test_any_content_change_invalidates(tmp_path, change):
    with Pensive(tmp_path, config=L1_CONFIG) as p:
        p.ingest(docs_corpus())
        q = "green tea antioxidants"
        assert p.query(q).tier == "L2"
        assert p.query(q).tier == "L1"
        if change == "add":
            p.ingest([Document(id="tea2", text="Green tea antioxidants: new catechin study.")])
        elif change == "replace":
            p.ingest([Document(id="tea", text="Black tea is oxidised; green tea is not.")])
        else:
            p.delete("tea")
        res = p.query(q)
        assert res.tier == "L2"  # never the stale answer
        ids = {h.doc_id for h in res.hits}
        assert ("tea2" in ids) if change == "add" else True
        assert ("tea" not in ids) if change == "delete" else True
        if change == "replace":
            assert any("Black tea" in h.text for h in res.hits)


def test_unchanged_reingest_keeps_the_cache(tmp_path):
    with Pensive(tmp_path, config=L1_CONFIG) as p:
        p.ingest(docs_corpus())
        p.query("arctic tern")
        assert p.ingest(docs_corpus()).unchanged == 8
        assert p.query("arctic tern").tier == "L1"


def test_cache_persists_across_reopen(tmp_path):
    with Pensive(tmp_path, config=L1_CONFIG) as p:
        p.ingest(docs_corpus())
        first = p.query("getUserName accounts", k=2)
    with Pensive(tmp_path) as p:  # the saved config keeps router.l1 on
        again = p.query("getUserName accounts", k=2)
        assert again.tier == "L1"
        assert [h.chunk_id for h in again.hits] == [h.chunk_id for h in first.hits]
        assert again.hits[0].timestamp == first.hits[0].timestamp


def test_ttl_expiry(tmp_path, monkeypatch):
    import pensive_core.cache as cache_mod

    now = [1000.0]
    monkeypatch.setattr(cache_mod.time, "time", lambda: now[0])
    c = L1Cache(tmp_path / "l1.sqlite", capacity=10, ttl_s=60)
    hit = Hit("d", "d#1", "text", 1.0, {}, datetime(2024, 1, 1, tzinfo=timezone.utc), {"bm25": 1})
    c.put("k", [hit], 0.5)
    now[0] += 59
    assert c.get("k") is not None
    now[0] += 2
    assert c.get("k") is None and len(c) == 0
    c.close()


def test_eviction_drops_the_least_frequently_used(tmp_path):
    c = L1Cache(tmp_path / "l1.sqlite", capacity=10, ttl_s=3600)
    hit = Hit("d", "d#1", "t", 1.0)
    for i in range(10):
        c.put(f"k{i}", [hit], 0.5)
    for i in range(1, 10):  # every key but k0 is used again
        c.get(f"k{i}")
    c.put("k10", [hit], 0.5)  # over capacity: the least used tenth goes
    assert c.get("k0") is None
    assert all(c.get(f"k{i}") is not None for i in range(1, 11))
    assert c.evictions == 1
    c.close()
    reopened = L1Cache(tmp_path / "l1.sqlite", capacity=10, ttl_s=3600)
    assert reopened.get("k0") is None and reopened.get("k5") is not None
    reopened.close()


def test_l1_off_by_default(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())
        assert p.query("arctic tern").tier == "L2"
        assert p.query("arctic tern").tier == "L2"
        assert p.stats()["l1"] is None
