"""Query time: demote what no longer holds (or did not hold yet) at the time asked about,
surface what superseded it, and favour passages whose dates fit the question's time.

A pure function over the fused ``(id, score)`` list: scores are multiplied, never replaced,
and nothing is dropped, so the temporal step can only reorder what retrieval found (plus the
statements it surfaces).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..fusion import Fused, scale_score
from .intent import TimeIntent
from .store import TemporalView, spans_fit

__all__ = ["Resolution", "TemporalKnobs", "bounds", "resolve"]

_EPS = 1e-6  # a point in time as a span: [t - eps, t)


@dataclass(frozen=True)
class TemporalKnobs:
    """The query-time settings of ``[temporal]``."""

    demote: float = 0.5
    surface: bool = True
    interval_gain: float = 2.0
    when_gain: float = 0.0
    slot_gain: float = 2.0


@dataclass(frozen=True)
class Resolution:
    """What the temporal step did: the reordered list, and counts for ``timings``/debugging."""

    fused: list[Fused]
    demoted: int = 0
    surfaced: int = 0
    boosted: int = 0


def bounds(intent: TimeIntent | None, at: float | None) -> tuple[float | None, float | None]:
    """The span a question asks about: ``at`` (an explicit ``as_of``, exclusive) wins; None,
    None means "now" (what has not been superseded)."""
    if at is not None:
        return at - _EPS, at
    if intent is None or intent.kind in ("latest", "when", "change"):
        return None, None
    lo = None if intent.start is None else intent.start.timestamp()
    hi = None if intent.end is None else intent.end.timestamp()
    if intent.kind == "as_of" and hi is not None:
        return hi - _EPS, hi
    return lo, hi


def holds(view: TemporalView, i: int, lo: float | None, hi: float | None) -> bool:
    """Whether statement ``i`` holds during ``[lo, hi)``; with both None, whether it holds
    now (nothing has superseded it)."""
    r = view.rows[i]
    if lo is None and hi is None:
        return r.superseded_by is None
    start = float("-inf") if r.t is None else r.t
    if r.superseded_by is None:
        end = float("inf")
    elif r.valid_to is not None:
        end = r.valid_to
    else:  # superseded when, is not known: from when its successor holds, if that is known
        succ = view.rows[r.superseded_by].t
        end = float("-inf") if succ is None else succ
    return start < (float("inf") if hi is None else hi) and end > (
        float("-inf") if lo is None else lo
    )


def holder(view: TemporalView, i: int, lo: float | None, hi: float | None) -> int | None:
    """The statement of ``i``'s slot holding during ``[lo, hi)`` (the latest such)."""
    best = None
    for j in view.chains[view.rows[i].chain]:
        if holds(view, j, lo, hi):
            best = j  # chains run oldest first: the last one holding wins
    return best


def _holding(view: TemporalView, i: int, lo: float | None, hi: float | None) -> int | None:
    """Statement ``i`` if it holds during ``[lo, hi)``, else the one of its slot that does;
    judged by now when no statement of the slot holds then."""
    bounded = lo is not None or hi is not None
    if bounded:
        if holds(view, i, lo, hi):
            return i
        h = holder(view, i, lo, hi)
        if h is not None:
            return h
    return i if holds(view, i, None, None) else holder(view, i, None, None)


