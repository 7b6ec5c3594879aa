"""One conformance suite, subclassed per vector backend."""

import numpy as np
import pytest

from pensive_core.backends import VectorBackend, create_backend
from pensive_core.config import ChromaConfig, FaissConfig

DIM = 16


def unit(rng, n):
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


class Conformance:
    name = ""
    options = None

    def make(self, folder):
        return create_backend(self.name, folder, DIM, self.options)

    def test_protocol(self, tmp_path):
        assert isinstance(self.make(tmp_path), VectorBackend)

    def test_empty_store(self, tmp_path):
        b = self.make(tmp_path)
        assert b.count() == 0
        assert b.search(unit(np.random.default_rng(0), 1)[0], 5) == []

    def test_search_finds_exact_vector_first(self, tmp_path):
        rng = np.random.default_rng(1)
        vecs = unit(rng, 50)
        b = self.make(tmp_path)
        b.upsert([f"id{i}" for i in range(50)], vecs)
        res = b.search(vecs[17], 5)
        assert res[0][0] == "id17" and res[0][1] == pytest.approx(1.0, abs=1e-4)
        assert [s for _, s in res] == sorted((s for _, s in res), reverse=True)
        assert len(res) == 5

    def test_upsert_is_idempotent_and_replaces(self, tmp_path):
        rng = np.random.default_rng(2)
        vecs = unit(rng, 10)
        b = self.make(tmp_path)
        b.upsert([f"id{i}" for i in range(10)], vecs)
        b.upsert([f"id{i}" for i in range(10)], vecs)
        assert b.count() == 10
        b.upsert(["id3"], vecs[7:8])
        assert b.count() == 10
        top = b.search(vecs[7], 2)
        assert {cid for cid, _ in top} == {"id3", "id7"}

    def test_delete_including_missing_ids(self, tmp_path):
        rng = np.random.default_rng(3)
        vecs = unit(rng, 10)
        b = self.make(tmp_path)
        b.upsert([f"id{i}" for i in range(10)], vecs)
        b.delete(["id4", "never-stored"])
        assert b.count() == 9
        assert all(cid != "id4" for cid, _ in b.search(vecs[4], 10))

    def test_persist_and_reload(self, tmp_path):
        rng = np.random.default_rng(4)
        vecs = unit(rng, 30)
        b = self.make(tmp_path)
        b.upsert([f"id{i}" for i in range(30)], vecs)
        b.delete(["id0"])
        b.persist()
        before = b.search(vecs[5], 5)
        again = self.make(tmp_path)
        assert again.count() == 29
        assert again.search(vecs[5], 5) == before

    def test_fetch(self, tmp_path):
        vecs = unit(np.random.default_rng(7), 3)
        b = self.make(tmp_path)
        b.upsert(["a", "b", "c"], vecs)
        got = b.fetch(["c", "zz", "a"])
        assert set(got) == {"a", "c"}
        np.testing.assert_allclose(got["c"], vecs[2], atol=1e-6)

    def test_k_larger_than_store(self, tmp_path):
        b = self.make(tmp_path)
        vecs = unit(np.random.default_rng(5), 3)
        b.upsert(["a", "b", "c"], vecs)
        assert len(b.search(vecs[0], 100)) == 3


class TestFaissFlat(Conformance):
    name = "faiss"
    options = FaissConfig(index="flat")


class TestFaissHNSW(Conformance):
    name = "faiss"
    options = FaissConfig(index="hnsw")


class TestFaissAuto(Conformance):
    name = "faiss"
    options = FaissConfig(index="auto", hnsw_threshold=20)

    def test_switches_to_hnsw_past_threshold(self, tmp_path):
        b = self.make(tmp_path)
        vecs = unit(np.random.default_rng(6), 40)
        b.upsert([f"id{i}" for i in range(10)], vecs[:10])
        assert b.kind == "flat"
        b.upsert([f"id{i}" for i in range(10, 40)], vecs[10:])
        assert b.kind == "hnsw"
        assert b.search(vecs[33], 1)[0][0] == "id33"


class TestMemory(Conformance):
    name = "memory"


class TestChromaEmbedded(Conformance):
    name = "chroma"
    options = ChromaConfig(mode="persistent")

    def test_other_dimension_is_refused(self, tmp_path):
        from pensive_core import ConfigError

        self.make(tmp_path).upsert(["a"], unit(np.random.default_rng(8), 1))
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
