"""The entity graph's learning: base-level activation, Hebbian edges, persistence, determinism."""

import math
import sqlite3
import time

import numpy as np
import pytest

from pensive_core.errors import ConfigError, InputError, PensiveError
from pensive_core.graph.learning import BaseLevel, Hebbian, LearningConfig

H = 1000.0  # a half-life, seconds


def open_db(path):
    return sqlite3.connect(path, isolation_level=None)


def table(db, name):
    return db.execute(f"SELECT * FROM {name} ORDER BY 1, 2").fetchall()


# -- base level -----------------------------------------------------------------------------
def test_accumulator_equals_explicit_sum_of_decayed_uses(tmp_path):
    bl = BaseLevel(open_db(tmp_path / "l.sqlite"), half_life_s=H)
    uses = {"a": [0.0, 10.0, 250.0, 251.5, 3000.0], "b": [5.0, 5.0, 4000.0]}
    events = sorted((t, cid) for cid, ts in uses.items() for t in ts)
    for t, cid in events:
        bl.use([cid], now=t)
    lam = math.log(2) / H
    for now in (4000.0, 4321.0, 12_000.0):
        got = bl.value(["a", "b", "never"], now)
        want = [sum(math.exp(-lam * (now - tj)) for tj in uses[c]) for c in ("a", "b")]
        assert got[:2] == pytest.approx(want, rel=1e-12)
        assert got[2] == 0.0


def test_one_use_halves_each_half_life_exactly():
    bl = BaseLevel(half_life_s=H)
    bl.use(["a"], now=100.0)
    assert bl.value(["a"], 100.0)[0] == 1.0
    assert bl.value(["a"], 100.0 + H)[0] == 0.5
    assert bl.value(["a"], 100.0 + 3 * H)[0] == 0.125


def test_recency_and_frequency_both_raise_value():
    bl = BaseLevel(half_life_s=H)
    bl.use(["old"], now=0.0)
    bl.use(["recent"], now=500.0)
    bl.use(["often", "once"], now=600.0)
    bl.use(["often"], now=600.0)  # a separate call at the same time is another use
    bl.use(["often"], now=700.0)
    bl.use(["once"], now=700.0)
    old, recent, often, once = bl.value(["old", "recent", "often", "once"], 800.0)
    assert recent > old > 0
    assert often > once > recent


def test_a_chunk_listed_twice_in_one_call_is_used_once():
    bl = BaseLevel(half_life_s=H)
    bl.use(["a", "a", "b"], now=0.0)
    assert bl.value(["a", "b"], 0.0).tolist() == [1.0, 1.0]
    assert len(bl) == 2


def test_boost_never_lowers_a_score_and_matches_the_formula():
    bl = BaseLevel(half_life_s=H, weight=0.5)
    for i in range(40):
        bl.use(["hot"], now=float(i))
    bl.use(["warm", "neg"], now=0.0)
    scores = [("hot", 0.3), ("cold", 0.9), ("warm", 0.5), ("neg", -0.4), ("zero", 0.0)]
    out = dict(bl.boost(scores, now=50.0))
    for cid, s in scores:
        assert out[cid] >= s
    assert out["cold"] == 0.9 and out["zero"] == 0.0  # unused: unchanged
    assert out["neg"] > -0.4  # a negative score is raised too, not scaled further down
    v = bl.value(["hot"], 50.0)[0]
    level = math.log1p(v)
    assert out["hot"] == pytest.approx(0.3 * (1 + 0.5 * level / (1 + level)), rel=1e-12)
    assert 0.3 < out["hot"] < 0.3 * 1.5  # bounded by 1 + weight however often used


def test_boost_is_bounded_by_one_plus_weight_even_after_many_uses():
    bl = BaseLevel(half_life_s=H, weight=0.2)
    bl.use(["a"], now=0.0)
    for _ in range(5000):
        bl.use(["a"], now=0.0)
    ((_, s),) = bl.boost([("a", 1.0)], now=0.0)
    level = math.log1p(5001.0)
    assert s == pytest.approx(1.0 + 0.2 * level / (1.0 + level), rel=1e-12)
    assert 1.17 < s < 1.2


