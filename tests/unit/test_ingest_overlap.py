"""A batch's passages are embedded in a thread while the archive, BM25, the graph and the
statements take them (issue 29): the store ends the same as embedding first, and a failure on
either side abandons the change whole, with no thread left behind."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from pensive_core import Document, Pensive
from pensive_core.embedders.hash import HashEmbedder
from pensive_core.ingest import IngestPipeline
from pensive_core.ingest import pipeline as pipeline_module
from tests.conftest import HASH_CONFIG, docs_corpus


class Recording(HashEmbedder):
    """Which thread embedded each call."""

    def __init__(self) -> None:
        super().__init__(dim=256)
        self.threads: list[str] = []
        self.fail = False

    def embed(self, texts):
        self.threads.append(threading.current_thread().name)
        if self.fail:
            raise RuntimeError("the model ran out of memory")
        return super().embed(texts)


def _embed_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("pensive-embed")]


def _state(p: Pensive) -> tuple:
    comps = p.components
    ids = sorted(c for cs in comps.archive.indexed_documents().values() for c in cs)
    vecs = comps.backend.fetch(ids)
    return (
        ids,
        {i: np.round(np.asarray(v), 6).tolist() for i, v in vecs.items()},
        [h.chunk_id for h in p.query("Who runs Acme?", k=5).hits],
        comps.graph.counts(),
        comps.temporal.counts(),
    )


@pytest.mark.parametrize("overlap", [True, False])
def test_the_store_ends_the_same_either_way(tmp_path, monkeypatch, overlap):
    monkeypatch.setattr(IngestPipeline, "overlap_embedding", overlap)
    emb = Recording()
    with Pensive(tmp_path / "s", config=HASH_CONFIG, embedder=emb) as p:
        rep = p.ingest(docs_corpus())
        assert rep.chunks_embedded > 0 and rep.stages["embedding"] > 0
        got = _state(p)
    assert all(t.startswith("pensive-embed") == overlap for t in emb.threads)
    with Pensive(tmp_path / "ref", config=HASH_CONFIG) as ref:
        monkeypatch.setattr(IngestPipeline, "overlap_embedding", not overlap)
        ref.ingest(docs_corpus())
        assert _state(ref) == got
    assert not _embed_threads()


def test_a_failed_embedding_abandons_the_change_after_the_other_stages(tmp_path):
    emb = Recording()
    path = tmp_path / "s"
    with Pensive(path, config=HASH_CONFIG, embedder=emb) as p:
        p.ingest(docs_corpus()[:3])
        before = _state(p)
        emb.fail = True
        with pytest.raises(RuntimeError, match="out of memory"):
            p.ingest([Document(id="new", text="Initech hired Jane Roe as treasurer in 2023.")])
        assert not _embed_threads()
        emb.fail = False
    with Pensive(path, config=HASH_CONFIG, embedder=emb) as p:  # recovery finishes it
        assert p.get("new").text.startswith("Initech")
        assert p.query("Who did Initech hire as treasurer?", k=1).hits[0].doc_id == "new"
        assert _state(p)[0] != before[0]


def test_a_stage_failing_beside_the_embedding_waits_for_it(tmp_path, monkeypatch):
    emb = Recording()
    started = threading.Event()
    real_embed = emb.embed

    def slow(texts):
        started.set()
        threading.Event().wait(0.3)
        return real_embed(texts)

    emb.embed = slow

    def broken_derive(*a, **k):
        assert started.wait(10)
        raise OSError(28, "No space left on device")

    path = tmp_path / "s"
    with Pensive(path, config=HASH_CONFIG, embedder=emb) as p:
        p.ingest(docs_corpus()[:2])
        monkeypatch.setattr(pipeline_module, "derive", broken_derive)
        with pytest.raises(Exception, match="No space left"):
            p.ingest([Document(id="late", text="Globex moved its offices to Lyon in 2022.")])
        assert not _embed_threads()  # the embedding finished before the error went up
        monkeypatch.undo()
    with Pensive(path, config=HASH_CONFIG) as p:
        assert p.query("Where did Globex move?", k=1).hits[0].doc_id == "late"
