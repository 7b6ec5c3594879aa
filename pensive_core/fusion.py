"""Rank fusion as pure functions over ``(id, score)`` lists keyed by stable ids.

Each function takes ``{retriever name: [(id, score), ...] best first}`` and per-retriever
weights, and returns one fused list of :class:`Fused` (id, score, ranks), best first. Inputs are
never mutated; weights given are weights used; ties keep the order in which ids were first seen
(retrievers in the order given, then rank). Scores may be any floats: non-finite ones are
clamped to the list's finite range and nothing overflows (see :func:`_dedupe`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Fused", "rrf", "weighted", "zscore", "zscale", "fuse", "scale_score", "FUSERS"]

Ranked = Sequence[tuple[str, float]]

#: A list's scores whose spread (standard deviation, relative to the largest) is at most this
#: are ties for :func:`zscore`.
_TIE = 1e-9

#: :func:`zscale` measures a list's scores above its lowest in units of this many of its
#: standard deviations (the width of mean +- 3 sd, the span distribution-based score fusion
#: maps to 0..1; a list of 100 normally spread scores spans about 5 sd).
_UNIT = 6.0


@dataclass(frozen=True)
class Fused:
    """One fused result: the id, the fused score, and each retriever's 1-based rank."""

    id: str
    score: float
    ranks: dict[str, int]


def _dedupe(items: Ranked) -> list[tuple[str, float]]:
    """One list made safe to combine: each id once (at its best rank), every score finite, and
    the scores divided by the largest magnitude among them.

    The score policy: ``+inf`` counts as the list's highest finite score and ``-inf`` or NaN as
    its lowest (0 when none is finite), so a retriever (a plug-in, a service) that reports a
    non-finite score cannot turn a fused score into NaN. The division changes nothing any
    fusion computes (min-max and z-scores do not move when every score is scaled by one
    positive number, ratios to the maximum neither, ranks not at all) but keeps scores near
    1e308 from overflowing into ``inf`` in a sum, a span or a variance.
    """
    seen: set[str] = set()
    out = []
    for cid, s in items:
        if cid not in seen:  # a retriever listing an id twice counts it once, at its best rank
            seen.add(cid)
            out.append((cid, float(s)))
    finite = [s for _, s in out if math.isfinite(s)]
    if len(finite) < len(out):
        hi, lo = (max(finite), min(finite)) if finite else (0.0, 0.0)
        out = [(c, s if math.isfinite(s) else hi if s == math.inf else lo) for c, s in out]
    scale = max((abs(s) for _, s in out), default=0.0)
    if scale > 0 and scale != 1.0:
        out = [(c, s / scale) for c, s in out]
    return out


def _combine(
    lists: Mapping[str, Ranked],
    weights: Mapping[str, float] | None,
    contribution: Callable[[str, list[tuple[str, float]]], Callable[[int, float], float]],
    missing: Callable[[str, list[tuple[str, float]]], float] | None = None,
) -> list[Fused]:
    order: dict[str, int] = {}
    totals: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    cleaned = {name: _dedupe(items) for name, items in lists.items() if items}
    for name, items in cleaned.items():
        w = 1.0 if weights is None else float(weights.get(name, 1.0))
        f = contribution(name, items)
        for rank, (cid, s) in enumerate(items, start=1):
            order.setdefault(cid, len(order))
            ranks.setdefault(cid, {})[name] = rank
            totals[cid] = totals.get(cid, 0.0) + w * f(rank, s)
    if missing is not None:
        # an id a retriever did not return gets that retriever's floor, weighted
        for name, items in cleaned.items():
            w = 1.0 if weights is None else float(weights.get(name, 1.0))
            if w == 0:
                continue
            floor = missing(name, items)
            for cid in totals:
                if name not in ranks[cid]:
                    totals[cid] += w * floor
    ids = sorted(totals, key=lambda c: (-totals[c], order[c]))
    return [Fused(c, totals[c], dict(ranks[c])) for c in ids]


def rrf(
    lists: Mapping[str, Ranked], weights: Mapping[str, float] | None = None, k: int = 60
) -> list[Fused]:
    """Weighted reciprocal rank fusion: ``sum_r w_r / (k + rank_r)``.

    Args:
        lists: Ranked ``(id, score)`` lists per retriever, best first.
        weights: Per-retriever weight (default 1.0 each).
        k: The RRF constant; larger flattens the rank curve.

    Returns:
        Fused results, best first.
    """
    return _combine(lists, weights, lambda _n, _items: lambda rank, _s: 1.0 / (k + rank))


def weighted(
    lists: Mapping[str, Ranked],
    weights: Mapping[str, float] | None = None,
    from_zero: Collection[str] = (),
) -> list[Fused]:
    """Weighted sum of min-max normalised scores; a missing id scores 0 for that retriever.

    Args:
        lists: Ranked ``(id, score)`` lists per retriever, best first.
        weights: Per-retriever weight (default 1.0 each).
        from_zero: Retrievers whose scores are on a ratio scale where 0 means "not found"
            (spreading activation): normalised by their maximum alone, so a list's last
            entry keeps what it scored instead of dropping to 0.

    Returns:
        Fused results, best first.
    """

    def contribution(name: str, items: list[tuple[str, float]]) -> Callable[[int, float], float]:
        scores = [s for _, s in items]
        lo, hi = (0.0 if name in from_zero else min(scores)), max(scores)
        span = hi - lo
        return lambda _r, s: (s - lo) / span if span > 0 else 1.0

    return _combine(lists, weights, contribution)


