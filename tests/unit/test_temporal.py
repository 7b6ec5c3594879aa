"""Temporal resolution: statements and their slots, question intent, supersession, and the
resolver inside a store (as-of questions, corrections, cache invalidation, time zones)."""

from datetime import datetime, timedelta, timezone

import pytest

from pensive_core import Document, Pensive, PensiveError
from pensive_core.fusion import Fused
from pensive_core.temporal import (
    RuleStatementExtractor,
    TemporalKnobs,
    parse_intent,
    resolve,
    slot_key,
)
from pensive_core.temporal.store import StatementRow, TemporalView
from tests.conftest import HASH_CONFIG

U = timezone.utc
RULES = RuleStatementExtractor()


def one(text, ref=None):
    found = RULES.extract(text, ref)
    assert len(found) == 1, found
    return found[0]


# -- statements ---------------------------------------------------------------------------
def test_both_word_orders_of_a_role_fill_one_slot():
    a = one("The CEO of Acme Corp is John Smith.")
    b = one("Jane Doe is the new CEO of Acme Corp.")
    assert a.slot == b.slot
    assert (a.value, b.value) == ("john smith", "jane doe")
    assert b.change and not a.change


def test_a_headline_before_the_clause_is_skipped():
    s = one("Leadership change at Acme Corp: Jane Doe is the new CEO of Acme Corp.")
    assert s.slot == one("The CEO of Acme Corp is John Smith.").slot


def test_a_metric_for_a_period_and_its_correction():
    a = one("Northwind's Q3 2024 revenue was $4.2 million.")
    b = one("Correction: Northwind's Q3 2024 revenue was $4.8 million, not $4.2 million.")
    assert a.slot == b.slot == slot_key("Northwind Q3 2024 revenue")
    assert (a.value, b.value) == ("$4.2 million", "$4.8 million")
    assert b.correction and not a.correction
    # another quarter is another slot
    assert one("Northwind's Q2 2024 revenue was $3.9 million.").slot != a.slot


def test_corrections_in_other_words():
    assert one("Update: the Kestrel rollout status is green.").correction
    assert one("Actually, Project Falcon's open bug count is 377.").correction


def test_speaker_turns_resolve_i_to_the_speaker():
    s = one("Caroline: I finally moved to Lisbon last month, it is lovely")
    assert s.slot == slot_key("Caroline", "location")
    assert s.value == "lisbon"
    assert s.change


def test_no_longer_ends_the_slot_and_a_pronoun_follows_the_subject():
    found = RULES.extract("Alice Chen no longer works at Initech; she joined Globex.")
    assert [(s.slot, s.value) for s in found] == [
        (slot_key("Alice Chen", "employer"), ""),
        (slot_key("Alice Chen", "employer"), "globex"),
    ]


def test_as_of_gives_the_statement_its_own_valid_time():
    s = one("As of March 2024, the Kestrel rollout status is amber.")
    assert s.valid_from == datetime(2024, 3, 1, tzinfo=U)


def test_a_question_and_its_answer_are_a_slot():
    a = one("Who won the most recent world cup? France.")
    b = one("Who won the most recent world cup? Argentina.")
    assert a.slot == b.slot and a.value != b.value


@pytest.mark.parametrize(
    "prose",
    [
        "The problem is that most startups never find out what users want.",
        "It was the best of times, it was the worst of times.",
        "Lisp is a language that lets you write programs that write programs.",
        "What they found was surprising to everyone involved in the project.",
        "Caroline: Hey Mel! Good to see you again.",
    ],
)
def test_prose_makes_no_statement(prose):
    assert RULES.extract(prose) == []


