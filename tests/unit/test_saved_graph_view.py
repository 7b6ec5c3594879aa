"""The graph view of a commit is saved beside the store and read by the next process instead
of being built from the tables again (issue 29: first query in a new process)."""

from __future__ import annotations

import pytest

from pensive_core import Document, Pensive
from pensive_core.graph.saved import load_view
from tests.conftest import HASH_CONFIG, docs_corpus


def _views(store):
    return sorted((store / "views").glob("graph-view-*.npz"))


def _same(a, b):
    assert a.nodes == b.nodes and a.kinds == b.kinds
    assert (a.n_chunks, a.n_entities) == (b.n_chunks, b.n_entities)
    for name, m in a.edges.items():
        assert (m != b.edges[name]).nnz == 0, name
    assert (a.adjacency != b.adjacency).nnz == 0


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s"
    with Pensive(path, config=HASH_CONFIG) as p:
        p.ingest(docs_corpus())
    return path


def test_a_writer_saves_the_view_at_close_and_a_new_process_reads_it(store, monkeypatch):
    (saved,) = _views(store)
    with Pensive(store, read_only=True) as r:
        built = r.components.graph.load()

        def refuse():  # the tables are not read again
            raise AssertionError("the graph view was built from the tables")

        monkeypatch.setattr(r.components.graph, "load", refuse)
        res = r.query("Who became chief executive of Acme?", k=3)
        assert res.hits and res.hits[0].doc_id == "ceo"
        view = r.components.graph_views.state()[0]
    _same(view, built)
    _same(load_view(saved), built)


def test_a_commit_makes_a_new_view_and_the_old_one_goes(store):
    (before,) = _views(store)
    with Pensive(store, config=HASH_CONFIG) as p:
        p.ingest([Document(id="new", text="Maria Lopez joined Globex as chief engineer.")])
        fresh = p.components.graph.load()
    (after,) = _views(store)
    assert after != before and not before.exists()
    _same(load_view(after), fresh)
    assert "e:maria lopez" in load_view(after).nodes


def test_a_torn_view_is_ignored_and_built_again(store):
    (saved,) = _views(store)
    saved.write_bytes(saved.read_bytes()[: saved.stat().st_size // 2])
    assert load_view(saved) is None
    with Pensive(store, read_only=True) as r:
        assert r.query("Who became chief executive of Acme?", k=3).hits[0].doc_id == "ceo"
        _same(r.components.graph_views.state()[0], r.components.graph.load())
    (again,) = _views(store)
    assert load_view(again) is not None  # written whole again by the reader


def test_an_unwritable_place_only_costs_the_build(store):
    for f in _views(store):
        f.unlink()
    (store / "views").rmdir()
    (store / "views").write_text("not a folder")  # nothing can be saved there
    with Pensive(store, read_only=True) as r:
        assert r.query("Who became chief executive of Acme?", k=3).hits[0].doc_id == "ceo"
    with Pensive(store, config=HASH_CONFIG) as p:  # nor does a writer's close fail
        p.ingest([Document(id="new", text="Maria Lopez joined Globex as chief engineer.")])
    assert (store / "views").read_text() == "not a folder"
