"""Learning from use (``[graph.learning]``): passages returned often and lately rise (ACT-R
base level), and the graph edges that led to them strengthen (Hebbian).

Answers change as they are used, so a store with learning on never caches answers in L1.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..fusion import Fused
from ..graph.learning import EdgeStrengths, UseHistory
from ..types import Hit

if TYPE_CHECKING:
    from ..archive import DocumentStore
    from ..views import GraphViews

__all__ = ["Learning"]

log = logging.getLogger(__name__)


class Learning:
    """Use history and learned edge weights, and the clock they are kept by.

    Args:
        history: When each passage was used.
        edges: Learned extra weights of graph edges.
        archive: Where a deterministic clock is kept.
        deterministic: Count learning steps instead of reading the wall clock.
        read_only: A reader never advances the clock.

    Attributes:
        version: Moves whenever learned edge weights change (the graph's transition matrix
            is made again).
    """

    def __init__(
        self,
        history: UseHistory,
        edges: EdgeStrengths,
        archive: DocumentStore,
        *,
        deterministic: bool,
        read_only: bool,
    ) -> None:
        self.history = history
        self.edges = edges
        self.archive = archive
        self.deterministic = deterministic
        self.read_only = read_only
        self.version = 0
        self._last = 0.0

    def now(self, tick: bool) -> float:
        """The learning clock: seconds of wall time, or with ``deterministic`` a count of
        learning steps (``tick`` advances it), never going back."""
        if self.deterministic:
            n = float(self.archive.get_meta("learning_clock") or 0)
            if tick and not self.read_only:
                n += 1
                self.archive.set_meta("learning_clock", n)
            return n
        now = max(time.time(), self._last)
        self._last = now
        return now

    def edge_matrix(self, index: Mapping[str, int], n: int) -> Any:
        """The learned edge weights now, as an ``n x n`` matrix over the graph's nodes."""
        return self.edges.as_matrix(index, n, self.now(False))

    def boost(self, fused: list[Fused]) -> list[Fused]:
        """Raise passages used often and lately (ACT-R base level); never lowers a score."""
        boosted = self.history.boost([(f.id, f.score) for f in fused], self.now(False))
        ranks = {f.id: f.ranks for f in fused}
        return [Fused(c, sc, ranks[c]) for c, sc in boosted]

    def learn_from(
        self, hits: Sequence[Hit], seeds: Mapping[int, float], views: GraphViews
    ) -> None:
        """Returned passages count as used; the graph edges that led to them from the
        activation's ``seeds`` strengthen."""
        try:
            now = self.now(True)
            self.history.use([h.chunk_id for h in hits], now)
            view, _, index, _ = views.state()
            reach = views.naming(view)[1]
            mentions = view.edges["mentions"]
            starts = [s for s in seeds if s < view.n_chunks]
            paths: list[tuple[str, str]] = []
            for h in hits:
                row = index.get(h.chunk_id)
                if "graph" not in h.sources or row is None:
                    continue
                into = set(reach.getcol(row).indices.tolist())  # entities leading to it
                for s in starts:
                    for e in sorted(into & set(mentions.getrow(s).indices.tolist())):
                        paths += [(view.nodes[s], view.nodes[e]), (view.nodes[e], h.chunk_id)]
            if paths and self.edges.strengthen(paths, now=now):
                self.version += 1
        except InputError as e:  # a clock another process moved ahead: skip this once
            log.debug("learning skipped: %s", e)

    def forget(self, removed: Sequence[str]) -> None:
        """Passages that no longer exist have no history (and their edges go)."""
        gone = list(removed)
        self.history.forget(gone)
        self.edges.forget(gone)
        self.edges.prune(self.now(False))
        self.version += 1