# -- the question's time ------------------------------------------------------------------
def test_intent_kinds():
    ref = datetime(2023, 5, 8, tzinfo=U)
    i = parse_intent("Who owned the house from 1811 to 1827?")
    assert (i.kind, i.start.year, i.end.year) == ("during", 1811, 1828)
    i = parse_intent("who won the world cup as of 2015")
    assert (i.kind, i.start, i.end) == ("as_of", None, datetime(2016, 1, 1, tzinfo=U))
    assert parse_intent("Who led the team before 2010?").kind == "before"
    assert parse_intent("What changed after May 2020?").kind == "after"
    assert parse_intent("Who is the current CEO of Acme?").kind == "latest"
    assert parse_intent("When did Caroline move to Lisbon?").kind == "when"
    assert parse_intent("How has Acme's CEO changed over the years?").kind == "change"
    assert parse_intent("What is the capital of France?") is None
    i = parse_intent("What did I buy last week?", ref)
    assert i.relative and (i.start, i.end) == (
        datetime(2023, 5, 1, tzinfo=U),
        datetime(2023, 5, 8, tzinfo=U),
    )
    assert parse_intent("What did I buy last week?", None) is None


# -- supersession -------------------------------------------------------------------------
def _view(*rows):
    return TemporalView([StatementRow(n, *r) for n, r in enumerate(rows, 1)], {})


def test_the_newer_valid_statement_supersedes_and_a_correction_wins_a_tie():
    v = _view(
        ("a", "s", "1", False, False, 100.0),
        ("b", "s", "2", False, False, 200.0),
        ("c", "s", "3", True, False, 200.0),  # a correction at the same valid time
    )
    assert [r.superseded_by for r in v.rows] == [1, 2, None]
    assert v.rows[0].valid_to == 200.0
    assert v.validity("a") == (
        datetime.fromtimestamp(100, U),
        datetime.fromtimestamp(200, U),
        "b",
    )


def test_restating_the_same_value_supersedes_nothing():
    v = _view(("a", "s", "1", False, False, 100.0), ("b", "s", "1", False, False, 200.0))
    assert [r.superseded_by for r in v.rows] == [None, None]


def test_undated_statements_supersede_only_when_worded_as_a_change():
    plain = _view(("a", "s", "1", False, False, None), ("b", "s", "2", False, False, None))
    assert [r.superseded_by for r in plain.rows] == [None, None]
    change = _view(("a", "s", "1", False, False, None), ("b", "s", "2", False, True, None))
    assert [r.superseded_by for r in change.rows] == [1, None]


def test_near_twin_slots_are_one_slot_but_other_numbers_are_not():
    v = _view(
        ("a", "2024 northwind q3 revenu", "1", False, False, 1.0),
        ("b", "2024 northwind q3 revenu total", "2", False, False, 2.0),
        ("c", "2024 northwind q2 revenu total", "3", False, False, 3.0),
    )
    assert v.rows[0].superseded_by == 1
    assert v.rows[1].superseded_by is None


def test_resolve_demotes_the_superseded_and_surfaces_what_holds():
    v = _view(("old", "s", "1", False, False, 100.0), ("new", "s", "2", False, False, 200.0))
    fused = [Fused("old", 1.0, {"dense": 1}), Fused("x", 0.8, {"dense": 2})]
    out = resolve(v, fused, None, None, TemporalKnobs(demote=0.5))
    assert [f.id for f in out.fused] == ["new", "x", "old"]
    assert out.fused[0].ranks == {"temporal": 1} and out.fused[0].score == 1.0
    # as of a time between the two, the old statement holds and nothing moves
    at = resolve(v, fused, None, 150.0, TemporalKnobs(demote=0.5))
    assert [f.id for f in at.fused] == ["old", "x"]
    # asked how it changed, both are shown
    change = resolve(v, fused, parse_intent("How did it change?"), None, TemporalKnobs())
    assert {f.id for f in change.fused} == {"old", "new", "x"}


def test_resolve_never_changes_its_input():
    v = _view(("old", "s", "1", False, False, 100.0), ("new", "s", "2", False, False, 200.0))
    fused = [Fused("old", 1.0, {"dense": 1})]
    resolve(v, fused, None, None, TemporalKnobs())
    assert fused == [Fused("old", 1.0, {"dense": 1})]


