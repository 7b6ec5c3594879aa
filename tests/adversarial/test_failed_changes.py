"""A change that fails part way leaves nothing half done: no passage of it is searchable, the
archive keeps what it wrote as pending, and the change is finished from the archive before the
next one (or when the store next opens for writing). The caller is told which.

Failures are injected through public plug points: an embedder that fails on its nth batch, a
vector backend (``module:Class``) that fails on an upsert, a listener of the commit point."""

from __future__ import annotations

import numpy as np
import pytest

from pensive_core import Document, Pensive, hooks
from pensive_core.backends.memory import MemoryBackend
from pensive_core.embedders.hash import HashEmbedder

pytestmark = pytest.mark.adversarial

CFG = {"embedder": {"name": "hash", "dim": 64}, "backend": {"name": "memory"}}


def docs(prefix: str, n: int, word: str = "lantern") -> list[Document]:
    return [
        Document(id=f"{prefix}{i}", text=f"The {word} number {prefix}{i} hangs by the north door.")
        for i in range(n)
    ]


class FailingEmbedder(HashEmbedder):
    """The hash embedder, failing on its ``fail_on``-th batch of passages."""

    def __init__(self, fail_on: int) -> None:
        super().__init__(dim=64)
        self.fail_on = fail_on
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("the model ran out of memory")
        return super().embed(texts)


def counts(p: Pensive) -> tuple[int, int, int, int]:
    s = p.stats(disk=False)
    return s["documents"], s["chunks"], s["vectors"], len(p.components.sparse.ids())


def searchable(p: Pensive, word: str) -> set[str]:
    return {h.doc_id for h in p.query(word, k=50).hits if word in h.text}


def test_a_batch_failing_in_the_model_leaves_no_passage_searchable(tmp_path):
    with Pensive(tmp_path, config=CFG) as p:
        p.ingest(docs("a", 3))
        before = counts(p)
    embedder = FailingEmbedder(fail_on=2)  # the first batch embeds, the second fails
    with Pensive(tmp_path, config=CFG, embedder=embedder) as p:
        with pytest.raises(RuntimeError, match="out of memory") as info:
            p.ingest(docs("b", 300, word="compass"))  # two batches of 256 and 44
        assert "was not committed" in "\n".join(info.value.__notes__)
        assert "pending" in "\n".join(info.value.__notes__)
        # nothing of the failed call is searchable, not even its first (embedded) batch
        assert searchable(p, "compass") == set()
        assert counts(p)[2:] == before[2:]  # vectors and BM25 as of the last commit
        assert searchable(p, "lantern") == {"a0", "a1", "a2"}
        # the next change finishes it from the archive first
        p.ingest(docs("c", 1, word="anchor"))
        for i in (0, 255, 256, 299):  # each batch of the failed call, first and last
            assert p.query(f"compass number b{i}", k=1).hits[0].doc_id == f"b{i}"
        n_docs, n_chunks, n_vectors, n_sparse = counts(p)
        assert n_docs == 304 and n_chunks == n_vectors == n_sparse == 304
        assert p.components.archive.unindexed() == []


def test_closing_after_a_failure_commits_nothing_and_reopening_finishes_it(tmp_path):
    with Pensive(tmp_path, config=CFG) as p:
        p.ingest(docs("a", 2))
    p = Pensive(tmp_path, config=CFG, embedder=FailingEmbedder(fail_on=1))
    with pytest.raises(RuntimeError):
        p.ingest(docs("b", 5, word="compass"))
    p.close()  # the half-done change is not marked indexed
    with Pensive(tmp_path, config=CFG) as again:  # recovery re-indexes it from the archive
        assert searchable(again, "compass") == {f"b{i}" for i in range(5)}
        n_docs, n_chunks, n_vectors, n_sparse = counts(again)
        assert (n_docs, n_chunks) == (7, 7) and n_vectors == n_sparse == 7
        assert again.components.archive.unindexed() == []


