"""One conformance suite, subclassed per vector backend."""

import numpy as np
import pytest

from pensive_core.backends import VectorBackend, create_backend
from pensive_core.config import ChromaConfig, FaissConfig
from pensive_core.errors import InputError
from pensive_core.filters import matches, parse_filter

DIM = 16


def unit(rng, n):
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


class Conformance:
    """What every vector backend must do. Subclass with ``name``/``options`` or ``make``.

    Backends on a remote service may be eventually consistent: ``settle`` waits until writes
    are visible (a no-op for local backends).
    """

    name = ""
    options = None

    def make(self, folder):
        return create_backend(self.name, folder, DIM, self.options)

    def settle(self, backend, namespace="", expect=None):
        """Wait until the backend's reads reflect its writes (remote services override)."""

    def test_protocol(self, tmp_path):
        assert isinstance(self.make(tmp_path), VectorBackend)

    def test_empty_store(self, tmp_path):
        b = self.make(tmp_path)
        assert b.count() == 0
        assert b.search(unit(np.random.default_rng(0), 1)[0], 5) == []
        assert b.fetch(["nothing"]) == {}
        b.delete(["nothing"])  # deleting from an empty store is fine

    def test_search_finds_exact_vector_first(self, tmp_path):
        rng = np.random.default_rng(1)
        vecs = unit(rng, 50)
        b = self.make(tmp_path)
        b.upsert([f"id{i}" for i in range(50)], vecs)
        self.settle(b, expect=50)
        res = b.search(vecs[17], 5)
        assert res[0][0] == "id17" and res[0][1] == pytest.approx(1.0, abs=1e-4)
        assert [s for _, s in res] == sorted((s for _, s in res), reverse=True)
        assert len(res) == 5
        # higher is better, and the score is the cosine similarity
        for cid, score in res:
            j = int(cid[2:])
            assert score == pytest.approx(float(vecs[j] @ vecs[17]), abs=1e-3)

    def test_upsert_is_idempotent_and_replaces(self, tmp_path):
        rng = np.random.default_rng(2)
        vecs = unit(rng, 10)
        b = self.make(tmp_path)
        b.upsert([f"id{i}" for i in range(10)], vecs)
        b.upsert([f"id{i}" for i in range(10)], vecs)
        self.settle(b, expect=10)
        assert b.count() == 10
        b.upsert(["id3"], vecs[7:8])
        self.settle(b, expect=10)
        assert b.count() == 10
        top = b.search(vecs[7], 2)
        assert {cid for cid, _ in top} == {"id3", "id7"}

    def test_delete_including_missing_ids(self, tmp_path):
        rng = np.random.default_rng(3)
        vecs = unit(rng, 10)
        b = self.make(tmp_path)
        b.upsert([f"id{i}" for i in range(10)], vecs)
        b.delete(["id4", "never-stored"])
        self.settle(b, expect=9)
        assert b.count() == 9
        assert all(cid != "id4" for cid, _ in b.search(vecs[4], 10))
        assert b.fetch(["id4"]) == {}

    def test_persist_and_reload(self, tmp_path):
        rng = np.random.default_rng(4)
        vecs = unit(rng, 30)
        b = self.make(tmp_path)
        meta = [{"color": ("red", "blue")[i % 2], "n": i} for i in range(30)]
        b.upsert([f"id{i}" for i in range(30)], vecs, meta)
        b.upsert(["x1", "x2"], vecs[:2], [{"color": "red"}] * 2, namespace="other")
        b.delete(["id0"])
        b.persist()
        self.settle(b, expect=29)
        before = b.search(vecs[5], 5)
        b.close()
        again = self.make(tmp_path)
        self.settle(again, expect=29)
        assert again.count() == 29 and again.count(namespace="other") == 2
        after = again.search(vecs[5], 5)
        assert [c for c, _ in after] == [c for c, _ in before]
        assert [s for _, s in after] == pytest.approx([s for _, s in before], abs=1e-5)
        red = again.search(vecs[5], 30, where=parse_filter({"color": "red"}))
        assert {c for c, _ in red} == {f"id{i}" for i in range(2, 30, 2)}

    def test_fetch(self, tmp_path):
        vecs = unit(np.random.default_rng(7), 3)
        b = self.make(tmp_path)
        b.upsert(["a", "b", "c"], vecs)
        self.settle(b, expect=3)
        got = b.fetch(["c", "zz", "a"])
        assert set(got) == {"a", "c"}
        np.testing.assert_allclose(got["c"], vecs[2], atol=1e-6)

    def test_k_larger_than_store(self, tmp_path):
        b = self.make(tmp_path)
        vecs = unit(np.random.default_rng(5), 3)
        b.upsert(["a", "b", "c"], vecs)
        self.settle(b, expect=3)
        assert len(b.search(vecs[0], 100)) == 3

    def test_metadata_filters(self, tmp_path):
        rng = np.random.default_rng(9)
        n = 40
        vecs = unit(rng, n)
        colors = ("red", "green", "blue", "amber")
        meta = [
            {"color": colors[i % 4], "n": i, "even": i % 2 == 0, "w": i / 4, "doc_id": f"d{i // 3}"}
            for i in range(n)
        ]
        del meta[5]["color"]  # a record without the field matches no comparison on it
        ids = [f"id{i}" for i in range(n)]
        b = self.make(tmp_path)
        b.upsert(ids, vecs, meta)
        self.settle(b, expect=n)
        cases = [
            {"color": "red"},
            {"color": {"$ne": "red"}},
            {"color": {"$in": ["green", "blue"]}},
            {"color": {"$nin": ["green", "blue"]}},
            {"n": {"$gte": 10, "$lt": 20}},
            {"n": {"$gt": 35}},
            {"n": {"$lte": 3}},
            {"w": {"$gt": 2.5}},
            {"even": True},
            {"n": 7},
            {"doc_id": "d4"},
            {"$or": [{"color": "amber"}, {"n": {"$lt": 2}}]},
            {"$and": [{"even": False}, {"color": {"$in": ["green", "amber"]}}]},
            {"color": "red", "even": True, "n": {"$gt": 20}},
            {"color": "violet"},
        ]
        for spec in cases:
            where = parse_filter(spec)
            want = {ids[i] for i in range(n) if matches(where, meta[i])}
            got = b.search(vecs[0], n, where=where)
            assert {c for c, _ in got} == want, spec
            assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
            top = b.search(vecs[12], 3, where=where)
            exact = sorted(want, key=lambda c: -float(vecs[int(c[2:])] @ vecs[12]))[:3]
            assert [c for c, _ in top] == exact, spec

    def test_upsert_replaces_metadata(self, tmp_path):
        vecs = unit(np.random.default_rng(10), 4)
        b = self.make(tmp_path)
        b.upsert(list("abcd"), vecs, [{"tag": "old", "extra": 1}] * 4)
        b.upsert(["b"], vecs[1:2], [{"tag": "new"}])
        b.upsert(["c"], vecs[2:3])  # no metadata: the old metadata goes too
        self.settle(b, expect=4)
        assert {c for c, _ in b.search(vecs[0], 4, where=parse_filter({"extra": 1}))} == {"a", "d"}
        assert {c for c, _ in b.search(vecs[1], 4, where=parse_filter({"tag": "old"}))} == set("ad")
        assert [c for c, _ in b.search(vecs[0], 4, where=parse_filter({"tag": "new"}))] == ["b"]

    def test_namespace_isolation(self, tmp_path):
        rng = np.random.default_rng(11)
        va, vb = unit(rng, 6), unit(rng, 6)
        ids = [f"id{i}" for i in range(6)]
        b = self.make(tmp_path)
        b.upsert(ids, va, [{"t": "a"}] * 6, namespace="tenant-a")
        b.upsert(ids[:4], vb[:4], [{"t": "b"}] * 4, namespace="tenant-b")
        self.settle(b, "tenant-a", expect=6)
        self.settle(b, "tenant-b", expect=4)
        assert b.count() == 0
        assert (b.count(namespace="tenant-a"), b.count(namespace="tenant-b")) == (6, 4)
        assert b.search(va[0], 3) == []
        hit = b.search(vb[2], 1, namespace="tenant-b")[0]
        assert hit[0] == "id2" and hit[1] == pytest.approx(1.0, abs=1e-4)
        assert b.search(vb[2], 1, namespace="tenant-a")[0][1] < 0.99
        assert {c for c, _ in b.search(va[0], 10, namespace="tenant-b")} == set(ids[:4])
        np.testing.assert_allclose(b.fetch(["id1"], namespace="tenant-b")["id1"], vb[1], atol=1e-6)
        assert b.fetch(["id5"], namespace="tenant-b") == {}
        b.delete(["id0", "id1"], namespace="tenant-a")
        self.settle(b, "tenant-a", expect=4)
        assert (b.count(namespace="tenant-a"), b.count(namespace="tenant-b")) == (4, 4)
        assert "id0" in b.fetch(["id0"], namespace="tenant-b")
        where = parse_filter({"t": "a"})
        assert b.search(va[3], 5, where=where, namespace="tenant-b") == []

    def test_a_repeated_id_in_one_upsert_keeps_the_last(self, tmp_path):
        vecs = unit(np.random.default_rng(13), 3)
        b = self.make(tmp_path)
        b.upsert(["a", "b", "a"], vecs, [{"v": 1}, {"v": 2}, {"v": 3}])
        self.settle(b, expect=2)
        assert b.count() == 2
        hit = b.search(vecs[2], 1, where=parse_filter({"v": 3}))
        assert hit[0][0] == "a" and hit[0][1] == pytest.approx(1.0, abs=1e-4)
        assert b.search(vecs[0], 2, where=parse_filter({"v": 1})) == []

    def test_bad_arguments_are_refused(self, tmp_path):
        b = self.make(tmp_path)
        vecs = unit(np.random.default_rng(12), 2)
        with pytest.raises(InputError, match="namespace"):
            b.upsert(["a"], vecs[:1], namespace="no spaces/here")
        with pytest.raises(InputError, match="shape"):
            b.upsert(["a", "b"], vecs[:1])
        with pytest.raises(InputError, match="metadata"):
            b.upsert(["a", "b"], vecs, [{}])
        with pytest.raises(InputError, match="namespace"):
            b.search(vecs[0], 3, namespace="x" * 80)
        assert b.count() == 0


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


class TestFaissIVFPQ(Conformance):
    """Below ``ivf_train_min`` an IVF-PQ store is exact: the same behaviour as every backend."""

    name = "faiss"
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


@pytest.mark.parametrize(
    "backend, module, extra",
    [
        ("faiss", "faiss", "faiss"),
        ("chroma", "chromadb", "chroma"),
        ("pinecone", "pinecone", "pinecone"),
        ("weaviate", "weaviate", "weaviate"),
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
