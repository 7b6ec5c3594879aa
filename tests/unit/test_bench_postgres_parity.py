"""The Postgres parity benchmark's comparison: quality figures only, the difference signed
Postgres - embedded, the tolerance applied, and two runs of different questions refused."""

from __future__ import annotations

import pytest

from benchmarks.postgres_parity import HEADLINE, PARTS, TOLERANCE, compare, flatten, same_top


def test_flatten_keeps_quality_figures_and_drops_timings_counts_and_lists():
    metrics = {
        "all": {"all@2": 0.5, "mean@5": 0.75, "n": 100},
        "query_ms_p50": 12.0,
        "graph_ms_p95": 3.0,
        "latency_ms": {"pensive": {"p50": 1.0}},
        "failures@1": ["a question"],
        "latest-wins": {"valid_above_rival": True},
        "seconds": 4.2,
    }
    assert flatten(metrics) == {
        "all/all@2": 0.5,
        "all/mean@5": 0.75,
        "latest-wins/valid_above_rival": 1.0,
    }


def test_compare_signs_the_difference_and_names_the_figures_over_the_tolerance():
    embedded = {"all": {"all@2": 0.44, "all@5": 0.76, "mean@5": 0.86}}
    postgres = {"all": {"all@2": 0.45, "all@5": 0.76, "mean@5": 0.857}}
    r = compare(embedded, postgres)
    assert r["figures"]["all/all@2"] == {"embedded": 0.44, "postgres": 0.45, "diff": 0.01}
    assert r["figures"]["all/mean@5"]["diff"] == pytest.approx(-0.003)
    assert r["max_abs_diff"] == pytest.approx(0.01)
    assert r["over"] == ["all/all@2"]  # 0.003 is within 0.005


def test_a_difference_of_exactly_the_tolerance_is_not_over_it():
    r = compare({"x": 0.5}, {"x": 0.5 + TOLERANCE})
    assert r["over"] == []


def test_compare_refuses_results_that_do_not_hold_the_same_figures():
    with pytest.raises(ValueError, match="only postgres"):
        compare({"a": 1.0}, {"a": 1.0, "b": 0.5})


def test_same_top_counts_queries_whose_first_k_ids_agree():
    a = [["x", "y", "z"], ["x", "y"], ["p"]]
    b = [["x", "y", "q"], ["y", "x"], ["p"]]
    assert same_top(a, b, k=2) == 2
    assert same_top(a, b, k=3) == 1
    with pytest.raises(ValueError, match="not the same questions"):
        same_top(a, b[:2])


def test_every_part_has_headline_figures():
    assert set(HEADLINE) == set(PARTS)
