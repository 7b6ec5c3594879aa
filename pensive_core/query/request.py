"""Request validation: the one place a query's inputs are checked (the text and ``k`` by the
checks in :mod:`pensive_core.validate`, which conversation recall shares).

:func:`make_request` turns what :meth:`Pensive.query <pensive_core.Pensive.query>` was given
into a :class:`QueryRequest`, or raises :class:`~pensive_core.errors.InputError` naming what
was wrong. Conversation recall and the server validate through the same functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import InputError
from ..filters import Filter, parse_filter
from ..timeutil import ensure_utc
from ..validate import (
    MAX_K,
    MAX_QUERY_CHARS,
    check_text,
    validate_k,
    validate_min_score,
    validate_query,
)
from .pins import validate_pins

__all__ = [
    "MAX_K",
    "MAX_QUERY_CHARS",
    "QueryRequest",
    "make_request",
    "validate_context",
    "validate_k",
    "validate_min_score",
    "validate_query",
]


@dataclass(frozen=True)
class QueryRequest:
    """A validated query.

    Args:
        text: The question.
        k: How many passages to return.
        cutoff: ``as_of`` made tz-aware UTC (None: no cutoff).
        where: The parsed metadata filter (None: none).
        context: Non-empty context pieces (recent turns, say).
        min_score: Hits whose ``match`` is below it are dropped (None: none are).
        pins: Document ids forced into the result (see :mod:`.pins`).
    """

    text: str
    k: int
    cutoff: datetime | None = None
    where: Filter | None = None
    context: tuple[str, ...] = ()
    min_score: float | None = None
    pins: tuple[str, ...] = ()


def validate_context(context: Any) -> tuple[str, ...]:
    """A query's context: a sequence of strings (a bare string is one piece), each limited
    like a query; None is no context. Blank pieces are dropped.

    Raises:
        InputError: On another type, more than 100 pieces, an over-long piece or one that
            does not encode as UTF-8.
    """
    if context is None:
        return ()
    if isinstance(context, str):
        context = [context]
    if not isinstance(context, (list, tuple)) or not all(isinstance(c, str) for c in context):
        raise InputError("context must be a str or a list of str")
    if len(context) > 100 or any(len(c) > MAX_QUERY_CHARS for c in context):
        raise InputError(f"context is limited to 100 pieces of {MAX_QUERY_CHARS} characters each")
    for i, piece in enumerate(context):
        check_text(piece, f"context[{i}]")
    return tuple(c for c in context if c.strip())


def make_request(
    text: Any,
    k: Any,
    as_of: datetime | None,
    filters: Mapping[str, Any] | None,
    context: Any,
    min_score: Any = None,
    pins: Any = None,
) -> QueryRequest:
    """Validate a query's inputs, in the order they are named.

    Raises:
        InputError: On an empty, over-long or non-string query, a bad ``k``, an ``as_of``
            that is not a time in the years 1 to 9999 once in UTC, a malformed filter (or one
            comparing with NaN or an infinity), a bad context, a ``min_score`` that is not
            None or a number in [0, 1], bad ``pins``, or a string anywhere that does not encode
            as UTF-8.
    """
    text = validate_query(text)
    k = validate_k(k)
    cutoff = ensure_utc(as_of)
    where = parse_filter(filters)
    ctx = validate_context(context)
    score = validate_min_score(min_score)
    return QueryRequest(text, k, cutoff, where, ctx, score, validate_pins(pins))
