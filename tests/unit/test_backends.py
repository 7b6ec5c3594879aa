"""The public conformance suite (``pensive_core.testing``), subclassed per local backend."""

import numpy as np
import pytest

from pensive_core.backends import create_backend
from pensive_core.config import ChromaConfig, FaissConfig
from pensive_core.filters import parse_filter
from pensive_core.testing import DIM, VectorBackendTests
from pensive_core.testing import unit_vectors as unit


class TestFaissFlat(VectorBackendTests):
    backend = "faiss"
    options = FaissConfig(index="flat")


class TestFaissHNSW(VectorBackendTests):
    backend = "faiss"
    options = FaissConfig(index="hnsw")


class TestFaissAuto(VectorBackendTests):
    backend = "faiss"
    options = FaissConfig(index="auto", hnsw_threshold=20)

    def test_switches_to_hnsw_past_threshold(self, make_backend, tmp_path):
        b = make_backend(tmp_path)
        vecs = unit(np.random.default_rng(6), 40)
        b.upsert([f"id{i}" for i in range(10)], vecs[:10])
        assert b.kind == "flat"
        b.upsert([f"id{i}" for i in range(10, 40)], vecs[10:])
        assert b.kind == "hnsw"
        assert b.search(vecs[33], 1)[0][0] == "id33"


class TestFaissIVFPQ(VectorBackendTests):
    """Below ``ivf_train_min`` an IVF-PQ store is exact: the same behaviour as every backend."""

    backend = "faiss"
    options = FaissConfig(index="ivfpq", ivf_train_min=256)


def _clustered(rng, n, centers=20):
    c = unit(rng, centers)
    v = c[rng.integers(0, centers, n)] + 0.35 * rng.normal(size=(n, DIM)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def test_ivfpq_trains_past_threshold_and_keeps_every_behaviour(tmp_path):
    rng = np.random.default_rng(20)
    n = 3000
    vecs = _clustered(rng, n)
    ids = [f"id{i}" for i in range(n)]
    meta = [{"part": i % 3} for i in range(n)]
    opts = FaissConfig(index="ivfpq", ivf_train_min=1000, pq_m=8, ivf_nprobe=16)
    b = create_backend("faiss", tmp_path, DIM, opts)
    b.upsert(ids[:500], vecs[:500], meta[:500])
    assert b.kind == "flat"
    b.upsert(ids[500:], vecs[500:], meta[500:])
    assert b.kind == "ivfpq" and b.count() == n
    exact = vecs @ vecs[:200].T
    found = 0
    for q in range(200):
        truth = set(np.argsort(-exact[:, q])[:10].tolist())
        got = {int(c[2:]) for c, _ in b.search(vecs[q], 10)}
        found += len(truth & got)
    assert found / 2000 >= 0.6  # 8 bytes per vector instead of 64: approximate, but close
    where = parse_filter({"part": 1})
    res = b.search(vecs[4], 10, where=where)
    assert len(res) == 10 and all(int(c[2:]) % 3 == 1 for c, _ in res)
    b.delete(ids[:100])
    assert b.count() == n - 100 and not {c for c, _ in b.search(vecs[5], 50)} & set(ids[:100])
    b.persist()
    again = create_backend("faiss", tmp_path, DIM, opts)
    assert again.kind == "ivfpq" and again.count() == n - 100
    assert [c for c, _ in again.search(vecs[300], 5)] == [c for c, _ in b.search(vecs[300], 5)]
    assert float(again.fetch(["id300"])["id300"] @ vecs[300]) > 0.9  # PQ approximation
    assert again.memory_bytes() > 0


def test_selective_filter_on_hnsw_is_exact(tmp_path):
    rng = np.random.default_rng(21)
    vecs = unit(rng, 2000)
    meta = [{"rare": i % 500 == 0} for i in range(2000)]
    b = create_backend("faiss", tmp_path, DIM, FaissConfig(index="hnsw", exact_filter_below=0))
    b.upsert([f"id{i}" for i in range(2000)], vecs, meta)
    res = b.search(vecs[1], 10, where=parse_filter({"rare": True}))
    assert sorted(c for c, _ in res) == ["id0", "id1000", "id1500", "id500"]


def test_faiss_store_written_before_namespaces_still_opens(tmp_path):
    import json

    import faiss

    vecs = unit(np.random.default_rng(22), 3)
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(DIM))
    from pensive_core.backends.faiss import int_id

    keys = [int_id(s) for s in "abc"]
    index.add_with_ids(vecs, np.array(keys, dtype=np.int64))
    faiss.write_index(index, str(tmp_path / "faiss-1.index"))
    np.save(tmp_path / "faiss-1.ids.npy", np.array(keys, dtype=np.int64))
    (tmp_path / "faiss-1.names.json").write_text(json.dumps({"names": list("abc")}))
    manifest = {
        "generation": 1,
        "kind": "flat",
        "dim": DIM,
        "index": "faiss-1.index",
        "ids": "faiss-1.ids.npy",
        "names": "faiss-1.names.json",
        "tombstones": [],
    }
    (tmp_path / "faiss.json").write_text(json.dumps(manifest))
    b = create_backend("faiss", tmp_path, DIM)
    assert b.count() == 3 and b.search(vecs[1], 1)[0][0] == "b"


