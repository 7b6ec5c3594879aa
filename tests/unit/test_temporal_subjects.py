"""Supersession by subject (``[temporal] subjects``): the newer of two passages about one
subject supersedes the older for a question about now, whatever their wording; as of a date,
the newest before it wins; a passage that is still true (a newer one only mentions its
subject, an undated one, another subject) is never demoted."""

from datetime import datetime, timezone

import numpy as np
import pytest

from pensive_core import Document, Pensive
from pensive_core.temporal import Statement, parse_intent
from pensive_core.temporal.subjects import SubjectCandidate, anchor_terms, asks_now, superseded
from tests.conftest import HASH_CONFIG

U = timezone.utc


def ts(year, month=1, day=1):
    return datetime(year, month, day, tzinfo=U).timestamp()


def cand(cid, score, t, vec, terms=("atlasly",), doc=None, latest=None):
    return SubjectCandidate(
        cid,
        doc or cid,
        score,
        t,
        None if vec is None else np.asarray(vec, dtype=np.float32),
        frozenset(terms),
        latest,
    )


# -- the pure step ----------------------------------------------------------------------------
def test_the_newer_of_one_subject_supersedes_the_older():
    old = cand("old", 1.0, ts(2018), [1, 0.1])
    new = cand("new", 0.9, ts(2022), [1, 0.2])
    assert superseded([old, new], None, 0.5, 0.8) == {"old": "new"}


def test_the_newest_of_three_is_named_and_both_older_are_superseded():
    a = cand("a", 1.0, ts(2015), [1, 0])
    b = cand("b", 1.0, ts(2018), [1, 0.1])
    c = cand("c", 1.0, ts(2024), [1, 0.2])
    assert superseded([a, b, c], None, 0.5, 0.8) == {"a": "c", "b": "c"}


def test_as_of_a_date_the_newest_before_it_wins_and_later_ones_take_no_part():
    a = cand("a", 1.0, ts(2015), [1, 0])
    b = cand("b", 1.0, ts(2018), [1, 0.1])
    c = cand("c", 1.0, ts(2024), [1, 0.2])
    assert superseded([a, b, c], ts(2020), 0.5, 0.8) == {"a": "b"}
    assert superseded([a, b, c], ts(2016), 0.5, 0.8) == {}


@pytest.mark.parametrize(
    "new",
    [
        cand("new", 0.9, ts(2022), [0, 1]),  # another subject: embeddings far apart
        cand("new", 0.9, ts(2022), [1, 0.1], terms=("fenwick",)),  # no shared anchor
        cand("new", 0.9, ts(2022), [1, 0.1], terms=()),  # names nothing the question asks
        cand("new", 0.5, ts(2022), [1, 0.1]),  # mentions the subject, answers less well
        cand("new", 0.9, None, [1, 0.1]),  # undated: no valid time to order by
        cand("new", 0.9, ts(2018), [1, 0.1]),  # the same valid time
        cand("new", 0.9, ts(2022), [1, 0.1], doc="old"),  # the same document
        cand("new", 0.9, ts(2022), None),  # no vector
        cand("new", 0.9, ts(2025), [1, 0.1], latest=ts(1988)),  # a history page: about 1988
    ],
)
def test_a_passage_that_is_still_true_is_not_superseded(new):
    old = cand("old", 1.0, ts(2018), [1, 0.1])
    assert "old" not in superseded([old, new], None, 0.5, 0.8)


def test_a_newer_passage_naming_a_date_after_the_older_one_still_supersedes():
    old = cand("old", 1.0, ts(2015), [1, 0])
    new = cand("new", 1.0, ts(2025), [1, 0.1], latest=ts(2025, 6, 1))
    assert superseded([old, new], None, 0.5, 0.8) == {"old": "new"}


def test_a_history_page_is_as_old_as_the_time_it_speaks_of():
    owned = cand("owned", 1.0, ts(2019), [1, 0], latest=ts(1989))  # "owned ... since 1988"
    sold = cand("sold", 0.9, ts(2024), [1, 0.1])  # names no date: as of its timestamp
    history = cand("history", 1.0, ts(2025), [1, 0.05], latest=ts(1989))  # written 2025
    assert superseded([owned, sold, history], None, 0.5, 0.8) == {
        "owned": "sold",
        "history": "sold",
    }


def test_negative_scores_compare_by_the_same_fraction():
    old = cand("old", -1.0, ts(2018), [1, 0])
    assert superseded([old, cand("new", -1.2, ts(2022), [1, 0])], None, 0.5, 0.8) == {"old": "new"}
    assert superseded([old, cand("new", -1.3, ts(2022), [1, 0])], None, 0.5, 0.8) == {}


def test_anchor_terms_are_the_questions_rarest():
    assert anchor_terms({"atlasly": 6.0, "mapping": 3.5, "company": 1.0}) == {
        "atlasly",
        "mapping",
    }
    assert anchor_terms({}) == frozenset()


# -- which queries it applies to ----------------------------------------------------------------
NOW = datetime(2026, 12, 1, 12, tzinfo=U)


def applies(text, cutoff=None):
    return asks_now(text, parse_intent(text, NOW), cutoff, NOW)


@pytest.mark.parametrize(
    "text",
    [
        "Who runs the Oslo office?",
        "who runs the oslo office",  # no question mark, lower case
        "What's the Vantor storage price",
        "Is the Gorse Lane pool still open?",
        "Has change 2231 landed?",
        "Tell me who owns Fenwick Arena",
        "the Vantor storage price?",  # a question by its mark alone
        "Who is the current mayor of Westford?",  # "current": a question about now
        "When is Omar Haddad defending his thesis?",  # a when in the present: what is planned
        "When's the first ferry to Gull Island?",
        "When will the Aurora lamp ship?",
        "Can I swim at Gorse Lane today?",  # "today" covers now
    ],
)
def test_it_applies_to_questions_about_now(text):
    assert applies(text) == (True, None)


