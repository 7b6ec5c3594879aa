"""The metadata filter language, and filters applied by every tier of a store."""

from dataclasses import replace

import pytest

from pensive_core import Document, InputError, Pensive
from pensive_core.filters import And, Cmp, Or, canonical, matches, parse_filter, to_mongo
from tests.conftest import HASH_CONFIG, docs_corpus


def test_parse_shapes():
    assert parse_filter(None) is None and parse_filter({}) is None
    assert parse_filter({"a": 1}) == Cmp("a", "$eq", 1)
    assert parse_filter({"a": {"$in": ["x", "y"]}}) == Cmp("a", "$in", ("x", "y"))
    both = parse_filter({"a": 1, "b": {"$gt": 2, "$lt": 5}})
    assert isinstance(both, And) and len(both.parts) == 3
    assert parse_filter({"$or": [{"a": 1}]}) == Cmp("a", "$eq", 1)  # one part: no wrapper
    assert isinstance(parse_filter({"$or": [{"a": 1}, {"b": 2}]}), Or)
    assert to_mongo(parse_filter({"a": 1})) == {"a": {"$eq": 1}}
    assert canonical(parse_filter({"b": 2, "a": 1})) == canonical(parse_filter({"b": 2, "a": 1}))
    assert canonical(parse_filter({"a": 1})) != canonical(parse_filter({"a": "1"}))


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"a": {"$regex": "x"}}, "unknown operator"),
        ({"$not": {"a": 1}}, "unknown filter operator"),
        ({"bad-name": 1}, "not an identifier"),
        ({"a": {"$gt": "2020"}}, "compares numbers"),
        ({"a": {"$gt": True}}, "compares numbers"),
        ({"a": {"$in": []}}, "non-empty list"),
        ({"a": {"$in": "x"}}, "non-empty list"),
        ({"a": [1, 2]}, "strings, numbers or booleans"),
        ({"a": None}, "strings, numbers or booleans"),
        ({"a": float("nan")}, "must be finite"),
        ({"$and": []}, "non-empty list"),
        ({"a": {}}, "empty operator"),
        (["a"], "non-empty dict"),
    ],
)
def test_malformed_filters_name_the_fault(spec, message):
    with pytest.raises(InputError, match=message):
        parse_filter(spec)


def test_matching_semantics():
    m = {"n": 3, "f": 2.5, "s": "x", "b": True}
    assert matches(parse_filter({"n": 3.0}), m)  # numbers compare as numbers
    assert not matches(parse_filter({"b": 1}), m)  # a boolean is not a number
    assert not matches(parse_filter({"n": True}), m)
    assert not matches(parse_filter({"s": {"$gt": 1}}), m)
    assert not matches(parse_filter({"missing": {"$ne": "x"}}), m)  # absent fields never match
    assert not matches(parse_filter({"missing": {"$nin": ["x"]}}), m)
    assert matches(parse_filter({"$or": [{"missing": 1}, {"f": {"$lte": 2.5}}]}), m)


@pytest.fixture
def store(tmp_path):
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        docs = docs_corpus()
        years = {"q3": 2024, "q4": 2024, "inv": 2024, "inv2": 2023, "ceo": 2021}
        p.ingest(
            replace(
                d, metadata={**d.metadata, "year": years.get(d.id, 2020), "finance": d.id in years}
            )
            for d in docs
        )
        yield p


def test_every_hit_passes_the_filter(store):
    plain = store.query("Acme revenue billion", k=5)
    assert {h.doc_id for h in plain.hits[:2]} == {"q3", "q4"}
    only = store.query("Acme revenue billion", k=5, filters={"year": {"$lt": 2024}})
    assert only.hits and all(h.metadata["year"] < 2024 for h in only.hits)
    assert {"q3", "q4"}.isdisjoint(h.doc_id for h in only.hits)
    one = store.query("Acme revenue billion", k=5, filters={"doc_id": "q4"})
    assert [h.doc_id for h in one.hits] == ["q4"]
    assert store.query("Acme revenue", k=3, filters={"topic": "nothing"}).hits == []


