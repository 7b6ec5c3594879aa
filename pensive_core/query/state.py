"""What one query carries from stage to stage, and what L2/L3 hands back."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from .. import deadline
from ..cache import Deps
from ..filters import Filter
from ..fusion import Fused
from ..temporal import TimeIntent
from ..types import Hit, TimeScope

__all__ = ["Answer", "QueryState", "Trace", "elapsed_ms"]


def elapsed_ms(t0: float) -> float:
    """Milliseconds since ``t0`` (a ``time.perf_counter()`` reading)."""
    return (time.perf_counter() - t0) * 1000.0


@dataclass(eq=False)
class Trace:
    """What :meth:`Pensive.explain <pensive_core.Pensive.explain>` records of one question:
    the candidate order after each stage, copied from the lists the router computed (not
    computed again), and what a stage decided about single passages.

    Attributes:
        orders: Stage name -> ``(passage id, score)`` best first, in the order stages ran.
        notes: What stages tell beyond an order (``superseded``: passage -> the newer passage
            that superseded it by subject; ``l3``: why L3 was asked and what it found).
    """

    orders: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    def snap(self, stage: str, rows: Sequence[Fused | Hit]) -> None:
        """Keep a copy of ``rows`` (fused candidates or hits) as the order after ``stage``."""
        self.orders[stage] = [
            (r.chunk_id, r.score) if isinstance(r, Hit) else (r.id, r.score) for r in rows
        ]


@dataclass(eq=False)
class QueryState:
    """One question on its way through L2 (and L3): each stage reads what the ones before it
    left and adds its own part. Made per call; nothing in it outlives the query.

    Attributes:
        text: The question.
        k: How many passages to return.
        cutoff: ``as_of`` (None: none).
        where: The metadata filter (None: none).
        context: Context pieces the question is asked in.
        search_text: What dense and BM25 retrieve with ("": the question; see
            :mod:`.context`).
        qvec: The question's vector (given when an answer is refreshed from L1's record).
        allowed: Ids of the passages the filter lets through (None: no filter).
        intent: The time the question asks about (None: none, or temporal resolution off).
        lists: Each retriever's ``(passage id, score)`` candidates, best first.
        weights: The fusion weight of each list.
        fused: The fused candidates, best first.
        seeds: The graph nodes activation spread from (what learning strengthens).
        relayed: The passages the graph's relay reached, with their scores, best first.
        hits: The answer's passages.
        confidence: L2's (or L3's) confidence in [0, 1].
        tier: ``"L2"`` or ``"L3"``.
        timings: Milliseconds per timed step (``QueryResult.timings``).
        trace: Set by explain: each stage's order is recorded there (None: a plain query).
    """

    text: str
    k: int
    cutoff: datetime | None = None
    where: Filter | None = None
    context: tuple[str, ...] = ()
    search_text: str = ""
    qvec: np.ndarray | None = None
    allowed: frozenset[str] | None = None
    intent: TimeIntent | None = None
    lists: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    fused: list[Fused] = field(default_factory=list)
    seeds: dict[int, float] = field(default_factory=dict)
    relayed: list[tuple[str, float]] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    confidence: float = 0.0
    tier: str = "L2"
    timings: dict[str, float] = field(default_factory=dict)
    trace: Trace | None = None

    def snap(self, stage: str, rows: Sequence[Fused | Hit]) -> None:
        """Record the order after ``stage`` when explaining (a plain query: nothing)."""
        if self.trace is not None:
            self.trace.snap(stage, rows)

    def note(self, key: str, value: Any) -> None:
        """Record what a stage decided, when explaining."""
        if self.trace is not None:
            self.trace.notes[key] = value

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Record the milliseconds the block takes under ``name`` (first: stop here if the
        thread's time limit has passed, see :mod:`pensive_core.deadline`)."""
        deadline.check()
        t = time.perf_counter()
        yield
        self.timings[name] = elapsed_ms(t)


class Answer(NamedTuple):
    """An answer L1 did not have: what the router returns and L1 stores.

    Attributes:
        hits: The passages, best first.
        confidence: In [0, 1].
        tier: ``"L2"`` or ``"L3"``.
        deps: What the answer depends on (for L1's invalidation).
        scope: The time the answer is scoped to.
        relative: The question's time was relative ("last year"): it depends on now, so it
            is not cached.
    """

    hits: list[Hit]
    confidence: float
    tier: str
    deps: Deps
    scope: TimeScope | None = None
    relative: bool = False