# -- in a store ---------------------------------------------------------------------------
CEO = [
    Document(
        "ceo-2019",
        "Acme Corp annual report. The CEO of Acme Corp is John Smith.",
        timestamp=datetime(2019, 4, 1, tzinfo=U),
    ),
    Document(
        "ceo-2022",
        "Press release. Maria Lopez was appointed CEO of Acme Corp, replacing John Smith.",
        timestamp=datetime(2022, 6, 15, tzinfo=U),
    ),
    *[Document(f"noise{i}", f"Acme Corp opened office number {i} in city {i}.") for i in range(6)],
]


def ids(res):
    return [h.doc_id for h in res.hits]


def test_latest_wins_by_default_and_the_old_statement_is_kept(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(CEO)
        res = p.query("Who is the CEO of Acme Corp?", k=3)
        assert ids(res)[0] == "ceo-2022"
        old = next(h for h in res.hits if h.doc_id == "ceo-2019")
        assert old.superseded_by == res.hits[0].chunk_id
        assert old.valid_to == datetime(2022, 6, 15, tzinfo=U)
        assert old.valid_from == datetime(2019, 4, 1, tzinfo=U)
        assert res.hits[0].superseded_by is None
    with Pensive(tmp_path, config={**HASH_CONFIG, "temporal": {"enabled": False}}) as p:
        # the control: without temporal resolution the older report ranks first
        res = p.query("Who is the CEO of Acme Corp?", k=3)
        assert ids(res)[0] == "ceo-2019"
        assert res.time_scope is None and res.hits[0].superseded_by is None


def test_as_of_across_a_change(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(CEO)
        q = "Who was the CEO of Acme Corp?"
        assert ids(p.query(q, k=3, as_of=datetime(2020, 1, 1, tzinfo=U)))[0] == "ceo-2019"
        assert ids(p.query(q, k=3, as_of=datetime(2023, 1, 1, tzinfo=U)))[0] == "ceo-2022"
        # the time in the question's words acts the same, without hiding later documents
        res = p.query("Who was the CEO of Acme Corp in 2020?", k=3)
        assert ids(res)[0] == "ceo-2019" and "ceo-2022" in ids(res)
        assert res.time_scope.kind == "during" and res.time_scope.supported >= 1
        assert ids(p.query("Who was the CEO of Acme Corp as of 2023?", k=3))[0] == "ceo-2022"


def test_as_of_in_another_time_zone_is_the_same_instant(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(CEO)
        # 2022-06-15 01:00 in UTC+2 is 2022-06-14 23:00 UTC: before the change
        plus2 = timezone(timedelta(hours=2))
        res = p.query(
            "Who is the CEO of Acme Corp?", k=3, as_of=datetime(2022, 6, 15, 1, tzinfo=plus2)
        )
        assert ids(res)[0] == "ceo-2019"
        assert res.time_scope.end == datetime(2022, 6, 14, 23, tzinfo=U)
        naive = p.query("Who is the CEO of Acme Corp?", k=3, as_of=datetime(2022, 6, 16))
        assert ids(naive)[0] == "ceo-2022"  # naive datetimes are UTC


def test_a_correction_outranks_what_it_corrects(tmp_path):
    docs = [
        Document("orig", "Quarterly update. Northwind's Q3 2024 revenue was $4.2 million."),
        Document(
            "fix", "Correction: Northwind's Q3 2024 revenue was $4.8 million, not $4.2 million."
        ),
        *[Document(f"n{i}", f"Northwind hired {i} new engineers in Q3 2024.") for i in range(5)],
    ]
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(docs)  # no timestamps at all: the correction is what supersedes
        res = p.query("What was Northwind's revenue in Q3 2024?", k=3)
        assert ids(res)[0] == "fix"
        assert next(h for h in res.hits if h.doc_id == "orig").superseded_by is not None


def test_relative_dates_in_a_chat_resolve_against_its_date(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(
            [
                Document(
                    "turn",
                    "Caroline: I went to the support group yesterday.",
                    timestamp=datetime(2023, 5, 8, 13, 56, tzinfo=U),
                ),
                Document(
                    "other",
                    "Caroline: I went to the support group again, it was great.",
                    timestamp=datetime(2023, 7, 2, tzinfo=U),
                ),
            ]
        )
        view = p.components.temporal_views.view()
        turn = p.query("support group", k=2).hits
        spans = view.dates_of(next(h for h in turn if h.doc_id == "turn").chunk_id)
        assert (
            datetime(2023, 5, 7, tzinfo=U).timestamp(),
            datetime(2023, 5, 8, tzinfo=U).timestamp(),
        ) in spans
        res = p.query("Did Caroline go to the support group on 7 May 2023?", k=2)
        assert ids(res)[0] == "turn" and res.time_scope.supported == 1


def test_the_cache_never_serves_a_superseded_answer(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(CEO[:1] + CEO[2:])
        q = "Who is the CEO of Acme Corp?"
        assert ids(p.query(q, k=3))[0] == "ceo-2019"
        assert p.query(q, k=3).tier == "L1"
        # worded so that it would not enter the cached question's candidate lists by itself
        p.ingest(
            [
                Document(
                    "new",
                    "Zq xv: Maria Lopez is the new CEO of Acme Corp.",
                    timestamp=datetime(2024, 1, 1, tzinfo=U),
                )
            ]
        )
        res = p.query(q, k=3)
        assert res.tier != "L1" or ids(res)[0] == "new"
        assert ids(res)[0] == "new"
        assert p.query(q, k=3).tier == "L1"  # and the new answer is cached again


def test_questions_with_relative_times_are_not_cached(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(CEO)
        q = "What did Acme Corp announce last week?"
        p.query(q, k=2)
        assert p.query(q, k=2).tier == "L2"


def test_statements_follow_replace_delete_and_reopen(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(CEO)
        assert p.stats()["temporal"]["statements"] == 2
        p.delete("ceo-2022")
        res = p.query("Who is the CEO of Acme Corp?", k=2)
        assert ids(res)[0] == "ceo-2019" and res.hits[0].superseded_by is None
        p.ingest([CEO[1]])
    with Pensive(tmp_path, read_only=True) as r:
        res = r.query("Who is the CEO of Acme Corp?", k=2)
        assert ids(res)[0] == "ceo-2022"


def test_a_store_built_without_temporal_resolution_is_brought_level(tmp_path):
    with Pensive(tmp_path, config={**HASH_CONFIG, "temporal": {"enabled": False}}) as p:
        p.ingest(CEO)
        assert p.stats()["temporal"] is None
    with Pensive(tmp_path, config={"temporal": {"enabled": True}}) as p:
        assert p.stats()["temporal"]["statements"] == 2
        assert ids(p.query("Who is the CEO of Acme Corp?", k=2))[0] == "ceo-2022"


def test_inside_one_passage_statements_keep_their_order():
    # "no longer works at X; she joined Y": the correction flag must not put the first clause
    # after the second, or "joined Y" would be superseded by the ending it follows
    v = _view(
        ("old", "s", "x", False, False, 100.0),
        ("fix", "s", "", True, True, 200.0),
        ("fix", "s", "y", False, True, 200.0),
    )
    assert [r.superseded_by for r in v.rows] == [1, 2, None]
    assert v.validity("old")[2] == "fix"


def test_a_sentence_after_a_closing_bracket_is_still_a_sentence():
    found = RULES.extract("No, I had not.) Ingrid Halvorsen no longer works at Soylent Foods.")
    assert [s.value for s in found] == [""]


def test_the_readme_example(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(
            [
                Document("r19", "The CEO of Acme is John Smith.", timestamp=datetime(2019, 4, 1)),
                Document(
                    "r22", "Maria Lopez was appointed CEO of Acme.", timestamp=datetime(2022, 6, 15)
                ),
                Document("fix", "Correction: Acme's Q3 revenue was $4.8M, not $4.2M."),
            ]
        )
        assert p.query("Who is the CEO of Acme?").hits[0].doc_id == "r22"
        old = p.query("Who is the CEO of Acme?", k=3).hits[1]
        assert old.doc_id == "r19"
        assert (old.valid_from, old.valid_to) == (
            datetime(2019, 4, 1, tzinfo=U),
            datetime(2022, 6, 15, tzinfo=U),
        )
        assert old.superseded_by.startswith("r22#")
        assert [h.doc_id for h in p.history(old)] == ["r19", "r22"]
        assert p.query("Who was the CEO of Acme in 2020?").hits[0].doc_id == "r19"
        assert (
            p.query("Who was the CEO of Acme?", as_of=datetime(2020, 1, 1)).hits[0].doc_id == "r19"
        )
        res = p.query("How has the CEO of Acme changed?")
        assert res.time_scope.kind == "change"
        assert {"r19", "r22"} <= {h.doc_id for h in res.hits}


def test_history_gives_a_drifting_value_oldest_first(tmp_path):
    counts = [412, 398, 377, 350]
    docs = [
        Document(
            f"r{i}",
            f"Weekly report. Project Falcon's open bug count is {n}.",
            timestamp=datetime(2024, 1, 1 + 7 * i, tzinfo=U),
        )
        for i, n in enumerate(counts)
    ]
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(docs + [Document("x", "Project Osprey's open bug count is 12.")])
        top = p.query("How many open bugs does Project Falcon have?", k=3).hits[0]
        assert top.doc_id == "r3" and top.superseded_by is None
        past = p.history(top)
        assert [h.doc_id for h in past] == ["r0", "r1", "r2", "r3"]
        assert [h.superseded_by.split("#")[0] for h in past[:3]] == ["r1", "r2", "r3"]
        assert past[0].valid_to == past[1].valid_from
        assert p.history("no-such-passage") == []
    off = {"temporal": {"enabled": False}}
    with Pensive(tmp_path, config=off) as p, pytest.raises(PensiveError, match="is off"):
        p.history(top)


def test_a_question_word_does_not_make_a_question_and_answer_a_clause():
    # "when"/"how" open subordinate clauses (no statement) but also questions (a Q&A pair)
    a = one("when was the last time norway was in the world cup? 1998.")
    b = one("when was the last time norway was in the world cup? 1994.")
    assert a.slot == b.slot and a.slot.startswith("q ")
    assert one("how old is dot from eastenders in real life? 94.").value == "94"


def test_a_search_style_question_and_its_answer():
    a = one("record for most assists in a nba game? 30.")
    assert a.slot.startswith("q ") and a.value == "30"
    assert RULES.extract("Was it worth it? Absolutely, I think so.") == []


def test_a_side_remark_does_not_shield_a_stale_answer():
    # the stale passage also states something else that still holds: the question is about
    # the team's size, so that statement alone decides
    v = _view(
        ("old", "engin osprey team", "7", False, False, 100.0),
        ("old", "q work", "think", False, False, 100.0),
        ("new", "engin osprey team", "22", False, False, 200.0),
    )
    fused = [Fused("old", 1.0, {"dense": 1}), Fused("new", 0.9, {"dense": 2})]
    words = frozenset("engin osprey team".split())
    out = resolve(v, fused, None, None, TemporalKnobs(), words)
    assert [f.id for f in out.fused] == ["new", "old"]


def test_a_rhetorical_question_inside_prose_is_no_statement():
    text = "It is subtle. How does it work? Think about what it means to be biased."
    assert RULES.extract(text) == []
