"""The entity graph's tables: construction, incremental update, persistence, determinism."""

import sqlite3

import numpy as np
import pytest

from pensive_core.graph import RuleExtractor
from pensive_core.graph.store import EDGE_TYPES, GraphStore, subject_key

RULES = RuleExtractor()

DOCS = {
    "a": [
        ("a#1", 0, "Scott Derrickson directed Sinister for Blumhouse."),
        ("a#2", 1, "Derrickson was born in Denver in 1966."),
    ],
    "b": [("b#1", 0, "Ed Wood was born in Poughkeepsie in 1924. Wood directed Glen or Glenda.")],
    "c": [("c#1", 0, "Blumhouse produced Get Out in 2017.")],
}


def open_db(path):
    return sqlite3.connect(path, isolation_level=None)


@pytest.fixture
def graph(tmp_path):
    g = GraphStore(open_db(tmp_path / "g.sqlite"))
    for doc, chunks in DOCS.items():
        g.add_document(doc, chunks, RuleExtractor())
    return g


def test_construction(graph):
    counts = graph.counts()
    assert counts["chunks"] == 4
    ents = graph.entities_of(["a#1", "a#2"])
    assert {"scott derrickson", "sinister", "blumhouse"} <= set(ents["a#1"])
    assert "scott derrickson" in ents["a#2"]  # "Derrickson" merged across the document
    assert graph.chunks_of("blumhouse") == ["a#1", "c#1"]
    view = graph.load()
    row = view.index()
    e = view.edges
    assert e["mentions"][row["a#1"], row["e:blumhouse"]] == 1
    assert e["mentioned_in"][row["e:blumhouse"], row["c#1"]] == 1
    assert e["next"][row["a#1"], row["a#2"]] == 1 and e["prev"][row["a#2"], row["a#1"]] == 1
    assert e["next"][row["a#2"], row["a#1"]] == 0  # directional
    assert e["is_a"][row["e:blumhouse"], row["t:name"]] == 1
    assert e["co_occurs"][row["e:scott derrickson"], row["e:blumhouse"]] == 1
    assert set(view.edges) == set(EDGE_TYPES)
    assert view.adjacency.shape == (len(view.nodes), len(view.nodes))
    assert view.kinds[: view.n_chunks] == ["chunk"] * 4


def test_delete_and_replace_update_incrementally(graph):
    graph.remove_document("c")
    assert graph.chunks_of("blumhouse") == ["a#1"]
    assert graph.chunks_of("get out") == []  # an entity no passage mentions is gone
    assert "e:get out" not in graph.load().index()
    graph.add_document("a", [("a#9", 0, "Blumhouse hired Ed Wood.")], RuleExtractor())
    assert graph.chunks_of("scott derrickson") == []
    assert graph.chunks_of("ed wood") == ["a#9", "b#1"]
    assert graph.counts()["chunks"] == 2


def test_repeated_mentions_weigh_more(graph):
    graph.add_document("d", [("d#1", 0, "Denver, Denver and Denver again.")], RuleExtractor())
    view = graph.load()
    row = view.index()
    assert view.edges["mentions"][row["d#1"], row["e:denver"]] == 3


def test_persistence_and_determinism(graph, tmp_path):
    again = GraphStore(open_db(tmp_path / "g.sqlite"))
    a, b = graph.load(), again.load()
    assert a.nodes == b.nodes
    assert (a.adjacency != b.adjacency).nnz == 0
    np.testing.assert_array_equal(a.adjacency.indptr, b.adjacency.indptr)


def test_hub_passages_add_no_pairs(tmp_path):
    g = GraphStore(open_db(tmp_path / "h.sqlite"), max_pair_entities=3)
    text = "Alice Adams, Bob Brown, Carol Chen and Dan Diaz met."
    g.add_document("h", [("h#1", 0, text)], RuleExtractor())
    assert g.load().edges["co_occurs"].nnz == 0


@pytest.mark.parametrize(
    ("title", "key"),
    [
        ("Lilu (mythology)", "lilu"),
        ("Steve Johnson (American football, born 1956)", "steve johnson"),
        ("The Exies", "exies"),
        ("  ", ""),
        (None, ""),
        (42, ""),
    ],
)
def test_subject_key(title, key):
    assert subject_key(title) == key


def test_a_document_is_about_its_title(tmp_path):
    g = GraphStore(open_db(tmp_path / "g.sqlite"))
    g.add_document("film", [("f#1", 0, "Sinister was directed by Scott Derrickson.")], RULES)
    bio = [("b#1", 0, "He was born in Denver."), ("b#2", 1, "He studied in Los Angeles.")]
    g.add_document("bio", bio, RULES, subject="Scott Derrickson (director)")
    view = g.load()
    row = view.index()
    e = row["e:scott derrickson"]
    assert view.edges["about"][e, row["b#1"]] == 1 and view.edges["about"][e, row["b#2"]] == 1
    assert view.edges["subject"][row["b#2"], e] == 1
    assert view.edges["about"][e, row["f#1"]] == 0  # the film names him; it is not about him
    # the title alone keeps the entity alive; with the document gone, it goes too
    g.remove_document("film")
    assert "e:scott derrickson" in g.load().index()
    g.remove_document("bio")
    assert "e:scott derrickson" not in g.load().index()
    assert g.counts()["entities"] == 0


def test_drop_removes_every_graph_table(tmp_path):
    db = open_db(tmp_path / "g.sqlite")
    GraphStore(db).add_document("a", DOCS["a"], RULES, subject="A")
    GraphStore.drop(db)
    left = db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'graph_%'").fetchall()
    assert left == []
