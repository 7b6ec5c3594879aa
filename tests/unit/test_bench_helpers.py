"""Fast tests for the benchmark helpers (``benchmarks/metrics.py``, ``benchmarks/peers.py``).

No SciFact and no embedding model: metrics run on hand-made runs/qrels, peers on
a tiny synthetic corpus with random normalised vectors. Tests needing the
benchmark requirements (``benchmarks/requirements.txt``) skip when those are
not installed.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks import metrics, peers  # noqa: E402

# --------------------------------------------------------------------------- #
# metrics
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def ir_measures():
    return pytest.importorskip("ir_measures")


def test_perfect_ranking_scores_one(ir_measures):
    qrels = {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 2}}
    run = {"q1": {"d1": 3.0, "d2": 2.0, "x": 1.0}, "q2": {"d3": 5.0, "y": 1.0}}
    res = metrics.evaluate(run, qrels)
    assert list(res) == ["nDCG@10", "R@10", "R@100"]
    for value in res.values():
        assert value == pytest.approx(1.0)


def test_known_values(ir_measures):
    # Single relevant doc at rank 2: nDCG = 1/log2(3).
    qrels = {"q1": {"d1": 1}}
    run = {"q1": {"x": 2.0, "d1": 1.0}}
    res = metrics.evaluate(run, qrels, measures=("nDCG@10", "R@1", "R@10"))
    assert res["nDCG@10"] == pytest.approx(1 / math.log2(3))
    assert res["R@1"] == pytest.approx(0.0)
    assert res["R@10"] == pytest.approx(1.0)


def test_missing_and_empty_queries_count_as_zero(ir_measures):
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}, "q4": {"d4": 1}}
    run = {
        "q1": {"d1": 1.0},  # perfect
        "q2": {},  # retrieved nothing
        # q3, q4 missing entirely
        "unjudged": {"d1": 1.0},  # ignored
    }
    res = metrics.evaluate(run, qrels)
    assert res["nDCG@10"] == pytest.approx(0.25)
    assert res["R@100"] == pytest.approx(0.25)


def test_empty_run_and_empty_qrels(ir_measures):
    assert metrics.evaluate({}, {"q1": {"d1": 1}}) == {
        "nDCG@10": 0.0,
        "R@10": 0.0,
        "R@100": 0.0,
    }
    assert metrics.evaluate({"q1": {"d1": 1.0}}, {})["nDCG@10"] == 0.0


def test_ranking_to_run_preserves_order(ir_measures):
    run = metrics.ranking_to_run({"q1": ["b", "a", "b", "c"]})
    assert list(run["q1"]) == ["b", "a", "c"]
    assert run["q1"]["b"] > run["q1"]["a"] > run["q1"]["c"]
    # Ranking wins over doc-id order: relevant "b" is first.
    res = metrics.evaluate(run, {"q1": {"b": 1}}, measures=("nDCG@10",))
    assert res["nDCG@10"] == pytest.approx(1.0)


def test_percentiles():
    p = metrics.percentiles([1.0, 2.0, 3.0, 4.0, 100.0])
    assert p["p50"] == pytest.approx(3.0)
    assert p["p95"] == pytest.approx(float(np.percentile([1, 2, 3, 4, 100], 95)))
    assert all(math.isnan(v) for v in metrics.percentiles([]).values())


def test_load_beir(tmp_path):
    (tmp_path / "qrels").mkdir()
    corpus_rows = [
        {"_id": "d1", "title": "T1", "text": "body one"},
        {"_id": "d2", "text": "body two"},
    ]
    (tmp_path / "corpus.jsonl").write_text(
        "\n".join(json.dumps(r) for r in corpus_rows) + "\n", encoding="utf-8"
    )
    query_rows = [{"_id": "q1", "text": "first"}, {"_id": "q9", "text": "unjudged"}]
    (tmp_path / "queries.jsonl").write_text(
        "\n".join(json.dumps(r) for r in query_rows) + "\n", encoding="utf-8"
    )
    (tmp_path / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\n", encoding="utf-8"
    )
    corpus, queries, qrels = metrics.load_beir(tmp_path)
    assert corpus == {
        "d1": {"title": "T1", "text": "body one"},
        "d2": {"title": "", "text": "body two"},
    }
    assert queries == {"q1": "first"}
    assert qrels == {"q1": {"d1": 1, "d2": 2}}


# --------------------------------------------------------------------------- #
# peers
# --------------------------------------------------------------------------- #

N_CHUNKS = 20
DIM = 16
TARGET = 7
QUERY = "zephyr quokka"


def _corpus():
    rng = np.random.default_rng(1234)
    vectors = rng.normal(size=(N_CHUNKS, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"chunk-{i:02d}" for i in range(N_CHUNKS)]
    fillers = [
        "river",
        "mountain",
        "protein",
        "cell",
        "network",
        "signal",
        "enzyme",
        "gene",
        "tissue",
        "membrane",
        "receptor",
        "pathway",
        "neuron",
        "vector",
    ]
    texts = []
    for i in range(N_CHUNKS):
        words = [fillers[(i + j) % len(fillers)] for j in range(6)]
        texts.append(f"Document {i} about " + " ".join(words) + ".")
    texts[TARGET] = "The zephyr quokka study: zephyr winds and quokka behaviour."
    # Two chunks with identical text must stay distinct results.
    texts[3] = texts[4] = "A duplicated abstract about saffron and cobalt."
    return ids, texts, vectors


IDS, TEXTS, VECTORS = _corpus()


class _Embedder:
    """Returns stored query vectors and counts calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.table = {QUERY: VECTORS[TARGET].copy(), "saffron cobalt": VECTORS[3].copy()}

    def __call__(self, query: str) -> np.ndarray:
        self.calls.append(query)
        return self.table[query]