class TestMemory(VectorBackendTests):
    backend = "memory"


class TestChromaEmbedded(VectorBackendTests):
    backend = "chroma"
    options = ChromaConfig(mode="persistent")

    def test_other_dimension_is_refused(self, make_backend, tmp_path):
        from pensive_core import ConfigError

        make_backend(tmp_path).upsert(["a"], unit(np.random.default_rng(8), 1))
        with pytest.raises(ConfigError, match="16-d"):
            create_backend("chroma", tmp_path, 32, self.options)


def test_hybrid_store_on_chroma(tmp_path):
    """The same code on another backend: config alone switches it."""
    from pensive_core import Pensive
    from tests.conftest import HASH_CONFIG, docs_corpus

    cfg = {**HASH_CONFIG, "backend": {"name": "chroma"}}
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest(docs_corpus())
        assert p.stats()["vectors"] == 8 and p.stats()["backend"] == "chroma"
        res = p.query("Was invoice INV-4471 paid?", k=2)
        assert res.hits[0].doc_id == "inv" and "dense" in res.hits[0].sources
        p.delete("inv")
        assert p.stats()["vectors"] == 7
    with Pensive(tmp_path) as p:  # reopened from the saved config: still Chroma
        assert p.stats()["vectors"] == 7


def test_faiss_refuses_other_dimension(tmp_path):
    from pensive_core import BackendError

    b = create_backend("faiss", tmp_path, DIM)
    b.upsert(["a"], unit(np.random.default_rng(0), 1))
    b.persist()
    with pytest.raises(BackendError, match="16-d"):
        create_backend("faiss", tmp_path, 32)


def test_atomic_persist_keeps_previous_generation(tmp_path, monkeypatch):
    import pensive_core.backends.faiss as fb

    b = create_backend("faiss", tmp_path, DIM)
    vecs = unit(np.random.default_rng(0), 5)
    b.upsert(list("abcde"), vecs)
    b.persist()

    def boom(*_a, **_k):
        raise OSError("disk full")

    b.upsert(["f"], vecs[:1])
    monkeypatch.setattr(fb, "write_manifest", boom)
    with pytest.raises(OSError):
        b.persist()
    monkeypatch.undo()
    assert create_backend("faiss", tmp_path, DIM).count() == 5  # the old generation is intact


@pytest.mark.parametrize(
    "backend, module, extra",
    [
        ("faiss", "faiss", "faiss"),
        ("chroma", "chromadb", "chroma"),
        ("pinecone", "pinecone", "pinecone"),
        ("weaviate", "weaviate", "weaviate"),
        ("pgvector", "psycopg", "postgres"),
    ],
)
def test_a_missing_extra_is_named_and_nothing_is_written(
    tmp_path, monkeypatch, backend, module, extra
):
    import sys

    from pensive_core import Document, MissingDependencyError, Pensive
    from tests.conftest import HASH_CONFIG

    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with Pensive(tmp_path, config={**HASH_CONFIG, "backend": {"name": backend}}) as p:
        with pytest.raises(MissingDependencyError, match=rf'pip install "pensive\[{extra}\]"'):
            p.ingest([Document(id="a", text="alpha beta")])
        assert p.stats()["documents"] == 0
