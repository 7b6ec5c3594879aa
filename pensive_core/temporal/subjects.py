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

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from .intent import TimeIntent

__all__ = ["SubjectCandidate", "anchor_terms", "asks_now", "superseded", "valid_time"]

# a question, by its form: a wh-word or an auxiliary first, an imperative asking for an
# answer, or a question mark last; a claim to check or a title is none of these
_QUESTION = re.compile(
    r"^\W*(?:who|whom|whose|what|what's|which|where|where's|when|when's|why|how|how's|is|isn't|"
    r"are|aren't|am|do|does|doesn't|did|has|have|had|can|could|will|would|should|shall|may|"
    r"tell me|show me|give me|find|list|name)\b|\?\W*$",
    re.IGNORECASE,
)
# "when" asked in the present or future ("when is the launch?", "when's the next ferry?") asks
# for what is planned now; "when did / was" asks for a past event, not one time to resolve at
_WHEN_NOW = re.compile(
    r"^\W*(?:when(?:'s|\u2019s|\s+(?:is|are|does|do|will|can|should|shall|must))|"
    r"what (?:time|day|date) (?:is|are|does|do|will))\b",
    re.IGNORECASE,
)


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


def asks_now(
    text: str, intent: TimeIntent | None, cutoff: float | None, now: datetime
) -> tuple[bool, float | None]:
    """Whether supersession by subject applies to a query, and the time it resolves at.

    It applies to a question about now ("who runs X?", "is X still open?", "when is the
    launch?", "... today?") or as of one time (``as_of=`` or "as of 2020"); not to a span,
    a past "when did ...", a "how has it changed", nor to text that is not a question (a
    claim to verify, a title): those ask for no one time at which one passage replaces
    another.

    Args:
        text: The query text.
        intent: The time the question asks about (:func:`.intent.parse_intent`).
        cutoff: The caller's ``as_of`` as an exclusive bound (POSIX seconds), or None.
        now: The current time (a relative "today" covering it reads as now).

    Returns:
        (applies, exclusive time bound or None for now).
    """
    if cutoff is not None:
        return True, cutoff
    if intent is not None:
        if intent.kind == "as_of" and intent.end is not None:
            return True, intent.end.timestamp()
        if intent.kind == "when":
            return bool(_WHEN_NOW.search(text)), None
        if intent.kind == "during" and intent.relative and intent.start and intent.end:
            return intent.start <= now < intent.end, None  # "today", "this week"
        if intent.kind != "latest":
            return False, None
        return True, None
    return bool(_QUESTION.search(text)), None


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
