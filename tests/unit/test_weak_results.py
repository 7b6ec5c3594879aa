"""Weak results are visible: every hit carries ``match``, a result its best ``match`` and
``weak``, and ``min_score`` drops hits below it; L1 answers carry the same; the JSON shapes
(HTTP, ``--json``, the L1 row store) carry them too. The calibration itself is measured by
``benchmarks/weak_results.py``; a floor on real data is in ``tests/quality``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pensive_core import Document, Hit, Pensive
from pensive_core.cache import hits_from_json, hits_to_json
from pensive_core.errors import InputError
from pensive_core.query.match import WEAK_BELOW, best_match, match_of, verdict, with_matches
from pensive_core.wire import result_json
from tests.conftest import HASH_CONFIG

DOCS = [
    Document(id="ferry", text="The night ferry to Lisbon leaves the harbour at eleven."),
    Document(id="tea", text="Green tea is steeped at eighty degrees for two minutes."),
    Document(id="inv", text="Invoice INV-4471 from Acme Corp was paid on 3 March 2024."),
]
Q = "When does the night ferry to Lisbon leave the harbour?"


@pytest.fixture
def store(tmp_path):
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        p.ingest(DOCS)
        yield p


def test_every_hit_has_a_match_and_the_result_its_best(store):
    res = store.query(Q, k=3)
    assert res.tier == "L2" and len(res.hits) == 3
    matches = [h.match for h in res.hits]
    assert all(m is not None and 0.0 <= m <= 1.0 for m in matches)
    assert res.match == max(matches)
    assert res.hits[0].doc_id == "ferry" and res.hits[0].match == res.match
    assert res.weak is (res.match < WEAK_BELOW)


def test_the_match_is_the_calibrated_cosine_of_the_passage(store):
    res = store.query(Q, k=3)
    qvec = store.embedder.embed_query(Q)
    vecs = store.components.backend.fetch([h.chunk_id for h in res.hits])
    for h in res.hits:
        assert h.match == match_of(float(np.dot(vecs[h.chunk_id], qvec)))


def test_default_keeps_every_hit_and_the_order(store, tmp_path):
    with Pensive(tmp_path / "plain", config=HASH_CONFIG) as other:
        other.ingest(DOCS)
        a = store.query(Q, k=3)
        b = other.query(Q, k=3, min_score=None)
    assert [h.chunk_id for h in a.hits] == [h.chunk_id for h in b.hits]
    assert [h.score for h in a.hits] == [h.score for h in b.hits]


def test_min_score_drops_hits_below_it(store):
    full = store.query(Q, k=3)
    ms = [h.match for h in full.hits]
    assert min(ms) < max(ms)
    cut = (min(ms) + max(ms)) / 2  # between the weakest and the best
    res = store.query(Q, k=3, min_score=cut)
    assert [h.chunk_id for h in res.hits] == [h.chunk_id for h in full.hits if h.match >= cut]
    assert len(res.hits) < len(full.hits)
    assert res.match == full.match  # the best match asked is reported, dropped or not


def test_nothing_passing_is_an_empty_weak_answer(store):
    res = store.query("What colour is the moon's far side?", k=3, min_score=1.0)
    assert res.hits == [] and res.weak is True
    assert res.match is not None and res.match < 1.0  # how close it came is still told


def test_an_l1_answer_carries_the_same_fields(store):
    first = store.query(Q, k=3)
    again = store.query(Q, k=3)
    assert first.tier == "L2" and again.tier == "L1"
    assert [h.match for h in again.hits] == [h.match for h in first.hits]
    assert (again.match, again.weak) == (first.match, first.weak)
    cut = max(h.match for h in first.hits)
    trimmed = store.query(Q, k=3, min_score=cut)  # the cached entry, trimmed at return
    assert trimmed.tier == "L1" and [h.match for h in trimmed.hits] == [cut]
    assert store.query(Q, k=3).hits == first.hits  # min_score did not change what is cached


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, math.inf, "0.5", True, [0.5]])
def test_a_bad_min_score_is_a_clear_error_and_caches_nothing(store, bad):
    with pytest.raises(InputError, match="min_score"):
        store.query(Q, k=3, min_score=bad)
    assert store.query(Q, k=3).tier == "L2"  # the refused call left nothing in L1


def test_without_dense_retrieval_match_is_unmeasured_and_nothing_is_dropped(tmp_path):
    cfg = {**HASH_CONFIG, "fusion": {"weights": {"dense": 0.0, "bm25": 1.0}}}
    with Pensive(tmp_path / "bm25", config=cfg) as p:
        p.ingest(DOCS)
        res = p.query(Q, k=2, min_score=0.9)
    assert res.hits and all(h.match is None for h in res.hits)
    assert res.match is None and res.weak is False


def test_an_empty_store_is_weak(tmp_path):
    with Pensive(tmp_path / "empty", config=HASH_CONFIG) as p:
        res = p.query(Q, k=2)
    assert res.hits == [] and res.weak is True and res.match is None


def test_hits_outside_the_dense_list_get_their_cosine_from_the_stored_vector(store):
    res = store.query(Q, k=3)
    bare = [Hit(h.doc_id, h.chunk_id, h.text, h.score) for h in res.hits]
    qvec = store.embedder.embed_query(Q)
    fetched = with_matches(store.components, bare, qvec, [])  # no dense list: all fetched
    assert [h.match for h in fetched] == [h.match for h in res.hits]
    assert with_matches(store.components, bare, None, []) == bare  # no question vector


def test_match_of_is_a_monotone_map_into_0_1():
    xs = [-1.0, 0.0, 0.2, 0.4, 0.6, 1.0]
    ys = [match_of(x) for x in xs]
    assert ys == sorted(ys) and ys[0] >= 0.0 and ys[-1] <= 1.0 and ys[0] < ys[-1]
    assert match_of(math.nan) == 0.0


def test_verdict_and_best_match():
    hits = [Hit("a", "a#1", "t", 1.0, match=0.9), Hit("b", "b#1", "t", 0.5, match=0.1)]
    hits.append(Hit("c", "c#1", "t", 0.4))  # no match measured: kept
    assert best_match(hits) == 0.9 and best_match(hits[2:]) is None
    kept, best, weak = verdict(hits, 0.5)
    assert [h.doc_id for h in kept] == ["a", "c"] and best == 0.9 and weak is False
    kept, best, weak = verdict(hits[1:2], None)
    assert kept == hits[1:2] and weak is (WEAK_BELOW > 0.1)


def test_the_json_shapes_carry_match_and_weak(store):
    res = store.query(Q, k=2)
    body = result_json(res)
    assert body["match"] == res.match and body["weak"] is res.weak
    assert [h["match"] for h in body["hits"]] == [h.match for h in res.hits]
    json.dumps(body)  # plain JSON
    assert list(hits_from_json(hits_to_json(res.hits))) == res.hits  # the L1 row store


def test_an_l1_entry_written_before_matches_reads_as_unmeasured():
    old = json.dumps(
        [
            {
                "doc_id": "a",
                "chunk_id": "a#1",
                "text": "t",
                "score": 1.0,
                "metadata": {},
                "timestamp": None,
                "sources": {"dense": 1},
            }
        ]
    )
    (hit,) = hits_from_json(old)
    assert hit.match is None and hit.doc_id == "a"


def test_an_aggregation_count_carries_matches_and_min_score_keeps_the_count(tmp_path):
    from tests.unit.test_graph_aggregate import DOCS as DIARY
    from tests.unit.test_graph_aggregate import GRAPH

    q = "How many times did Caroline go to Lisbon?"
    with Pensive(tmp_path / "g", config=GRAPH) as p:
        p.ingest(DIARY)
        res = p.query(q, k=2)
        none = p.query(q, k=2, min_score=1.0)
    assert res.aggregation is not None and len(res.hits) == 4
    assert all(h.match is not None for h in res.hits)
    assert res.match == max(h.match for h in res.hits)
    assert none.aggregation == res.aggregation  # the count stands; only hits are dropped
    assert [h.match for h in none.hits] == [m for m in (h.match for h in res.hits) if m >= 1.0]
    assert none.weak is (not none.hits or res.match < WEAK_BELOW)
