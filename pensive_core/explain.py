"""Explain mode: did the expected source reach the context at all, and where was it lost?

:meth:`Pensive.explain <pensive_core.Pensive.explain>` (this module's :func:`explain_query`)
runs a question through the same router code as :meth:`~pensive_core.Pensive.query`, with a
:class:`~pensive_core.query.state.Trace` attached: each stage records the candidate order it
left, copied from the lists it computed, so explain and query cannot drift apart (the final
hits are the query's hits). For each expected document or passage it reports the rank and score
in every stage (dense, BM25, fusion, graph activation and relay, context, temporal, filter,
hits, rerank, L3, final hits, and the prompt ``Conversation.build`` would make at a token
budget), why a stage moved or dropped it, and the stage where it was lost.

Explain changes nothing: the L1 cache is looked at (reported in :attr:`Explanation.l1`) but
neither used nor written, nothing is learned, and no query is counted in ``stats()``.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .errors import InputError, NotFoundError
from .query.request import make_request
from .query.state import QueryState, Trace
from .types import Hit, QueryResult
from .validate import check_text
from .wire import hit_json

if TYPE_CHECKING:
    from .components import Components
    from .engine import Pensive

__all__ = ["STAGES", "ExpectedTrace", "Explanation", "StageInfo", "StageRank", "explain_query"]

#: Every stage explain reports, in the order a question passes them, with its kind: ``list``
#: (a retriever's own candidates), ``order`` (the candidate order after the stage), ``hits``
#: (passages of the answer) or ``prompt``.
STAGES: tuple[tuple[str, str], ...] = (
    ("dense", "list"),
    ("bm25", "list"),
    ("fused", "order"),
    ("graph", "list"),
    ("relay", "list"),
    ("graph_fused", "order"),
    ("context", "order"),
    ("temporal", "order"),
    ("filter", "order"),
    ("aggregation", "hits"),
    ("hits", "hits"),
    ("rerank", "hits"),
    ("l3", "hits"),
    ("final", "hits"),
    ("prompt", "prompt"),
)
_KIND = dict(STAGES)
_LABEL = {"dense": "dense", "bm25": "BM25", "graph": "graph activation", "relay": "the relay"}
_MAX_EXPECT = 100


@dataclass(frozen=True)
class StageInfo:
    """One stage of the explained query.

    Attributes:
        name: One of :data:`STAGES`.
        kind: ``list``, ``order``, ``hits`` or ``prompt``.
        ran: Whether the stage ran for this question (off by config, or not called for).
        size: How many candidates (or hits, or prompt passages) it left.
        note: What it did, in words.
    """

    name: str
    kind: str
    ran: bool
    size: int = 0
    note: str = ""


@dataclass(frozen=True)
class StageRank:
    """Where one expected item stood after one stage.

    Attributes:
        stage: The stage's name.
        rank: 1-based rank (for a document, its best passage's); None when absent.
        score: The score at that stage (None when absent).
        chunk_id: The passage that ranked (None when absent).
        reason: A stable code for what the stage did to it (None: nothing to say):
            ``not_retrieved``, ``added``, ``raised``, ``demoted``, ``superseded``,
            ``outranked`` (the graph or temporal stage raised others above it), ``surfaced``, ``excluded_by_filter``, ``cut_by_k``, ``after_as_of``,
            ``not_in_archive``, ``cut_by_rerank``, ``displaced_by_l3``, ``found_by_l3``,
            ``clipped``, ``cut_by_budget``, ``not_counted`` (a counting question).
        detail: The reason's facts (the superseding passage, the depth, the budget...).
        note: The reason as a sentence.
    """

    stage: str
    rank: int | None = None
    score: float | None = None
    chunk_id: str | None = None
    reason: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True)
class ExpectedTrace:
    """One expected id, traced through every stage that ran.

    Attributes:
        id: The id as given.
        kind: ``document``, ``passage`` or ``missing`` (not in the store).
        doc_id: Its document (None when missing).
        passages: The passages it stands for (a document: all of them).
        archive_only: Its document is kept in the L3 archive only (only L3 can find it).
        stages: Its :class:`StageRank` in each stage that ran, in order.
        found: Whether it is in the final hits (and, with a budget, in the prompt).
        lost_at: The stage where it was lost (``retrieval`` when no retriever found it;
            None when found or missing).
        reason: The reason code at ``lost_at`` (see :class:`StageRank`).
        cause: For an item cut by k: the stage that moved it from within the first k to
            below them (``temporal``, ``graph_fused``...), None when it never was within.
        sentence: The verdict in words.
    """

    id: str
    kind: str
    doc_id: str | None = None
    passages: tuple[str, ...] = ()
    archive_only: bool = False
    stages: tuple[StageRank, ...] = ()
    found: bool = False
    lost_at: str | None = None
    reason: str | None = None
    cause: str | None = None
    sentence: str = ""

    def stage(self, name: str) -> StageRank | None:
        """Its rank in stage ``name`` (None when that stage did not run)."""
        return next((s for s in self.stages if s.stage == name), None)


@dataclass(frozen=True)
class Explanation:
    """What :meth:`Pensive.explain <pensive_core.Pensive.explain>` returns.

    Attributes:
        query: The question.
        k: Hits asked for.
        token_budget: The prompt budget checked (None: no prompt stage).
        stages: Every stage of :data:`STAGES`, whether it ran and what it left.
        items: One :class:`ExpectedTrace` per expected id, in the order given.
        hits: The final hits: exactly what :meth:`~pensive_core.Pensive.query` returns
            when L1 does not answer.
        tier: ``L2`` or ``L3``.
        confidence: The answer's confidence.
        l1: Whether the L1 cache would have answered instead (``enabled``, ``cacheable``,
            ``would_answer``, ``match``, ``hits``: its passage ids, ``same``: whether they
            are the fresh hits'); explain never answers from it.
        verdict: Where the expected items were lost, in one line.
        timings: Milliseconds per stage.
    """

    query: str
    k: int
    token_budget: int | None
    stages: tuple[StageInfo, ...]
    items: tuple[ExpectedTrace, ...]
    hits: tuple[Hit, ...]
    tier: str
    confidence: float
    l1: Mapping[str, Any]
    verdict: str
    timings: Mapping[str, float] = field(default_factory=dict)

    @property
    def missing(self) -> list[str]:
        """The expected ids the store does not hold."""
        return [t.id for t in self.items if t.kind == "missing"]

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-safe values (what ``POST /v1/explain`` returns)."""
        return {
            "query": self.query,
            "k": self.k,
            "token_budget": self.token_budget,
            "tier": self.tier,
            "confidence": float(self.confidence),
            "verdict": self.verdict,
            "l1": dict(self.l1),
            "stages": [dataclasses.asdict(s) for s in self.stages],
            "items": [
                {
                    **{f.name: getattr(t, f.name) for f in dataclasses.fields(t)},
                    "passages": list(t.passages),
                    "stages": [
                        {**dataclasses.asdict(s), "detail": dict(s.detail)} for s in t.stages
                    ],
                }
                for t in self.items
            ],
            "hits": [hit_json(h) for h in self.hits],
            "timings": {k: round(float(v), 3) for k, v in self.timings.items()},
        }

    def render(self) -> str:
        """A plain-text report: per expected item, its rank in each stage and why."""
        budget = f", budget {self.token_budget} tokens" if self.token_budget else ""
        out = [
            f"explain {self.query!r} (k={self.k}{budget}): tier {self.tier}, "
            f"confidence {self.confidence:.2f}",
            f"L1: {_l1_line(self.l1)}",
            f"verdict: {self.verdict}",
        ]
        off = [s.name for s in self.stages if not s.ran]
        if off:
            out.append(f"stages not run: {', '.join(off)}")
        for t in self.items:
            out += ["", t.sentence]
            if t.kind == "missing":
                continue
            out.append(f"  {'stage':<12} {'rank':>5} {'score':>9}  {'passage':<24} why")
            for s in t.stages:
                rank = "-" if s.rank is None else str(s.rank)
                score = "-" if s.score is None else f"{s.score:.4f}"
                cid = _short(s.chunk_id or "-", 24)
                out.append(f"  {s.stage:<12} {rank:>5} {score:>9}  {cid:<24} {s.note}".rstrip())
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _l1_line(l1: Mapping[str, Any]) -> str:
    if not l1.get("enabled"):
        return "off"
    if not l1.get("cacheable"):
        return "not used for this question (context, learning, or another commit)"
    if not l1.get("would_answer"):
        return "would not answer (nothing cached for this question)"
    same = "the same hits" if l1.get("same") else "different hits from the fresh answer"
    return f"would answer ({l1.get('match')} match, {same}); bypassed"


# -- inputs ---------------------------------------------------------------------------------
def _expect_ids(expect: Any) -> list[str]:
    """The expected ids: a str (one id) or a sequence of non-empty strs, each once."""
    if isinstance(expect, str):
        expect = [expect]
    if not isinstance(expect, (list, tuple)) or not all(isinstance(e, str) for e in expect):
        raise InputError(
            "expect must be a document or passage id, or a list of them (str), got "
            f"{type(expect).__name__}"
        )
    ids = list(dict.fromkeys(check_text(e, f"expect[{i}]") for i, e in enumerate(expect)))
    if not ids or any(not e.strip() for e in ids):
        raise InputError("expect needs at least one non-empty document or passage id")
    if len(ids) > _MAX_EXPECT:
        raise InputError(f"expect takes at most {_MAX_EXPECT} ids, got {len(ids)}")
    return ids


def _resolve(comps: Components, ids: Sequence[str]) -> list[ExpectedTrace]:
    """Each id as a passage (a ``Hit.chunk_id``), else a document (a ``Document.id``), else
    missing."""
    archive = comps.archive
    rows = archive.chunks(ids)
    out = []
    for i in ids:
        row = rows.get(i)
        if row is not None:
            out.append(ExpectedTrace(i, "passage", row.doc_id, (i,), bool(row.archive_only)))
            continue
        passages = tuple(c for c, _, _ in archive.doc_chunks(i))
        if passages:
            first = archive.chunks(passages[:1]).get(passages[0])
            only = bool(first is not None and first.archive_only)
            out.append(ExpectedTrace(i, "document", i, passages, only))
        else:
            out.append(
                ExpectedTrace(
                    i, "missing", sentence=f"{i}: not in store (no such document or passage)"
                )
            )
    return out


# -- the run --------------------------------------------------------------------------------
def explain_query(
    store: Pensive,
    text: str,
    expect: str | Sequence[str],
    k: int = 5,
    *,
    token_budget: int | None = None,
    as_of: datetime | None = None,
    filters: Mapping[str, Any] | None = None,
    context: Sequence[str] | None = None,
) -> Explanation:
    """Where each expected document or passage ranked in every stage of a query, and why it
    was lost (:meth:`Pensive.explain <pensive_core.Pensive.explain>` is this, bound).

    Args:
        store: An open store (read-only handles too).
        text: The question.
        expect: Document ids (each of its passages is followed; its best passage is reported
            per stage) or passage ids (``Hit.chunk_id``), or one id as a str.
        k: Hits asked for, as in :meth:`~pensive_core.Pensive.query`.
        token_budget: Also check the prompt ``Conversation.build`` would make of the final
            hits within this many tokens (``[memory]`` tokenizer and shares); None skips it.
        as_of: As in :meth:`~pensive_core.Pensive.query`.
        filters: As in :meth:`~pensive_core.Pensive.query`.
        context: As in :meth:`~pensive_core.Pensive.query`.

    Returns:
        The :class:`Explanation`: ``items`` (per expected id, each stage's rank, score and
        reason, and ``lost_at``), ``stages``, ``hits`` (the query's), ``verdict``, ``l1``.

    Raises:
        InputError: On a bad question, ``k``, filter, budget or ``expect``.
        NotFoundError: When no expected id names a document or passage of the store (ids
            that do not, beside ones that do, are reported as ``missing``).
    """
    comps = store.components
    router = store.router
    req = make_request(text, k, as_of, filters, context)
    ids = _expect_ids(expect)
    if token_budget is not None and (
        isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1
    ):
        raise InputError(f"token_budget must be a positive int or None, got {token_budget!r}")
    if comps.backend is not None:
        comps.embedder.get()  # a one-off model load, as query does
    with comps.lock:
        comps.refresh()
        items = _resolve(comps, ids)
        if all(t.kind == "missing" for t in items):
            raise NotFoundError(
                f"none of the expected ids {ids!r} is a document or passage of {store.path}: "
                "expect takes Document ids (Hit.doc_id) or passage ids (Hit.chunk_id)"
            )
        if "@" in req.text:  # mentions pin documents; what is searched is the rest, as query's
            mentioned = router.pins.resolve(req.text, ())
            if mentioned.ids and mentioned.text.strip():
                req = dataclasses.replace(req, text=mentioned.text)
        l1 = _peek_l1(comps, router, req)
        saved = copy.deepcopy(comps.counters)  # the stages count runs: explain is not one
        state = QueryState(req.text, req.k, req.cutoff, req.where, req.context, trace=Trace())
        try:
            res = router.compute(req, state, time.perf_counter())
        finally:
            for key, value in saved.items():
                if isinstance(value, dict):
                    comps.counters[key].clear()
                    comps.counters[key].update(value)
                else:
                    comps.counters[key] = value
    if l1.get("would_answer"):
        l1["same"] = l1["hits"] == [h.chunk_id for h in res.hits]
    built = _prompt(store, req.text, res.hits, token_budget) if token_budget else None
    return _explanation(comps, req.text, req.k, token_budget, state, res, items, l1, built)


def _peek_l1(comps: Components, router: Any, req: Any) -> dict[str, Any]:
    if comps.l1 is None:
        return {"enabled": False}
    qk = router.cache.key(req)
    if qk is None:
        return {"enabled": True, "cacheable": False, "would_answer": False}
    cached = router.cache.lookup(qk, peek=True)
    if cached is None:
        return {"enabled": True, "cacheable": True, "would_answer": False}
    return {
        "enabled": True,
        "cacheable": True,
        "would_answer": True,
        "match": cached.match,
        "tier": cached.tier,
        "hits": [h.chunk_id for h in cached.hits],
    }


def _prompt(store: Pensive, query: str, hits: Sequence[Hit], budget: int) -> Any:
    """The prompt ``Conversation.build`` makes of these passages in an empty session (its
    ``passage_items``: each expanding to its neighbours)."""
    from .errors import PensiveError
    from .memory.prompt import PromptItem
    from .memory.session_prompt import session_prompt

    items = []
    for h in hits:
        try:
            wide: str | None = store.expand(h, 1)
        except PensiveError:
            wide = None
        items.append(PromptItem(text=h.text, score=h.score, id=f"doc:{h.chunk_id}", expanded=wide))
    return session_prompt(
        store.config.memory,
        budget,
        query=query,
        system="",
        pins=[],
        summaries=[],
        retrieved=items,
        recent=[],
        session_id="",
    )


# -- the report -----------------------------------------------------------------------------
def _explanation(
    comps: Components,
    query: str,
    k: int,
    budget: int | None,
    state: QueryState,
    res: QueryResult,
    items: list[ExpectedTrace],
    l1: dict[str, Any],
    built: Any,
) -> Explanation:
    trace = state.trace
    assert trace is not None
    depth = comps.config.fusion.depth
    rows: dict[str, list[tuple[str, float]]] = {}
    notes: dict[str, str] = {}
    for name in ("dense", "bm25", "graph"):
        if name in state.lists:
            rows[name] = state.lists[name]
            notes[name] = f"{len(state.lists[name])} candidates (depth {depth})"
    if "relay_ms" in state.timings:
        rows["relay"] = list(state.relayed)
        notes["relay"] = f"{len(state.relayed)} passages reached from the top ones"
    rows.update(trace.orders)
    graph_ran = "graph" in rows or "relay" in rows or comps.learning is not None
    if not graph_ran:
        rows.pop("graph_fused", None)
    rows["final"] = [(h.chunk_id, h.score) for h in res.hits]
    l3 = trace.notes.get("l3") or {}
    if "l3" in rows and not l3.get("reason"):
        rows.pop("l3")  # not escalated: the hits as rerank (or the fused order) left them
        notes["l3"] = f"not escalated (confidence {l3.get('confidence', 0.0):.2f})"
    elif "l3" in rows:
        why = "an exact string no hit held" if l3["reason"] == "exact" else "low confidence"
        found = len(l3.get("found", []))
        notes["l3"] = f"escalated to L3 ({why}); the archive gave {found} passages"
    if "fused" in rows:
        notes["fused"] = f"{comps.config.fusion.method} of {', '.join(state.weights)}"
    if "hits" in rows:
        notes["hits"] = f"the first {len(rows['hits'])} candidates the archive holds"
    if built is not None:
        score = dict(rows["final"])
        rows["prompt"] = [(i[4:], score[i[4:]]) for i in built.included if i[4:] in score]
        notes["prompt"] = (
            f"{built.tokens} of {budget} tokens ({built.headroom} kept for the answer)"
        )
    stages = tuple(
        StageInfo(name, kind, name in rows, len(rows.get(name, [])), notes.get(name, ""))
        for name, kind in STAGES
    )
    ctx = _Context(comps, state, rows, built, k)
    traced = tuple(t if t.kind == "missing" else ctx.trace(t) for t in items)
    return Explanation(
        query,
        k,
        budget,
        stages,
        traced,
        tuple(res.hits),
        res.tier,
        res.confidence,
        l1,
        _verdict(traced, budget),
        dict(res.timings),
    )


def _verdict(items: Sequence[ExpectedTrace], budget: int | None) -> str:
    present = [t for t in items if t.kind != "missing"]
    found = [t for t in present if t.found]
    where = "the final hits and the prompt" if budget else "the final hits"
    head = f"{len(found)} of {len(present)} expected in {where}"
    lost = [
        f"{t.id} lost at {t.lost_at} ({t.reason}"
        + (f", moved there by {t.cause})" if t.cause else ")")
        for t in present
        if not t.found
    ]
    missing = [t.id for t in items if t.kind == "missing"]
    parts = [head, *lost]
    if missing:
        parts.append(f"not in store: {', '.join(missing)}")
    return "; ".join(parts)


class _Context:
    """Reads one expected item's place in every stage from the recorded rows."""

    def __init__(
        self,
        comps: Components,
        state: QueryState,
        rows: dict[str, list[tuple[str, float]]],
        built: Any,
        k: int,
    ) -> None:
        self.comps = comps
        self.state = state
        self.rows = rows
        self.built = built
        self.k = k
        self.depth = comps.config.fusion.depth
        trace = state.trace
        assert trace is not None
        self.superseded: dict[str, str] = trace.notes.get("superseded") or {}
        self.l3 = trace.notes.get("l3") or {}

    def find(self, stage: str, passages: Sequence[str]) -> tuple[int, float, str] | None:
        want = set(passages)
        for i, (cid, score) in enumerate(self.rows.get(stage, []), start=1):
            if cid in want:
                return i, float(score), cid
        return None

    def trace(self, item: ExpectedTrace) -> ExpectedTrace:
        out: list[StageRank] = []
        prev: tuple[str, tuple[int, float, str] | None] | None = None  # the last order/hits
        lost: tuple[str, str | None] | None = None
        ever = False
        for name, kind in STAGES:
            if name not in self.rows:
                continue
            at = self.find(name, item.passages)
            reason, detail, note = self.why(name, kind, at, prev, item)
            out.append(
                StageRank(
                    name,
                    None if at is None else at[0],
                    None if at is None else at[1],
                    None if at is None else at[2],
                    reason,
                    detail,
                    note,
                )
            )
            if kind == "list":
                continue
            if at is not None:
                ever, lost = True, None
            elif prev is not None and prev[1] is not None:
                lost = (name, reason)
            prev = (name, at)
        last = prev[1] if prev is not None else None
        found = last is not None
        what = f"{item.id} ({item.kind}" + (
            f", {len(item.passages)} passage{'s' * (len(item.passages) != 1)})"
            if item.kind == "document"
            else ")"
        )
        if item.archive_only:
            what += " [archive only: only L3 can find it]"
        if found:
            assert prev is not None and last is not None
            where = "in the prompt" if prev[0] == "prompt" else "in the final hits"
            final = self.find("final", item.passages)
            rank = final[0] if final is not None else last[0]
            return dataclasses.replace(
                item,
                stages=tuple(out),
                found=True,
                sentence=f"{what}: found, {where} (rank {rank})",
            )
        if not ever and "aggregation" in self.rows:
            lost = ("aggregation", "not_counted")
            note = "not among the passages the count found"
        elif lost is None or not ever:
            lost = ("retrieval", "not_retrieved")
            note = "no retriever found it"
            misses = [s.note for s in out if s.stage in _LABEL and s.note]
            note += f" ({'; '.join(misses)})" if misses else ""
        else:
            note = next((s.note for s in out if s.stage == lost[0]), "")
        cause = self.cause(out) if lost[1] == "cut_by_k" else None
        if cause is not None:
            moved = next(s for s in out if s.stage == cause)
            note += f"; {cause} moved it below them" + (f" ({moved.note})" if moved.note else "")
        return dataclasses.replace(
            item,
            stages=tuple(out),
            found=False,
            lost_at=lost[0],
            reason=lost[1],
            cause=cause,
            sentence=f"{what}: lost at {lost[0]}: {note}",
        )

    def cause(self, out: Sequence[StageRank]) -> str | None:
        """The last order stage that took the item from within the hits' reach to below it."""
        n = len(self.rows.get("hits", []))
        cause = None
        was_in = False
        for s in out:
            if _KIND[s.stage] != "order":
                continue
            now_in = s.rank is not None and s.rank <= n
            if was_in and not now_in:
                cause = s.stage
            was_in = now_in
        return cause

    def why(
        self,
        name: str,
        kind: str,
        at: tuple[int, float, str] | None,
        prev: tuple[str, tuple[int, float, str] | None] | None,
        item: ExpectedTrace,
    ) -> tuple[str | None, dict[str, Any], str]:
        """The reason code, its facts and a sentence for the item at this stage."""
        before = prev[1] if prev is not None else None
        if kind == "list":
            if at is not None:
                return None, {}, ""
            n = len(self.rows[name])
            depth = self.depth
            return (
                "not_retrieved",
                {"depth": depth, "candidates": n},
                f"not retrieved by {_LABEL[name]} within depth {depth}"
                + (f" (it returned {n})" if n < depth else ""),
            )
        if name == "fused" and at is None:
            return "not_retrieved", {}, "found by no retriever"
        if name == "aggregation" and at is None:
            return "not_counted", {}, "not among the passages the count found"
        if name == "graph_fused":
            if at is not None and before is None:
                how = "the relay" if self.find("relay", item.passages) else "graph activation"
                return "added", {"by": how}, f"added by {how}"
            if at is not None and before is not None and at[0] > before[0]:
                return self.outranked(at, before, "graph_fused")
            return self.moved(at, before)
        if name == "temporal":
            return self.temporal(at, before)
        if name == "filter" and at is None and before is not None:
            return "excluded_by_filter", {}, "excluded by the metadata filter"
        if name == "hits" and at is None and before is not None:
            return self.not_a_hit(before)
        if name == "rerank" and at is None and before is not None:
            return (
                "cut_by_rerank",
                {"k": self.k},
                f"the reranker put it below the top {self.k}",
            )
        if name == "l3":
            return self.escalated(at, before)
        if name == "prompt" and at is None and before is not None:
            budget = self.built.budget if self.built is not None else None
            return (
                "cut_by_budget",
                {"token_budget": budget},
                f"cut by token budget: {budget} tokens hold {len(self.rows['prompt'])} of "
                f"{len(self.rows['final'])} passages",
            )
        part = self.built.clipped if self.built is not None else ()
        if name == "prompt" and at is not None and f"doc:{at[2]}" in part:
            return "clipped", {}, "clipped to fit the token budget"
        if at is None:
            return None, {}, ""
        return self.moved(at, before)

    @staticmethod
    def moved(
        at: tuple[int, float, str] | None, before: tuple[int, float, str] | None
    ) -> tuple[str | None, dict[str, Any], str]:
        if at is None or before is None or at[0] == before[0]:
            return None, {}, ""
        return (
            None,
            {"from": before[0]},
            f"{'up' if at[0] < before[0] else 'down'} from {before[0]}",
        )

    def temporal(
        self, at: tuple[int, float, str] | None, before: tuple[int, float, str] | None
    ) -> tuple[str | None, dict[str, Any], str]:
        if at is None:
            return None, {}, ""
        if before is None:
            return "surfaced", {}, "surfaced by temporal: it holds at the time asked"
        if at[1] >= before[1] - 1e-12:
            if at[1] > before[1] + 1e-12:
                return "raised", {"from": before[0]}, f"raised by temporal (from {before[0]})"
            if at[0] > before[0]:
                return self.outranked(at, before)
            return self.moved(at, before)
        cid = at[2]
        newer = self.superseded.get(cid)
        if newer is not None:
            return (
                "superseded",
                {"by": newer, "how": "subject"},
                f"superseded by {newer} (a newer passage about the same subject); demoted "
                f"from {before[0]} to {at[0]}",
            )
        view = self.comps.temporal_views.view() if self.comps.temporal_views else None
        if view is not None:
            _, _, by = view.validity(cid)
            info = view.chunks.get(cid)
            said = [view.rows[i] for i in info.statements] if info is not None else []
            statement = "; ".join(f"{r.slot} = {r.value}" for r in said[:3])
            if by is not None:
                return (
                    "superseded",
                    {"by": by, "how": "statement", "statement": statement},
                    f"superseded by {by} (statement {statement}); demoted from {before[0]} "
                    f"to {at[0]}",
                )
            return (
                "demoted",
                {"statement": statement},
                f"demoted by temporal from {before[0]} to {at[0]}: its statement "
                f"({statement or 'none'}) does not hold at the time asked",
            )
        return "demoted", {}, f"demoted by temporal from {before[0]} to {at[0]}"

    def outranked(
        self, at: tuple[int, float, str], before: tuple[int, float, str], stage: str = "temporal"
    ) -> tuple[str, dict[str, Any], str]:
        """Not demoted itself: passages the stage raised (or added) took its place."""
        order = [n for n, _ in STAGES if n in self.rows and _KIND[n] == "order"]
        prior = order[order.index(stage) - 1]
        was = {cid: i for i, (cid, _) in enumerate(self.rows[prior], start=1)}
        above = [cid for cid, _ in self.rows[stage][: at[0] - 1]]
        passed = [c for c in above if was.get(c, 10**9) > before[0]]
        detail: dict[str, Any] = {"by": passed}
        why = ""
        if stage == "temporal":
            intent = self.state.intent
            asked = "no time" if intent is None else intent.kind
            for end in (intent.start, intent.end) if intent is not None else ():
                if end is not None:
                    asked += f" {end.date().isoformat()}"
            detail["intent"] = asked
            why = f"the question asks about {asked}; "
        name = "the graph stage" if stage == "graph_fused" else stage
        return (
            "outranked",
            detail,
            f"down from {before[0]} to {at[0]}: {name} raised {len(passed)} "
            f"passage{'s' * (len(passed) != 1)} above it ({why}{', '.join(passed[:3])})",
        )

    def not_a_hit(self, before: tuple[int, float, str]) -> tuple[str, dict[str, Any], str]:
        built = self.rows["hits"]
        order = self.rows.get(self._order_before_hits(), [])
        pos = {cid: i for i, (cid, _) in enumerate(order, start=1)}
        last = max((pos.get(cid, 0) for cid, _ in built), default=0)
        rank, cid = before[0], before[2]
        if rank > last:
            n = len(built)
            return (
                "cut_by_k",
                {"rank": rank, "hits": n, "k": self.k},
                f"cut by k: rank {rank} among the candidates; the hits are the first {n}",
            )
        row = self.comps.archive.chunks([cid]).get(cid)
        cutoff = self.state.cutoff
        if row is not None and cutoff is not None and row.timestamp and row.timestamp > cutoff:
            return "after_as_of", {"timestamp": str(row.timestamp)}, "newer than as_of"
        return "not_in_archive", {}, "the archive does not hold it (an interrupted ingest)"

    def _order_before_hits(self) -> str:
        for name in ("filter", "temporal", "context", "graph_fused", "fused"):
            if name in self.rows:
                return name
        return "fused"

    def escalated(
        self, at: tuple[int, float, str] | None, before: tuple[int, float, str] | None
    ) -> tuple[str | None, dict[str, Any], str]:
        why = self.l3.get("reason")
        missing = list(self.l3.get("missing") or [])
        detail = {"why": why, "missing": missing}
        said = "exact strings " + ", ".join(missing) if missing else "low confidence"
        if at is None and before is not None:
            return (
                "displaced_by_l3",
                detail,
                f"escalated to L3 ({said}): pushed out by archive passages",
            )
        if at is not None and before is None:
            return "found_by_l3", detail, f"found by L3's archive search ({said})"
        return self.moved(at, before)
