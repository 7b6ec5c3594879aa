"""Fast tests for the pure helpers of ``benchmarks/temporal.py``: year shifting, validity of
dated statements, evidence ids, needle generation and placement, and the metrics.

No model and no shared data: loaders run on tiny files written to ``tmp_path``.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks import temporal as T  # noqa: E402
from benchmarks.multihop import dia_ids  # noqa: E402

UTC = timezone.utc


# -- year shifting --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("question", "shifted"),
    [
        ("Who owned the house from 1811 to 1827?", "Who owned the house from 1511 to 1527?"),
        ("Who won which prize in 1990?", "Who won which prize in 1690?"),
        ("Who held the post 1811-1827?", "Who held the post 1511-1527?"),
        ("Who led the club from Jun 2009 to Jun 2010?", "Who led the club from Jun 1709 to Jun 1710?"),
        ("Where did she live between the years 1975 and 1982?",
         "Where did she live between the years 1675 and 1682?"),
        ("Who owned gleaston castle, 1346 to 1347?", "Who owned gleaston castle, 1046 to 1047?"),
        ("What title did Arnulf hold from 880 to 887?", "What title did Arnulf hold from 580 to 587?"),
    ],
)  # fmt: skip
def test_shift_years_moves_every_year_of_the_time_expression(question, shifted):
    assert T.shift_years(question) == shifted


def test_shift_years_leaves_other_numbers_alone():
    q = "Who commanded the U-567 from Apr 1935 to Apr 1937?"
    assert T.shift_years(q) == "Who commanded the U-567 from Apr 1635 to Apr 1637?"
    q = "Which railway ordered 162 of the locomotives from 1947 to 1950?"
    assert T.shift_years(q) == "Which railway ordered 162 of the locomotives from 1647 to 1650?"
    assert T.shift_years("What was the 416th squadron part of?") is None
    assert T.shift_years("After the season 2018/2019, who was hired?") is None
    assert T.shift_years("Who won in 1990?", delta=-10) == "Who won in 1980?"


# -- SituatedQA -----------------------------------------------------------------------------------
def test_start_date_fills_missing_parts_and_survives_bad_ones():
    assert T.start_date({"year": 2018, "month": None, "date": None}) == datetime(
        2018, 1, 1, tzinfo=UTC
    )
    assert T.start_date({"year": 2018, "month": 6, "date": 9}) == datetime(2018, 6, 9, tzinfo=UTC)
    assert T.start_date({"year": 2018, "month": 2, "date": 31}) == datetime(2018, 2, 1, tzinfo=UTC)
    assert T.start_date({"year": None, "month": 2, "date": 3}) is None
    assert T.start_date(None) is None


def test_period_end_is_the_last_second_of_the_year_or_day():
    assert T.period_end("2015") == datetime(2015, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert T.period_end("January 27, 2021") == datetime(2021, 1, 27, 23, 59, 59, tzinfo=UTC)
    assert T.period_end("sometime") is None


def test_strip_as_of():
    assert T.strip_as_of("who won the cup as of 2015") == ("who won the cup", "2015")
    assert T.strip_as_of("who won the show as of January 27, 2021") == (
        "who won the show",
        "January 27, 2021",
    )
    assert T.strip_as_of("who won the cup") is None


def test_valid_statement_is_the_latest_started_by_the_date():
    starts = {"p": datetime(1990, 1, 1, tzinfo=UTC), "c": datetime(2018, 1, 1, tzinfo=UTC)}
    assert T.valid_statement(starts, T.period_end("2018")) == ("c", "p")
    assert T.valid_statement(starts, T.period_end("2017")) == ("p", "c")
    assert T.valid_statement(starts, T.period_end("1990")) == ("p", "c")
    assert T.valid_statement(starts, T.period_end("1989")) is None


def test_statements_differ_only_in_the_answer():
    assert T.statement("who won the cup", "France") == "who won the cup? France."
    assert T.statement("who won the cup?", "Spain ") == "who won the cup? Spain."


def test_load_situatedqa_pairs_rows_with_their_timeline(tmp_path):
    folder = tmp_path / "situatedqa"
    folder.mkdir()
    tl = {
        "prev_answers_full": "1990", "prev_start": {"year": 1990, "month": None, "date": None},
        "cur_answers_full": "2018", "cur_start": {"year": 2018, "month": 7, "date": None},
    }  # fmt: skip
    raw = [
        {"id": 1, "question": "when did england last reach a semi final", "timelines": [tl, tl]},
        {"id": 2, "question": "a question without a timeline", "timelines": None},
    ]
    qa = [
        {"id": 1, "edited_question": "when did england last reach a semi final as of 2019",
         "date": "2019", "answer": ["2018"]},
        {"id": 1, "edited_question": "when did england last reach a semi final as of 1998",
         "date": "1998", "answer": ["1990"]},
        {"id": 1, "edited_question": "when did england last reach a semi final as of 1950",
         "date": "1950", "answer": ["none"]},
        {"id": 2, "edited_question": "a question without a timeline as of 2020", "date": "2020",
         "answer": ["x"]},
    ]  # fmt: skip
    (folder / "raw_temp.dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in raw))
    (folder / "qa_temp.dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in qa))
    docs, undated, dated, stats = T.load_situatedqa(tmp_path, "dev")
    assert [d.id for d in docs] == ["1:prev", "1:cur"]
    assert docs[1].timestamp == datetime(2018, 7, 1, tzinfo=UTC)
    assert docs[0].text.replace("1990", "") == docs[1].text.replace("2018", "")
    assert undated == [{"text": raw[0]["question"], "valid": "1:cur", "other": "1:prev"}]
    assert [(q["valid"], q["other"], q["text"]) for q in dated] == [
        ("1:cur", "1:prev", raw[0]["question"]),
        ("1:prev", "1:cur", raw[0]["question"]),
    ]
    assert dated[0]["as_of"] == datetime(2019, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert stats["no_valid_statement_yet"] == 1
    assert stats["valid_matches_annotated_answer"] == 2


# -- TimeQA and LoCoMo ---------------------------------------------------------------------------
def test_load_timeqa_pools_paragraphs_and_marks_unanswerable(tmp_path):
    (tmp_path / "timeqa").mkdir()
    raw = [
        {"index": "a", "paras": ["Title A", "p1", "p2"], "questions": [
            ["Who in 1990?", [{"para": 2, "from": 0, "end": 1, "answer": "X"}]],
            ["Who in 1400?", [{"para": 0, "from": 0, "end": 0, "answer": ""}]]]},
        {"index": "b", "paras": ["Title B", "q1"], "questions": [
            ["What from 1811 to 1827?", [{"para": 1, "from": 0, "end": 1, "answer": "Y"},
                                         {"para": 1, "from": 2, "end": 3, "answer": "Z"}]]]},
    ]  # fmt: skip
    (tmp_path / "timeqa" / "human_annotated_train.json").write_text(json.dumps(raw))
    docs, qs = T.load_timeqa(tmp_path)
    assert [d.id for d in docs] == ["0:1", "0:2", "1:1"]
    assert docs[0].metadata == {"title": "Title A"} and docs[0].timestamp is None
    assert [(q["gold"], q["answerable"], q["split"]) for q in qs] == [
        ({"0:2"}, True, "tune"),
        (set(), False, "tune"),
        ({"1:1"}, True, "heldout"),
    ]


def test_evidence_ids_are_cleaned():
    assert dia_ids(["D8:6; D9:17", "D30:05", "D1:3", "junk"]) == {"D8:6", "D9:17", "D30:5", "D1:3"}


def test_session_time():
    assert T.session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert T.session_time("10:04 am on 19 January, 2023") == datetime(
        2023, 1, 19, 10, 4, tzinfo=UTC
    )


# -- metrics --------------------------------------------------------------------------------------
def test_rank_metrics():
    ranked = T.ranked_docs(["a", "b", "a", "c", "d"])
    assert ranked == ["a", "b", "c", "d"]
    assert T.hit_at(ranked, {"c", "x"}, 3) and not T.hit_at(ranked, {"c"}, 2)
    assert T.evidence_recall(ranked, {"a", "d"}, 2) == 0.5
    assert T.evidence_recall(ranked, set(), 2) == 0.0


def test_ranked_above_treats_missing_as_last():
    assert T.ranked_above(["a", "b"], "a", "b")
    assert not T.ranked_above(["a", "b"], "b", "a")
    assert T.ranked_above(["a"], "a", "b")
    assert not T.ranked_above(["b"], "a", "b")
    assert not T.ranked_above(["c"], "a", "b")  # both missing is wrong


def test_abstains_needs_a_bounded_scope_with_no_support():
    scope = SimpleNamespace
    assert not T.abstains(None)
    assert T.abstains(scope(start=datetime(1500, 1, 1, tzinfo=UTC), end=None, supported=0))
    assert not T.abstains(scope(start=None, end=datetime(1500, 1, 1), supported=2))
    assert not T.abstains(scope(start=None, end=None, supported=0))  # "latest", "when"


def test_summarize_and_percentiles():
    rows = [
        {"split": "tune", "hit": True, "r": 1.0},
        {"split": "heldout", "hit": False, "r": 0.5},
        {"split": "tune", "hit": False, "r": 0.0},
    ]
    out = T.summarize(rows, ("all", "tune", "heldout", "other"))
    assert out["all"] == {"hit": 0.3333, "r": 0.5, "n": 3}
    assert out["tune"] == {"hit": 0.5, "r": 0.5, "n": 2}
    assert "other" not in out
    assert T.percentiles([1.0, 2.0, 3.0]) == {"query_ms_p50": 2.0, "query_ms_p95": 2.9}
    assert T.percentiles([]) == {}


# -- needles --------------------------------------------------------------------------------------
def test_contains_value_matches_whole_values_only():
    assert T.contains_value("The count is 412.", "412")
    assert not T.contains_value("The count is 412.", "41")
    assert T.contains_value("was $4.8 million, not $4.2 million.", "$4.2 million")
    assert not T.contains_value("revenue of $4.85 million", "$4.8")
    assert T.contains_value("status is on hold.", "On Hold")


def test_cases_are_well_formed():
    cases = T.make_cases(per_category=12, seed=7)
    assert [c.category for c in cases].count("gradual drift") == 12
    assert {c.category for c in cases} == set(T.CATEGORIES)
    assert len({c.question for c in cases}) == len(cases)
    assert T.make_cases(per_category=12, seed=7) == cases  # fixed seed, same suite
    for c in cases:
        assert not T.contains_value(c.question, c.answer)
        assert all(T.contains_value(n, c.subject) for n in c.needles)
        assert T.contains_value(c.needles[-1], c.answer)  # the newest needle holds the answer
        assert not any(T.contains_value(n, c.answer) for n in c.needles[:-1])
        assert list(c.depths) == sorted(c.depths) and c.depths[-1] == c.depth
        assert c.answer not in c.stale
    for c in (c for c in cases if c.category == "gradual drift"):
        assert 5 <= len(c.needles) <= 8 and len(set(c.stale)) == len(c.stale)
    for c in (c for c in cases if c.category == "corrections"):
        assert len(c.needles) == 2 and T.contains_value(c.needles[0], c.stale[0])
    assert {c.depth for c in cases} == set(T.DEPTHS)


def test_answers_and_stale_only():
    case = T.NeedleCase("gradual drift", "Falcon", "How many open bugs does Project Falcon have?",
                        "377", stale=("412",))  # fmt: skip
    assert T.answers(case, "Project Falcon's open bug count is 377.")
    assert not T.answers(case, "Some other text with 377 in it.")
    assert T.stale_only(case, "Project Falcon's open bug count is 412.")
    assert not T.stale_only(case, "Falcon: 377, not 412.")


def test_place_gives_distinct_hosts_in_time_order():
    cases = T.make_cases(per_category=6, seed=1)
    n_docs = 120
    placed = T.place(cases, n_docs)
    hosts = [h for c in placed for h in c.hosts]
    assert len(hosts) == len(set(hosts)) and all(0 <= h < n_docs for h in hosts)
    for c in placed:
        assert list(c.hosts) == sorted(c.hosts) and len(c.hosts) == len(c.needles)
        if len(c.needles) == 1:
            assert abs(c.hosts[0] / (n_docs - 1) - c.depth) < 0.1
    with pytest.raises(ValueError, match="too small"):
        T.place(cases, 10)


def test_splice_inserts_at_a_sentence_boundary():
    text = "One two. Three four. Five six. Seven eight."
    out = T.splice(text, "NEEDLE.", at=0.5)
    assert out == "One two. Three four. NEEDLE. Five six. Seven eight."
    assert T.splice(text, "N.", at=0.0).startswith("N. One")
    assert T.splice(text, "N.", at=1.0).endswith("eight. N.")


def test_cut_documents_restores_lost_breaks_and_bounds_size():
    text = ("This is a sentence that goes on. " * 30 + "accelerating.We start again.\n\n" +
            "Short para.\n\nAnother short one.")  # fmt: skip
    docs = T.cut_documents(text, target=300)
    assert all(len(d) <= 300 for d in docs)
    assert "accelerating.\n\nWe start" in "\n\n".join(docs) or any(
        d.startswith("We start") for d in docs
    )
    assert " ".join(" ".join(d.split()) for d in docs).count("sentence that goes on") == 30


def test_spaced_times_span_the_range():
    times = T.spaced_times(5)
    assert times[0] == T.HAYSTACK_START and times[-1] == T.HAYSTACK_END
    assert times == sorted(times)
    assert T.spaced_times(1) == [T.HAYSTACK_START]


def test_build_needle_corpus_splices_every_needle_into_its_host():
    haystack = [f"Filler sentence {i}. More filler here. And a bit more." for i in range(80)]
    cases = T.make_cases(per_category=3, seed=2)
    docs, placed = T.build_needle_corpus(haystack, cases)
    assert len(docs) == 80 and docs[0].timestamp == T.HAYSTACK_START
    for c in placed:
        for needle, host in zip(c.needles, c.hosts):
            assert needle in docs[host].text
        stamps = [docs[h].timestamp for h in c.hosts]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
