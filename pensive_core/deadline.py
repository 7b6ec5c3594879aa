"""A time limit for work on this thread, checked between query stages.

A Python thread cannot be stopped from outside, so a server that gives up waiting on a slow
query (504) would leave it running to the end, holding a reader and a worker thread. Instead
the server runs each request :func:`within` its timeout and the query checks the limit as it
enters each stage (:func:`check`): past it, the query stops there with
:class:`DeadlineExceeded` and its reader goes back to the pool. A stage already running (one
embedding call, one index search) finishes first.

Example:
    >>> with within(60.0):
    ...     check()  # well inside the limit: nothing happens
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import PensiveError

__all__ = ["DeadlineExceeded", "within", "check"]

_local = threading.local()


class DeadlineExceeded(PensiveError, TimeoutError):
    """The work ran past the time limit it was given; it stopped between two stages."""


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Give the work done on this thread inside the block ``seconds`` to finish."""
    before = getattr(_local, "at", None)
    at = time.monotonic() + seconds
    _local.at = at if before is None else min(at, before)
    try:
        yield
    finally:
        _local.at = before


def check() -> None:
    """Raise :class:`DeadlineExceeded` if this thread's time limit has passed."""
    at = getattr(_local, "at", None)
    if at is not None and time.monotonic() > at:
        raise DeadlineExceeded("the time limit passed; the work stopped before its next stage")
