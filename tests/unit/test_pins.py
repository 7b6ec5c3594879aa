"""Pins and @-mentions: documents forced into a query's result (pensive_core.query.pins)."""

from __future__ import annotations

import pytest

from pensive_core import Document, InputError, NotFoundError, Pensive
from pensive_core.query.pins import find_mentions
from tests.conftest import HASH_CONFIG, docs_corpus

TERN = Document(
    id="tern-guide",
    text="The arctic tern is a seabird. It breeds in the Arctic.",
    metadata={"title": "Arctic Tern Field Guide"},
)
# a long document whose matching passage is far from its head
LONG = Document(
    id="manual",
    text="\n\n".join(
        [f"Section {i}. The pump model P{i} runs on ordinary mains power." for i in range(30)]
        + ["Section 99. The emergency valve opens when the boiler pressure exceeds nine bar."]
        + [f"Section {i}. The fan model F{i} is cleaned monthly." for i in range(100, 130)]
    ),
    metadata={"title": "Plant manual"},
)


@pytest.fixture
def store(tmp_path):
    p = Pensive(tmp_path / "s", config={**HASH_CONFIG, "chunking": {"max_tokens": 48}})
    p.ingest([*docs_corpus(), TERN, LONG])
    yield p
    p.close()


def test_a_pin_goes_first_marked_and_the_k_retrieved_hits_follow_unchanged(store):
    plain = store.query("What was Acme revenue in Q3 2024?", k=3, pins=None)
    res = store.query("What was Acme revenue in Q3 2024?", k=3, pins=["tea"])
    assert res.hits[0].doc_id == "tea"
    assert res.hits[0].pinned and dict(res.hits[0].sources) == {"pin": 1}
    assert not any(h.pinned for h in res.hits[1:])
    assert [h.chunk_id for h in res.hits[1:]] == [h.chunk_id for h in plain.hits]
    assert not any(h.pinned for h in plain.hits)


def test_pins_keep_the_order_given_and_duplicates_count_once(store):
    res = store.query("revenue", k=2, pins=["bird", "tea", "bird"])
    assert [h.doc_id for h in res.hits[:2]] == ["bird", "tea"]
    assert [dict(h.sources) for h in res.hits[:2]] == [{"pin": 1}, {"pin": 2}]
    assert sum(h.pinned for h in res.hits) == 2


def test_a_pinned_passage_also_retrieved_appears_once(store):
    res = store.query("Acme revenue Q3 2024 cloud sales", k=3, pins=["q3"])
    ids = [h.chunk_id for h in res.hits]
    assert len(ids) == len(set(ids))
    assert res.hits[0].doc_id == "q3" and res.hits[0].pinned


def test_a_pinned_long_document_is_represented_by_its_matching_passage_not_its_head(store):
    res = store.query("When does the emergency valve open? boiler pressure", k=2, pins=["manual"])
    assert res.hits[0].doc_id == "manual" and res.hits[0].pinned
    assert "emergency valve" in res.hits[0].text
    assert "Section 0." not in res.hits[0].text


def test_min_score_never_drops_a_pin(store):
    res = store.query("revenue", k=3, min_score=1.0, pins=["tea"])
    assert [h.doc_id for h in res.hits] == ["tea"]


def test_pins_are_looked_up_each_time_and_never_cached_in_l1(store):
    q = "What was Acme revenue in Q3 2024?"
    store.query(q, k=3, pins=["tea"])
    again = store.query(q, k=3)  # the same question without pins: from L1, no pin in it
    assert again.tier == "L1"
    assert not any(h.pinned for h in again.hits)
    store.ingest([Document(id="tea", text="Black tea is oxidised longer than green tea.")])
    res = store.query(q, k=3, pins=["tea"])
    assert res.hits[0].pinned and "oxidised" in res.hits[0].text


@pytest.mark.parametrize(
    "pins, error",
    [
        (["nope"], NotFoundError),
        (["tea", "nope", "gone"], NotFoundError),
        (5, InputError),
        ([1], InputError),
        ([""], InputError),
        (["   "], InputError),
        ([f"d{i}" for i in range(21)], InputError),
        (["tea\ud800"], InputError),
        ({"tea": 1}, InputError),
    ],
)
def test_bad_pins_are_clear_errors_and_change_nothing(store, pins, error):
    before = store.stats()
    with pytest.raises(error):
        store.query("revenue", k=3, pins=pins)
    after = store.stats()
    assert after["queries"] == before["queries"]
    assert after["l1"]["entries"] == before["l1"]["entries"]
    assert after["commit"] == before["commit"]


def test_an_unknown_pin_names_every_missing_id(store):
    with pytest.raises(NotFoundError) as err:
        store.query("revenue", pins=["tea", "nope", "gone"])
    assert "'nope'" in str(err.value) and "'gone'" in str(err.value)
    assert "'tea'" not in str(err.value)


# -- mentions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        "what does @tea say about antioxidants",
        "@tea what does it say about antioxidants?",
        "tell me about antioxidants in @tea.",
        "antioxidants (see @tea)",
        'what does @"Arctic Tern Field Guide" say',
        'what does @"arctic   tern field guide" say',
    ],
)
def test_a_mention_pins_its_document(store, question):
    res = store.query(question, k=2)
    assert res.hits[0].pinned
    assert res.hits[0].doc_id in {"tea", "tern-guide"}
    assert res.query == question


def test_a_resolved_mention_is_not_searched_as_a_word(store):
    with_mention = store.query("which company had revenue? @bird", k=3)
    without = store.query("which company had revenue?", k=3)
    assert [h.chunk_id for h in with_mention.hits[1:]] == [h.chunk_id for h in without.hits]


@pytest.mark.parametrize(
    "question",
    [
        "what did @alice say about revenue",  # names no document: part of the question
        "mail bob@tea.com about the invoice",  # an e-mail address is not a mention
        "revenue @ 12%",
        "@@tea revenue",
        # an @ inside a URL (a profile link, a query string) is part of the address
        "summarise https://medium.com/@tea about revenue",
        "see https://example.org/feed?user=@tea for revenue",
        "the image at cdn.example.org/@tea/logo.png",
    ],
)
def test_what_is_not_a_mention_pins_nothing(store, question):
    res = store.query(question, k=3)
    assert not any(h.pinned for h in res.hits)


def test_a_quoted_mention_naming_nothing_is_an_error(store):
    with pytest.raises(NotFoundError, match="No Such Title"):
        store.query('what does @"No Such Title" say', k=3)


def test_a_title_naming_two_documents_asks_for_an_id(tmp_path):
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        p.ingest(
            [
                Document(id="a", text="first copy", metadata={"title": "Notes"}),
                Document(id="b", text="second copy", metadata={"title": "notes"}),
            ]
        )
        with pytest.raises(InputError, match="mention one by its id"):
            p.query('what is in @"Notes"', k=2)


def test_a_question_of_only_mentions_returns_the_pinned_documents(store):
    res = store.query("@tea @bird", k=3)
    assert [h.doc_id for h in res.hits] == ["tea", "bird"]
    assert all(h.pinned for h in res.hits)


def test_find_mentions_positions():
    found = find_mentions('see @doc-7, and @"The Title" but not a@b.c')
    assert [(m.name, m.quoted) for m in found] == [("doc-7", False), ("The Title", True)]
