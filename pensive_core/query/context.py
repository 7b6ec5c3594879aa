"""A question asked in a context (recent turns, say): the context says who or what a question
that names nobody is about, and raises the passages tied to what it names.

Two steps, both only when ``context=`` is given:

* **Before retrieval** (:meth:`ContextStage.expand`): a question that names nothing itself
  ("Where did she grow up?") is retrieved, by dense and BM25 alike, as the question followed by
  the names the context says, latest piece first ("... Scott Derrickson"): what a
  history-aware retriever's rewrite does, without an LLM. A question that names something keeps
  its own words ("Where did Marie Curie grow up?" is not about the person talked of before).
  The names are those the extractor finds in the context, and the graph's multi-word entities
  the context says in any case ("scott derrickson?").
* **After the graph** (:meth:`ContextStage.raise_scores`): the context's activation of a
  passage (1 for a passage of the document about a name the context says, 0.5 for one naming
  it) multiplies the passage's fused score by ``1 + context_gain x`` the activation,
  so a passage both the question and the context reach rises; nothing is lowered and nothing
  the question did not find is added. ``Hit.sources["context"]`` is the passage's rank by the
  context's activation.

The question's own text is what the temporal stage, L3 and the answer's ``query`` see.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..fusion import Fused, scale_score
from ..graph import normalize_entity
from .graph import looks_like_a_name
from .state import QueryState

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["ContextStage"]

_COMMON = 20  # passages naming a name beyond which each is raised less
_READ = 4000  # characters of the context read for names, latest first (a query's cost bound)


class ContextStage:
    """The context's names for retrieval, and its activation over the fused candidates."""

    def __init__(self, comps: Components) -> None:
        self._comps = comps
        # the last context's names, by commit: both steps of one query read them once
        self._names: tuple[int, tuple[str, ...], list[str]] | None = None

    # -- what the context names -------------------------------------------------------------
    def _known(self) -> dict[str, int] | None:
        """The graph's node index (None: no graph)."""
        comps = self._comps
        if comps.graph is None or comps.graph_views is None:
            return None
        return comps.graph_views.state()[2]

    def names(self, text: str) -> list[str]:
        """The names ``text`` writes as names (capitals; not dates, codes or quantities)."""
        return [m.text for m in self._comps.extractor.extract(text) if looks_like_a_name(m)]

    def known_names(self, text: str, index: dict[str, int]) -> list[str]:
        """The graph's multi-word entities ``text`` says, in any case ("scott derrickson")."""
        words = [w.strip('.,;:!?"()') for w in normalize_entity(text).split()]
        found: list[str] = []
        for n in range(min(4, len(words)), 1, -1):  # longest first
            for i in range(len(words) - n + 1):
                gram = " ".join(words[i : i + n])
                if "e:" + gram in index and not any(gram in f for f in found):
                    found.append(gram)
        return found

    def context_names(self, context: tuple[str, ...]) -> list[str]:
        """What the context names, latest piece first, each once (a longer name replaces a
        shorter one it contains): with the graph, only names the store knows. Only the last
        ``_READ`` characters are read, so a long context costs no more than a short one."""
        commit = self._comps.commit_no
        cached = self._names  # one read: another thread may replace it
        if cached is not None and cached[0] == commit and cached[1] == context:
            return cached[2]
        known = self._known()
        names: list[str] = []
        left = _READ
        for piece in reversed(context):
            if left <= 0:
                break
            piece = piece[-left:]  # the end of a piece is its latest part
            left -= len(piece)
            said = self.names(piece)
            if known is not None:
                said = [n for n in said if "e:" + normalize_entity(n) in known]
                said += self.known_names(piece, known)
            for name in said:
                key = normalize_entity(name)
                if key and not any(key in normalize_entity(n) for n in names):
                    names = [n for n in names if normalize_entity(n) not in key] + [name]
        self._names = (commit, context, names)
        return names

    # -- before retrieval -------------------------------------------------------------------
    def expand(self, state: QueryState) -> None:
        """Set ``state.search_text`` to the question followed by the context's names when the
        question names nothing itself (``[fusion] context_names`` names at most; 0: off)."""
        limit = self._comps.config.fusion.context_names
        if not state.context or limit <= 0 or self.names(state.text):
            return
        names = self.context_names(state.context)
        if names:
            state.search_text = f"{state.text} {' '.join(names[:limit])}"

    # -- after the graph --------------------------------------------------------------------
    def activation(self, context: tuple[str, ...]) -> dict[int, float]:
        """Passage rows the context's names reach: a passage of a document about one at 1,
        a passage naming one at 0.5 (shared out when more than ``_COMMON`` passages name it,
        so a name every passage says raises none of them much); the best over names."""
        comps = self._comps
        index = self._known()
        if index is None:
            return {}
        assert comps.graph_views is not None
        view = comps.graph_views.state()[0]
        about, naming = view.edges["about"], view.edges["mentioned_in"]
        act: dict[int, float] = {}
        for name in self.context_names(context):
            n = index["e:" + normalize_entity(name)]
            named = naming.indices[naming.indptr[n] : naming.indptr[n + 1]]
            share = 0.5 * min(1.0, _COMMON / max(1, len(named)))
            for rows, a in (
                (named, share),
                (about.indices[about.indptr[n] : about.indptr[n + 1]], 1.0),
            ):
                for r in rows.tolist():
                    if r < view.n_chunks and a > act.get(r, 0.0):
                        act[r] = a
        return act

    def raise_scores(self, state: QueryState) -> None:
        """Multiply each fused candidate's score by ``1 + context_gain x`` the context's
        activation of it, and record its rank by that activation as ``"context"``."""
        comps = self._comps
        gain = comps.config.graph.context_gain
        if not state.context or gain <= 0 or not state.fused:
            return
        act = self.activation(state.context)
        if not act:
            return
        assert comps.graph_views is not None
        index = comps.graph_views.state()[2]
        on = [f.id for f in state.fused if f.id in index]
        reached = {c: act[index[c]] for c in on if index[c] in act}
        if not reached:
            return
        order = sorted(reached, key=lambda c: (-reached[c], c))
        rank = {c: r for r, c in enumerate(order, start=1)}
        out = []
        for f in state.fused:
            a = reached.get(f.id, 0.0)
            if a <= 0:
                out.append(f)
                continue
            score = scale_score(f.score, 1.0 + gain * a)
            out.append(Fused(f.id, score, {**f.ranks, "context": rank[f.id]}))
        out.sort(key=lambda f: -f.score)  # stable: ties keep the fused order
        state.fused = out
