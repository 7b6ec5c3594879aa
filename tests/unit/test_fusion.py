import copy
import math
import random

import pytest

from pensive_core.fusion import fuse, rrf, weighted, zscale, zscore

LISTS = {
    "dense": [("a", 0.9), ("b", 0.8), ("c", 0.5)],
    "bm25": [("c", 12.0), ("d", 7.0), ("a", 3.0)],
}


@pytest.mark.parametrize("fn", [rrf, weighted, zscore, zscale])
def test_inputs_are_not_mutated(fn):
    before = copy.deepcopy(LISTS)
    fn(LISTS, {"dense": 2.0, "bm25": 0.5})
    assert before == LISTS


@pytest.mark.parametrize("fn", [rrf, weighted, zscore, zscale])
def test_zero_weight_reduces_to_the_other_ranking(fn):
    out = fn(LISTS, {"dense": 0.0, "bm25": 1.0})
    bm25_order = [cid for cid, _ in LISTS["bm25"]]
    assert [f.id for f in out][:3] == bm25_order


@pytest.mark.parametrize("fn", [rrf, weighted, zscore, zscale])
def test_weights_change_the_winner(fn):
    dense_heavy = fn(LISTS, {"dense": 5.0, "bm25": 1.0})
    bm25_heavy = fn(LISTS, {"dense": 1.0, "bm25": 5.0})
    assert dense_heavy[0].id == "a"
    assert bm25_heavy[0].id == "c"


def test_rrf_values_and_ranks():
    out = {f.id: f for f in rrf(LISTS, k=60)}
    assert out["a"].score == pytest.approx(1 / 61 + 1 / 63)
    assert out["c"].score == pytest.approx(1 / 63 + 1 / 61)
    assert out["a"].ranks == {"dense": 1, "bm25": 3}
    assert out["d"].ranks == {"bm25": 2}


def test_ties_keep_first_seen_order():
    out = rrf({"x": [("p", 1.0)], "y": [("q", 1.0)]})
    assert [f.id for f in out] == ["p", "q"]
    assert out[0].score == out[1].score


def test_duplicates_in_one_list_count_once():
    out = rrf({"x": [("p", 1.0), ("p", 0.5), ("q", 0.2)]})
    assert [f.id for f in out] == ["p", "q"]
    assert out[0].ranks == {"x": 1}
    assert out[1].ranks == {"x": 2}


def test_weighted_min_max():
    out = {f.id: f.score for f in weighted(LISTS)}
    assert out["a"] == pytest.approx(1.0 + 0.0)
    assert out["c"] == pytest.approx(0.0 + 1.0)
    assert out["d"] == pytest.approx((7 - 3) / 9)


def test_zscore_missing_gets_floor_not_mean():
    out = {f.id: f.score for f in zscore(LISTS)}
    # "d" is absent from dense: it must not score above "b", which dense did return
    assert out["d"] < out["a"]
    assert len(out) == 4


def test_fuse_dispatch_and_empty_lists():
    assert fuse("rrf", {"dense": [], "bm25": []}) == []
    assert [f.id for f in fuse("zscore", {"dense": [("a", 1.0)], "bm25": []})] == ["a"]
    assert [f.id for f in fuse("weighted", LISTS)] == [f.id for f in weighted(LISTS)]


def test_a_list_scaled_from_zero_keeps_its_last_entry():
    # activation is a ratio scale (0: not reached): min-max would give "b" nothing at all
    lists = {"dense": [("x", 0.9), ("y", 0.5)], "graph": [("a", 0.004), ("b", 0.002)]}
    minmax = {f.id: f.score for f in weighted(lists)}
    scaled = {f.id: f.score for f in weighted(lists, from_zero=("graph",))}
    assert minmax["b"] == 0.0 and scaled["b"] == pytest.approx(0.5)
    assert scaled["a"] == minmax["a"] == 1.0 and scaled["x"] == minmax["x"]
    assert {f.id: f.score for f in fuse("weighted", lists, None, 60, ("graph",))} == scaled


@pytest.mark.parametrize("method", ["rrf", "weighted", "zscore", "zscale"])
def test_scores_near_the_float_limit_fuse_as_their_scaled_copies_do(method):
    big = {"a": [("x", 1.7e308), ("y", 1.0e308), ("z", -1.7e308)], "b": [("y", 3.0), ("z", 1.0)]}
    small = {"a": [("x", 1.7), ("y", 1.0), ("z", -1.7)], "b": [("y", 3.0), ("z", 1.0)]}
    got, want = fuse(method, big), fuse(method, small)
    assert all(math.isfinite(f.score) for f in got)
    assert [f.id for f in got] == [f.id for f in want]
    assert [f.score for f in got] == pytest.approx([f.score for f in want])