class FailingBackend(MemoryBackend):
    """The memory backend, failing on the second upsert (a remote service going away)."""

    upserts = 0

    def upsert(self, ids, vectors, metadata=None, *, namespace=""):
        type(self).upserts += 1
        if type(self).upserts == 2:
            raise ConnectionError("the vector service went away")
        return super().upsert(ids, vectors, metadata, namespace=namespace)


def test_a_backend_failing_mid_change_leaves_counts_level(tmp_path):
    FailingBackend.upserts = 0
    cfg = {**CFG, "backend": {"name": "tests.adversarial.test_failed_changes:FailingBackend"}}
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest(docs("a", 3))
        before = counts(p)
        with pytest.raises(ConnectionError):
            p.ingest(docs("b", 2, word="compass"))
        assert counts(p)[2:] == before[2:]
        assert searchable(p, "compass") == set()
        p.ingest(docs("c", 1, word="anchor"))  # the service is back: both changes land
        assert searchable(p, "compass") == {"b0", "b1"}
        n_docs, n_chunks, n_vectors, n_sparse = counts(p)
        assert n_docs == n_chunks == n_vectors == n_sparse == 6


def test_a_commit_failing_part_way_is_finished_before_the_next_change(tmp_path):
    with Pensive(tmp_path, config=CFG) as p:
        p.ingest(docs("a", 2))

        def fail(point, event):
            if point == "commit" and event == "enter":
                raise OSError(28, "No space left on device")

        remove = hooks.add_listener(fail)
        try:
            with pytest.raises(OSError, match="No space"):
                p.ingest(docs("b", 2, word="compass"))
        finally:
            remove()
        assert searchable(p, "compass") == set()
        p.delete("a0")  # the next change: the failed one is finished first
        assert searchable(p, "compass") == {"b0", "b1"}
        assert counts(p) == (3, 3, 3, 3)


def test_a_replacement_that_fails_keeps_the_old_version_until_it_is_finished(tmp_path):
    with Pensive(tmp_path, config=CFG) as p:
        p.ingest([Document(id="d", text="The lantern hangs by the north door.")])
    with Pensive(tmp_path, config=CFG, embedder=FailingEmbedder(fail_on=1)) as p:
        with pytest.raises(RuntimeError):
            p.ingest([Document(id="d", text="The compass lies in the south drawer.")])
        # the archive holds the new text (pending); no index holds half of either version
        assert p.get("d").text.startswith("The compass")
        vectors = p.components.backend.ids()
        assert vectors == p.components.sparse.ids()
    with Pensive(tmp_path, config=CFG) as p:
        assert searchable(p, "compass") == {"d"} and searchable(p, "lantern") == set()
        assert counts(p) == (1, 1, 1, 1)


def test_an_input_that_fails_mid_stream_keeps_the_batches_before_it(tmp_path):
    def stream():
        yield from docs("a", 300)
        raise ValueError("the caller's source broke")

    with Pensive(tmp_path, config=CFG) as p:
        with pytest.raises(ValueError, match="source broke"):
            p.ingest(stream())
        # the first batch (256) was whole and committed; the rest never arrived
        assert counts(p) == (256, 256, 256, 256)
        assert p.components.archive.unindexed() == []


def test_vectors_beyond_the_archive_are_reconciled_on_open(tmp_path):
    """A vector the archive does not list (left by a change cut short on a backend that
    persisted it) is removed when the store opens for writing, even with no dirty mark."""
    with Pensive(tmp_path, config=CFG) as p:
        p.ingest(docs("a", 3))
        backend = p.components.backend
        vec = np.ones((1, 64), dtype=np.float32) / 8.0
        backend.upsert(["ghost#1"], vec, [{"doc_id": "ghost"}])
        backend.persist()
    with Pensive(tmp_path, config=CFG) as p:
        assert "ghost#1" not in p.components.backend.ids()
        assert counts(p) == (3, 3, 3, 3)