def _stats(items: list[tuple[str, float]]) -> tuple[float, float]:
    """A list's mean and standard deviation; the deviation is 0 when its scores are ties."""
    scores = [s for _, s in items]
    mean = sum(scores) / len(scores)
    var = sum((s - mean) ** 2 for s in scores) / len(scores)
    std = math.sqrt(var)
    # scores equal but for rounding (0.005 and 0.005000000000000004) are ties: z-scoring
    # them would turn the last bits of a float into a full unit of evidence (scores are
    # scaled to a largest magnitude of 1, so this is relative)
    return mean, std if std > _TIE else 0.0


def zscore(lists: Mapping[str, Ranked], weights: Mapping[str, float] | None = None) -> list[Fused]:
    """Weighted sum of z-scored scores (distribution-based fusion).

    An id a retriever did not return is given that retriever's lowest z-score: it was at best as
    good as the last one returned. A list whose scores are all equal (to nine digits, relative
    to the largest) contributes nothing: its differences are rounding, not evidence.

    Args:
        lists: Ranked ``(id, score)`` lists per retriever, best first.
        weights: Per-retriever weight (default 1.0 each).

    Returns:
        Fused results, best first.
    """

    def contribution(_name: str, items: list[tuple[str, float]]) -> Callable[[int, float], float]:
        mean, std = _stats(items)
        return lambda _r, s: (s - mean) / std if std > 0 else 0.0

    def floor(_name: str, items: list[tuple[str, float]]) -> float:
        mean, std = _stats(items)
        return (min(s for _, s in items) - mean) / std if std > 0 else 0.0

    return _combine(lists, weights, contribution, floor)


def zscale(
    lists: Mapping[str, Ranked],
    weights: Mapping[str, float] | None = None,
    from_zero: Collection[str] = (),
) -> list[Fused]:
    """Weighted sum of each list's scores above its lowest, in units of six of its standard
    deviations: min-max normalisation with the span replaced by the spread.

    The lowest score returned counts 0, as an id the list did not return does, so scores are
    on the scale :func:`weighted` uses (0: no evidence) and the stages after fusion that
    multiply or add to them (time, the graph) work as they do there. Ranks are those
    :func:`zscore` gives (the same sum less a constant per list, scaled) when no list is
    ``from_zero``. What differs from :func:`weighted` is that a list counts by how far its best
    stands out from the rest of it, not by its span: one retriever's clear match, far above
    everything else it returned (an identifier only BM25 finds, a paraphrase only the dense
    retriever finds), scores above 1 and is not outscored by passages middling in both lists,
    and a list with no clear match (scores close together) scores below 1 at its top. A list
    whose scores are all equal (to nine digits, relative to the largest) contributes nothing.

    Args:
        lists: Ranked ``(id, score)`` lists per retriever, best first.
        weights: Per-retriever weight (default 1.0 each).
        from_zero: Lists on a ratio scale where 0 means "not found" (spreading activation):
            scaled by their maximum, as in :func:`weighted`, so they add to a fused score what
            they add there.

    Returns:
        Fused results, best first.
    """

    def contribution(name: str, items: list[tuple[str, float]]) -> Callable[[int, float], float]:
        if name in from_zero:
            hi = max(s for _, s in items)
            return lambda _r, s: s / hi if hi > 0 else 1.0
        _mean, std = _stats(items)
        lo = min(s for _, s in items)
        return lambda _r, s: (s - lo) / (_UNIT * std) if std > 0 else 0.0

    return _combine(lists, weights, contribution)


FUSERS = {"rrf": rrf, "weighted": weighted, "zscore": zscore, "zscale": zscale}


def scale_score(score: float, factor: float) -> float:
    """``score`` moved by ``factor`` in the direction the factor says, whatever its sign (fused
    scores may be negative under z-score fusion): below 1 lowers it, above 1 raises it."""
    if score >= 0:
        return score * factor
    return score / factor if factor > 0 else float("-inf")


def fuse(
    method: str,
    lists: Mapping[str, Ranked],
    weights: Mapping[str, float] | None = None,
    k: int = 60,
    from_zero: Collection[str] = (),
) -> list[Fused]:
    """Dispatch to the fusion function ``method`` names (``rrf``, ``weighted``, ``zscore``,
    ``zscale``); ``from_zero`` is passed to :func:`weighted` and :func:`zscale`."""
    if method == "rrf":
        return rrf(lists, weights, k)
    if method == "weighted":
        return weighted(lists, weights, from_zero)
    if method == "zscore":
        return zscore(lists, weights)
    if method == "zscale":
        return zscale(lists, weights, from_zero)
    raise KeyError(method)  # as FUSERS[method] would