@pytest.mark.parametrize("method", ["rrf", "weighted", "zscore", "zscale"])
def test_non_finite_scores_are_clamped_to_the_lists_finite_range(method):
    inf, nan = math.inf, math.nan
    lists = {"a": [("x", inf), ("y", 3.0), ("u", 1.0), ("w", nan), ("z", -inf)], "b": [("w", 1.0)]}
    # +inf counts as the highest finite score, NaN and -inf as the lowest
    clamped = {"a": [("x", 3.0), ("y", 3.0), ("u", 1.0), ("w", 1.0), ("z", 1.0)], "b": [("w", 1.0)]}
    got, want = fuse(method, lists), fuse(method, clamped)
    assert all(math.isfinite(f.score) for f in got)
    assert [f.id for f in got] == [f.id for f in want]
    assert [f.score for f in got] == pytest.approx([f.score for f in want])
    assert all(math.isfinite(f.score) for f in fuse(method, {"a": [("x", nan), ("y", inf)]}))


def test_zscore_treats_scores_equal_but_for_rounding_as_ties():
    # an activation list whose scores differ only in the last bits of a float
    noisy = {
        "a": [("x", 3.0), ("y", 2.0), ("z", 1.0)],
        "g": [("z", 0.005000000000000004), ("y", 0.005)],
    }
    plain = {"a": [("x", 3.0), ("y", 2.0), ("z", 1.0)]}
    assert [f.id for f in zscore(noisy)] == [f.id for f in zscore(plain)]
    assert [f.score for f in zscore(noisy)] == pytest.approx([f.score for f in zscore(plain)])


def _random_lists(rng, n_ids=12):
    ids = [f"p{i}" for i in range(n_ids)]
    out = {}
    for name in ("dense", "bm25"):
        picked = rng.sample(ids, rng.randint(2, n_ids))
        scores = sorted((rng.uniform(-1, 20) for _ in picked), reverse=True)
        out[name] = list(zip(picked, scores))
    return out


def test_zscale_ranks_as_zscore_does_without_a_ratio_list():
    rng = random.Random(3)
    for _ in range(200):
        lists = _random_lists(rng)
        weights = {"dense": rng.choice([0.5, 1.0, 2.0]), "bm25": 1.0}
        a, b = zscale(lists, weights), zscore(lists, weights)
        assert [f.id for f in a] == [f.id for f in b]
        assert {f.id: f.ranks for f in a} == {f.id: f.ranks for f in b}
        # the same sum less a constant, in units of six standard deviations
        za, zb = {f.id: f.score for f in a}, {f.id: f.score for f in b}
        top = b[0].id
        assert {c: za[top] - za[c] for c in za} == pytest.approx(
            {c: (zb[top] - zb[c]) / 6 for c in zb}
        )
        assert min(za.values()) >= 0.0


def test_zscale_values_start_at_zero_and_count_in_standard_deviations():
    lists = {"x": [("a", 3.0), ("b", 2.0), ("c", 1.0)], "y": [("d", 5.0)]}
    out = {f.id: f.score for f in zscale(lists)}
    std = (2 / 3) ** 0.5
    # "y" is one score, a tie: nothing; "x"'s lowest counts 0, as what it did not return
    assert out["c"] == out["d"] == 0.0
    assert out["b"] == pytest.approx(1 / (6 * std))
    assert out["a"] == pytest.approx(2 / (6 * std))


def test_zscale_adds_a_ratio_list_as_weighted_does():
    lists = {
        "dense": [("x", 0.9), ("y", 0.7), ("z", 0.5)],
        "graph": [("z", 0.004), ("q", 0.002)],
    }
    plain = {f.id: f.score for f in zscale({"dense": lists["dense"]})}
    out = {f.id: f.score for f in zscale(lists, {"dense": 1.0, "graph": 2.0}, ("graph",))}
    assert out["z"] == pytest.approx(plain["z"] + 2.0 * 1.0)
    assert out["q"] == pytest.approx(0.0 + 2.0 * 0.5)
    assert out["x"] == pytest.approx(plain["x"])  # not reached: the graph adds 0
    graph_as_weighted = {
        f.id: f.score for f in weighted({"graph": lists["graph"]}, None, ("graph",))
    }
    assert out["q"] == pytest.approx(2.0 * graph_as_weighted["q"])
    via = {
        f.id: f.score for f in fuse("zscale", lists, {"dense": 1.0, "graph": 2.0}, 60, ("graph",))
    }
    assert via == out


def _standout(strong: str, flat: str):
    """One retriever finds "hit" far above the forty other passages it returned, and the other
    retriever does not find it; that one's list is flat, best first where the first is best."""
    others = [f"m{i}" for i in range(40)]
    return {
        strong: [("hit", 10.0)] + [(m, 3.0 - 2.0 * i / 40) for i, m in enumerate(others)],
        flat: [(m, 0.6 - 0.1 * i / 40) for i, m in enumerate(others)],
    }


@pytest.mark.parametrize("strong,flat", [("dense", "bm25"), ("bm25", "dense")])
def test_zscale_keeps_one_retrievers_clear_match_on_top(strong, flat):
    lists = _standout(strong, flat)
    equal = {"dense": 1.0, "bm25": 1.0}
    assert zscale(lists, equal)[0].id == "hit"
    # min-max gives the clear match 1.0, the flat list's first 1.0 plus what the other gave it
    assert weighted(lists, equal)[0].id == "m0"


def test_zscale_ties_contribute_nothing():
    lists = {"a": [("x", 3.0), ("y", 2.0)], "b": [("y", 0.005000000000000004), ("x", 0.005)]}
    assert [f.id for f in zscale(lists)] == ["x", "y"]
