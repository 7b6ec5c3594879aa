"""Finding the turns of a session that bear on a question.

Three ways (``recall(method=...)``): "hybrid" asks the session's turn index (dense + BM25 +
graph + time), boosts recent turns, adds what the window index finds, lets a strong match lift
the turns either side of it and favours turns by a speaker the question names; "hypervector"
asks the numpy-only selector; "recent" takes the last turns. A short follow-up leaning on the
previous exchange ("and her?") may reuse the last recall instead of searching again.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..types import Hit
from .turns import Turn, TurnStore

if TYPE_CHECKING:
    from ..config import MemoryConfig
    from ..engine import Pensive
    from .hypervector import HypervectorSelector
    from .index import SessionIndex

__all__ = [
    "HybridSearch",
    "LastRecall",
    "by_speaker",
    "hypervector_hits",
    "is_followup_query",
    "marked",
    "recent_hits",
]

# words that point back at the previous exchange; a follow-up has one and hardly anything else
_ANAPHORS = frozenset(
    "he she it they them him her his hers its their theirs that this those these there then "
    "one ones".split()
)
_FILLER = frozenset(
    "and but so also what about how why when where who which really else more other same "
    "is are was were do does did can could would will the a an of to for with on in at".split()
)
_WORD_RE = re.compile(r"[A-Za-z']+")


@dataclass
class LastRecall:
    """A session's last hybrid recall, for a follow-up to reuse.

    Args:
        query: What was asked.
        hits: What was found.
        after_seq: The position of the session's last turn when it was asked.
    """

    query: str
    hits: list[Hit]
    after_seq: int


def is_followup_query(query: str, max_words: int) -> bool:
    """Whether ``query`` is a short follow-up leaning on the previous exchange: at most
    ``max_words`` words, a pronoun pointing back ("and her?", "why did she do that?"), and at
    most one word of its own content (a new subject means a new search)."""
    words = [w.lower() for w in _WORD_RE.findall(query)]
    if not 0 < len(words) <= max_words:
        return False
    if not any(w in _ANAPHORS for w in words):
        return False
    return sum(w not in _ANAPHORS and w not in _FILLER for w in words) <= 1


def recent_hits(turns: Sequence[Turn], session_id: str) -> list[Hit]:
    """``turns`` newest first, scored from 1 down."""
    n = len(turns)
    return [t.to_hit(session_id, 1.0 - i / max(n, 1)) for i, t in enumerate(reversed(turns))]


def hypervector_hits(
    hv: HypervectorSelector,
    log: TurnStore | None,
    session_id: str,
    query: str,
    k: int,
    cutoff: datetime | None,
) -> list[Hit]:
    """The selector's best ``k`` turns (at or before ``cutoff``, if given) that ``log`` holds."""
    ranked = hv.search(query, k if cutoff is None else min(len(hv), k * 4) or k)
    rows = {} if log is None else log.by_seq(int(i[1:]) for i, _ in ranked)
    out = []
    for tid, score in ranked:
        t = rows.get(int(tid[1:]))
        if t is not None and (cutoff is None or t.timestamp <= cutoff):
            out.append(t.to_hit(session_id, float(score)))
    return out[:k]


