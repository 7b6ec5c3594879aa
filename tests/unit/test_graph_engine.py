"""The entity graph inside a store: built at ingest, kept level, used at query time."""

from dataclasses import replace

from pensive_core import Document, Pensive
from tests.conftest import HASH_CONFIG

GRAPH = {**HASH_CONFIG, "graph": {"enabled": True}}

DOCS = [
    Document(id="film", text="Sinister is a 2012 horror film directed by Scott Derrickson."),
    Document(id="bio", text="Scott Derrickson grew up in Denver, Colorado."),
    *[
        Document(id=f"d{i}", text=f"{name} was born in the city of {city}, where {name} lived.")
        for i, (name, city) in enumerate(
            [("Ada Park", "Leeds"), ("Bo Chen", "Lyon"), ("Cy Dunn", "Porto"), ("Di Eve", "Graz")]
        )
    ],
]
Q = "In which city was the director of Sinister born?"


def graph_list(p):
    _, lists, _ = p._retrieve(Q, {})
    return [c.split("#")[0] for c, _ in lists.get("graph", [])], lists


def test_two_hop_passage_is_reached_by_the_graph_alone(tmp_path):
    # the bridge entity (Scott Derrickson) is never named in the question
    with Pensive(tmp_path, config=GRAPH) as p:
        p.ingest(DOCS)
        graph, lists = graph_list(p)
        res = p.query(Q, k=6)
    assert graph[:2] == ["film", "bio"]
    assert "bio" not in [c.split("#")[0] for c, _ in lists["bm25"]]
    assert [c.split("#")[0] for c, _ in lists["dense"]][-1] == "bio"
    bio = next(h for h in res.hits if h.doc_id == "bio")
    assert bio.sources["graph"] == 2


def test_graph_follows_replace_and_delete(tmp_path):
    with Pensive(tmp_path, config=GRAPH) as p:
        p.ingest(DOCS)
        assert p._graph.chunks_of("scott derrickson")
        p.ingest([replace(DOCS[1], text="Jane Roe grew up in Denver, Colorado.")])
        assert len(p._graph.chunks_of("scott derrickson")) == 1
        p.delete("film")
        assert p._graph.chunks_of("scott derrickson") == []
        assert p._graph.chunks_of("sinister") == []


def test_enabling_the_graph_later_builds_it_from_the_archive(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(DOCS)
    with Pensive(tmp_path, config={"graph": {"enabled": True}}) as p:
        assert p._graph.counts()["chunks"] == len(DOCS)
        assert graph_list(p)[0][:2] == ["film", "bio"]


def test_graph_answers_respect_filters(tmp_path):
    with Pensive(tmp_path, config=GRAPH) as p:
        p.ingest(DOCS)
        res = p.query(Q, k=3, filters={"doc_id": {"$ne": "bio"}})
        assert "bio" not in [h.doc_id for h in res.hits]
