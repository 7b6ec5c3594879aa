"""FAISS writes what changed: a commit of a few passages appends a log to the index's last
whole copy instead of writing the whole index again, a load replays the logs into the same
index (the same HNSW graph, byte for byte), and a reader catches up by reading only the new
logs (issue 29: a commit costs in proportion to the change)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pensive_core.backends.faiss import FaissBackend
from pensive_core.config import FaissConfig
from pensive_core.errors import CorruptStoreError

pytest.importorskip("faiss")
DIM = 32


def _vecs(n, seed):
    v = np.random.RandomState(seed).randn(n, DIM).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _put(b, start, n, seed, ns=""):
    ids = [f"p{i}" for i in range(start, start + n)]
    b.upsert(ids, _vecs(n, seed), [{"i": i} for i in range(start, start + n)], namespace=ns)


def _manifest(folder):
    return json.loads((folder / "faiss.json").read_text())


def _answers(b, ns=""):
    return [b.search(q, 10, namespace=ns) for q in _vecs(20, 999)]


def _graph(b, ns=""):
    import faiss

    return faiss.serialize_index(b.raw_index(namespace=ns)).tobytes()


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_small_commits_append_logs_and_a_load_rebuilds_the_same_index(tmp_path, kind):
    cfg = FaissConfig(index=kind)
    b = FaissBackend(tmp_path, DIM, cfg)
    _put(b, 0, 2000, 1)
    b.persist()
    base = _manifest(tmp_path)["spaces"][""]["index"]
    for c in range(5):
        _put(b, 2000 + 10 * c, 10, 10 + c)
        b.delete([f"p{3 * c}", "not-there"])
        b.persist()
    entry = _manifest(tmp_path)["spaces"][""]
    assert entry["index"] == base and len(entry["logs"]) == 5
    assert not any(p.name.endswith(".index") and p.name != base for p in tmp_path.iterdir())
    _put(b, 2005, 1, 77)  # a replaced vector (HNSW cannot replace: it rebuilds, written whole)
    b.persist()
    entry = _manifest(tmp_path)["spaces"][""]
    assert (entry["index"] == base) == (kind == "flat")
    loaded = FaissBackend(tmp_path, DIM, cfg)
    assert loaded.count() == b.count() == 2050 - 5
    assert _answers(loaded) == _answers(b)
    if kind == "hnsw":  # logged writes replay into the very same graph
        assert _graph(loaded) == _graph(b)
    assert loaded.ids() == b.ids()
    got = loaded.search(_vecs(1, 77)[0], 1)
    assert got[0][0] == "p2005" and got[0][1] == pytest.approx(1.0, abs=1e-5)


def test_a_commit_writes_kilobytes_not_the_index(tmp_path):
    b = FaissBackend(tmp_path, DIM)
    _put(b, 0, 3000, 1)
    b.persist()
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    _put(b, 3000, 3, 2)
    b.persist()
    after = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    written = {n for n, t in after.items() if before.get(n) != t} - {"faiss.json"}
    assert len(written) == 2 and all(".log." in n for n in written), written
    assert sum((tmp_path / n).stat().st_size for n in written) < 4096


def test_logs_are_folded_into_a_new_whole_copy_past_a_tenth_or_sixty_four(tmp_path):
    b = FaissBackend(tmp_path, DIM)
    _put(b, 0, 6000, 1)
    b.persist()
    _put(b, 6000, 700, 2)  # past max(512, 10% of 6000): written whole
    b.persist()
    entry = _manifest(tmp_path)["spaces"][""]
    assert entry["logs"] == [] and entry["count"] == 6700
    for c in range(64):
        _put(b, 7000 + c, 1, 100 + c)
        b.persist()
    assert len(_manifest(tmp_path)["spaces"][""]["logs"]) == 64
    _put(b, 8000, 1, 200)
    b.persist()
    entry = _manifest(tmp_path)["spaces"][""]
    assert len(entry["logs"]) == 0 and entry["count"] == 6765  # the 65th write folded them
    names = {p.name for p in tmp_path.iterdir()}
    assert len([n for n in names if n.endswith(".index")]) == 1
    assert not any(".log." in n for n in names)
    assert _answers(FaissBackend(tmp_path, DIM)) == _answers(b)


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_a_reader_follows_by_reading_only_the_new_logs(tmp_path, kind):
    cfg = FaissConfig(index=kind)
    w = FaissBackend(tmp_path, DIM, cfg)
    _put(w, 0, 1500, 1)
    w.persist()
    r = FaissBackend(tmp_path, DIM, cfg)
    index = r.raw_index()
    for c in range(3):
        _put(w, 1500 + c * 5, 5, 20 + c)
        w.delete([f"p{c}"])
        w.persist()
    assert r.follow() is True
    assert r.raw_index() is index  # caught up in place, not loaded again
    assert _answers(r) == _answers(w) == _answers(FaissBackend(tmp_path, DIM, cfg))
    if kind == "hnsw":
        assert _graph(r) == _graph(w)
    assert r.follow() is True  # nothing new: nothing to do
    _put(w, 5000, 900, 5)  # a new whole copy: the reader must open anew
    w.persist()
    before = _answers(r)
    assert r.follow() is False
    assert _answers(r) == before  # and it was left as it was


def test_a_reader_refuses_a_damaged_log_and_is_left_unchanged(tmp_path):
    w = FaissBackend(tmp_path, DIM)
    _put(w, 0, 600, 1)
    w.persist()
    r = FaissBackend(tmp_path, DIM)
    before = _answers(r)
    _put(w, 600, 4, 2)
    w.persist()
    log = tmp_path / _manifest(tmp_path)["spaces"][""]["logs"][-1]["vectors"]
    raw = bytearray(log.read_bytes())
    raw[-3] ^= 0xFF
    log.write_bytes(bytes(raw))
    with pytest.raises(CorruptStoreError):
        r.follow()
    assert _answers(r) == before and r.count() == 600
    with pytest.raises(CorruptStoreError):
        FaissBackend(tmp_path, DIM)


def test_namespaces_log_apart(tmp_path):
    b = FaissBackend(tmp_path, DIM)
    _put(b, 0, 800, 1, ns="a")
    _put(b, 0, 800, 2, ns="b")
    b.persist()
    first = _manifest(tmp_path)["spaces"]
    _put(b, 800, 2, 3, ns="b")
    b.persist()
    now = _manifest(tmp_path)["spaces"]
    assert now["a"] == first["a"]  # untouched: same files, no log
    assert now["b"]["index"] == first["b"]["index"] and len(now["b"]["logs"]) == 1
    loaded = FaissBackend(tmp_path, DIM)
    assert loaded.count(namespace="a") == 800 and loaded.count(namespace="b") == 802
    assert _answers(loaded, "b") == _answers(b, "b")


def test_a_store_reader_keeps_its_vector_index_across_small_commits(tmp_path):
    from pensive_core import Document, Pensive

    cfg = {"embedder": {"name": "hash", "dim": 64}}
    docs = [
        Document(id=f"d{i}", text=f"note {i} about topic {i % 7} and item {i}") for i in range(300)
    ]
    with Pensive(tmp_path / "s", config=cfg) as w:
        w.ingest(docs)
        with Pensive(tmp_path / "s", config=cfg, read_only=True) as r:
            r.query("topic 3", k=3)
            index = r.components.backend.raw_index()
            w.ingest([Document(id="new", text="a lighthouse keeper on topic 3")])
            w.delete("d5")
            got = r.query("lighthouse keeper topic 3", k=5)
            assert r.components.backend.raw_index() is index
            assert got.hits[0].doc_id == "new"
            assert "d5" not in {h.doc_id for h in r.query("note 5 about topic 5", k=10).hits}
            with Pensive(tmp_path / "s", config=cfg, read_only=True) as fresh:
                want = fresh.query("note 17 topic 3 item", k=8)
            assert [h.chunk_id for h in r.query("note 17 topic 3 item", k=8).hits] == [
                h.chunk_id for h in want.hits
            ]


def test_a_store_reader_that_met_a_damaged_log_keeps_refusing_not_answering_without_vectors(
    tmp_path,
):
    """A reader whose catch-up met a damaged log must not go on answering from BM25 alone
    (its vector index dropped, the commit marked as seen): every query refuses until the
    file is repaired, and the reader then follows again."""
    from pensive_core import Document, Pensive

    cfg = {"embedder": {"name": "hash", "dim": 64}}
    docs = [Document(id=f"d{i}", text=f"note {i} about topic {i % 7}") for i in range(50)]
    with Pensive(tmp_path / "s", config=cfg) as w:
        w.ingest(docs)
        with Pensive(tmp_path / "s", config=cfg, read_only=True) as r:
            r.query("topic 3", k=3)
            w.ingest([Document(id="new", text="zebra stripes on the savanna")])
            folder = tmp_path / "s" / "vectors"
            log = folder / _manifest(folder)["spaces"][""]["logs"][-1]["vectors"]
            good = log.read_bytes()
            raw = bytearray(good)
            raw[-3] ^= 0xFF
            log.write_bytes(bytes(raw))
            for _ in range(2):  # the second query must not pass for a caught-up reader
                with pytest.raises(CorruptStoreError):
                    r.query("zebra stripes savanna", k=3)
            log.write_bytes(good)  # repaired: the reader follows again, dense included
            hit = r.query("zebra stripes savanna", k=3).hits[0]
            assert hit.doc_id == "new" and "dense" in hit.sources


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_closing_writes_an_hnsw_index_whole_so_the_next_open_replays_nothing(tmp_path, kind):
    cfg = FaissConfig(index=kind)
    b = FaissBackend(tmp_path, DIM, cfg)
    _put(b, 0, 2000, 1)
    b.persist()
    base = _manifest(tmp_path)["spaces"][""]["index"]
    for c in range(3):
        _put(b, 2000 + 10 * c, 10, 10 + c)
        b.persist()
    want, graph = _answers(b), _graph(b)
    b.close()
    entry = _manifest(tmp_path)["spaces"][""]
    if kind == "hnsw":  # adding logged vectors to a graph is slow: folded in at close
        assert entry["logs"] == [] and entry["index"] != base
    else:  # a flat index replays its logs in no time: left as they are
        assert len(entry["logs"]) == 3 and entry["index"] == base
    loaded = FaissBackend(tmp_path, DIM, cfg)
    assert _answers(loaded) == want and _graph(loaded) == graph
    assert loaded.count() == 2030
    assert not any(
        p.name.endswith(".index") and p.name != entry["index"] for p in tmp_path.iterdir()
    )
    before = _manifest(tmp_path)
    loaded.close()  # nothing logged since it loaded: nothing written
    assert _manifest(tmp_path) == before


def test_a_full_disk_at_close_keeps_the_logged_index_and_close_succeeds(tmp_path, monkeypatch):
    cfg = FaissConfig(index="hnsw")
    b = FaissBackend(tmp_path, DIM, cfg)
    _put(b, 0, 2000, 1)
    b.persist()
    _put(b, 2000, 10, 2)
    b.persist()
    before, want = _manifest(tmp_path), _answers(b)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(FaissBackend, "_write_base", full)
    b.close()  # folding the logs in is only a speed-up: nothing raised, nothing changed
    assert _manifest(tmp_path) == before
    monkeypatch.undo()
    assert _answers(FaissBackend(tmp_path, DIM, cfg)) == want
