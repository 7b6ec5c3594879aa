"""How likely a hit answers the question: ``Hit.match``, ``QueryResult.match`` and ``weak``.

A hit's match is a logistic function of its dense cosine similarity to the question (the
stored passage vector against the question's vector), fitted with ``benchmarks.weak_results``
on the bundled all-MiniLM-L6-v2 embedder: answerable questions (SciFact claims with a relevant
abstract) against unanswerable ones (HotpotQA and LoCoMo questions asked of SciFact), on the
*choose* half of those questions, classes weighted to an even prior. It is reported, not
chosen, on the other half and on the HotpotQA corpus (see ``benchmarks/results/
weak_results.md``). With another embedder the same map is applied but is not calibrated: its
order is still the cosine's, its level may be off.

What it tells: whether the store holds passages close to the question. A question the store
has nothing on (another domain, another corpus) is flagged weak almost always (AUROC 0.999 on
the report sets, 1% of answerable questions flagged); a question on a topic the store covers
whose own answer is missing is not (on SciFact claims whose relevant abstracts were removed,
AUROC 0.66 and 3% flagged; the old ``confidence`` does no better there).

The top BM25 score per query term, retriever agreement and ``QueryResult.confidence`` were
candidate signals too: each alone separated worse on the choose half, and a logistic fit of the
cosine with either changed the choose half's AUROC by at most 0.0001, so the cosine alone is
used (the figures are in the benchmark's results).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..embedders.base import checked
from ..types import Hit

if TYPE_CHECKING:
    from ..components import Components

__all__ = [
    "INTERCEPT",
    "SLOPE",
    "WEAK_BELOW",
    "best_match",
    "match_of",
    "matched",
    "verdict",
    "with_matches",
]

# P(answerable | cosine) = 1 / (1 + exp(-(INTERCEPT + SLOPE * cosine))), fitted on the choose half
INTERCEPT = -15.8874
SLOPE = 38.7795
# a result is weak when its best hit's match is below this: Youden's J on the choose half
# (recall of unanswerable + recall of answerable questions), a cosine of about 0.39
WEAK_BELOW = 0.3155


def match_of(cosine: float) -> float:
    """The calibrated match in [0, 1] of a dense cosine similarity (rounded to 4 places)."""
    z = INTERCEPT + SLOPE * float(cosine)
    if not math.isfinite(z):
        return 0.0
    return round(1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z)))), 4)


def with_matches(
    comps: Components,
    hits: Sequence[Hit],
    qvec: np.ndarray | None,
    dense: Sequence[tuple[str, float]],
) -> list[Hit]:
    """``hits`` with ``match`` set from each one's cosine to ``qvec`` (taken from the dense
    candidate list ``dense`` where the passage is in it, else from its stored vector).

    Without a question vector (dense retrieval off) the hits are returned as they are, their
    match None. A passage whose vector the backend does not hold keeps match None.
    """
    if qvec is None or not hits or comps.backend is None:
        return list(hits)
    cos: dict[str, float] = dict(dense)
    missing = [h.chunk_id for h in hits if h.chunk_id not in cos]
    if missing:
        stored = comps.backend.fetch(missing, namespace=comps.config.backend.namespace)
        q = np.asarray(qvec, dtype=np.float32).ravel()
        for cid, vec in stored.items():
            cos[cid] = float(np.dot(np.asarray(vec, dtype=np.float32).ravel(), q))
    return [
        dataclasses.replace(h, match=match_of(cos[h.chunk_id])) if h.chunk_id in cos else h
        for h in hits
    ]


def matched(comps: Components, hits: Sequence[Hit], text: str) -> list[Hit]:
    """``hits`` found without a question vector (an aggregation count) with their match to
    ``text``, embedded here; as they are when dense retrieval is off."""
    if not hits or comps.backend is None or comps.config.fusion.weights.get("dense", 1.0) <= 0:
        return list(hits)
    embedder = comps.embedder.get()
    return with_matches(comps, hits, checked(embedder, embedder.embed_query(text), None), [])


def best_match(hits: Sequence[Hit]) -> float | None:
    """The highest match among ``hits`` (None when no hit has one)."""
    known = [h.match for h in hits if h.match is not None]
    return max(known) if known else None


def verdict(hits: Sequence[Hit], min_score: float | None) -> tuple[list[Hit], float | None, bool]:
    """The hits kept under ``min_score`` (a hit whose match is below it is dropped; one with
    no match is kept), the best match before dropping, and whether the result is weak (its
    best match below :data:`WEAK_BELOW`, or no hit left)."""
    best = best_match(hits)
    kept = list(hits)
    if min_score is not None:
        kept = [h for h in hits if h.match is None or h.match >= min_score]
    weak = not kept or (best is not None and best < WEAK_BELOW)
    return kept, best, weak
