"""A read-only store's warm-up: what its first question needs, made ready in a background
thread while the store opens (``[router] warm``).

A reader is opened to answer questions, and its first one used to pay for everything in turn:
the query model (importing onnxruntime and starting its session), then the graph and statement
views, each loaded once per commit. Made beside the opening instead, the query model loads while
the vector and BM25 indexes are read (their file reads and FAISS's C++ leave the interpreter
free), and the views are ready when the question comes (benchmarks/first_query: 10M tokens).

Nothing here is required: the first question waits for what is still being made and makes
whatever failed itself, raising as it always did. A store closed meanwhile stops the warm-up
before its next step; the thread is not a daemon, so a process never exits in the middle of
a native library's start-up.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .components import Components
    from .embedders.base import Embedder

__all__ = ["THREAD", "Warmer"]

log = logging.getLogger(__name__)

#: The warm-up thread's name.
THREAD = "pensive-warm"


class Warmer:
    """Makes a reader's query model and views in one background thread.

    Args:
        comps: The store being opened (its indexes may not be loaded yet).
        given: An embedder given to the store, warmed in place of one made from the config.
    """

    def __init__(self, comps: Components, given: Embedder | None = None) -> None:
        self._comps = comps
        self._given = given
        self._stop = threading.Event()
        self._ready = threading.Event()
        made: Future[Embedder] = Future()
        if given is None:
            comps.embedder.pending = made  # the first question takes it instead of making one
        self._made = made
        self._thread = threading.Thread(target=self._run, name=THREAD, daemon=False)
        self._thread.start()

    def ready(self) -> None:
        """The graph and statement tables are open: the views may be loaded (beside the
        vector and BM25 indexes, still loading)."""
        self._ready.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the warm-up is over (done, failed or stopped); False on ``timeout``."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self) -> None:
        """Stop before the next step and wait for the thread (the store is closing, or failed
        to open). Safe under the store's lock: the thread waits for it in short waits that
        look for the stop, and loads the views only while holding it."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        comps = self._comps
        try:
            self._embedder()
            if not (self._until(self._ready.wait) and self._until(comps.lock.acquire)):
                return
            try:
                if not (self._stop.is_set() or comps.closed):
                    self._views()
            finally:
                comps.lock.release()
        except Exception as exc:  # noqa: BLE001 - the first question makes it and raises
            log.info("warming %s for queries stopped: %s", comps.path, exc)

    def _embedder(self) -> None:
        try:
            emb = self._given if self._given is not None else self._comps.embedder.make()
            warm = getattr(emb, "warm_query", None)
            if warm is not None:
                warm()
        except BaseException as exc:
            self._made.set_exception(exc)
            raise
        self._made.set_result(emb)

    def _until(self, step: Any) -> bool:
        """``step(timeout=...)`` in short waits until it succeeds; False if stopped first."""
        while not self._stop.is_set():
            if step(timeout=0.05):
                return True
        return False

    def _views(self) -> None:
        comps = self._comps
        if comps.closed:
            return
        if comps.graph_views is not None and comps.graph is not None:
            view = comps.graph_views.state()[0]
            comps.graph_views.kinds(view)  # (the relay's, at every question)
        if comps.temporal_views is not None and comps.temporal is not None:
            comps.temporal_views.view()
