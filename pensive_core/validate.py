"""Checks of query arguments shared by the store and conversation memory, so both refuse the
same input with the same message."""

from __future__ import annotations

from typing import Any

from .errors import InputError

__all__ = ["MAX_K", "MAX_QUERY_CHARS", "validate_k", "validate_query"]

MAX_QUERY_CHARS = 20_000  # the longest question (and context piece) a query takes
MAX_K = 1_000  # the most hits a query returns


def validate_query(text: Any) -> str:
    """A query's text, checked.

    Args:
        text: What the caller passed as the question.

    Returns:
        ``text`` unchanged.

    Raises:
        InputError: If it is not a str, is blank, or is longer than :data:`MAX_QUERY_CHARS`.
    """
    if not isinstance(text, str):
        raise InputError(f"query must be a str, got {type(text).__name__}")
    if not text.strip():
        raise InputError("query is empty")
    if len(text) > MAX_QUERY_CHARS:
        raise InputError(f"query is {len(text)} characters; the limit is {MAX_QUERY_CHARS}")
    return text


def validate_k(k: Any) -> int:
    """A query's ``k``, checked.

    Args:
        k: What the caller passed as the number of hits.

    Returns:
        ``k`` unchanged.

    Raises:
        InputError: If it is not an int (a bool is not) between 1 and :data:`MAX_K`.
    """
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"k must be an int between 1 and {MAX_K}, got {k!r}")
    return k
