"""The graph and the statements as loaded for queries: once per commit, shared by the stages
that read them (activation, the focused hop, aggregation, learning; temporal resolution, hit
validity, time scopes, the commit's supersession check)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .graph import ActivationConfig, GraphView, transition
from .graph.incremental import update_view
from .graph.saved import load_view, save_view, view_path
from .temporal import TemporalView

if TYPE_CHECKING:
    from .components import Components

__all__ = ["GraphState", "GraphViews", "TemporalViews"]

log = logging.getLogger(__name__)

GraphState = tuple[GraphView, Any, dict[str, int], ActivationConfig]
#: Up to this many changed documents (or half the passages the view holds, if more) a view is
#: brought forward from the last one loaded rather than built whole from the tables.
_FORWARD_MOST = 2000


class GraphViews:
    """The loaded graph, its transition matrix, node index and activation settings, made once
    per commit (learned edge weights only redo the matrix), and the entity -> passage links."""

    def __init__(self, comps: Components) -> None:
        self._comps = comps
        self._state: (
            tuple[tuple[int, int], GraphView, Any, dict[str, int], ActivationConfig] | None
        ) = None
        self._reach: tuple[GraphView, Any, Any] | None = None
        self._ends: tuple[GraphView, dict[str, list[tuple[str, int]]]] | None = None
        self._kinds: tuple[GraphView, dict[int, str]] | None = None

    def activation_config(self) -> ActivationConfig:
        """``[graph]``'s spreading settings."""
        g = self._comps.config.graph
        return ActivationConfig(
            decay=g.decay,
            hops=g.hops,
            threshold=g.threshold,
            convergence=g.convergence,
            edge_weights=dict(g.edges),
            type_weights={"chunk": 1.0, "entity": g.entity_weight, "type": 0.0},
        )

    def state(self) -> GraphState:
        """``(view, transition matrix, node index, activation config)`` as of this commit."""
        comps = self._comps
        assert comps.graph is not None
        commit = comps.commit_no
        if self._state is None or self._state[0][0] != commit:
            view = self._forward(commit) or self._view()
            if self._state is not None and view is self._state[1]:
                # nothing in the graph changed: its node index and matrix stand
                self._state = ((commit, self._state[0][1]), *self._state[1:])
            else:
                cfg = self.activation_config()
                self._state = ((commit, -1), view, None, view.index(), cfg)
        version, view, matrix, index, cfg = self._state
        learned = comps.learning.version if comps.learning is not None else 0
        if version != (commit, learned):
            # the graph is loaded once per commit; learned weights only redo the matrix
            extra = None
            if comps.learning is not None:  # edges that led to used passages weigh more
                extra = comps.learning.edge_matrix(index, len(view.nodes))
            matrix = transition(view, cfg, extra)
            self._state = ((commit, learned), view, matrix, index, cfg)
        return view, matrix, index, cfg

    def _forward(self, commit: int) -> GraphView | None:
        """The view loaded for an earlier commit brought up to ``commit`` by reading only the
        documents the commits between changed (None: build it whole)."""
        if self._state is None or self._state[0][0] > commit:
            return None
        graph = self._comps.graph
        changed_since = getattr(graph, "changed_since", None)
        if changed_since is None:
            return None  # (an engine that keeps no log)
        old = self._state[1]
        with graph.snapshot():  # type: ignore[union-attr]  # (the log and its rows at once)
            changed = changed_since(self._state[0][0], commit)
            if changed is None or len(changed) > max(_FORWARD_MOST, old.n_chunks // 2):
                return None  # not known, or so much changed that building it whole is cheaper
            if not changed:
                return old
            chunks, mentions, subjects = graph.rows_of(changed)  # type: ignore[union-attr]
            return update_view(
                old,
                changed,
                chunks,
                mentions,
                subjects,
                graph.kinds_of,  # type: ignore[union-attr]
                self._comps.config.graph.max_pair_entities,
            )

    def _saved_at(self) -> Path | None:
        """Where this commit's view is saved (None: the engine keeps no local files)."""
        comps = self._comps
        if comps.storage.name != "embedded" or comps.graph is None:
            return None
        counts = comps.graph.counts()
        stamp = f"{comps.config.graph.max_pair_entities}-{counts['chunks']}-{counts['entities']}"
        return view_path(comps.storage.path / "views", comps.commit_no, stamp)

    def _view(self) -> GraphView:
        """This commit's view: read where a process saved it, else built from the tables and
        saved for the next process (best effort: a read-only disk only costs the build)."""
        comps = self._comps
        assert comps.graph is not None
        path = self._saved_at()
        view = load_view(path) if path is not None else None
        if view is None:
            view = comps.graph.load()
            if path is not None:
                try:
                    save_view(path, view)
                except OSError as exc:
                    log.info("graph view not saved (%s): the next process builds it too", exc)
        return view

    def save(self) -> None:
        """Save this commit's view if no process has (a writer closing: the next process's
        first question then reads it instead of building it)."""
        path = self._saved_at()
        if path is None or path.is_file():
            return
        if self._state is not None and self._state[0][0] == self._comps.commit_no:
            save_view(path, self._state[1])  # built for a question already
        else:
            self._view()

    def naming(self, view: GraphView) -> tuple[Any, Any]:
        """Entity -> the passages naming it or about it, as CSR (rows: an entity's passages)
        and CSC (columns: a passage's entities), made once per loaded graph."""
        if self._reach is None or self._reach[0] is not view:
            linked = (view.edges["mentioned_in"] + view.edges["about"]).tocsr()
            self._reach = (view, linked, linked.tocsc())
        return self._reach[1], self._reach[2]

    def kinds(self, view: GraphView) -> dict[int, str]:
        """Entity row -> its kind (``"name"``, ``"date"``...), read from the ``is_a`` edges
        once per loaded graph."""
        if self._kinds is None or self._kinds[0] is not view:
            is_a = view.edges["is_a"].tocoo()
            # per edge through Python lists, not numpy scalars: a reader redoes this at every
            # commit (12 ms of a ~65 ms catch-up at 1,000 SciFact abstracts, about 3 ms so)
            types, at = np.unique(is_a.col, return_inverse=True)
            names = [view.nodes[t][2:] for t in types.tolist()]
            kinds = dict(zip(is_a.row.tolist(), map(names.__getitem__, at.tolist())))
            self._kinds = (view, kinds)
        return self._kinds[1]

    def named_as(self, view: GraphView, index: dict[str, int], key: str) -> list[int]:
        """The entity rows that name ``key``: its own, and every longer name ending with it
        (an opener the extractor kept: "surprisingly caroline" names "caroline")."""
        if self._ends is None or self._ends[0] is not view:
            ends: dict[str, list[tuple[str, int]]] = {}
            for row, node in enumerate(view.nodes):
                if node.startswith("e:") and " " in node:
                    ends.setdefault(node.rsplit(" ", 1)[1], []).append((node[2:], row))
            self._ends = (view, ends)
        own = index.get("e:" + key)
        last = key.rsplit(" ", 1)[-1]
        longer = [r for k, r in self._ends[1].get(last, ()) if k.endswith(" " + key)]
        return ([own] if own is not None else []) + longer


class TemporalViews:
    """Statements with supersession computed, loaded once per commit, and the supersession
    signature of the last view seen (compared across a commit to find what it demoted)."""

    def __init__(self, comps: Components) -> None:
        self._comps = comps
        self._view: tuple[int, TemporalView] | None = None
        #: Per passage, what supersedes its statements, as of the last view loaded (or the
        #: snapshot taken when a change began); None when none was taken.
        self.signature: dict[str, tuple[str | None, ...]] | None = None

    def view(self) -> TemporalView:
        """The statements as of this commit."""
        comps = self._comps
        assert comps.temporal is not None
        if self._view is None or self._view[0] != comps.commit_no:
            view = comps.temporal.load()
            self._view = (comps.commit_no, view)
            self.signature = view.signature()
        return self._view[1]

    def snapshot(self) -> None:
        """Take the signature before a change, if none is known yet."""
        comps = self._comps
        assert comps.temporal is not None
        if self.signature is None:
            self.signature = comps.temporal.load().signature()

    def superseded_changes(self) -> list[str]:
        """Passages whose supersession this commit changed (compared with before it)."""
        before = self.signature
        self._view = None
        self.view()  # loads this commit's view and sets its signature
        after = self.signature or {}
        if before is None:
            # nothing was cached when the change began (or the view was never loaded): every
            # passage that is superseded now counts as changed
            return [c for c, sig in after.items() if any(x is not None for x in sig)]
        return [c for c in set(before) | set(after) if before.get(c) != after.get(c)]
