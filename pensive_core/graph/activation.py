"""Spreading activation over the entity graph (a pure function of the graph and the seeds).

Each seed starts with its activation and spreads it hop by hop along weighted edges:

* **decay**: what a node passes on is multiplied by ``decay`` per hop;
* **fan-out damping**: a node splits what it passes on among its out-edges in proportion to
  their weights (row-normalised), so a hub that links to thousands of passages gives each only
  a sliver, while a rare entity passes its activation on almost whole;
* **firing threshold**: a node whose new activation is below ``threshold`` does not fire;
* **hop limit**: at most ``hops`` hops from any seed;
* **diminishing returns**: repeated arrivals at one node combine as ``1 - prod(1 - a)`` (so
  activation never exceeds 1 and the tenth arrival adds less than the first);
* **convergence bonus**: a node reached from two or more independent seeds is multiplied by
  ``1 + convergence * (seeds reaching it - 1)``;
* **type weights**: the final activation of a node is scaled by its kind's weight, so passages
  can rank above bare entity nodes.

Seeds are spread side by side, one row each (a sparse product per hop: only the nodes that
fire are touched), which is what lets the convergence bonus count independent seeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from .store import EDGE_TYPES, GraphView

__all__ = ["ActivationConfig", "spread", "top_chunks", "transition"]


@dataclass(frozen=True)
class ActivationConfig:
    """Knobs of :func:`spread` (defaults are placeholders until measured on benchmarks)."""

    decay: float = 0.5
    hops: int = 3
    threshold: float = 0.01
    convergence: float = 0.5
    edge_weights: Mapping[str, float] = field(
        default_factory=lambda: {
            "mentions": 1.0,
            "mentioned_in": 1.0,
            "is_a": 0.0,  # a type node joins every entity of a kind: a hub by construction
            "has_member": 0.0,
            "next": 0.5,
            "prev": 0.5,
            "co_occurs": 0.5,
            "about": 1.0,
            "subject": 1.0,
        }
    )
    type_weights: Mapping[str, float] = field(
        default_factory=lambda: {"chunk": 1.0, "entity": 0.3, "type": 0.0}
    )


def transition(
    view: GraphView, cfg: ActivationConfig, extra: sparse.spmatrix | None = None
) -> sparse.csr_matrix:
    """The row-normalised weighted adjacency: row ``i`` sums to 1 (or 0 for a sink).

    ``extra`` (same shape) is added before normalising: learned (Hebbian) edge weights."""
    n = len(view.nodes)
    a = sparse.csr_matrix((n, n), dtype=np.float32)
    for name in EDGE_TYPES:
        w = cfg.edge_weights.get(name, 0.0)
        if w:
            a = a + view.edges[name] * np.float32(w)
    if extra is not None:
        a = a + sparse.csr_matrix(extra, dtype=np.float32)
    a = sparse.csr_matrix(a)
    out = np.asarray(a.sum(axis=1)).ravel()
    inv = np.divide(1.0, out, out=np.zeros_like(out), where=out > 0)
    return sparse.csr_matrix(sparse.diags(inv.astype(np.float32)) @ a)


def spread(
    view: GraphView,
    seeds: Mapping[int, float],
    cfg: ActivationConfig | None = None,
    matrix: sparse.csr_matrix | None = None,
    *,
    include_seeds: bool = True,
) -> np.ndarray:
    """Activation of every node after spreading from ``seeds`` (node row -> start activation).

    Args:
        view: The loaded graph.
        seeds: Start activations in (0, 1], by node row; each seed is an independent source.
        cfg: The knobs (defaults when None).
        matrix: A precomputed :func:`transition` for ``view`` and ``cfg`` (computed when None).
        include_seeds: False leaves out everything a seed's own row holds at the seed (its
            start, and what came back to it, e.g. through the entity it is about), so a seed
            scores only by what other seeds spread to it (what the graph adds to a retriever
            that already found the seeds).

    Returns:
        One weighted activation per node (``view.nodes`` order), seeds included.
    """
    cfg = cfg or ActivationConfig()
    n = len(view.nodes)
    if not seeds or n == 0:
        return np.zeros(n, dtype=np.float64)
    t = matrix if matrix is not None else transition(view, cfg)
    order = sorted(seeds.items())
    # Only nodes within ``hops`` edges of a seed can be reached: the spreading runs on that
    # sub-graph (rows and columns in ascending node order, so every sum adds the same terms in
    # the same order as over the whole graph), and costs what the seeds reach, not the graph.
    sub = _reachable(t, [node for node, _ in order], max(0, cfg.hops))
    ts = t[sub][:, sub]
    pos = {int(node): i for i, node in enumerate(sub.tolist())}
    # one row per seed, spread together
    act = np.zeros((len(order), len(sub)), dtype=np.float64)
    for r, (node, start) in enumerate(order):
        act[r, pos[node]] = min(1.0, max(0.0, float(start)))
    frontier = act.copy()
    for _ in range(max(0, cfg.hops)):
        frontier[frontier < cfg.threshold] = 0.0  # too weak to fire
        if not frontier.any():
            break
        arrived = np.minimum(cfg.decay * (sparse.csr_matrix(frontier) @ ts).toarray(), 1.0)
        new = 1.0 - (1.0 - act) * (1.0 - arrived)  # diminishing returns
        frontier = new - act
        act = new
    if not include_seeds:
        for r, (node, _) in enumerate(order):
            act[r, pos[node]] = 0.0  # its own start, and whatever it spread back to itself
    miss = np.prod(1.0 - act, axis=0)  # every seed's arrivals, combined the same way
    reached = np.count_nonzero(act >= cfg.threshold, axis=0)
    total = 1.0 - miss
    bonus = 1.0 + cfg.convergence * np.maximum(reached - 1, 0)
    # nodes are ordered passages, entities, types: the weights are three constant blocks
    kind = np.searchsorted(
        np.array([view.n_chunks, view.n_chunks + view.n_entities]), sub, side="right"
    )
    weights = np.array(
        [cfg.type_weights.get(k, 0.0) for k in ("chunk", "entity", "type")], dtype=np.float64
    )[kind]
    out = np.zeros(n, dtype=np.float64)
    out[sub] = total * bonus * weights
    return out


def _reachable(t: sparse.csr_matrix, seeds: list[int], hops: int) -> np.ndarray:
    """Every node within ``hops`` edges of ``seeds`` (seeds included), ascending."""
    seen = np.unique(np.asarray(seeds, dtype=np.int64))
    step = seen
    indptr, indices = t.indptr, t.indices
    for _ in range(hops):
        if not len(step):
            break
        starts, ends = indptr[step], indptr[step + 1]
        if not (ends - starts).sum():
            break
        nxt = np.unique(np.concatenate([indices[a:b] for a, b in zip(starts, ends)]))
        step = np.setdiff1d(nxt, seen, assume_unique=True)
        seen = np.union1d(seen, step)
    return seen


def top_chunks(
    view: GraphView, activation: np.ndarray, k: int, floor: float = 0.0
) -> list[tuple[str, float]]:
    """The ``k`` most activated passages as ``(chunk id, activation)``, best first (ties by id);
    only passages whose activation is above ``floor``."""
    scores = activation[: view.n_chunks]
    order = sorted(
        (i for i in np.flatnonzero(scores > max(floor, 0.0)).tolist()),
        key=lambda i: (-scores[i], view.nodes[i]),
    )
    return [(view.nodes[i], float(scores[i])) for i in order[:k]]