def test_a_reader_never_finds_a_pending_document_even_in_the_archive(tmp_path):
    cfg = {"embedder": {"name": "hash", "dim": 64}}
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest(docs("a", 3))
    reader = Pensive(tmp_path, read_only=True)
    with Pensive(tmp_path, config=cfg, embedder=FailingEmbedder(fail_on=1)) as p:
        with pytest.raises(RuntimeError):
            p.ingest([Document(id="inv", text="Invoice INV-9090 was paid in full on Friday.")])
        # an exact identifier goes to the archive (L3): the pending document is not there yet
        res = reader.query("Was INV-9090 paid?", k=5)
        assert "inv" not in {h.doc_id for h in res.hits}
    reader.close()
    with Pensive(tmp_path, config=cfg) as p:  # finished on open: now it is found
        assert "inv" in {h.doc_id for h in p.query("Was INV-9090 paid?", k=5).hits}


def herons(p: Pensive) -> list[str]:
    res = p.query("grey heron sighting", k=20)
    return sorted(h.doc_id for h in res.hits if h.doc_id.startswith("heron"))


def heron(i: int) -> Document:
    return Document(id=f"heron{i}", text=f"Grey heron sighting number {i} on the marsh.")


def fillers() -> list[Document]:  # enough passages that one more is not a bulk change
    return [
        Document(id=f"n{i}", text=f"Field note {i} records tram lines in district {i}.")
        for i in range(120)
    ]


def interrupt_at(point: str):
    """A hook listener that interrupts the change on entering ``point``."""

    def listener(at, event):
        if at == point and event == "enter":
            raise KeyboardInterrupt

    return listener


def test_an_invalidation_that_fails_leaves_no_stale_answer(tmp_path):
    cfg = {"embedder": {"name": "hash", "dim": 256}}
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest([*fillers(), heron(0)])
        assert herons(p) == ["heron0"] and herons(p) == ["heron0"]  # now cached

        remove = hooks.add_listener(interrupt_at("l1-invalidate"))
        try:
            with pytest.raises(KeyboardInterrupt):
                p.ingest([heron(1)])
        finally:
            remove()
        p.ingest([Document(id="other", text="Unrelated bread ovens.")])
        assert herons(p) == ["heron0", "heron1"]
    reader = Pensive(tmp_path, read_only=True)
    assert herons(reader) == ["heron0", "heron1"]
    reader.close()


def test_reindex_after_a_failed_change_finishes_it_first(tmp_path):
    with Pensive(tmp_path, config=CFG) as p:
        p.ingest(docs("a", 2))
    with Pensive(tmp_path, config=CFG, embedder=FailingEmbedder(fail_on=1)) as p:
        with pytest.raises(RuntimeError):
            p.ingest(docs("b", 1, word="compass"))
        p.reindex("faiss")
        assert not p.components.archive.unindexed() and searchable(p, "compass") == {"b0"}
        assert counts(p) == (3, 3, 3, 3)


def test_a_time_limit_does_not_fail_an_ingest_in_its_cache_refresh(tmp_path):
    from pensive_core.deadline import within

    cfg = {"embedder": {"name": "hash", "dim": 64}}
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest([*fillers(), heron(0)])
        herons(p)
        with within(0.0):
            p.ingest([heron(1)])  # the refresh of the cached answer stops; the ingest stands
        assert herons(p) == ["heron0", "heron1"]


class Picky(HashEmbedder):
    """The hash embedder, refusing any passage that says 'poison' (a document the model
    cannot embed, however often it is asked)."""

    def __init__(self) -> None:
        super().__init__(dim=64)

    def embed(self, texts):
        if any("poison" in t for t in texts):
            raise ValueError("the model cannot embed this passage")
        return super().embed(texts)


