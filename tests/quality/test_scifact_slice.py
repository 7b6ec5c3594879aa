"""Quality floor on a small slice of real SciFact data, with the bundled MiniLM embedder.

The slice: the first 150 judged train queries (by id), their relevant abstracts, and seeded
random distractors up to 1,000 abstracts. Hybrid fusion must beat each retriever alone.
"""

import random

import pytest

from tests.conftest import DATA

pytestmark = [
    pytest.mark.quality,
    pytest.mark.slow,  # the default config: the real MiniLM embeds the slice
    pytest.mark.skipif(
        not (DATA / "scifact" / "corpus.jsonl").exists(),
        reason=f"SciFact data not found under {DATA}",
    ),
]

N_QUERIES = 150
N_DOCS = 1000


@pytest.fixture(scope="module")
def scifact_slice(tmp_path_factory):
    from benchmarks.metrics import load_beir
    from pensive_core import Document, Pensive

    corpus, queries, qrels = load_beir(DATA / "scifact", split="train")
    qids = sorted(queries, key=int)[:N_QUERIES]
    wanted = {d for q in qids for d in qrels[q]}
    others = sorted(set(corpus) - wanted)
    random.Random(7).shuffle(others)
    keep = sorted(wanted | set(others[: N_DOCS - len(wanted)]))
    docs = [
        Document(id=d, text=f"{corpus[d]['title']}\n\n{corpus[d]['text']}".strip())
        for d in keep
        if (corpus[d]["title"] + corpus[d]["text"]).strip()
    ]
    store = Pensive(tmp_path_factory.mktemp("scifact"))
    store.ingest(docs)
    yield store, {q: queries[q] for q in qids}, {q: qrels[q] for q in qids}
    store.close()


def ndcg_at_10(store, queries, qrels, **fusion):
    """nDCG@10 with some fusion settings changed for this call only."""
    from benchmarks.common import chunk_doc, doc_ranking
    from benchmarks.metrics import evaluate, ranking_to_run

    saved = store.config.fusion.model_copy(deep=True)
    for key, value in fusion.items():
        setattr(store.config.fusion, key, value)
    try:
        rankings = {
            q: doc_ranking((h.chunk_id for h in store.query(t, k=50).hits), chunk_doc)
            for q, t in queries.items()
        }
    finally:
        store.config.fusion = saved
    return evaluate(ranking_to_run(rankings), qrels, ("nDCG@10",))["nDCG@10"]


BM25_ONLY = {"dense": 0.0, "bm25": 1.0}
DENSE_ONLY = {"dense": 1.0, "bm25": 0.0}


def test_hybrid_beats_each_retriever_alone(scifact_slice):
    store, queries, qrels = scifact_slice
    hybrid = ndcg_at_10(store, queries, qrels)
    bm25 = ndcg_at_10(store, queries, qrels, weights=BM25_ONLY)
    dense = ndcg_at_10(store, queries, qrels, weights=DENSE_ONLY)
    print(f"nDCG@10 hybrid={hybrid:.4f} bm25={bm25:.4f} dense={dense:.4f}")
    assert hybrid > bm25
    assert hybrid > dense
    assert hybrid > 0.6  # published full-corpus figures: BM25 0.665, MiniLM 0.645


@pytest.mark.parametrize("method", ["rrf", "weighted", "zscore"])
def test_every_fusion_method_beats_bm25_and_keeps_up_with_dense(scifact_slice, method):
    # With content-defined passages and contexts, dense alone is strong on this slice (0.824
    # nDCG@10 where RRF gave 0.810 and z-score 0.821): only the default fusion (weighted,
    # chosen on SciFact's tune half) is held to beating it, in the test above.
    store, queries, qrels = scifact_slice
    fused = ndcg_at_10(store, queries, qrels, method=method)
    bm25 = ndcg_at_10(store, queries, qrels, weights=BM25_ONLY)
    dense = ndcg_at_10(store, queries, qrels, weights=DENSE_ONLY)
    assert fused > bm25
    assert fused > dense - 0.03


def test_weak_flags_questions_from_another_dataset(scifact_slice):
    """The match signal on the slice: its own claims are rarely weak, HotpotQA questions
    (which no abstract answers) mostly are (``benchmarks/weak_results.md``: on the full corpus's
    report half 1% of claims were flagged and 97% of other datasets' questions)."""
    import json

    store, queries, _qrels = scifact_slice
    raw = json.loads((DATA / "hotpotqa_hipporag100" / "hotpotqa_train.json").read_text())
    own = [store.query(t, k=5) for t in queries.values()]
    other = [store.query(q["question"], k=5) for q in raw[:50]]
    own_weak = sum(r.weak for r in own) / len(own)
    other_weak = sum(r.weak for r in other) / len(other)
    print(f"weak: own claims {own_weak:.3f}, HotpotQA questions {other_weak:.3f}")
    assert own_weak <= 0.1
    assert other_weak >= 0.8
    # (an answer with no hits has no match: counted as 0)
    own_mean = sum(r.match or 0.0 for r in own) / len(own)
    other_mean = sum(r.match or 0.0 for r in other) / len(other)
    assert own_mean > other_mean + 0.5