class HybridSearch:
    """One hybrid recall over a session's indexes and log.

    Args:
        log: The session's log.
        index: The session's indexes.
        memory: The ``[memory]`` settings.
        session_id: The session's id.
    """

    def __init__(
        self, log: TurnStore, index: SessionIndex, memory: MemoryConfig, session_id: str
    ) -> None:
        self.log = log
        self.index = index
        self.memory = memory
        self.session_id = session_id

    def run(self, query: str, k: int, cutoff: datetime | None, adapted: bool) -> list[Hit]:
        """The ``k`` turns that bear on ``query``, best first.

        Args:
            query: The question.
            k: How many turns.
            cutoff: Only turns at or before this time.
            adapted: Whether a recent topic shift has retrieval adapted (the shift's recency
                weight, no context from the turns before the shift).
        """
        log, cfg = self.log, self.memory
        n_turns = len(log)
        if n_turns == 0:
            return []
        store = self.index.turns()
        if store is None:
            return []
        recent = [] if adapted else [t.text for t in log.turns(2)]  # off-topic after a shift
        res = store.query(query, k=min(4 * k, 1000), as_of=cutoff, context=recent or None)
        best: dict[str, Hit] = {}
        for h in res.hits:  # a long turn's passages: the turn once, at its best passage
            if h.doc_id not in best:
                meta = {key: v for key, v in h.metadata.items() if key != "context"}
                best[h.doc_id] = dataclasses.replace(h, metadata=meta)
        last = n_turns - 1
        weight = cfg.shift_recency_weight if adapted else cfg.recency_weight
        for key, h in best.items():
            age = max(0, last - int(h.metadata.get("seq", last)))
            boost = 1.0 + weight * 2.0 ** (-age / cfg.recency_half_life)
            best[key] = dataclasses.replace(h, score=float(h.score * boost))
        windows = self.index.windows(log)
        if windows is not None and cfg.window_weight > 0:
            best = self._add_windows(best, windows, query, k, cutoff)
        if cfg.neighbour_weight > 0 and best:
            best = self._spread(best, cfg.neighbour_weight, cfg.question_gain, cutoff)
        scored = list(best.values())
        if cfg.speaker_weight > 0:
            scored = [by_speaker(h, query, cfg.speaker_weight) for h in scored]
        scored.sort(key=lambda h: (-h.score, h.doc_id))
        return scored[:k]

    def _add_windows(
        self, best: dict[str, Hit], windows: Pensive, query: str, k: int, cutoff: datetime | None
    ) -> dict[str, Hit]:
        """Each turn gains ``window_weight`` x the score of the best window holding it."""
        cfg = self.memory
        n = cfg.window_turns
        prior: dict[int, float] = {}
        for h in windows.query(query, k=min(3 * k, 1000), as_of=cutoff).hits:
            end = int(h.metadata["seq"])
            for seq in range(max(0, end - n + 1), end + 1):
                prior[seq] = max(prior.get(seq, 0.0), h.score)
        by_seq = {int(h.metadata["seq"]): h for h in best.values()}
        rows = self.log.by_seq(set(prior) - set(by_seq))
        out: dict[str, Hit] = {}
        for seq in set(by_seq) | set(prior):
            hit = by_seq.get(seq) or self._reached(rows.get(seq), cutoff, "window")
            if hit is None:
                continue
            gain = cfg.window_weight * prior.get(seq, 0.0)
            out[hit.doc_id] = dataclasses.replace(hit, score=float(hit.score + gain))
        return out

    def _reached(self, turn: Turn | None, cutoff: datetime | None, via: str) -> Hit | None:
        """A turn that neither list found but ``via`` reached, as a hit (None past the cutoff)."""
        if turn is None or (cutoff is not None and turn.timestamp > cutoff):
            return None
        return dataclasses.replace(turn.to_hit(self.session_id), sources={via: 1})

    def _spread(
        self, best: dict[str, Hit], weight: float, question_gain: float, cutoff: datetime | None
    ) -> dict[str, Hit]:
        """A turn next to a strong match gains ``weight`` x that match's score (the larger of
        its two neighbours'): an answer is found by the question just before it, and the
        reverse. After a question the gain is ``1 + question_gain`` times larger."""
        by_seq = {int(h.metadata["seq"]): h for h in best.values()}
        rows = self.log.by_seq({s + d for s in by_seq for d in (-1, 0, 1)})
        out: dict[str, Hit] = {}
        for seq in sorted(set(by_seq) | set(rows)):
            hit = by_seq.get(seq) or self._reached(rows.get(seq), cutoff, "neighbour")
            if hit is None:
                continue
            before, after = by_seq.get(seq - 1), by_seq.get(seq + 1)
            gain = 0.0
            if before is not None:
                asked = (t := rows.get(seq - 1)) is not None and "?" in t.text
                gain = weight * (1.0 + question_gain * asked) * before.score
            if after is not None:
                gain = max(gain, weight * after.score)
            out[hit.doc_id] = dataclasses.replace(hit, score=float(hit.score + gain))
        return out


def by_speaker(hit: Hit, query: str, weight: float) -> Hit:
    """A turn whose speaker the question names ("What did Melanie paint?") gains ``weight``."""
    who = next(
        (v for k in ("speaker", "name") if isinstance(v := hit.metadata.get(k), str) and v.strip()),
        None,
    )
    if who is None or not re.search(rf"\b{re.escape(who.strip())}\b", query, re.IGNORECASE):
        return hit
    return dataclasses.replace(hit, score=float(hit.score * (1.0 + weight)))


def marked(hit: Hit, **extra: Any) -> Hit:
    """``hit`` with ``extra`` added to its metadata."""
    return dataclasses.replace(hit, metadata={**hit.metadata, **extra})
