"""Spreading activation: reach by hops, hub damping, convergence bonus, threshold, determinism."""

import sqlite3

import numpy as np
import pytest

from pensive_core.graph import RuleExtractor
from pensive_core.graph.activation import ActivationConfig, spread, top_chunks
from pensive_core.graph.store import GraphStore


def build(tmp_path, docs):
    g = GraphStore(sqlite3.connect(tmp_path / "g.sqlite", isolation_level=None))
    for doc, chunks in docs.items():
        g.add_document(doc, chunks, RuleExtractor())
    return g.load()


@pytest.fixture
def two_hop(tmp_path):
    # "Which city was the director of Sinister born in?": Sinister -> Scott Derrickson -> Denver
    return build(
        tmp_path,
        {
            "film": [("film#1", 0, "Sinister is a horror film directed by Scott Derrickson.")],
            "bio": [("bio#1", 0, "Scott Derrickson was born in Denver, Colorado.")],
            "other": [("other#1", 0, "Denver hosts the Colorado Rockies.")],
            "noise": [("noise#1", 0, "Glen or Glenda is a film by Ed Wood.")],
        },
    )


def seed(view, *names):
    row = view.index()
    return {row[n]: 1.0 for n in names}


def test_two_hop_passage_is_reached_within_the_hop_limit(two_hop):
    act = spread(two_hop, seed(two_hop, "e:sinister"), ActivationConfig(hops=3))
    ranked = [c for c, _ in top_chunks(two_hop, act, 4)]
    assert ranked[:2] == ["film#1", "bio#1"]  # one hop, then the bridge's other passage
    assert "noise#1" not in ranked  # nothing links it
    short = spread(two_hop, seed(two_hop, "e:sinister"), ActivationConfig(hops=1))
    assert [c for c, _ in top_chunks(two_hop, short, 4)] == ["film#1"]


def test_convergence_bonus_favours_nodes_two_seeds_reach(two_hop):
    # one hop: film#1 is reached from both seeds, bio#1 from Derrickson only
    s = seed(two_hop, "e:sinister", "e:scott derrickson")
    row = two_hop.index()
    with_bonus = spread(two_hop, s, ActivationConfig(hops=1, convergence=0.5))
    without = spread(two_hop, s, ActivationConfig(hops=1, convergence=0.0))
    assert with_bonus[row["film#1"]] == pytest.approx(1.5 * without[row["film#1"]])
    assert with_bonus[row["bio#1"]] == pytest.approx(without[row["bio#1"]])
    assert with_bonus[row["noise#1"]] == without[row["noise#1"]] == 0.0


def test_a_hub_cannot_dominate(tmp_path):
    docs = {f"d{i}": [(f"d{i}#1", 0, f"Acme Corp filed report number R{i}.")] for i in range(40)}
    docs["key"] = [("key#1", 0, "Acme Corp and Zephyr Labs signed the merger.")]
    docs["rare"] = [("rare#1", 0, "Zephyr Labs was founded in Oslo.")]
    view = build(tmp_path, docs)
    act = spread(view, seed(view, "key#1"), ActivationConfig(hops=2))
    row = view.index()
    hub_share = max(act[row[f"d{i}#1"]] for i in range(40))
    assert act[row["rare#1"]] > 5 * hub_share


def test_threshold_stops_weak_activation(two_hop):
    row = two_hop.index()
    weak = spread(two_hop, {row["e:sinister"]: 0.005}, ActivationConfig(threshold=0.01))
    assert np.count_nonzero(weak[: two_hop.n_chunks]) == 0


def test_activation_is_bounded_and_deterministic(two_hop):
    s = seed(two_hop, "e:sinister", "e:denver", "bio#1")
    a = spread(two_hop, s, ActivationConfig(convergence=0.0, type_weights={"chunk": 1.0}))
    assert a.max() <= 1.0 + 1e-9
    b = spread(
        two_hop,
        dict(reversed(list(s.items()))),
        ActivationConfig(convergence=0.0, type_weights={"chunk": 1.0}),
    )
    np.testing.assert_array_equal(a, b)


def test_type_weights_rank_passages_above_entities(two_hop):
    act = spread(two_hop, seed(two_hop, "film#1"))
    row = two_hop.index()
    assert act[row["bio#1"]] > 0 and act[row["e:scott derrickson"]] > 0
    assert act[row["t:name"]] == 0.0  # type nodes carry nothing by default