def test_boost_reorders_best_first_and_does_not_mutate_input():
    bl = BaseLevel(half_life_s=H, weight=0.5)
    for t in range(10):
        bl.use(["b"], now=float(t))
    scores = [("a", 1.0), ("b", 0.95), ("c", 0.5)]
    before = list(scores)
    out = bl.boost(scores, now=10.0)
    assert [c for c, _ in out] == ["b", "a", "c"]
    assert scores == before


def test_boost_preserves_order_and_scores_when_nothing_was_used():
    bl = BaseLevel(half_life_s=H, weight=1.0)
    bl.use(["elsewhere"], now=0.0)
    scores = [("c", 3.0), ("a", 2.0), ("b", 2.0), ("d", -1.0)]  # ties keep input order
    assert bl.boost(scores, now=1.0) == scores
    assert BaseLevel(weight=1.0).boost(scores, now=1.0) == scores


def test_weight_zero_changes_nothing():
    bl = BaseLevel(half_life_s=H, weight=0.0)
    bl.use(["a"], now=0.0)
    assert bl.boost([("b", 2.0), ("a", 1.0)], now=1.0) == [("b", 2.0), ("a", 1.0)]


def test_base_level_forget(tmp_path):
    path = tmp_path / "l.sqlite"
    bl = BaseLevel(open_db(path), half_life_s=H)
    bl.use(["a", "b", "c"], now=0.0)
    assert bl.forget(["a", "c", "missing"]) == 2
    assert bl.value(["a", "b", "c"], 1.0).tolist() == [0.0, 0.5 ** (1 / H), 0.0]
    assert [r[0] for r in table(open_db(path), "graph_base_level")] == ["b"]
    bl.use(["a"], now=2.0)  # a forgotten chunk starts afresh
    assert bl.value(["a"], 2.0)[0] == 1.0


def test_base_level_persistence_round_trip(tmp_path):
    path = tmp_path / "l.sqlite"
    db = open_db(path)
    bl = BaseLevel(db, half_life_s=H)
    for t, ids in [(0.0, ["a", "b"]), (123.25, ["a"]), (900.0, ["c", "a"])]:
        bl.use(ids, now=t)
    want = bl.value(["a", "b", "c"], 1500.0)
    db.close()
    again = BaseLevel(open_db(path), half_life_s=H)
    assert again.value(["a", "b", "c"], 1500.0).tobytes() == want.tobytes()
    rows = table(open_db(path), "graph_base_level")
    assert [(c, last) for c, _, last in rows] == [("a", 900.0), ("b", 0.0), ("c", 900.0)]
    # and the reloaded accumulator goes on as the original would have
    bl2 = BaseLevel(half_life_s=H)
    for t, ids in [(0.0, ["a", "b"]), (123.25, ["a"]), (900.0, ["c", "a"]), (2000.0, ["a"])]:
        bl2.use(ids, now=t)
    again.use(["a"], now=2000.0)
    assert again.value(["a"], 2500.0)[0] == bl2.value(["a"], 2500.0)[0]


def test_reader_sees_another_connections_writes(tmp_path):
    path = tmp_path / "l.sqlite"
    writer = BaseLevel(open_db(path), half_life_s=H)
    reader = BaseLevel(open_db(path), half_life_s=H, read_only=True)
    writer.use(["a"], now=0.0)
    assert reader.value(["a"], 0.0)[0] == 1.0  # loaded lazily
    writer.use(["a"], now=0.0)
    assert reader.value(["a"], 0.0)[0] == 2.0  # reloaded after the other commit
    other = BaseLevel(open_db(path), half_life_s=H)  # a second writer adds to, not over
    other.use(["a"], now=0.0)
    writer.use(["a"], now=0.0)
    assert reader.value(["a"], 0.0)[0] == 4.0


