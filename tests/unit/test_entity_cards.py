"""L1 entity cards and document summaries (pensive_core.cards) on real stores: SQLite,
FAISS, the entity graph, the hash embedder (and MiniLM where L2's answer is compared)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pensive_core import Document, EntityCard, InputError, NotFoundError, Pensive
from pensive_core.cards import entity_question, summarize

from ..conftest import HASH_CONFIG

QUESTIONS = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "entity_questions.json").read_text()
)


def _doc(title: str, body: str) -> Document:
    # the shape benchmarks/multihop gives HotpotQA paragraphs: the title, then the text
    return Document(id=title, text=f"{title}\n\n{body}", metadata={"title": title})


DOCS = [
    _doc(
        "Maren Holloway",
        "Maren Holloway (born 3 May 1971) is a Canadian glaciologist and author. She leads the "
        "ice-core laboratory at Tarnby University. Her book Blue Strata won the Lyle Prize.",
    ),
    _doc(
        "Tarnby University",
        "Tarnby University is a public research university in northern Ontario, founded in "
        "1958. Its ice-core laboratory is led by Maren Holloway.",
    ),
    _doc(
        "Blue Strata",
        "Blue Strata is a 2009 non-fiction book by Maren Holloway about the climate record "
        "kept in glacial ice. It won the Lyle Prize in 2010.",
    ),
    _doc(
        "Osric Vane",
        "Osric Vane (1902 - 1977) was a Welsh cartographer who surveyed the Brecon uplands. "
        "He drew the first contour map of Pen Ddu.",
    ),
    _doc(
        "Lyle Prize",
        "The Lyle Prize is an annual award for writing about the natural sciences, given "
        "since 1985 by the Lyle Trust in Edinburgh.",
    ),
    _doc(
        "Kestrel (ship)",
        "Kestrel was a steam trawler built in Hull in 1911. She sank off Flamborough Head in "
        "1932 with no loss of life.",
    ),
    _doc(
        "Kestrel (band)",
        "Kestrel are an English folk band formed in Norwich in 2004.",
    ),
]


@pytest.fixture
def store(tmp_path):
    p = Pensive(tmp_path / "store", config=HASH_CONFIG)
    p.ingest(DOCS)
    yield p
    p.close()


def _fill(template: str, x: str = "Maren Holloway", y: str = "Osric Vane") -> str:
    return template.format(X=x, x=x.lower(), Y=y)


# -- the question set -------------------------------------------------------------------------


def test_the_question_set_is_the_fixed_one():
    # written before the code (tests/data/entity_questions.json): both lists are used whole
    assert len(QUESTIONS["card"]) == 24 and len(QUESTIONS["no_card"]) == 20


@pytest.mark.parametrize("template", QUESTIONS["card"])
def test_every_card_phrasing_names_the_entity(template):
    assert entity_question(_fill(template)).casefold() == "maren holloway"


@pytest.mark.parametrize("template", QUESTIONS["card"])
def test_a_card_answers_every_entity_phrasing(store, template):
    res = store.query(_fill(template), k=2)
    assert (res.tier, res.card) == ("L1", "maren holloway")
    assert res.hits[0].doc_id == "Maren Holloway"
    assert res.hits[0].sources == {"card": 1}
    assert len(res.hits) == 2


@pytest.mark.parametrize("template", QUESTIONS["no_card"])
def test_no_card_answers_the_other_phrasings(store, template):
    res = store.query(_fill(template), k=2)
    assert res.card is None
    assert res.tier != "L1" or res.cached_from is not None


def test_as_of_filters_and_context_go_to_l2(store):
    q = "who is Maren Holloway?"
    assert store.query(q, k=2).card == "maren holloway"
    at = datetime(2030, 1, 1, tzinfo=timezone.utc)
    assert store.query(q, k=2, as_of=at).card is None
    assert store.query(q, k=2, filters={"title": "Maren Holloway"}).card is None
    assert store.query(q, k=2, context=["we spoke about ice"]).card is None


def test_an_ambiguous_name_is_not_served(store):
    # two documents are about "Kestrel": no card is confident, so L2 answers
    card = store.router.cards.card("kestrel")
    assert card is not None and card.docs == ("Kestrel (band)", "Kestrel (ship)")
    assert not card.confident
    assert store.query("what is Kestrel?", k=2).card is None


def test_a_card_l2_does_not_agree_with_is_not_served(tmp_path):
    # the document titled "Zed Quill" never says the name; another says little else: L2's
    # first passage for "who is Zed Quill?" is the other one, so the card is not confident
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        p.ingest(
            [
                Document(
                    id="zq",
                    text="A village bakery opened in 1990 selling rye bread and pastries.",
                    metadata={"title": "Zed Quill"},
                ),
                Document(id="other", text="Zed Quill, Zed Quill: the story of Zed Quill."),
            ]
        )
        card = p.router.cards.card("Zed Quill")
        assert card is not None and card.docs == ("zq",) and not card.confident
        res = p.query("who is Zed Quill?", k=1)
        assert res.card is None and res.hits[0].doc_id == "other"


def test_a_title_qualifier_may_be_left_out_or_given(store):
    card = store.router.cards.card("Blue Strata")
    assert card is not None and card.confident and card.docs == ("Blue Strata",)
    assert store.router.cards.card("Kestrel (ship)").key == "kestrel"


def test_an_unknown_name_goes_to_l2(store):
    res = store.query("who is Ingrid Solberg?", k=2)
    assert res.card is None and res.tier == "L2"


def test_k_larger_than_a_complete_card_returns_its_passages(store):
    card = store.router.cards.card("Osric Vane")
    assert card.complete and len(card.passages) == 1
    res = store.query("who is Osric Vane", k=5)
    assert res.card == "osric vane" and [h.doc_id for h in res.hits] == ["Osric Vane"]


# -- what a card holds ------------------------------------------------------------------------


def test_the_card_holds_its_document_then_the_passages_naming_it(store):
    card = store.router.cards.card("maren holloway")
    assert isinstance(card, EntityCard)
    assert card.name == "Maren Holloway" and card.docs == ("Maren Holloway",)
    assert card.passages[0].startswith("Maren Holloway#")
    assert {p.split("#")[0] for p in card.passages[1:]} == {"Tarnby University", "Blue Strata"}
    assert card.summary.startswith("Maren Holloway (born 3 May 1971) is a Canadian glaciologist")
    assert card.commit == store.commit_number


def test_the_card_holds_current_statements_with_valid_times(tmp_path):
    with Pensive(tmp_path / "s", config=HASH_CONFIG) as p:
        t0 = datetime(2020, 1, 1, tzinfo=timezone.utc)
        p.ingest(
            [
                Document(
                    id="Nadia Roux",
                    text="Nadia Roux\n\nNadia Roux is the CEO of Fenwick Labs.",
                    metadata={"title": "Nadia Roux"},
                    timestamp=t0,
                )
            ]
        )
        card = p.router.cards.card("nadia roux")
        assert card.statements, "the statement extractor found nothing to show"
        assert all(s.chunk_id in card.passages for s in card.statements)
        assert card.statements[0].valid_from == t0.isoformat()


# -- invalidation -----------------------------------------------------------------------------


def test_a_commit_changing_x_rebuilds_x_card_and_only_the_cards_it_touches(store):
    cards = store.router.cards
    before = {k: cards.card(k) for k in ("maren holloway", "osric vane", "lyle prize")}
    first = store.commit_number
    store.ingest(
        [
            _doc(
                "Osric Vane",
                "Osric Vane (1902 - 1977) was a Welsh surveyor and engraver. He engraved the "
                "Pen Ddu sheet.",
            )
        ]
    )
    assert store.commit_number > first
    after = {k: cards.card(k) for k in before}
    assert after["osric vane"].commit == store.commit_number
    assert after["osric vane"].summary.startswith("Osric Vane (1902 - 1977) was a Welsh surveyor")
    # untouched entities keep the card built at the first commit
    assert after["maren holloway"] == before["maren holloway"]
    assert after["lyle prize"] == before["lyle prize"]
    res = store.query("who is Osric Vane?", k=1)
    assert res.card == "osric vane" and "surveyor and engraver" in res.hits[0].text


def test_a_new_document_naming_x_adds_to_x_card(store):
    store.ingest([_doc("Pen Ddu", "Pen Ddu is a hill in Wales first mapped by Osric Vane.")])
    card = store.router.cards.card("osric vane")
    assert card.commit == store.commit_number
    assert [p.split("#")[0] for p in card.passages] == ["Osric Vane", "Pen Ddu"]


def test_deleting_the_document_removes_the_card(store):
    assert store.router.cards.card("Lyle Prize") is not None
    store.delete("Lyle Prize")
    # no document is about it now, and no passage names it (Maren Holloway's do: still known)
    gone = store.router.cards.card("Lyle Prize")
    assert gone is None or (not gone.confident and not gone.docs)
    assert store.router.cards.card("Osric Vane") is not None
    store.delete("Osric Vane")
    assert store.router.cards.card("Osric Vane") is None
    res = store.query("who is Osric Vane?", k=2)
    assert res.card is None
    with pytest.raises(NotFoundError):
        store.summary("Osric Vane")


def test_cards_survive_reopening_and_are_rebuilt_when_behind(tmp_path):
    path = tmp_path / "s"
    with Pensive(path, config=HASH_CONFIG) as p:
        p.ingest(DOCS[:3])
    # a commit made with cards off leaves them behind: reopened with them on, all are rebuilt
    with Pensive(path, config={"router": {"entity_cards": False}}) as p:
        assert p.query("who is Maren Holloway", k=1).card is None
        p.ingest([DOCS[3]])
    with Pensive(path) as p:
        assert p.router.cards.card("Osric Vane").confident
        assert p.query("who is Osric Vane", k=1).card == "osric vane"


def test_a_reader_serves_the_writer_cards(tmp_path):
    path = tmp_path / "s"
    with Pensive(path, config=HASH_CONFIG) as w:
        w.ingest(DOCS[:2])
        with Pensive(path, read_only=True) as r:
            assert r.query("who is Maren Holloway?", k=1).card == "maren holloway"
            w.ingest([DOCS[3]])
            assert r.query("who is Osric Vane?", k=1).card == "osric vane"


def test_l1_off_or_learning_on_sends_entity_questions_to_l2(tmp_path):
    path = tmp_path / "s"
    with Pensive(path, config=HASH_CONFIG) as p:
        p.ingest(DOCS)
    with Pensive(path, config={"router": {"l1": False}}) as p:
        assert p.query("who is Maren Holloway?", k=2).tier == "L2"
        assert p.router.cards.card("Maren Holloway").confident  # kept, not served
    with Pensive(path, config={"graph": {"learning": {"enabled": True}}}) as p:
        assert p.query("who is Maren Holloway?", k=2).tier == "L2"


def test_cards_off_serves_nothing_but_summaries_still_work(tmp_path):
    cfg = {**HASH_CONFIG, "router": {"entity_cards": False}}
    with Pensive(tmp_path / "s", config=cfg) as p:
        p.ingest(DOCS)
        res = p.query("who is Maren Holloway?", k=2)
        assert res.card is None and res.tier == "L2"
        assert p.router.cards.card("Maren Holloway") is None
        assert p.summary("Osric Vane").startswith("Osric Vane (1902 - 1977) was a Welsh")


# -- summaries --------------------------------------------------------------------------------


def test_summary_is_the_lead_sentences(store):
    s = store.summary("Maren Holloway")
    assert s == (
        "Maren Holloway (born 3 May 1971) is a Canadian glaciologist and author. She leads "
        "the ice-core laboratory at Tarnby University."
    )


def test_summary_of_an_unknown_document_raises_and_changes_nothing(store):
    n = store.commit_number
    with pytest.raises(NotFoundError, match="no document with id 'nope'"):
        store.summary("nope")
    assert store.commit_number == n


@pytest.mark.parametrize("bad", ["\ud800", 7, None])
def test_summary_of_an_id_that_is_not_text_is_an_input_error(store, bad):
    # a lone surrogate reached SQLite and came back as a UnicodeEncodeError
    with pytest.raises(InputError, match="doc_id"):
        store.summary(bad)


def test_summarize_keeps_abbreviations_and_initials_inside_sentences():
    text = "Title\n\nJ. R. Smith served in the U.S. Army until 1970. He then taught. He retired."
    assert (
        summarize(text, "Title")
        == "J. R. Smith served in the U.S. Army until 1970. He then taught."
    )
    long = "word " * 200
    out = summarize(long, max_chars=50)
    assert len(out) <= 51 and out.endswith("…")


# -- agreement with L2 ------------------------------------------------------------------------


@pytest.mark.slow
def test_the_card_top_hit_is_l2_top_hit(tmp_path, minilm):
    path = tmp_path / "s"
    with Pensive(path, embedder=minilm) as p:
        p.ingest(DOCS)
    names = ["Maren Holloway", "Tarnby University", "Blue Strata", "Osric Vane", "Lyle Prize"]
    with Pensive(path, embedder=minilm) as p:
        cards = {n: p.query(f"who is {n}?", k=3) for n in names}
    with Pensive(
        path, embedder=minilm, config={"router": {"entity_cards": False, "l1": False}}
    ) as p:
        fresh = {n: p.query(f"who is {n}?", k=3) for n in names}
    for n in names:
        assert cards[n].card is not None and fresh[n].tier == "L2"
        assert cards[n].hits[0].chunk_id == fresh[n].hits[0].chunk_id, n
