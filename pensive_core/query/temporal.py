"""The temporal stage: the time a question asks about, supersession and as-of resolution of
L2's candidates, and the time scope an answer reports."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..fusion import Fused, scale_score
from ..temporal import TemporalKnobs, TimeIntent, parse_intent, resolve, slot_key, supported
from ..temporal.subjects import SubjectCandidate, anchor_terms, asks_now, superseded
from ..timeutil import utcnow
from ..types import Hit, TimeScope
from .state import QueryState

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["TemporalStage", "as_of_bound"]


def as_of_bound(cutoff: datetime | None) -> float | None:
    """``as_of`` as the resolver's exclusive bound (POSIX seconds): as_of itself is included."""
    return None if cutoff is None else cutoff.timestamp() + 1e-6


class TemporalStage:
    """Demotes what does not hold at the time asked about and surfaces what does
    (``[temporal]``); off when the store has no temporal index.

    Its one cache: the intent of each question without a relative time (an L1 answer does not
    parse it again).
    """

    def __init__(self, comps: Components) -> None:
        self._comps = comps
        self._intents: dict[str, TimeIntent | None] = {}

    @property
    def on(self) -> bool:
        """Whether the store resolves time."""
        return self._comps.temporal is not None

    def settings(self) -> tuple[Any, ...]:
        """What of ``[temporal]`` shapes an answer (part of L1's key)."""
        if self._comps.temporal is None:
            return ()
        t = self._comps.config.temporal  # attribute reads: a model_dump costs an L1 hit its budget
        return (
            t.demote,
            t.surface,
            t.interval_gain,
            t.when_gain,
            t.slot_gain,
            t.question_dates,
            t.subjects,
            t.subject_window,
            t.subject_similarity,
            t.subject_relevance,
        )

    def intent(self, text: str) -> TimeIntent | None:
        """The time the question asks about (relative phrases read against now); remembered
        per question, so an L1 answer does not parse it again."""
        if text in self._intents:
            return self._intents[text]
        intent = self._read_intent(text)
        if intent is None or not intent.relative:  # "last week" moves with the clock
            if len(self._intents) >= 8192:
                self._intents.clear()
            self._intents[text] = intent
        return intent

    def _read_intent(self, text: str) -> TimeIntent | None:
        if self._comps.temporal is None:
            return None
        if self._comps.config.temporal.question_dates:
            return parse_intent(text, utcnow())
        # dates in the question ignored: still tell "now" and "how did it change"
        intent = parse_intent(text, None)
        return intent if intent is not None and intent.start is intent.end is None else None

    def run(self, state: QueryState) -> None:
        """Resolve the top ``[fusion] depth`` fused candidates in time."""
        comps = self._comps
        if comps.temporal is None or not state.fused:
            return
        assert comps.temporal_views is not None
        with state.timed("temporal_ms"):
            c = comps.config.temporal
            knobs = TemporalKnobs(c.demote, c.surface, c.interval_gain, c.when_gain, c.slot_gain)
            depth = comps.config.fusion.depth
            words = frozenset(slot_key(state.text).split())
            fused = state.fused
            res = resolve(
                comps.temporal_views.view(),
                fused[:depth],
                state.intent,
                as_of_bound(state.cutoff),
                knobs,
                words,
            )
            state.fused = res.fused + fused[depth:]
            if c.subjects:
                state.fused = self.subjects(state)

    def subjects(self, state: QueryState) -> list[Fused]:
        """Supersession by subject (:mod:`pensive_core.temporal.subjects`) among the top
        ``[temporal] subject_window`` candidates, for a question about now or as of a time;
        a superseded passage's score is multiplied by ``[temporal] demote``."""
        comps = self._comps
        c = comps.config.temporal
        applies, at = asks_now(state.text, state.intent, as_of_bound(state.cutoff), utcnow())
        if not applies:
            return state.fused  # a span, a past "when", a change, not a question
        window = state.fused[: c.subject_window]
        if len(window) < 2:
            return state.fused
        ids = [f.id for f in window]
        rows = comps.archive.chunks(ids)
        dated = [i for i in ids if (r := rows.get(i)) is not None and r.timestamp is not None]
        if len(dated) < 2 or comps.backend is None:
            return state.fused
        vecs = comps.backend.fetch(dated, namespace=comps.config.backend.namespace)
        anchors = anchor_terms(self._idf(state.text))
        if not anchors:
            return state.fused
        assert comps.temporal_views is not None
        view = comps.temporal_views.view()
        tokenize = self._tokenize
        cands = []
        for f in window:
            row = rows.get(f.id)
            if row is None or row.timestamp is None:
                continue
            info = view.chunks.get(f.id)
            ends = [e for _, e in info.dates] if info is not None else []
            cands.append(
                SubjectCandidate(
                    f.id,
                    row.doc_id,
                    f.score,
                    row.timestamp.timestamp(),
                    vecs.get(f.id),
                    anchors & frozenset(tokenize(row.text)),
                    max(ends) if ends else None,
                )
            )
        older = superseded(cands, at, c.subject_similarity, c.subject_relevance)
        state.note("superseded", dict(older))
        if not older:
            return state.fused
        # the newer passage stands in for what it supersedes (as a surfaced statement does):
        # it takes the older one's score if that was higher; the older one is demoted
        score = {f.id: f.score for f in window}
        lift: dict[str, float] = {}
        for old, new in older.items():
            lift[new] = max(lift.get(new, score[new]), score[old])
        out = [
            Fused(f.id, scale_score(f.score, c.demote), f.ranks)
            if f.id in older
            else Fused(f.id, lift[f.id], f.ranks)
            if f.id in lift
            else f
            for f in state.fused
        ]
        out.sort(key=lambda f: -f.score)
        return out

    def _tokenize(self, text: str) -> list[str]:
        tok = getattr(self._comps.sparse, "tokenizer", None)
        return tok.tokenize(text) if tok is not None else self._comps.words.tokenize(text)

    def _idf(self, text: str) -> dict[str, float]:
        """The question's terms found in the store, with their IDF (every term 1.0 when the
        sparse index does not tell document frequencies)."""
        terms = set(self._tokenize(text))
        freq = getattr(self._comps.sparse, "doc_freq", None)
        if freq is None:
            return dict.fromkeys(terms, 1.0)
        n = max(1, self._comps.sparse.n_live)
        return {t: math.log(1 + n / d) for t, d in freq(sorted(terms)).items() if d > 0}

    def scope(
        self, intent: TimeIntent | None, cutoff: datetime | None, hits: Sequence[Hit]
    ) -> TimeScope | None:
        """The time an answer is scoped to, and how many of its hits support it."""
        comps = self._comps
        if comps.temporal is None or (intent is None and cutoff is None):
            return None
        assert comps.temporal_views is not None
        n = supported(
            comps.temporal_views.view(), [h.chunk_id for h in hits], intent, as_of_bound(cutoff)
        )
        if cutoff is not None:
            return TimeScope("as_of", None, cutoff, "as_of", n)
        assert intent is not None
        return TimeScope(intent.kind, intent.start, intent.end, "question", n)

    def history(self, chunk_id: str) -> list[Hit]:
        """Every passage stating a value of the slots ``chunk_id`` states, ordered by when
        each became true (empty when it states nothing tracked)."""
        comps = self._comps
        assert comps.temporal_views is not None
        view = comps.temporal_views.view()
        info = view.chunks.get(chunk_id)
        if info is None or not info.statements:
            return []
        members = sorted(
            {j for i in info.statements for j in view.chains[view.rows[i].chain]},
            key=lambda j: (view.rows[j].t if view.rows[j].t is not None else float("inf"), j),
        )
        ids = list(dict.fromkeys(view.rows[j].chunk for j in members))
        rows = comps.archive.chunks(ids)
        out = []
        for n, c in enumerate(ids, start=1):
            row = rows.get(c)
            if row is None:
                continue
            vf, vt, by = view.validity(c)
            out.append(
                Hit(
                    row.doc_id,
                    c,
                    row.text,
                    0.0,
                    row.metadata,
                    row.timestamp,
                    sources={"temporal": n},
                    valid_from=vf,
                    valid_to=vt,
                    superseded_by=by,
                )
            )
        return out