def _build(name: str, embedder: _Embedder):
    if name == "langchain":
        pytest.importorskip("langchain_classic")
        pytest.importorskip("langchain_community")
        pytest.importorskip("rank_bm25")
        pytest.importorskip("faiss")
        return peers.build_langchain_ensemble(IDS, TEXTS, VECTORS, embedder)
    if name == "llamaindex":
        pytest.importorskip("llama_index.core")
        pytest.importorskip("llama_index.retrievers.bm25")
        return peers.build_llamaindex_fusion(IDS, TEXTS, VECTORS, embedder)
    if name == "rank_bm25":
        pytest.importorskip("rank_bm25")
        return peers.build_rank_bm25(IDS, TEXTS)
    if name == "faiss":
        pytest.importorskip("faiss")
        return peers.build_plain_faiss(IDS, VECTORS, embedder)
    raise AssertionError(name)


PEERS = ["langchain", "llamaindex", "rank_bm25", "faiss"]
USES_EMBEDDINGS = {"langchain", "llamaindex", "faiss"}


@pytest.fixture(scope="module", params=PEERS)
def built(request):
    embedder = _Embedder()
    return request.param, _build(request.param, embedder), embedder


def test_peer_satisfies_protocol(built):
    _, peer, _ = built
    assert isinstance(peer, peers.PeerRetriever)
    assert isinstance(peer.name, str) and peer.name


def test_target_chunk_ranks_first(built):
    name, peer, embedder = built
    embedder.calls.clear()
    result = peer.search(QUERY, 5)
    assert result[0] == IDS[TARGET]
    assert len(result) == 5
    assert len(set(result)) == 5
    assert set(result) <= set(IDS)
    if name in USES_EMBEDDINGS:
        assert embedder.calls == [QUERY]


def test_k_changes_between_calls(built):
    _, peer, _ = built
    assert peer.search(QUERY, 1) == [IDS[TARGET]]
    everything = peer.search(QUERY, 100)  # more than the corpus
    assert sorted(everything) == sorted(IDS)
    assert everything[0] == IDS[TARGET]
    assert len(peer.search(QUERY, 3)) == 3


@pytest.mark.parametrize("name", [p for p in PEERS if p != "faiss"])  # FAISS never sees text
def test_identical_texts_stay_distinct(name):
    peer = _build(name, _Embedder())
    top = peer.search("saffron cobalt", 2)
    assert sorted(top) == [IDS[3], IDS[4]]


def test_invalid_k(built):
    _, peer, _ = built
    with pytest.raises(ValueError):
        peer.search(QUERY, 0)


def test_langchain_embeddings_adapter_is_exact():
    pytest.importorskip("langchain_core")
    emb = peers.langchain_query_embeddings(_Embedder())
    assert emb.embed_query(QUERY) == VECTORS[TARGET].tolist()
    with pytest.raises(RuntimeError):
        emb.embed_documents(["anything"])


def test_llamaindex_embedding_adapter_is_exact():
    pytest.importorskip("llama_index.core")
    emb = peers.llamaindex_query_embedding(_Embedder())
    assert emb.get_query_embedding(QUERY) == VECTORS[TARGET].tolist()
    with pytest.raises(RuntimeError):
        emb.get_text_embedding("anything")


def test_builders_validate_inputs():
    pytest.importorskip("faiss")
    pytest.importorskip("rank_bm25")
    with pytest.raises(ValueError):
        peers.build_plain_faiss(IDS[:-1], VECTORS, _Embedder())
    with pytest.raises(ValueError):
        peers.build_rank_bm25(["a", "a"], ["x", "y"])
    with pytest.raises(ValueError):
        peers.build_rank_bm25(IDS, TEXTS[:-1])


def test_word_tokenize():
    assert peers.word_tokenize("IL-6 Levels, in T-cells!") == [
        "il",
        "6",
        "levels",
        "in",
        "t",
        "cells",
    ]


def test_half_of_splits_independently_of_id_parity():
    from benchmarks.common import half_of, split_of

    ids = [str(i) for i in range(2000)]
    halves = [half_of(q) for q in ids]
    assert set(halves) == {"choose", "report"}
    assert 900 < halves.count("choose") < 1100
    assert [half_of(q) for q in ids] == halves  # a fixed split, not a random draw per call
    # each old half is cut about in two: choosing on "choose" is not choosing on "tune"
    for old in ("tune", "heldout"):
        part = [h for q, h in zip(ids, halves) if split_of(q) == old]
        assert 400 < part.count("choose") < 600