def test_read_only_raises_on_writes_and_creates_nothing(tmp_path):
    path = tmp_path / "l.sqlite"
    db = open_db(path)
    bl = BaseLevel(db, read_only=True)
    heb = Hebbian(db, read_only=True)
    assert bl.value(["a"], 0.0).tolist() == [0.0]  # no table yet: nothing learned
    assert heb.as_matrix({"x": 0, "y": 1}, 2, now=0.0).nnz == 0
    with pytest.raises(PensiveError, match="read-only"):
        bl.use(["a"], now=0.0)
    with pytest.raises(PensiveError, match="read-only"):
        bl.forget(["a"])
    with pytest.raises(PensiveError, match="read-only"):
        heb.strengthen([("x", "y")], now=0.0)
    with pytest.raises(PensiveError, match="read-only"):
        heb.prune(now=0.0)
    with pytest.raises(PensiveError, match="read-only"):
        heb.forget(["x"])
    assert db.execute("SELECT name FROM sqlite_master").fetchall() == []


def test_failed_write_leaves_cache_and_table_unchanged(tmp_path):
    db = open_db(tmp_path / "l.sqlite")
    bl = BaseLevel(db, half_life_s=H)
    bl.use(["a"], now=0.0)
    db.execute("BEGIN")  # the caller's own transaction: ours cannot start
    with pytest.raises(sqlite3.OperationalError):
        bl.use(["a", "b"], now=1.0)
    db.execute("ROLLBACK")
    assert bl.value(["a", "b"], 1.0).tolist() == [0.5 ** (1 / H), 0.0]
    assert len(table(db, "graph_base_level")) == 1


# -- Hebbian --------------------------------------------------------------------------------
def test_strengthen_raises_then_decays_with_half_life_exactly():
    heb = Hebbian(rate=0.5, half_life_s=H, max_weight=10.0, prune_below=0.001)
    assert heb.strengthen([("e:x", "c1")], 1.0, now=100.0) == 1
    assert heb.weight("e:x", "c1", 100.0) == 0.5
    assert heb.weight("e:x", "c1", 100.0 + H) == 0.25
    assert heb.weight("e:x", "c1", 100.0 + 2 * H) == 0.125
    assert heb.weight("c1", "e:x", 100.0) == 0.0  # directional
    heb.strengthen([("e:x", "c1")], 0.5, now=100.0 + H)  # decayed 0.25 + 0.5 * 0.5
    assert heb.weight("e:x", "c1", 100.0 + H) == 0.5
    assert heb.weight("e:x", "c1", 100.0 + 2 * H) == 0.25


def test_strengthen_once_per_edge_per_call_and_zero_amount_adds_nothing():
    heb = Hebbian(rate=0.25, half_life_s=H, prune_below=0.0)
    assert heb.strengthen([("a", "b"), ("a", "b"), ["b", "c"]], now=0.0) == 2
    assert heb.weight("a", "b", 0.0) == 0.25 and heb.weight("b", "c", 0.0) == 0.25
    heb.strengthen([("a", "b")], 0.0, now=H)
    assert heb.weight("a", "b", H) == 0.125


def test_cap_holds():
    heb = Hebbian(rate=0.4, half_life_s=H, max_weight=1.0)
    for i in range(10):
        heb.strengthen([("a", "b")], 1.0, now=float(i))
        assert heb.weight("a", "b", float(i)) <= 1.0
    assert heb.weight("a", "b", 9.0) == 1.0
    assert heb.as_matrix({"a": 0, "b": 1}, 2, now=9.0).max() == 1.0
    assert heb.weight("a", "b", 9.0 + H) == 0.5  # capped when stored, not only when read


def test_pruning_removes_weak_edges(tmp_path):
    path = tmp_path / "l.sqlite"
    heb = Hebbian(open_db(path), rate=1.0, half_life_s=H, max_weight=2.0, prune_below=0.1)
    heb.strengthen([("a", "b")], 1.0, now=0.0)
    heb.strengthen([("b", "c")], 0.15, now=0.0)
    heb.strengthen([("c", "a")], 0.05, now=0.0)  # below the floor from the start
    index = {"a": 0, "b": 1, "c": 2}
    # at t = H: a->b 0.5, b->c 0.075, c->a 0.025; the weak ones are already left out
    m = heb.as_matrix(index, 3, now=H)
    assert m.nnz == 1 and m[0, 1] == 0.5
    assert len(heb) == 3
    assert heb.prune(now=H) == 2
    assert len(heb) == 1
    assert table(open_db(path), "graph_hebbian") == [("a", "b", 1.0, 0.0)]
    assert heb.prune(now=H) == 0