def resolve(
    view: TemporalView,
    fused: Sequence[Fused],
    intent: TimeIntent | None,
    at: float | None,
    knobs: TemporalKnobs,
    words: frozenset[str] = frozenset(),
) -> Resolution:
    """Reorder fused candidates by time.

    Args:
        view: Statements and dates, with supersession computed.
        fused: The fused candidates, best first.
        intent: The question's time (None: a question about now).
        at: An explicit ``as_of`` (POSIX seconds, exclusive), or None.
        knobs: Demotion factor, surfacing, gains.
        words: The question's slot words (:func:`slot_key` of it, split): a passage whose
            statement holds and fills the slot the question names rises by ``slot_gain``.

    Returns:
        The candidates re-scored and re-sorted, with counts of what changed.
    """
    lo, hi = bounds(intent, at)
    kind = "as_of" if at is not None else (intent.kind if intent else "latest")
    scores = {f.id: f.score for f in fused}
    ranks = {f.id: f.ranks for f in fused}
    base = dict(scores)  # before the time factors: raised where a passage stands in
    factor = dict.fromkeys(scores, 1.0)
    demoted = surfaced = boosted = 0

    def stand_in(cid: str, score: float) -> None:
        nonlocal surfaced
        if cid not in base:
            surfaced += 1
            ranks[cid] = {"temporal": surfaced}
            factor[cid] = 1.0
        if base.get(cid, float("-inf")) < score:
            base[cid] = score

    # pass 1: what does not hold is demoted; what holds instead stands in its place
    for f in fused:
        info = view.chunks.get(f.id)
        if info is None or not info.statements:
            continue
        if kind != "change":
            # a statement that does not hold at the time asked about, where another statement
            # of its slot does; when none of the slot's statements holds then (the question's
            # date names the slot, "Q3 2024 revenue", rather than a time), it is judged by now
            # the statements about what the question asks (its slot words): another statement
            # in the passage (a side remark) must not shield a stale answer from demotion
            asked = [i for i in info.statements if words and view.slot_match(i, words) > 0]
            instead = [_holding(view, i, lo, hi) for i in asked or info.statements]
            if instead and all(h is not None and h not in info.statements for h in instead):
                factor[f.id] *= knobs.demote
                demoted += 1
                if knobs.surface:
                    for h in instead:
                        assert h is not None
                        stand_in(view.rows[h].chunk, f.score)
        elif knobs.surface:
            # how something changed: every statement of its slot, just below this passage
            for i in info.statements:
                for j in view.chains[view.rows[i].chain]:
                    if view.rows[j].chunk not in base:
                        stand_in(view.rows[j].chunk, scale_score(f.score, 0.999))
    # pass 2: passages that fit the time asked about, or fill the slot it names, rise
    bounded = kind in ("during", "before", "after") and (lo is not None or hi is not None)
    for cid in base:
        info = view.chunks.get(cid)
        if info is None or factor[cid] < 1.0:
            continue
        up = 1.0
        if bounded and knobs.interval_gain and spans_fit(view.dates_of(cid), lo, hi):
            up *= 1 + knobs.interval_gain
        elif kind == "when" and knobs.when_gain and info.dates:
            up *= 1 + knobs.when_gain
        # only slots with a history: the boost picks which changing fact is asked about,
        # and leaves passages whose statements never changed as retrieval ranked them
        changing = [i for i in info.statements if len(view.chains[view.rows[i].chain]) > 1]
        if knobs.slot_gain and words and changing:
            match = max(view.slot_match(i, words) for i in changing)
            up *= 1 + knobs.slot_gain * match
        if up != 1.0:
            factor[cid] *= up
            boosted += 1
    if not demoted and not boosted and not surfaced:
        return Resolution(list(fused))
    out = {c: scale_score(base[c], factor[c]) for c in base}
    order = sorted(out, key=lambda c: -out[c])
    return Resolution([Fused(c, out[c], ranks[c]) for c in order], demoted, surfaced, boosted)


def supported(
    view: TemporalView, chunk_ids: Sequence[str], intent: TimeIntent | None, at: float | None
) -> int:
    """How many of these passages fit the time asked about: a date or a statement in the span
    (bounded questions), a statement that holds now ("latest"), any date ("when")."""
    lo, hi = bounds(intent, at)
    kind = "as_of" if at is not None else (intent.kind if intent else "latest")
    n = 0
    for cid in chunk_ids:
        info = view.chunks.get(cid)
        if info is None:
            continue
        if lo is not None or hi is not None:
            ok = spans_fit(view.dates_of(cid), lo, hi) or any(
                holds(view, i, lo, hi) and view.rows[i].t is not None for i in info.statements
            )
        elif kind == "when":
            ok = bool(info.dates) or any(view.rows[i].t is not None for i in info.statements)
        else:
            ok = any(holds(view, i, None, None) for i in info.statements) or bool(info.dates)
        n += ok
    return n
