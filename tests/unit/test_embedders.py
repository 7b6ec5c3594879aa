import numpy as np
import pytest

from pensive_core import ConfigError
from pensive_core.config import EmbedderConfig
from pensive_core.embedders import Embedder, create_embedder


def test_hash_embedder_is_deterministic_and_normalised():
    e = create_embedder(EmbedderConfig(name="hash", dim=64))
    assert isinstance(e, Embedder)
    a = e.embed(["Invoice INV-4471 paid", "Invoice INV-4471 paid", ""])
    assert a.shape == (3, 64) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a[:2], axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(a[0], a[1])
    np.testing.assert_array_equal(e.embed_query("Invoice INV-4471 paid"), a[0])
    assert e.count_tokens(["one two three"]) == [3]


def test_unknown_embedder_name():
    with pytest.raises(ConfigError, match="never downloaded"):
        create_embedder(EmbedderConfig(name="sentence-transformers/all-mpnet-base-v2"))


@pytest.mark.slow
def test_any_local_sentence_transformers_folder(tmp_path, minilm):
    from pensive_core.embedders.sentence_transformers import bundled_minilm_path

    folder = str(bundled_minilm_path())
    e = create_embedder(EmbedderConfig(name=folder))
    assert e.name == folder and e.dim == 384 and e.max_tokens == 254
    v = e.embed(["the night ferry leaves at ten", "a recipe for lentil soup"])
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    q = e.embed_query("when does the ferry depart?")
    assert q @ v[0] > q @ v[1]
    np.testing.assert_allclose(q, minilm.embed_query("when does the ferry depart?"), atol=1e-5)
    (tmp_path / "not-a-model").mkdir()
    with pytest.raises(ConfigError, match="not a sentence-transformers model folder"):
        create_embedder(EmbedderConfig(name=str(tmp_path / "not-a-model")))


class _Counting:
    """An embedder that counts how often it is asked to embed a query."""

    name, dim, max_tokens = "counting", 8, 64

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts):
        return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)

    def embed_query(self, text):
        self.calls += 1
        v = np.zeros(8, dtype=np.float32)
        v[len(text) % 8] = 1.0
        return v

    def count_tokens(self, texts):
        return [len(t.split()) for t in texts]


def test_query_cache_embeds_a_repeated_question_once_and_evicts_the_least_recent():
    from pensive_core.embedders.base import QueryCache

    inner = _Counting()
    q = QueryCache(inner, size=2)
    a = q.embed_query("where is the invoice?")
    b = q.embed_query("where is the invoice?")
    assert inner.calls == 1 and q.hits == 1
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError):
        a[0] = 5.0  # shared between callers: read-only
    q.embed_query("one")
    q.embed_query("where is the invoice?")  # refreshes it: "one" is now the oldest
    q.embed_query("two")  # evicts "one"
    assert inner.calls == 3
    q.embed_query("where is the invoice?")
    assert inner.calls == 3
    q.embed_query("one")
    assert inner.calls == 4
    # passages go straight through, and the model's own attributes are reachable
    assert q.embed(["a", "b"]).shape == (2, 8) and q.count_tokens(["a b"]) == [2]
    assert q.max_tokens == 64 and q.name == "counting"


def test_the_store_embeds_a_repeated_question_once(tmp_path):
    from pensive_core import Document, Pensive

    cfg = {"embedder": {"name": "hash", "dim": 64}, "router": {"l1": False}}
    with Pensive(tmp_path / "s", config=cfg) as p:
        p.ingest([Document(id="a", text="Invoice INV-4471 was paid by bank transfer in May.")])
        p.query("was invoice INV-4471 paid?")
        assert "embed_ms" in p.query("was invoice INV-4471 paid?", k=3).timings
        assert p.embedder.hits == 1
    off = {**cfg, "embedder": {"name": "hash", "dim": 64, "query_cache": 0}}
    with Pensive(tmp_path / "s", config=off) as p:
        assert not hasattr(p.embedder, "hits")


def test_ingest_reports_where_its_time_went(tmp_path):
    from pensive_core import Document, Pensive

    with Pensive(tmp_path / "s", config={"embedder": {"name": "hash", "dim": 64}}) as p:
        rep = p.ingest(
            [Document(id=f"d{i}", text=f"Passage {i} about tram fares.") for i in range(5)]
        )
    assert set(rep.stages) >= {"chunking", "embedding", "bm25", "archive", "graph", "commit"}
    assert all(v >= 0 for v in rep.stages.values())
    assert 0 < sum(rep.stages.values()) <= rep.seconds + 1e-6


_QUESTIONS = [
    "Has invoice INV-4471-KQ been settled?",
    "¿Dónde está la estación de tranvía más cercana? 東京",
    "word " * 400,  # past the model's window: truncated the same way on both paths
    "",
]


@pytest.mark.slow
def test_queries_go_through_onnxruntime_and_match_pytorch(minilm):
    pytest.importorskip("onnxruntime")
    for q in _QUESTIONS:
        fast = minilm.embed_query(q)
        slow = minilm.embed_torch([q], 1)[0]
        assert fast.shape == (384,) and fast.dtype == np.float32
        assert float(fast @ slow) >= 0.9999, q[:40]
    assert minilm.query_encoder is not None  # onnx and onnxruntime come with the minilm extra


@pytest.mark.slow
def test_the_exported_query_model_is_cached_and_a_torn_cache_file_is_replaced(
    minilm, tmp_path, monkeypatch
):
    pytest.importorskip("onnxruntime")
    from pensive_core.embedders.onnx_query import OnnxQueryEncoder
    from pensive_core.embedders.sentence_transformers import bundled_minilm_path

    monkeypatch.setenv("PENSIVE_CACHE_DIR", str(tmp_path))

    def ref(t):
        return minilm.embed_torch([t], 1)[0]

    enc = OnnxQueryEncoder.build(bundled_minilm_path(), minilm.model, 1, ref)
    assert enc is not None
    (cached,) = (tmp_path / "onnx").glob("*.onnx")
    size = cached.stat().st_size
    cached.write_bytes(cached.read_bytes()[: size // 3])  # a crash mid-write, say
    again = OnnxQueryEncoder.build(bundled_minilm_path(), minilm.model, 1, ref)
    assert again is not None and cached.stat().st_size == size
    q = "where is the invoice?"
    assert float(again(q) @ ref(q)) >= 0.9999


@pytest.mark.slow
def test_a_model_onnx_cannot_reproduce_stays_on_pytorch(minilm, tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    from pensive_core.embedders.onnx_query import OnnxQueryEncoder
    from pensive_core.embedders.sentence_transformers import bundled_minilm_path

    monkeypatch.setenv("PENSIVE_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(0)

    def other_model(_t):  # vectors the exported model does not give
        v = rng.standard_normal(384).astype(np.float32)
        return v / np.linalg.norm(v)

    assert OnnxQueryEncoder.build(bundled_minilm_path(), minilm.model, 1, other_model) is None
