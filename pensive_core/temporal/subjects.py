"""Supersession by subject, whatever the wording: passages about the same subject, ordered
by valid time, the newer one superseding the older for a question about now (or as of a date).

Statements (:mod:`.statements`) need a sentence worded as a slot and a value; people state a
change in many other ways ("handed the reins to", "was bumped to", "we've switched to", or no
cue at all). This step needs no wording: two of a question's top candidates are about one
subject when

* they come from different documents with different valid times (the documents' timestamps),
* both contain one of the words the question names its subject by (its rarest terms in the
  store: "Atlasly", "Fenwick", "2231"), and
* their embeddings are close (cosine at least ``similarity``);

and the newer one supersedes the older when, besides,

* it answers the question about as well (its fused score at least ``relevance`` times the
  older's): a newer passage that mentions the subject in passing ("celebrated five years in
  the old firehouse") does not replace the older one that answers the question, and
* it is newer in valid time: a passage's valid time is its document's timestamp, or, when
  every date its text names ends before that, the latest of them (a history page written
  in 2025 about 1988 speaks of 1988; "owned by X since 1988" holds from 1988).

A pure function over plain values; the temporal stage (:mod:`pensive_core.query.temporal`)
gathers them and applies the demotion. Passages without a timestamp never take part, so
undated collections (encyclopedia text, papers) are left exactly as retrieval ranked them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["SubjectCandidate", "anchor_terms", "superseded", "valid_time"]


@dataclass(frozen=True)
class SubjectCandidate:
    """One fused candidate as this step sees it.

    Args:
        id: The passage id.
        doc: Its document id.
        score: Its fused score (after the statement step).
        t: Its valid time: the document's timestamp (POSIX seconds); None: not known.
        vec: Its embedding (None: not available; it then takes no part).
        terms: The question's anchor terms the passage contains.
        latest_date: The end of the latest date its text names (POSIX seconds), or None.
    """

    id: str
    doc: str
    score: float
    t: float | None
    vec: np.ndarray | None
    terms: frozenset[str]
    latest_date: float | None = None


def anchor_terms(idf: dict[str, float], share: float = 0.5) -> frozenset[str]:
    """The terms a question names its subject by: those at least ``share`` as rare (by IDF)
    as its rarest term found in the store.

    Args:
        idf: The question's terms found in the store, with their inverse document frequency.
        share: Fraction of the highest IDF a term needs.
    """
    if not idf:
        return frozenset()
    top = max(idf.values())
    return frozenset(t for t, w in idf.items() if w >= share * top)


def _better(new: float, old: float, relevance: float) -> bool:
    """Whether a score ``new`` is at least ``relevance`` of ``old`` (scores may be negative)."""
    if old >= 0:
        return new >= relevance * old
    return new >= old / relevance if relevance > 0 else True


def superseded(
    cands: Sequence[SubjectCandidate],
    at: float | None,
    similarity: float,
    relevance: float,
) -> dict[str, str]:
    """Which candidates a newer one about the same subject supersedes.

    Args:
        cands: The question's top candidates, best first.
        at: Exclusive bound of the time asked about (an ``as_of``), or None for now: a
            passage from that time or later takes no part (it is not known yet then).
        similarity: Least embedding cosine of two passages about one subject.
        relevance: Least fraction of the older passage's score the newer one needs.

    Returns:
        Superseded passage id -> the id of the newest passage superseding it.
    """
    live = [
        c
        for c in cands
        if c.t is not None and c.vec is not None and c.terms and (at is None or c.t < at)
    ]
    if len(live) < 2:
        return {}
    unit = {}
    for c in live:
        assert c.vec is not None
        n = float(np.linalg.norm(c.vec))
        unit[c.id] = c.vec / n if n > 0 else c.vec
    out: dict[str, str] = {}
    newest: dict[str, float] = {}
    when = {c.id: valid_time(c) for c in live}
    for old in live:
        for new in live:
            if new.doc == old.doc or when[new.id] <= when[old.id] or not (old.terms & new.terms):
                continue
            if not _better(new.score, old.score, relevance):
                continue
            if float(unit[old.id] @ unit[new.id]) < similarity:
                continue
            if when[new.id] > newest.get(old.id, float("-inf")):
                newest[old.id] = when[new.id]
                out[old.id] = new.id
    return out


def valid_time(c: SubjectCandidate) -> float:
    """When what a passage says became true: the latest date its text names when that is
    before its document's timestamp (a history page, "since 1988", a look back), else the
    timestamp."""
    assert c.t is not None
    if c.latest_date is not None and c.latest_date < c.t:
        return c.latest_date
    return c.t
