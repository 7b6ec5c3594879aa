"""Moving a store's vectors to another backend: counts verified, nothing re-embedded, nothing
lost on failure, readers and the CLI follow."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pensive_core import BackendError, ConfigError, Pensive
from pensive_core.backends.memory import MemoryBackend
from pensive_core.cli import app
from tests.conftest import HASH_CONFIG, docs_corpus

Q = "Was invoice INV-4471 paid?"


@pytest.fixture
def built(tmp_path):
    folder = tmp_path / "store"
    with Pensive(folder, config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())
    return folder


def test_move_to_memory_and_back_to_faiss_with_options(built):
    with Pensive(built) as p:
        before = [h.chunk_id for h in p.query(Q, k=3).hits]
        report = p.reindex("memory")
        assert report["from"] == "faiss" and report["to"] == "memory" and report["vectors"] == 8
        assert [h.chunk_id for h in p.query(Q, k=3).hits] == before
        p.reindex("faiss", {"index": "hnsw"})
        assert p.stats()["index"] == "hnsw" and p.stats()["vectors"] == 8
        assert [h.chunk_id for h in p.query(Q, k=3).hits] == before
    with Pensive(built) as p:
        assert p.config.backend.faiss.index == "hnsw" and p.stats()["vectors"] == 8


def test_cache_is_emptied_by_a_move(built):
    with Pensive(built) as p:
        p.query(Q, k=3)
        assert p.query(Q, k=3).tier == "L1"
        p.reindex("memory")
        assert p.query(Q, k=3).tier != "L1"


class ShortCounting(MemoryBackend):
    """A backend that loses one vector (as an eventually consistent service might report)."""

    def count(self, *, namespace=""):
        return max(0, super().count(namespace=namespace) - 1)


def test_failed_verification_leaves_the_store_as_it_was(built):
    with Pensive(built) as p:
        before = [h.chunk_id for h in p.query(Q, k=3).hits]
        with pytest.raises(BackendError, match="holds 7 vectors.*expected 8"):
            p.reindex("tests.unit.test_reindex:ShortCounting", verify_timeout_s=0)
        assert p.stats()["backend"] == "faiss" and p.stats()["vectors"] == 8
        assert [h.chunk_id for h in p.query(Q, k=3).hits] == before
    assert sorted(f.name for f in built.iterdir() if f.name.startswith("vectors")) == ["vectors"]
    with Pensive(built) as p:
        assert p.stats()["backend"] == "faiss"


def test_bad_target_is_a_config_error(built):
    with Pensive(built) as p:
        with pytest.raises(ConfigError, match="unknown"):
            p.reindex("nosuchbackend")
        with pytest.raises(ConfigError):
            p.reindex("faiss", {"index": "pyramid"})
        with pytest.raises(ConfigError):
            p.reindex("memory", namespace="bad namespace")
        assert p.stats()["backend"] == "faiss"


def test_missing_vectors_are_embedded_once(built):
    with Pensive(built) as p:
        gone = [h.chunk_id for h in p.query("arctic tern", k=1).hits]
        p.components.backend.delete(gone)  # as if the old index lost them
        report = p.reindex("memory")
        assert report["embedded"] == 1 and p.stats()["vectors"] == 8


def test_reader_follows_the_writer_to_the_new_backend(built):
    with Pensive(built) as writer, Pensive(built, read_only=True) as reader:
        want = [h.chunk_id for h in reader.query(Q, k=3).hits]
        writer.reindex("memory")
        assert [h.chunk_id for h in reader.query(Q, k=3).hits] == want
        assert reader.config.backend.name == "memory"


def test_cli_reindex(built):
    runner = CliRunner()
    res = runner.invoke(app, ["reindex", "--to", "memory", "--store", str(built)])
    assert res.exit_code == 0, res.output
    assert "moved 8 vectors from faiss to memory" in res.output
    res = runner.invoke(
        app, ["reindex", "--to", "faiss", "--store", str(built), "--set", "index=flat"]
    )
    assert res.exit_code == 0, res.output
    with Pensive(built) as p:
        assert p.stats()["backend"] == "faiss" and p.config.backend.faiss.index == "flat"


class DirtyWatching(MemoryBackend):
    """Records whether the store was marked as changing while vectors were copied into it."""

    seen: list[bool] = []
    archive = None

    def upsert(self, ids, vectors, metadata, *, namespace=""):
        DirtyWatching.seen.append(DirtyWatching.archive.is_dirty())
        return super().upsert(ids, vectors, metadata, namespace=namespace)


def test_a_move_marks_the_store_changing_until_it_commits(built):
    with Pensive(built) as p:
        DirtyWatching.archive = p.components.archive
        DirtyWatching.seen = []
        p.reindex("tests.unit.test_reindex:DirtyWatching")
        assert DirtyWatching.seen and all(DirtyWatching.seen)  # a kill here reconciles on open
        assert not p.components.archive.is_dirty()  # and the commit cleared it