def test_filtered_answers_are_cached_apart(store):
    f = {"finance": True}
    a = store.query("who disputes the shipping charges", k=3, filters=f)
    assert a.tier != "L1"
    b = store.query("who disputes the shipping charges", k=3, filters=f)
    assert b.tier == "L1" and [h.chunk_id for h in b.hits] == [h.chunk_id for h in a.hits]
    other = store.query("who disputes the shipping charges", k=3, filters={"finance": False})
    assert other.tier != "L1" and all(not h.metadata["finance"] for h in other.hits)
    assert store.query("who disputes the shipping charges", k=3).tier != "L1"


def test_metadata_change_moves_a_document_in_and_out_of_a_filter(store):
    q, f = "arctic tern migration", {"finance": True}
    assert all(h.doc_id != "bird" for h in store.query(q, k=3, filters=f).hits)
    bird = next(d for d in docs_corpus() if d.id == "bird")
    report = store.ingest([replace(bird, metadata={"topic": "bird", "finance": True})])
    assert report.chunks_embedded == 0  # same text: the vectors are kept, only metadata moves
    res = store.query(q, k=3, filters=f)
    assert res.tier != "L1" and res.hits[0].doc_id == "bird"
    assert "dense" in res.hits[0].sources  # the vector backend holds the new metadata too
    assert store.query(q, k=3, filters={"finance": False}).hits[0].doc_id != "bird"


def test_archive_tier_respects_the_filter(store):
    res = store.query("INV-4472", k=3)
    assert res.hits[0].doc_id == "inv2"
    filtered = store.query("INV-4472", k=3, filters={"year": 2024})
    assert all(h.doc_id != "inv2" for h in filtered.hits)


def test_bad_filter_is_an_input_error(store):
    with pytest.raises(InputError, match="unknown operator"):
        store.query("anything", filters={"year": {"$between": [1, 2]}})


def test_namespace_is_part_of_how_a_store_was_built(tmp_path):
    from pensive_core import ConfigError

    cfg = {**HASH_CONFIG, "backend": {"namespace": "tenant-a"}}
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest([Document(id="a", text="alpha beta gamma")])
        assert p.stats()["namespace"] == "tenant-a" and p.stats()["vectors"] == 1
    with pytest.raises(ConfigError, match="backend.namespace"):
        Pensive(tmp_path, config={"backend": {"namespace": "tenant-b"}})
    with pytest.raises(ConfigError):
        Pensive(tmp_path / "x", config={"backend": {"namespace": "has space"}})


def test_metadata_index_agrees_with_matches_on_random_records_and_filters():
    import random

    from pensive_core.filters import MetadataIndex

    rng = random.Random(7)
    values = ["a", "b", "c", 0, 1, 1.0, 2.5, -3, True, False, "1", [1], {"x": 1}]
    fields = ["f", "g", "h"]
    records = [{f: rng.choice(values) for f in fields if rng.random() < 0.7} for _ in range(300)]
    scalars = [v for v in values if not isinstance(v, (list, dict))]
    numbers = [v for v in scalars if isinstance(v, (int, float)) and not isinstance(v, bool)]

    def leaf():
        f, op = rng.choice(fields), rng.choice(["$eq", "$ne", "$in", "$nin", "$gt", "$lte"])
        if op in ("$in", "$nin"):
            return {f: {op: rng.sample(scalars, 3)}}
        return {f: {op: rng.choice(numbers if op in ("$gt", "$lte") else scalars)}}

    def tree(depth=0):
        if depth < 2 and rng.random() < 0.4:
            return {
                rng.choice(["$and", "$or"]): [tree(depth + 1) for _ in range(rng.randint(2, 3))]
            }
        return leaf()

    index = MetadataIndex(records)
    for _ in range(300):
        node = parse_filter(tree())
        want = [matches(node, r) for r in records]
        assert index.mask(node).tolist() == want, node
