"""The L1 exact-key cache: discrimination, invalidation, eviction, persistence, routing."""

from datetime import datetime, timezone

import pytest

from pensive_core import Document, Pensive
from pensive_core.cache import Deps, L1Cache, cache_key, make_key, normalize_query
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
        with pytest.raises(TypeError, match="read-only"):  # served hits are shared: immutable
            again.hits[0].metadata["mutated"] = True
        assert dict(again.hits[0].metadata) == dict(first.hits[0].metadata)
        assert p.query("Was invoice INV-4471 paid?", k=3).tier == "L1"
        stats = p.stats()
        assert stats["l1"]["hits"] == 2 and stats["queries"]["L1"]["count"] == 2
        assert stats["l1"]["matches"]["exact"] == 2
        assert stats["queries"]["L2"]["count"] == 2
        assert stats["queries"]["L1"]["p50_ms"] < stats["queries"]["L2"]["p50_ms"]


@pytest.mark.parametrize("refresh", [0, 256])
@pytest.mark.parametrize("change", ["add", "replace", "delete"])
def test_any_content_change_invalidates(tmp_path, change, refresh):
    with Pensive(
        tmp_path, config={**HASH_CONFIG, "router": {"l1": True, "l1_refresh": refresh}}
    ) as p:
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
        # never the stale answer: dropped, or answered again at the commit
        assert res.tier == ("L1" if refresh else "L2")
        l1, p.components.l1 = p.components.l1, None
        assert [h.chunk_id for h in p.query(q).hits] == [h.chunk_id for h in res.hits]
        p.components.l1 = l1
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


def _put(c, text, hits=None, *, k=5, commit=0, deps=None):
    qk = make_key(text, k, None, {})
    hits = hits if hits is not None else [Hit("d", "d#1", f"answer to {text}", 1.0)]
    assert c.put(qk, hits, 0.5, "L2", deps or Deps(), commit)
    return qk


def _get(c, text, k=5):
    return c.get(make_key(text, k, None, {}))


def test_ttl_expiry(tmp_path, monkeypatch):
    import pensive_core.cache as cache_mod

    now = [1000.0]
    monkeypatch.setattr(cache_mod.time, "time", lambda: now[0])
    c = L1Cache(tmp_path / "l1.sqlite", capacity=10, ttl_s=60)
    hit = Hit("d", "d#1", "text", 1.0, {}, datetime(2024, 1, 1, tzinfo=timezone.utc), {"bm25": 1})
    _put(c, "when does the ferry leave", [hit])
    now[0] += 59
    assert _get(c, "when does the ferry leave").hits[0].timestamp == hit.timestamp
    now[0] += 2
    assert _get(c, "when does the ferry leave") is None and len(c) == 0
    c.close()


def test_eviction_drops_the_least_frequently_used(tmp_path):
    c = L1Cache(tmp_path / "l1.sqlite", capacity=10, ttl_s=3600)
    names = [
        f"question number {w}"
        for w in "zero one two three four five six seven eight nine ten".split()
    ]
    for q in names[:10]:
        _put(c, q)
    for q in names[1:10]:  # every question but the first is asked again
        assert _get(c, q) is not None
    _put(c, names[10])  # over capacity: the least used tenth goes
    assert _get(c, names[0]) is None
    assert all(_get(c, q) is not None for q in names[1:])
    assert c.evictions == 1
    c.close()
    reopened = L1Cache(tmp_path / "l1.sqlite", capacity=10, ttl_s=3600)
    assert _get(reopened, names[0]) is None and _get(reopened, names[5]) is not None
    reopened.close()


def test_hot_set_is_bounded_and_cold_entries_come_from_sqlite(tmp_path):
    c = L1Cache(tmp_path / "l1.sqlite", capacity=100, ttl_s=3600, hot=3)
    words = "alpha bravo charlie delta echo foxtrot golf hotel".split()
    for w in words:
        _put(c, f"status of project {w}")
    c.close()
    c = L1Cache(tmp_path / "l1.sqlite", capacity=100, ttl_s=3600, hot=3)
    assert c.stats()["hot"] == 0 and len(c) == len(words)  # keys in memory, answers on disk
    for w in words:
        assert _get(c, f"status of project {w}").hits[0].text.endswith(w)
    assert c.stats()["hot"] <= 3
    c.close()


