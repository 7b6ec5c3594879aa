"""The rerank stage in the core query path: off by default, candidates in and k out, L1
answers never reordered, fail-soft on any reranker failure."""

import math

import pytest

from pensive_core import ConfigError, Document, Pensive
from tests.conftest import HASH_CONFIG, docs_corpus


class ByWord:
    """Scores a passage by whether it holds a word (a deterministic stand-in for a model)."""

    def __init__(self, word):
        self.word = word
        self.calls = 0

    def score(self, query, texts):
        self.calls += 1
        return [10.0 if self.word in t.lower() else -float(len(t)) / 100 for t in texts]


class Broken:
    def __init__(self, result):
        self.result = result

    def score(self, query, texts):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result(texts)


def test_off_by_default(hash_store):
    hash_store.ingest(docs_corpus())
    res = hash_store.query("Acme revenue", k=3)
    assert "rerank_ms" not in res.timings
    assert all("rerank" not in h.sources for h in res.hits)
    assert hash_store.stats()["rerank"] is None


def test_the_reranker_orders_the_candidates_and_k_come_out(tmp_path):
    reranker = ByWord("tern")
    with Pensive(tmp_path / "on", config=HASH_CONFIG, reranker=reranker) as p:
        p.ingest(docs_corpus())
        res = p.query("Acme revenue and cloud sales", k=2)
    with Pensive(tmp_path / "off", config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())
        plain = p.query("Acme revenue and cloud sales", k=2)
    assert plain.hits[0].doc_id in ("q3", "q4")
    # "bird" ranks low for this question but is among the 40 candidates: the reranker lifts it
    assert res.hits[0].doc_id == "bird" and res.hits[0].score == 10.0
    assert len(res.hits) == 2
    assert [h.sources["rerank"] for h in res.hits] == [1, 2]
    assert "rerank_ms" in res.timings
    assert reranker.calls == 1


def test_l1_answers_are_not_reranked_again(tmp_path):
    reranker = ByWord("tern")
    with Pensive(tmp_path, config=HASH_CONFIG, reranker=reranker) as p:
        p.ingest(docs_corpus())
        first = p.query("Acme revenue", k=3)
        again = p.query("Acme revenue", k=3)
        assert again.tier == "L1" and reranker.calls == 1
        assert [h.chunk_id for h in again.hits] == [h.chunk_id for h in first.hits]
        assert p.stats()["rerank"] == {"runs": 1, "failed": 0}


@pytest.mark.parametrize(
    "result",
    [
        RuntimeError("model fell over"),
        lambda texts: [1.0],  # the wrong number of scores
        lambda texts: [math.nan] * len(texts),  # a non-finite score
    ],
)
def test_a_failing_reranker_leaves_l2_order(tmp_path, result):
    with Pensive(tmp_path / "off", config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())
        plain = p.query("Acme revenue", k=3)
    with Pensive(tmp_path / "on", config=HASH_CONFIG, reranker=Broken(result)) as p:
        p.ingest(docs_corpus())
        res = p.query("Acme revenue", k=3)
        assert [h.chunk_id for h in res.hits] == [h.chunk_id for h in plain.hits]
        assert [h.score for h in res.hits] == [h.score for h in plain.hits]
        assert p.stats()["rerank"] == {"runs": 1, "failed": 1}


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="rerank"):
        Pensive(tmp_path / "a", config={**HASH_CONFIG, "rerank": {"model": str(tmp_path)}})
    with pytest.raises(ConfigError, match="rerank.candidates"):
        Pensive(tmp_path / "b", config={**HASH_CONFIG, "rerank": {"candidates": 0}})
    with pytest.raises(ConfigError, match="reranker"):
        Pensive(tmp_path / "c", config=HASH_CONFIG, reranker=object())


@pytest.mark.slow
def test_a_real_cross_encoder_from_the_config(tmp_path):
    pytest.importorskip("sentence_transformers")
    from pensive_core.embedders.sentence_transformers import bundled_minilm_path

    # MiniLM with a fresh one-label head: the scores mean nothing, the code path is real
    cfg = {**HASH_CONFIG, "rerank": {"model": str(bundled_minilm_path()), "candidates": 6}}
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest(docs_corpus() + [Document(id="x", text="A short note on terns.")])
        res = p.query("arctic tern migration", k=3)
        assert len(res.hits) == 3
        assert [h.sources["rerank"] for h in res.hits] == [1, 2, 3]
        scores = [h.score for h in res.hits]
        assert scores == sorted(scores, reverse=True) and all(math.isfinite(s) for s in scores)
        assert p.stats()["rerank"] == {"runs": 1, "failed": 0}
