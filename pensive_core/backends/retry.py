"""Retrying a remote backend's request on transient failures, with exponential backoff."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["with_backoff"]

T = TypeVar("T")


def with_backoff(
    fn: Callable[[], T],
    *,
    retries: int,
    backoff_s: float,
    transient: Callable[[Exception], bool],
    fail: Callable[[Exception, int], BaseException],
    wait_hint: Callable[[Exception], float | None] | None = None,
) -> T:
    """Run ``fn``; on an exception ``transient`` accepts, wait and try again, at most
    ``retries`` more times, waiting ``backoff_s`` then doubling (or longer when ``wait_hint``
    returns a server's ``Retry-After``, capped at a minute).

    Raises:
        BaseException: What ``fail(exc, attempts)`` returns (``exc`` itself to re-raise it),
            once the error is not transient or the retries are spent.
    """
    attempt = 0
    while True:
        try:
            return fn()
        except Exception as exc:
            if attempt < retries and transient(exc):
                delay = backoff_s * 2**attempt
                hint = wait_hint(exc) if wait_hint is not None else None
                if hint is not None and hint > 0:
                    delay = max(delay, min(hint, 60.0))
                time.sleep(delay)
                attempt += 1
                continue
            err = fail(exc, attempt + 1)
            if err is exc:
                raise
            raise err from exc