def test_as_matrix_places_weights_and_skips_unknown_nodes():
    heb = Hebbian(rate=0.5, half_life_s=H)
    heb.strengthen([("e:x", "c1"), ("c2", "e:x"), ("gone", "c1")], now=0.0)
    index = {"c1": 0, "c2": 1, "e:x": 2}
    m = heb.as_matrix(index, 4, now=0.0)
    assert m.format == "csr" and m.shape == (4, 4) and m.dtype == np.float32
    dense = m.toarray()
    want = np.zeros((4, 4), dtype=np.float32)
    want[2, 0] = want[1, 2] = 0.5
    np.testing.assert_array_equal(dense, want)
    with pytest.raises(InputError, match="outside"):
        heb.as_matrix(index, 2, now=0.0)


def test_hebbian_forget_removes_edges_at_either_end(tmp_path):
    path = tmp_path / "l.sqlite"
    heb = Hebbian(open_db(path), half_life_s=H)
    heb.strengthen([("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")], now=0.0)
    assert heb.forget(["b"]) == 2
    assert heb.weight("a", "b", 0.0) == 0.0 and heb.weight("b", "c", 0.0) == 0.0
    assert heb.weight("c", "d", 0.0) > 0
    assert [(s, d) for s, d, _, _ in table(open_db(path), "graph_hebbian")] == [
        ("c", "d"),
        ("d", "a"),
    ]


def test_hebbian_persistence_round_trip(tmp_path):
    path = tmp_path / "l.sqlite"
    db = open_db(path)
    heb = Hebbian(db, rate=0.3, half_life_s=H)
    heb.strengthen([("a", "b"), ("b", "c")], 0.7, now=10.0)
    heb.strengthen([("a", "b")], 0.2, now=333.0)
    index = {"a": 0, "b": 1, "c": 2}
    want = heb.as_matrix(index, 3, now=500.0)
    want_ab = heb.weight("a", "b", 500.0)
    db.close()
    again = Hebbian(open_db(path), rate=0.3, half_life_s=H)
    got = again.as_matrix(index, 3, now=500.0)
    assert got.data.tobytes() == want.data.tobytes()
    assert got.indices.tolist() == want.indices.tolist()
    assert got.indptr.tolist() == want.indptr.tolist()
    assert again.weight("a", "b", 500.0) == want_ab > 0


# -- determinism ----------------------------------------------------------------------------
def _script(path):
    db = open_db(path)
    cfg = LearningConfig(enabled=True, hebbian_prune_below=0.05)
    bl, heb = BaseLevel.from_config(cfg, db), Hebbian.from_config(cfg, db)
    t = 1_700_000_000.0
    for step in range(30):
        t += 3600.0 * (1 + step % 7) + 0.125
        ids = [f"c{(step * 7 + k) % 11}" for k in range(3)]
        bl.use(ids, now=t)
        heb.strengthen([(f"e:{step % 5}", cid) for cid in ids], amount=0.1 * (step % 4), now=t)
        if step % 10 == 9:
            heb.prune(now=t)
            bl.forget([f"c{step % 11}"])
            heb.forget([f"c{(step + 3) % 11}"])
    names = [f"c{i}" for i in range(11)] + [f"e:{i}" for i in range(5)]
    index = {n: i for i, n in enumerate(names)}
    m = heb.as_matrix(index, len(names), now=t + 60)
    boosted = bl.boost([(n, 1.0 / (i + 1)) for i, n in enumerate(names[:11])], now=t + 60)
    dump = "\n".join(db.iterdump())
    return (
        bl.value(names[:11], t + 60).tobytes(),
        m.data.tobytes(),
        m.indices.tobytes(),
        m.indptr.tobytes(),
        repr(boosted),
        dump,
    )


def test_same_calls_give_byte_identical_results(tmp_path):
    first, second = _script(tmp_path / "1.sqlite"), _script(tmp_path / "2.sqlite")
    assert first == second
    assert np.frombuffer(first[0]).any()  # the script did learn something


