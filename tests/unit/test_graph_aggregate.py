"""Aggregation questions: recognised, resolved to graph entities, counted exactly."""

from datetime import datetime, timezone

import pytest

from pensive_core import Document, Pensive
from pensive_core.graph import is_aggregation, parse_aggregation
from pensive_core.tokenize import Tokenizer
from tests.conftest import HASH_CONFIG

GRAPH = {**HASH_CONFIG, "graph": {"enabled": True}}


def day(n):
    return datetime(2024, 5, n, tzinfo=timezone.utc)


# a diary: Caroline goes to Lisbon three times, once to Porto; her dog comes up twice
DIARY = [
    ("d1", 3, "Caroline flew to Lisbon for the design conference."),
    ("d2", 1, "Caroline walked her dog along the river before work."),
    ("d3", 7, "Back in Lisbon, Caroline met the printers about the new posters."),
    ("d4", 5, "Melanie painted the kitchen; nobody went anywhere."),
    ("d5", 9, "Caroline took the dog to Porto, then on to Lisbon by train."),
    ("d6", 11, "Melanie asked Caroline about Lisbon, and Caroline said Lisbon again."),
]
DOCS = [Document(id=i, text=t, timestamp=day(d), metadata={"n": d}) for i, d, t in DIARY]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("How many times did Caroline go to Lisbon?", True),
        ("how often does Melanie paint?", True),
        ("List every time the dog was mentioned", True),
        ("Show me all mentions of Porto.", True),
        ("What is the number of times Bob called?", True),
        ("Where did Caroline go in May?", False),
        ("How many people live in Lisbon?", False),
        ("List the capitals of Europe", False),
    ],
)
def test_is_aggregation(text, expected):
    assert is_aggregation(text) is expected


def test_parse_takes_longest_names_and_keeps_other_words_as_terms():
    known = {"caroline", "lisbon", "new york", "york"}.__contains__
    words = Tokenizer("english", "en")
    ask = parse_aggregation("How many times did Caroline visit New York?", known, words.tokenize)
    assert ask is not None
    assert ask.entities == ("new york", "caroline")
    assert ask.terms == ("visit",)
    assert parse_aggregation("How many times did Zed go?", known, words.tokenize) is None
    assert parse_aggregation("Where is Lisbon?", known, words.tokenize) is None


def test_an_aggregation_question_is_counted_from_the_graph(tmp_path):
    with Pensive(tmp_path, config=GRAPH) as p:
        p.ingest(DOCS)
        res = p.query("How many times did Caroline go to Lisbon?", k=2)
        dog = p.query("List every time Caroline's dog was mentioned", k=1)
        plain = p.query("Where did Caroline go?", k=2)
    agg = res.aggregation
    assert agg is not None and agg.entities == ("caroline", "lisbon") and agg.terms == ()
    # d1, d3, d5, d6 name both; d6 names Lisbon twice and Caroline twice
    assert agg.count == 4 and agg.documents == 4 and not agg.truncated
    assert agg.mentions == 2 + 2 + 2 + 4
    assert [h.doc_id for h in res.hits] == ["d1", "d3", "d5", "d6"]  # all of them, oldest first
    assert [h.sources["graph"] for h in res.hits] == [1, 2, 3, 4]
    assert dog.aggregation is not None and dog.aggregation.terms == ("dog",)
    assert [h.doc_id for h in dog.hits] == ["d2", "d5"]  # "dog" is a word, not an entity
    assert plain.aggregation is None and len(plain.hits) == 2  # other questions: top k


def test_aggregation_respects_filters_as_of_and_the_limit(tmp_path):
    cfg = {**HASH_CONFIG, "graph": {"enabled": True, "aggregate_limit": 2}}
    q = "How many times did Caroline go to Lisbon?"
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest(DOCS)
        limited = p.query(q)
        filtered = p.query(q, filters={"n": {"$gte": 5}})
        early = p.query(q, as_of=day(8))
    assert limited.aggregation.count == 4 and limited.aggregation.truncated
    assert [h.doc_id for h in limited.hits] == ["d1", "d3"]
    assert filtered.aggregation.count == 3
    assert early.aggregation.count == 2


def test_aggregation_follows_deletes_and_can_be_switched_off(tmp_path):
    q = "How many times did Caroline go to Lisbon?"
    with Pensive(tmp_path, config=GRAPH) as p:
        p.ingest(DOCS)
        p.delete("d3")
        assert p.query(q).aggregation.count == 3
    off = {**HASH_CONFIG, "graph": {"enabled": True, "aggregate": False}}
    with Pensive(tmp_path, config=off) as p:
        res = p.query(q, k=2)
    assert res.aggregation is None and len(res.hits) == 2


# Written before the fix (issue 25): four visits, each sentence opened differently; a fifth
# names only Lisbon, a sixth names another Caroline-free trip.
OPENED = [
    ("v1", 2, "In June Caroline went to Lisbon with her sister."),
    ("v2", 4, "Over Christmas Caroline visited Lisbon again."),
    ("v3", 6, "Caroline flew to Lisbon for a conference."),
    ("v4", 8, "Hey Mel, guess what: Last weekend Caroline was back in Lisbon!"),
    ("v5", 10, "Lisbon was rainy all week, Mel said."),
    ("v6", 12, "In July Melanie went to Porto."),
]


def test_aggregation_counts_every_sentence_whatever_opens_it(tmp_path):
    docs = [Document(id=i, text=t, timestamp=day(d)) for i, d, t in OPENED]
    with Pensive(tmp_path, config=GRAPH) as p:
        p.ingest(docs)
        res = p.query("How many times did Caroline go to Lisbon?")
        porto = p.query("How many times did Melanie go to Porto?")
    assert res.aggregation is not None and res.aggregation.count == 4
    assert [h.doc_id for h in res.hits] == ["v1", "v2", "v3", "v4"]
    assert porto.aggregation is not None and porto.aggregation.count == 1


def test_an_opener_the_extractor_keeps_still_counts(tmp_path):
    # "Surprisingly" is no word the extractor knows opens a sentence: the name it makes,
    # "Surprisingly Caroline", ends with Caroline and is counted as hers
    docs = [
        Document(id="a", text="Surprisingly Caroline went to Lisbon.", timestamp=day(1)),
        Document(id="b", text="Caroline loved Lisbon.", timestamp=day(2)),
        Document(id="c", text="Caroline Bell went to Lisbon.", timestamp=day(3)),
    ]
    with Pensive(tmp_path, config=GRAPH) as p:
        p.ingest(docs)
        res = p.query("How many times did Caroline go to Lisbon?")
    # "Caroline Bell" may be someone else: a longer name only counts when it ends with hers
    assert [h.doc_id for h in res.hits] == ["a", "b"] and res.aggregation.count == 2