def test_a_document_the_embedder_always_refuses_does_not_wedge_the_store(tmp_path):
    with Pensive(tmp_path, config=CFG) as p:
        p.ingest(docs("a", 2))
    with Pensive(tmp_path, config=CFG, embedder=Picky()) as p:
        with pytest.raises(ValueError):
            p.ingest([*docs("b", 2), Document(id="bad", text="A poison vial on the shelf.")])
        # the next change goes through: the refused one is set aside, the others indexed
        p.ingest(docs("c", 1, word="compass"))
        assert searchable(p, "compass") == {"c0"} and searchable(p, "lantern") >= {"b0", "b1"}
        assert p.components.archive.unindexed() == ["bad"]  # pending, never shown
        assert not [h for h in p.query("poison vial shelf", k=10).hits if h.doc_id == "bad"]
    with Pensive(tmp_path, config=CFG, embedder=Picky()) as p:  # opening for writing works
        p.ingest([Document(id="bad", text="A glass vial on the shelf.")])  # replaced: indexed
        assert searchable(p, "vial") == {"bad"} and not p.components.archive.unindexed()
        assert counts(p) == (6, 6, 6, 6)
        p.delete("bad")
        assert counts(p) == (5, 5, 5, 5)


def test_a_failure_after_the_commit_point_says_the_change_was_committed(tmp_path):
    with Pensive(tmp_path, config={"embedder": {"name": "hash", "dim": 64}}) as p:
        p.ingest(docs("a", 2))

        remove = hooks.add_listener(interrupt_at("l1-invalidate"))
        try:
            with pytest.raises(KeyboardInterrupt) as info:
                p.ingest(docs("b", 1, word="compass"))
        finally:
            remove()
        assert "was committed" in " ".join(info.value.__notes__)
        assert searchable(p, "compass") == {"b0"} and not p.components.archive.unindexed()


class FailingDeletes(MemoryBackend):
    """The memory backend, its deletes failing (a vector service that went away)."""

    fail = False

    def delete(self, ids, *, namespace=""):
        if FailingDeletes.fail:
            raise ConnectionError("the vector service went away")
        return super().delete(ids, namespace=namespace)


def failed_delete(p: Pensive, doc_id: str) -> None:
    """Delete ``doc_id`` with the backend's deletes failing (the caller sees the error)."""
    FailingDeletes.fail = True
    try:
        with pytest.raises(ConnectionError):
            p.delete(doc_id)
    finally:
        FailingDeletes.fail = False


def test_a_delete_that_fails_is_not_served_from_the_cache(tmp_path):
    cfg = {**CFG, "backend": {"name": "tests.adversarial.test_failed_changes:FailingDeletes"}}
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest([*docs("a", 3), Document(id="z", text="The zeppelin floats above the town.")])
        assert p.query("zeppelin floats", k=3).hits[0].doc_id == "z"  # cached
        failed_delete(p, "z")
        # the archive no longer has it: no tier shows it, the cache neither
        res = p.query("zeppelin floats", k=3)
        assert "z" not in {h.doc_id for h in res.hits}, res.tier
    with Pensive(tmp_path, config=cfg) as p:
        assert counts(p) == (3, 3, 3, 3)


def test_a_reader_elsewhere_stops_serving_the_cache_after_a_failed_delete(tmp_path):
    cfg = {**CFG, "backend": {"name": "tests.adversarial.test_failed_changes:FailingDeletes"}}
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest([*docs("a", 3), Document(id="z", text="The zeppelin floats above the town.")])
    reader = Pensive(tmp_path, read_only=True)
    with Pensive(tmp_path, config=cfg) as p:
        first = reader.query("zeppelin floats", k=3)
        assert first.hits[0].doc_id == "z"
        assert reader.query("zeppelin floats", k=3).tier == "L1"  # in the reader's memory
        failed_delete(p, "z")
        res = reader.query("zeppelin floats", k=3)
        assert res.tier != "L1" and "z" not in {h.doc_id for h in res.hits}
    reader.close()