@pytest.mark.parametrize("a,b", NEAR_MISSES)
def test_near_misses_never_share_an_answer_by_any_path(tmp_path, a, b):
    c = L1Cache(tmp_path / "l1.sqlite")
    _put(c, a)
    assert _get(c, b) is None
    assert _get(c, a) is not None
    c.close()


@pytest.mark.parametrize(
    "stored,asked,match",
    [
        ("What was revenue in Q3 2024?", "what was REVENUE in q3 2024", "exact"),
        ("Which invoices did Globex pay in May?", "in May which invoices did Globex pay", "bag"),
        ("What is the capital of Portugal?", "please, what is capital of Portugal", "bag"),
        ("didn't the arctic tern migrate", "did not the arctic tern migrate", "exact"),
        (
            "Which antioxidants does green tea contain?",
            "Which antioxidents does green tea contain?",
            "fuzzy",
        ),
    ],
)
def test_variants_match(tmp_path, stored, asked, match):
    c = L1Cache(tmp_path / "l1.sqlite")
    _put(c, stored)
    got = _get(c, asked)
    assert got is not None and got.match == match
    assert got.hits[0].text == f"answer to {stored}"
    again = _get(c, asked)  # the same text again goes straight to that entry
    assert again is not None and again.match == match and again.hits == got.hits
    c.close()


@pytest.mark.parametrize(
    "stored,asked",
    [
        (
            "Which antioxidants does green tea contain?",
            "Which antioxidants does black tea contain?",
        ),
        ("Who is the CEO of Acme?", "Who was the CEO of Acme?"),  # tense: now vs then
        ("When did the ferry leave Harbourline?", "When did the ferry leave Harborline?"),  # names
        ("What does smoking cause?", "What causes smoking?"),
        ("Which trials enrolled children", "Which trials enrolled no children"),
    ],
)
def test_fuzzy_matching_refuses_different_questions(tmp_path, stored, asked):
    c = L1Cache(tmp_path / "l1.sqlite")
    _put(c, stored)
    assert _get(c, asked) is None
    c.close()


def test_scope_separates_k(tmp_path):
    c = L1Cache(tmp_path / "l1.sqlite")
    _put(c, "arctic tern migration", k=3)
    assert _get(c, "arctic tern migration", k=3) is not None
    assert _get(c, "migration arctic tern", k=5) is None  # the bag key is scoped too
    c.close()


def test_a_put_computed_before_a_commit_is_refused(tmp_path):
    """A reader that computed an answer on an old index cannot store it after an invalidation."""
    c = L1Cache(tmp_path / "l1.sqlite")
    other = L1Cache(tmp_path / "l1.sqlite")  # another process's view of the same cache
    other.invalidate_all(commit=1)
    qk = make_key("arctic tern", 5, None, {})
    assert not c.put(qk, [Hit("d", "d#1", "t", 1.0)], 0.5, "L2", Deps(), commit=0)
    assert c.get(qk) is None
    assert c.put(qk, [Hit("d", "d#1", "t", 1.0)], 0.5, "L2", Deps(), commit=1)
    assert other.get(qk) is not None  # and the other process sees it
    c.close()
    other.close()


def test_invalidation_elsewhere_reaches_a_process_holding_the_entry_in_memory(tmp_path):
    a = L1Cache(tmp_path / "l1.sqlite")
    b = L1Cache(tmp_path / "l1.sqlite")
    qk = _put(a, "arctic tern")
    assert b.get(qk) is not None  # now in b's memory
    b.invalidate([qk.exact], commit=1)
    a.sync()  # what the store does when it sees the commit number move
    assert a.commit == 1 and a.get(qk) is None
    a.close()
    b.close()


def test_l1_on_by_default_and_can_be_switched_off(tmp_path):
    with Pensive(tmp_path / "on", config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())
        assert [p.query("arctic tern").tier for _ in range(2)] == ["L2", "L1"]
    off = {**HASH_CONFIG, "router": {"l1": False}}
    with Pensive(tmp_path / "off", config=off) as p:
        p.ingest(docs_corpus())
        assert [p.query("arctic tern").tier for _ in range(2)] == ["L2", "L2"]
        assert p.stats()["l1"] is None
