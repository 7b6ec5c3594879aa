"""Post-retrieval steps over passages from any retriever, as pure functions.

Framework adapters (the LlamaIndex node postprocessors, say) hand in what they have -- a text,
a score and a metadata mapping per passage -- and get back new scores, an order, or clipped
texts; they map those back onto their own objects. Nothing here knows a framework, and nothing
mutates its inputs.

* :func:`temporal_rescore`: demote passages whose statements a newer passage in the same list
  supersedes (the store's own supersession rules, see :mod:`pensive_core.temporal.store`), and
  leave out passages dated after an ``as_of`` time.
* :func:`entity_boost`: raise passages that name entities the query names, or that share
  entities with the other passages (a small multiplicative boost that never lowers a score).
* :func:`fit_budget`: the best passages within a token budget, the last one clipped around the
  query's best sentence (never cut to its head).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .errors import InputError
from .fusion import scale_score
from .graph.extract import EntityExtractor, RuleExtractor, normalize_entity
from .memory.prompt import PromptBuilder, clip_passage
from .temporal.dates import parse_date
from .temporal.statements import RuleStatementExtractor, StatementExtractor
from .temporal.store import TemporalView
from .timeutil import ensure_utc

__all__ = [
    "TIME_KEYS",
    "Budgeted",
    "Item",
    "Rescored",
    "entity_boost",
    "fit_budget",
    "item_time",
    "temporal_rescore",
]

#: A passage as an adapter hands it in: ``(text, score, metadata)``.
Item = tuple[str, float, Mapping[str, Any]]

#: Metadata keys read, in order, for a passage's time (its document's time, the reference
#: for relative dates in it).
TIME_KEYS = ("timestamp", "date", "valid_from")


def item_time(metadata: Mapping[str, Any], keys: Sequence[str] = TIME_KEYS) -> datetime | None:
    """The time of a passage from its metadata: the first of ``keys`` that reads as a time.

    Args:
        metadata: The passage's metadata.
        keys: Keys to try, in order. Values may be datetimes, ISO strings, POSIX seconds, or
            a date in words ("2 May 2024").

    Returns:
        A tz-aware UTC datetime, or None when no key holds a readable time.
    """
    for key in keys:
        value = metadata.get(key)
        if value is None or isinstance(value, bool):
            continue
        try:
            return ensure_utc(value)
        except InputError:
            if isinstance(value, str):
                found = parse_date(value)
                if found is not None:
                    return found.start
    return None


@dataclass(frozen=True)
class Rescored:
    """One passage after :func:`temporal_rescore`.

    Args:
        index: Its position in the input.
        score: Its new score (the input score, times ``demote`` if superseded).
        superseded_by: The input position of the passage that supersedes it, or None.
        valid_from: When what it states became true, where known.
        valid_to: When that stopped being true (the superseding statement's time), where known.
    """

    index: int
    score: float
    superseded_by: int | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None


def temporal_rescore(
    items: Sequence[Item],
    *,
    as_of: datetime | None = None,
    demote: float = 0.5,
    extractor: StatementExtractor | None = None,
    time_keys: Sequence[str] = TIME_KEYS,
) -> list[Rescored]:
    """Demote superseded passages and leave out those dated after ``as_of``.

    Statements are extracted from each passage (its time, from ``time_keys``, resolves
    relative dates and is the valid time of statements that give none). Two statements of one
    slot with different values: the newer supersedes the older, as in the store. Passages
    dated after ``as_of`` are left out before supersession is judged, so what was true then
    is not demoted by what came later.

    Args:
        items: ``(text, score, metadata)`` per passage.
        as_of: Only passages dated at or before this time (undated ones always stay).
        demote: Factor applied to a superseded passage's score, in [0, 1].
        extractor: Finds statements (default: the rule-based extractor).
        time_keys: Metadata keys read for a passage's time.

    Returns:
        The kept passages, best first by new score (a superseded one after an equal score).

    Raises:
        InputError: If ``demote`` is outside [0, 1].
    """
    if not 0.0 <= demote <= 1.0:
        raise InputError(f"demote must be a factor in [0, 1], got {demote!r}")
    cutoff = ensure_utc(as_of)
    ext = extractor if extractor is not None else RuleStatementExtractor()
    times = [item_time(meta, time_keys) for _, _, meta in items]
    kept = [i for i, t in enumerate(times) if cutoff is None or t is None or t <= cutoff]
    # record order: undated passages first (by position), then by time -- an undated
    # "change" then supersedes only undated passages before it, never a dated one
    order = sorted(kept, key=lambda i: (times[i] is not None, times[i] or datetime.min, i))
    statements = []
    for i in order:
        t = times[i]
        for st in ext.extract(items[i][0], t):
            statements.append((str(i), st, st.valid_from if st.valid_from is not None else t))
    view = TemporalView.from_statements(statements)
    out = []
    for i in kept:
        vf, vt, by = view.validity(str(i))
        score = float(items[i][1])
        sup = int(by) if by is not None else None
        out.append(
            Rescored(i, scale_score(score, demote) if sup is not None else score, sup, vf, vt)
        )
    out.sort(key=lambda r: (-r.score, r.superseded_by is not None, r.index))
    return out


def _phrase_in(key: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text) is not None


def entity_boost(
    query: str,
    items: Sequence[Item],
    *,
    boost: float = 0.1,
    extractor: EntityExtractor | None = None,
) -> list[float]:
    """Scores raised for passages tied to the query's entities and to each other.

    A passage's factor is ``1 + boost * (q + o)``: ``q`` is the share of the query's entities
    it names (an entity of the passage written in the query counts too, so "who leads acme"
    meets "Acme"), ``o`` the share of the other passages that share an entity with it. The
    factor is at most ``1 + 2 * boost`` and never below 1: no score is lowered.

    Args:
        query: The question.
        items: ``(text, score, metadata)`` per passage.
        boost: The most either signal adds, as a fraction of the score (>= 0).
        extractor: Finds entities (default: the rule-based extractor).

    Returns:
        The new score per passage, in input order.

    Raises:
        InputError: If ``boost`` is negative.
    """
    if boost < 0:
        raise InputError(f"boost must be >= 0, got {boost!r}")
    ext = extractor if extractor is not None else RuleExtractor()
    ents = [frozenset(m.key for m in ext.extract(text) if m.key) for text, _, _ in items]
    q_ents = frozenset(m.key for m in ext.extract(query) if m.key)
    q_norm = normalize_entity(query)
    out = []
    for i, (_, score, _) in enumerate(items):
        mine = ents[i]
        named = (mine & q_ents) | {e for e in mine if _phrase_in(e, q_norm)}
        q = min(1.0, len(named) / max(1, len(q_ents | named))) if named else 0.0
        others = len(items) - 1
        o = (
            sum(1 for j in range(len(items)) if j != i and mine & ents[j]) / others
            if others
            else 0.0
        )
        factor = 1.0 + boost * (q + o)
        out.append(max(float(score), scale_score(float(score), factor)))
    return out


@dataclass(frozen=True)
class Budgeted:
    """One passage kept by :func:`fit_budget`.

    Args:
        index: Its position in the input.
        text: The text kept: whole, or clipped around the query's best sentence.
        clipped: Whether ``text`` is only part of the passage.
        tokens: Tokens of ``text``.
    """

    index: int
    text: str
    clipped: bool
    tokens: int


def fit_budget(
    query: str,
    items: Sequence[Item],
    token_budget: int,
    *,
    tokenizer: str | Callable[[str], int] | Any | None = None,
    min_tokens: int = 16,
) -> list[Budgeted]:
    """The best passages whose texts fit ``token_budget`` tokens together.

    Passages are taken best score first while they fit whole; the first that does not is
    clipped to the room left, around the sentence sharing the most words with the query
    (growing outward sentence by sentence, cuts marked ``[…]``), if at least ``min_tokens``
    are left for it; the rest are left out. Only passage texts are counted, not what a
    framework puts between them.

    Args:
        query: The question clipping aims at.
        items: ``(text, score, metadata)`` per passage.
        token_budget: Tokens the kept texts may take together (>= 1).
        tokenizer: What counts tokens (see :class:`~pensive_core.memory.PromptBuilder`;
            default tiktoken cl100k_base, offline).
        min_tokens: The smallest clipped passage worth keeping.

    Returns:
        The kept passages, best first.

    Raises:
        InputError: On a budget or ``min_tokens`` that is not a positive int.
    """
    for name, value in (("token_budget", token_budget), ("min_tokens", min_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{name} must be a positive int, got {value!r}")
    builder = PromptBuilder(tokenizer, min_item_tokens=min_tokens)
    count = builder.counter.count
    ranked = sorted(range(len(items)), key=lambda i: (-float(items[i][1]), i))
    out: list[Budgeted] = []
    room = token_budget
    for i in ranked:
        text = items[i][0]
        n = count(text)
        if n <= room:
            out.append(Budgeted(i, text, False, n))
            room -= n
            continue
        if room >= min_tokens:
            # the prompt builder's clipping: the query's best sentence, grown outward
            body = clip_passage(builder, text, query, room)
            if body:
                out.append(Budgeted(i, body, True, count(body)))
        break
    return out