@pytest.mark.parametrize(
    "text",
    [
        "Aspirin inhibits platelet aggregation in healthy adults.",  # a claim to verify
        "0-dimensional biomaterials show inductive properties",
        "Vantor storage pricing",  # a title or keywords: no question form
        "When did Caroline go to the support group?",  # a past event
        "When was the arena sold?",
        "Who led the club from 1990 to 1995?",  # a span
        "How has the ferry timetable changed?",  # asks for the change itself
        "What did Omar do last week?",  # a relative time that does not cover now
    ],
)
def test_it_does_not_apply_to_claims_spans_or_past_events(text):
    assert applies(text)[0] is False


def test_as_of_a_time_applies_to_any_text_and_resolves_there():
    assert applies("Aspirin inhibits platelet aggregation.", cutoff=ts(2020)) == (True, ts(2020))
    ok, at = applies("Who owned Fenwick Arena as of 2020?")
    assert ok and at == datetime(2021, 1, 1, tzinfo=U).timestamp()


# -- in a store ---------------------------------------------------------------------------
SUBJECTS = {
    **HASH_CONFIG,
    "router": {"l1": False},
    # the hash embedder is no judge of meaning: any cosine counts here; the anchor terms,
    # timestamps and relevance still decide
    "temporal": {"subjects": True, "subject_similarity": -1.0, "subject_relevance": 0.2},
}


def docs():
    return [
        Document(
            "old",
            "Marta Ruiz bakes the bread at Quillfeather Bakery every morning.",
            timestamp=datetime(2018, 3, 1, tzinfo=U),
        ),
        Document(
            "new",
            "Quillfeather Bakery: Tomasz Wren bakes the bread there these days.",
            timestamp=datetime(2022, 3, 1, tzinfo=U),
        ),
    ] + [
        Document(f"filler{i}", f"Unrelated note number {i} about gardening and tides.")
        for i in range(6)
    ]


def top(p, text, **kw):
    return p.query(text, k=3, **kw).hits[0].doc_id


def test_in_a_store_now_and_as_of(tmp_path):
    q = "Who bakes the bread at Quillfeather Bakery every morning?"  # the old passage's wording wins retrieval
    with Pensive(
        tmp_path / "off",
        config={**SUBJECTS, "temporal": {**SUBJECTS["temporal"], "subjects": False}},
    ) as p:
        p.ingest(docs())
        before = top(p, q)
    with Pensive(tmp_path / "on", config=SUBJECTS) as p:
        p.ingest(docs())
        assert before == "old"  # without the step the stale passage is on top
        assert top(p, q) == "new"
        assert top(p, q, as_of=datetime(2020, 1, 1, tzinfo=U)) == "old"


def test_in_a_store_undated_passages_are_left_alone(tmp_path):
    undated = [Document(d.id, d.text) for d in docs()]
    with Pensive(tmp_path / "s", config=SUBJECTS) as p:
        p.ingest(undated)
        q = "Who bakes the bread at Quillfeather Bakery every morning?"
        res = p.query(q, k=3)
    with Pensive(tmp_path / "t", config={**SUBJECTS, "temporal": {"enabled": False}}) as p:
        p.ingest(undated)
        assert [h.doc_id for h in p.query(q, k=3).hits] == [h.doc_id for h in res.hits]


def test_in_a_store_an_unchanged_fact_is_not_demoted(tmp_path):
    """A newer passage that mentions the subject in passing (and answers the question less
    well) does not supersede the passage that answers it."""
    kept = [
        Document(
            "fact",
            "The Sable Jazz Club is on Orchard Street, in the old firehouse on Orchard Street.",
            timestamp=datetime(2019, 1, 1, tzinfo=U),
        ),
        Document(
            "mention",
            "Sable saxophonist night was sold out; tickets, drinks, dancing, a great crowd.",
            timestamp=datetime(2024, 1, 1, tzinfo=U),
        ),
    ] + docs()[2:]
    q = "Where on Orchard Street is the Sable Jazz Club?"
    with Pensive(tmp_path / "s", config=SUBJECTS) as p:
        p.ingest(kept)
        assert top(p, q) == "fact"


class Scripted:
    """A scripted stand-in for an LLM statement extractor."""

    name = "scripted-test"

    def extract(self, text, reference=None):
        if "Quillfeather" not in text:
            return []
        value = "tomasz wren" if "Tomasz" in text else "marta ruiz"
        return [Statement("quillfeather head baker", value, change="now" in text)]


def test_the_statement_extractor_plug_takes_a_scripted_extractor(tmp_path):
    """An LLM extractor plugs in where the rules are; a scripted fake stands for one. Its
    statements and the subject step agree on the current passage."""
    cfg = {
        **SUBJECTS,
        "temporal": {**SUBJECTS["temporal"], "extractor": f"{__name__}:Scripted"},
    }
    with Pensive(tmp_path / "s", config=cfg) as p:
        p.ingest(docs())
        res = p.query("Who bakes the bread at Quillfeather Bakery every morning?", k=3)
        assert res.hits[0].doc_id == "new"
        old = next(h for h in res.hits if h.doc_id == "old")
        # the scripted statements superseded it (the step itself marks nothing)
        assert old.superseded_by == res.hits[0].chunk_id
