"""Explain mode against real parts (FAISS, SQLite, BM25, the graph, the temporal index; the
model-free hash embedder): each expected item's rank in every stage comes from the lists the
router computed, its final hits are the query's, and nothing in the store changes."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from pensive_core import (
    Document,
    ExpectedTrace,
    Explanation,
    InputError,
    NotFoundError,
    Pensive,
    StageRank,
)
from pensive_core.explain import STAGES
from tests.conftest import HASH_CONFIG, docs_corpus

U = timezone.utc
Q3 = "Acme revenue in Q3 2024"


@pytest.fixture
def store(tmp_path):
    p = Pensive(tmp_path / "store", config=HASH_CONFIG)
    p.ingest(docs_corpus())
    yield p
    p.close()


def state_of(p: Pensive) -> dict:
    """What a query would change: the query stats, the L1 cache's figures and entries, the
    process counters."""
    st = p.stats(disk=False)
    return {
        "queries": st["queries"],
        "l1": {k: v for k, v in st["l1"].items()},
        "entries": sorted(e.key for e in p.components.l1.entries()),
        "counters": json.loads(json.dumps(p.components.counters)),
        "commit": p.commit_number,
    }


def test_final_hits_are_the_query_hits(store):
    for q, k in [(Q3, 2), ("arctic tern migration", 3), ("Who paid invoice INV-4471?", 3)]:
        ex = store.explain(q, expect=["q3"], k=k)
        res = store.query(q, k=k)  # answered by L2: L1 held nothing for it
        assert res.tier != "L1"
        assert list(ex.hits) == res.hits
        assert ex.tier == res.tier
        # now L1 answers the query; explain bypasses it, reports it, and computes the same
        again = store.explain(q, expect=["q3"], k=k)
        assert store.query(q, k=k).tier == "L1"
        assert list(again.hits) == res.hits
        assert again.l1["would_answer"] is True and again.l1["same"] is True
        assert again.l1["hits"] == [h.chunk_id for h in res.hits]


def test_a_mention_is_taken_out_of_what_is_explained_as_query_does(store):
    q = "Who paid invoice INV-4471? see @tea"
    ex = store.explain(q, expect=["inv"], k=3)
    res = store.query(q, k=3)
    assert res.hits[0].pinned and res.hits[0].doc_id == "tea"
    assert list(ex.hits) == [h for h in res.hits if not h.pinned]


def test_explain_changes_nothing(store):
    store.query("green tea", k=2)  # something in the stats and the cache already
    before = state_of(store)
    ex = store.explain(Q3, expect=["q3", "tea"], k=2, token_budget=400)
    ex = store.explain("Who paid invoice INV-4471?", expect=["inv"], k=3)
    assert ex.l1["would_answer"] is False
    assert state_of(store) == before
    # not stored in L1: the question is still answered by L2
    assert store.query(Q3, k=2).tier == "L2"


def test_each_rank_is_the_rank_in_the_routers_own_lists(store):
    ex = store.explain(Q3, expect=["tea"], k=2)
    tea = ex.items[0]
    assert tea.kind == "document" and not tea.found
    assert tea.lost_at == "hits" and tea.reason == "cut_by_k"
    cut = tea.stage("hits")
    assert cut.reason == "cut_by_k" and cut.detail["hits"] == 2
    # its rank in the order the hits are taken from is where query() puts it with a larger k
    r = tea.stage("temporal").rank
    assert r is not None and r > 2
    hits = store.query(Q3, k=r).hits
    assert hits[-1].doc_id == "tea" and len(hits) == r
    # the dense list is the backend's own: rank and score agree with a direct search
    p = store.components
    qvec = p.embedder.get().embed_query(Q3)
    found = p.backend.search(qvec, 20, namespace=p.config.backend.namespace)
    order = [c for c, _ in sorted(found, key=lambda r: -r[1])]
    dense = tea.stage("dense")
    assert order.index(dense.chunk_id) + 1 == dense.rank
    assert dense.score == pytest.approx(dict(found)[dense.chunk_id], abs=1e-6)


def test_found_item_and_stage_table(store):
    ex = store.explain(Q3, expect="q3", k=2)
    assert isinstance(ex, Explanation)
    (q3,) = ex.items
    assert isinstance(q3, ExpectedTrace) and q3.found and q3.lost_at is None
    assert q3.stage("final").rank == 1 == q3.stage("dense").rank
    assert all(isinstance(s, StageRank) for s in q3.stages)
    assert [s.name for s in ex.stages] == [name for name, _ in STAGES]
    ran = {s.name for s in ex.stages if s.ran}
    assert {"dense", "bm25", "fused", "hits", "final"} <= ran
    assert "rerank" not in ran and "prompt" not in ran  # no reranker, no budget given
    assert ex.verdict.startswith("1 of 1 expected in the final hits")
    text = str(ex)
    assert "dense" in text and "found, in the final hits (rank 1)" in text
    data = json.loads(json.dumps(ex.to_dict()))
    assert data["items"][0]["found"] is True
    assert [h["chunk_id"] for h in data["hits"]] == [h.chunk_id for h in ex.hits]


def test_a_passage_id_is_traced_by_itself(store):
    cid = store.query(Q3, k=1).hits[0].chunk_id
    ex = store.explain(Q3, expect=[cid], k=1)
    assert ex.items[0].kind == "passage" and ex.items[0].passages == (cid,)
    assert ex.items[0].stage("final").chunk_id == cid


def test_unknown_ids_are_an_error_when_none_resolve_and_change_nothing(store):
    before = state_of(store)
    with pytest.raises(NotFoundError, match="none of the expected ids"):
        store.explain(Q3, expect=["no-such-doc", "no#such"], k=2)
    assert state_of(store) == before
    ex = store.explain(Q3, expect=["q3", "no-such-doc"], k=2)
    assert ex.missing == ["no-such-doc"]
    assert ex.items[1].kind == "missing" and "not in store" in ex.items[1].sentence
    assert "not in store: no-such-doc" in ex.verdict


@pytest.mark.parametrize("bad", [[], [""], ["  "], [3], None, "", [None], ["q3", "\udc80"]])
def test_bad_expectations_are_input_errors(store, bad):
    before = state_of(store)
    with pytest.raises(InputError):
        store.explain(Q3, expect=bad, k=2)
    assert state_of(store) == before


def test_bad_budget_and_query_are_input_errors(store):
    for kwargs in ({"token_budget": 0}, {"token_budget": True}, {"k": 0}):
        with pytest.raises(InputError):
            store.explain(Q3, expect=["q3"], **{"k": 2, **kwargs})
    with pytest.raises(InputError):
        store.explain("", expect=["q3"])


def test_cut_by_token_budget(store):
    first, second = (h.doc_id for h in store.query(Q3, k=2).hits)
    wide = store.explain(Q3, expect=[first, second], k=2, token_budget=4000)
    assert all(t.found for t in wide.items), wide.verdict
    assert [t.stage("prompt").rank for t in wide.items] == [1, 2]
    tight = store.explain(Q3, expect=[first, second], k=2, token_budget=70)
    a, b = tight.items
    assert a.found and a.stage("prompt").rank == 1
    assert b.stage("final") is not None and b.stage("final").rank == 2
    assert not b.found and b.lost_at == "prompt" and b.reason == "cut_by_budget"
    assert "cut by token budget" in b.sentence


def test_l3_escalation_is_reported(tmp_path):
    docs = [d for d in docs_corpus() if d.id != "inv"]
    inv = next(d for d in docs_corpus() if d.id == "inv")
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        p.ingest(docs)
        p.ingest([inv], archive_only=True)
        ex = p.explain("Who paid invoice INV-4471?", expect=["inv", "inv2"], k=3)
        assert ex.tier == "L3"
        inv_t, inv2 = ex.items
        assert inv_t.archive_only and inv_t.found
        assert inv_t.stage("fused").rank is None
        l3 = inv_t.stage("l3")
        assert l3.reason == "found_by_l3" and "inv-4471" in l3.detail["missing"]
        assert next(s for s in ex.stages if s.name == "l3").ran
        assert list(ex.hits) == p.query("Who paid invoice INV-4471?", k=3).hits


def test_supersession_is_the_reason_a_stale_answer_dropped(tmp_path):
    ceo = [
        Document(
            "ceo-2019",
            "Acme Corp annual report. The CEO of Acme Corp is John Smith.",
            timestamp=datetime(2019, 4, 1, tzinfo=U),
        ),
        Document(
            "ceo-2022",
            "Press release. Maria Lopez was appointed CEO of Acme Corp, replacing John Smith.",
            timestamp=datetime(2022, 6, 15, tzinfo=U),
        ),
        *[Document(f"n{i}", f"Acme Corp opened office number {i} in city {i}.") for i in range(6)],
    ]
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        p.ingest(ceo)
        ex = p.explain("Who is the CEO of Acme Corp?", expect=["ceo-2019"], k=1)
        (old,) = ex.items
        t = old.stage("temporal")
        assert t.reason == "superseded"
        new = p.query("Who is the CEO of Acme Corp?", k=1).hits[0]
        assert new.doc_id == "ceo-2022" and t.detail["by"] == new.chunk_id
        assert old.lost_at == "hits" and old.reason == "cut_by_k" and old.cause == "temporal"
        assert "moved there by temporal" in ex.verdict
        # the stage before temporal had it on top: temporal is what moved it
        assert old.stage("graph_fused").rank == 1 and t.rank > 1


def test_not_retrieved_within_depth(tmp_path):
    cfg = {**HASH_CONFIG, "fusion": {"depth": 2}, "graph": {"enabled": False}}
    with Pensive(tmp_path / "s", config=cfg) as p:
        p.ingest(docs_corpus())
        ex = p.explain("arctic tern migration", expect=["code"], k=2)
        (code,) = ex.items
        assert code.lost_at == "retrieval" and code.reason == "not_retrieved"
        assert code.stage("dense").reason == "not_retrieved"
        assert code.stage("dense").detail["depth"] == 2
        assert "not retrieved by dense within depth 2" in code.sentence


class ByLength:
    """A reranker that prefers short passages (so it reorders what L2 found)."""

    def score(self, query, texts):
        return [-float(len(t)) for t in texts]


def test_rerank_stage_and_a_read_only_handle(tmp_path):
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())
    with Pensive(tmp_path / "s", config=HASH_CONFIG, reranker=ByLength()) as p:
        ex = p.explain(Q3, expect=["q3", "q4"], k=1)
        assert next(s for s in ex.stages if s.name == "rerank").ran
        lost = [t for t in ex.items if not t.found]
        assert lost and all(t.lost_at in ("rerank", "hits") for t in lost)
        assert list(ex.hits) == p.query(Q3, k=1).hits
    with Pensive(tmp_path / "s", config=HASH_CONFIG, read_only=True) as r:
        ex = r.explain(Q3, expect=["q3"], k=2)
        assert ex.items[0].found


def test_outranked_by_passages_temporal_raised(tmp_path):
    docs = [
        Document(
            "gold",
            "The Jump is a British television series in which celebrities learn winter sports.",
        ),
        Document(
            "dated",
            "British celebrities tried winter sports on a television show in January 2014.",
        ),
        Document("other", "Snow fell in Scotland in March 2014."),
    ]
    q = "Which British television series about celebrities learning winter sports began in 2014?"
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        p.ingest(docs)
        (gold,) = p.explain(q, expect=["gold"], k=1).items
        t = gold.stage("temporal")
        assert gold.stage("graph_fused").rank == 1 and t.rank == 2
        assert t.reason == "outranked" and t.detail["intent"].startswith("during 2014-01-01")
        assert [c.split("#")[0] for c in t.detail["by"]] == ["dated"]
        assert (gold.lost_at, gold.cause) == ("hits", "temporal")
    # the control: without temporal resolution the undated passage keeps first place
    with Pensive(tmp_path / "s", config={**HASH_CONFIG, "temporal": {"enabled": False}}) as p:
        (gold,) = p.explain(q, expect=["gold"], k=1).items
        assert gold.found and gold.stage("temporal") is None


def test_a_counting_question_is_explained_by_its_count(tmp_path):
    from tests.unit.test_graph_aggregate import DOCS, GRAPH

    q = "How many times did Caroline go to Lisbon?"
    with Pensive(tmp_path / "s", config=GRAPH) as p:
        p.ingest(DOCS)
        ex = p.explain(q, expect=["d1", "d2"], k=2)
        d1, d2 = ex.items
        assert d1.found and d1.stage("aggregation").rank == 1
        assert (d2.lost_at, d2.reason) == ("aggregation", "not_counted")
        assert [s.name for s in ex.stages if s.ran] == ["aggregation", "final"]
        assert list(ex.hits) == p.query(q, k=2).hits


def test_explain_learns_nothing(tmp_path):
    cfg = {**HASH_CONFIG, "graph": {"learning": {"enabled": True, "deterministic": True}}}
    with Pensive(tmp_path / "s", config=cfg) as p:
        p.ingest(docs_corpus())
        clock = p.components.archive.get_meta("learning_clock")
        first = p.explain(Q3, expect=["q3"], k=3)
        again = p.explain(Q3, expect=["q3"], k=3)
        assert p.components.archive.get_meta("learning_clock") == clock
        assert list(first.hits) == list(again.hits)
        assert [s.score for s in first.items[0].stages] == [s.score for s in again.items[0].stages]
        p.query(Q3, k=3)  # a query does learn: the clock moves
        assert p.components.archive.get_meta("learning_clock") != clock
