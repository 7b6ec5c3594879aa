"""Dense lists rank the same way on every CPU: scores an ulp apart (an AVX-512 machine and an
AVX2 one sum float32 products in different orders) are ranked by id, not by the last bit."""

from pensive_core.query.retrieve import TIE, steady


def test_near_ties_are_ranked_by_id_whatever_the_last_bit():
    here = [("manual#1", 0.025141822174191475), ("ceo-2022#1", 0.025141824036836624)]
    there = [("manual#1", 0.025141824036836624), ("ceo-2022#1", 0.025141822174191475)]
    assert (
        [c for c, _ in steady(here, 5)]
        == [c for c, _ in steady(there, 5)]
        == [
            "ceo-2022#1",
            "manual#1",
        ]
    )


def test_scores_are_kept_and_real_differences_still_rank():
    rows = [("b", 0.5), ("a", 0.5 - 10 * TIE), ("c", 0.9), ("d", 0.5 - TIE / 2)]
    out = steady(rows, 10)
    assert out == [("c", 0.9), ("b", 0.5), ("d", 0.5 - TIE / 2), ("a", 0.5 - 10 * TIE)]


def test_a_tie_at_the_edge_is_settled_by_id_before_the_cut():
    rows = [("x", 0.9), ("z", 0.3), ("y", 0.3 + TIE / 10)]
    assert steady(rows, 2) == [("x", 0.9), ("y", 0.3 + TIE / 10)]
    assert steady(list(reversed(rows)), 2) == [("x", 0.9), ("y", 0.3 + TIE / 10)]
