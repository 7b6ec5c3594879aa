"""Named points in the engine that tools can watch: the crash driver's kill points.

The engine announces entering and leaving each point of :data:`POINTS`; a listener added with
:func:`add_listener` hears every announcement in the process. This is a test hook: the crash
benchmark (``benchmarks/crash.py``) kills its own process at a chosen point to show that no
acknowledged write is lost, and the probes that report which phase a random kill hit use the
same announcements. With no listener, a point costs one list check.

Example:
    >>> seen = []
    >>> remove = add_listener(lambda point, event: seen.append((point, event)))
    >>> with announce("commit"):
    ...     pass
    >>> remove(); seen
    [('commit', 'enter'), ('commit', 'exit')]
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .errors import InputError

__all__ = ["POINTS", "Listener", "add_listener", "announce"]

#: The points, in the order a store meets them: opening it, recovering what a killed process
#: left half done, one batch of an ingest (chunk to derive), a commit (indexes persisted, the
#: archive marked, L1 invalidated), the L1 invalidation inside it, a query, a delete, closing.
POINTS = (
    "open",
    "recover",
    "ingest-batch",
    "commit",
    "l1-invalidate",
    "query",
    "delete",
    "close",
)

#: Called as ``listener(point, event)``; ``event`` is ``"enter"``, ``"exit"`` (the step
#: finished) or ``"fail"`` (it raised). A listener that raises stops the step. Listeners nest
#: like context managers: entering calls them in the order they were added, leaving in the
#: reverse order.
Listener = Callable[[str, str], None]

_listeners: list[Listener] = []
_lock = threading.Lock()


def add_listener(listener: Listener) -> Callable[[], None]:
    """Hear every announcement of every point in this process.

    Returns:
        A function that removes the listener again.

    Raises:
        InputError: If ``listener`` is not callable.
    """
    if not callable(listener):
        raise InputError(f"a hook listener must be callable, got {type(listener).__name__}")
    with _lock:
        _listeners.append(listener)

    def remove() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return remove


@contextmanager
def announce(point: str) -> Iterator[None]:
    """Announce entering ``point`` and leaving it (``"exit"``, or ``"fail"`` on an error).

    Raises:
        InputError: If ``point`` is not one of :data:`POINTS`.
    """
    if not _listeners:
        yield
        return
    if point not in POINTS:
        raise InputError(f"unknown hook point {point!r}; known: {', '.join(POINTS)}")
    for listener in list(_listeners):
        listener(point, "enter")
    try:
        yield
    except BaseException:
        for listener in reversed(list(_listeners)):
            listener(point, "fail")
        raise
    for listener in reversed(list(_listeners)):
        listener(point, "exit")