def test_no_clock_is_read(tmp_path, monkeypatch):
    def clock():
        raise AssertionError("the learning module read the clock")

    for name in ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter"):
        monkeypatch.setattr(time, name, clock)
    _script(tmp_path / "l.sqlite")


# -- configuration and bad arguments --------------------------------------------------------
def test_config_defaults_and_from_config():
    cfg = LearningConfig()
    assert cfg.enabled is False
    assert cfg.base_level_half_life_s == 7 * 86_400
    with pytest.raises(AttributeError):
        cfg.enabled = True  # type: ignore[misc]
    cfg = LearningConfig(
        base_level_weight=0.3,
        base_level_half_life_s=60.0,
        hebbian_rate=0.2,
        hebbian_half_life_s=120.0,
        hebbian_max=2.0,
        hebbian_prune_below=0.5,
    )
    bl, heb = BaseLevel.from_config(cfg), Hebbian.from_config(cfg)
    assert (bl.weight, bl.half_life_s) == (0.3, 60.0)
    assert (heb.rate, heb.half_life_s, heb.max_weight, heb.prune_below) == (0.2, 120.0, 2.0, 0.5)


def test_infinite_half_life_means_no_decay():
    bl = BaseLevel(half_life_s=math.inf)
    bl.use(["a"], now=0.0)
    assert bl.value(["a"], 1e12)[0] == 1.0


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: BaseLevel(half_life_s=-1.0), "half_life_s"),
        (lambda: BaseLevel(half_life_s=0.0), "half_life_s"),
        (lambda: BaseLevel(half_life_s=math.nan), "half_life_s"),
        (lambda: BaseLevel(weight=-0.1), "weight"),
        (lambda: Hebbian(half_life_s=-5.0), "half_life_s"),
        (lambda: Hebbian(rate=math.nan), "rate"),
        (lambda: Hebbian(max_weight=0.0), "max_weight"),
        (lambda: Hebbian(max_weight=1.0, prune_below=1.0), "prune_below"),
        (lambda: LearningConfig(hebbian_half_life_s=-1.0), "hebbian_half_life_s"),
        (lambda: LearningConfig(base_level_half_life_s=0.0), "base_level_half_life_s"),
        (lambda: LearningConfig(base_level_weight=math.inf), "base_level_weight"),
        (lambda: BaseLevel(sqlite3.connect(":memory:")), "isolation_level"),
    ],
)
def test_bad_knobs_raise_config_error(make, name):
    with pytest.raises(ConfigError, match=name) as err:
        make()
    assert isinstance(err.value, ValueError)


def test_bad_call_arguments_raise_value_error():
    bl = BaseLevel(half_life_s=H)
    heb = Hebbian(half_life_s=H)
    bl.use(["a"], now=100.0)
    heb.strengthen([("x", "y")], now=100.0)
    cases = [
        (lambda: heb.strengthen([("x", "y")], math.nan, now=200.0), "amount"),
        (lambda: heb.strengthen([("x", "y")], -1.0, now=200.0), "amount"),
        (lambda: heb.strengthen([("x", "y")], math.inf, now=200.0), "amount"),
        (lambda: heb.strengthen([("x", "x")], now=200.0), "self-loop"),
        (lambda: heb.strengthen([("x", "y", "z")], now=200.0), "pairs"),
        (lambda: bl.use(["a"], now=99.0), "earlier"),
        (lambda: bl.value(["a"], 99.0), "earlier"),
        (lambda: bl.boost([("a", 1.0)], now=99.0), "earlier"),
        (lambda: bl.use(["a"], now=math.nan), "finite"),
        (lambda: bl.use("a", now=200.0), "one string"),
        (lambda: bl.use([1], now=200.0), "strings"),
        (lambda: heb.strengthen([("x", "y")], now=50.0), "earlier"),
        (lambda: heb.weight("x", "y", 50.0), "earlier"),
        (lambda: heb.as_matrix({"x": 0, "y": 1}, 2, now=50.0), "earlier"),
        (lambda: heb.prune(now=50.0), "earlier"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError, match=msg) as err:
            call()
        assert isinstance(err.value, InputError)
    # nothing above changed the state
    assert bl.value(["a"], 100.0)[0] == 1.0
    assert heb.weight("x", "y", 100.0) == heb.rate
