"""The graph stage: spreading activation from L2's top passages (and the question's names),
the focused hop, and the learning boost (a question's context: :mod:`.context`).

Activation's passages are fused with L2's lists as a third list (``graph``, at ``[graph]
weight``); with ``[graph] cycles`` > 1 each cycle seeds from what the last one recalled. The
focused hop reads, in L2's top passages, the sentence that names what the question names and
follows the other names there to the passages they lead to (see :class:`GraphStage`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..chunking import split_sentences
from ..fusion import Fused, fuse
from ..graph import GraphView, normalize_entity, spread, top_chunks
from .state import QueryState

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["GraphStage", "looks_like_a_name", "padded_key", "says_any"]

FROM_ZERO = ("graph",)  # activation: 0 is "not reached", so the graph's list is scaled by its top
_WORDS_ONLY = re.compile(r"[^\w]+")  # whole words match whole words


def padded_key(key: str) -> str:
    """An entity key as whole words between spaces, for :func:`says_any`."""
    return f" {_WORDS_ONLY.sub(' ', key).strip()} "


def says_any(text: str, names: Sequence[str]) -> bool:
    """Whether ``text`` says one of ``names`` (:func:`padded_key` keys), word for word."""
    folded = f" {_WORDS_ONLY.sub(' ', normalize_entity(text))} "
    return any(n in folded for n in names)


def looks_like_a_name(m: Any) -> bool:
    """A name a focused hop follows: a person, place, firm or title written as one ("Hana
    Kraind", "Quorbel"), not a date, quantity, code or acronym ("MODY", "rs1934179"), which
    unrelated passages share by coincidence."""
    if m.kind not in ("name", "title"):
        return False
    first = next((w for w in m.text.split() if w[:1].isalpha()), "")
    return first[:1].isupper() and any(c.islower() for c in first)


class GraphStage:
    """Adds the graph's list to L2's and fuses again; then the learning boost."""

    def __init__(self, comps: Components) -> None:
        self._comps = comps

    def run(self, state: QueryState) -> None:
        """Activation (when the graph is on and weighted), then the learning boost."""
        comps = self._comps
        g = comps.config.graph
        if comps.graph is not None and g.weight > 0:
            with state.timed("graph_ms"):
                cfg = comps.config.fusion
                state.weights["graph"] = g.weight
                seeds: dict[int, float] = {}
                grown: dict[int, float] = {}
                for _ in range(g.cycles):
                    # each cycle seeds from what the last one recalled
                    graph_list, grown = self.activate(
                        state.text, state.fused, cfg.depth, state.allowed, seeds
                    )
                    state.lists["graph"] = graph_list
                    state.fused = fuse(cfg.method, state.lists, state.weights, cfg.k, FROM_ZERO)
                    if len(grown) == len(seeds):
                        break  # nothing new recalled: another cycle would change nothing
                    seeds = grown
                state.seeds = seeds or grown
        if comps.learning is not None and state.fused:
            state.fused = comps.learning.boost(state.fused)

    # -- seeds ------------------------------------------------------------------------------
    def question_seeds(
        self, text: str, index: Mapping[str, int], weight: float
    ) -> dict[int, float]:
        """Entity nodes whose names ``text`` says (runs of up to four words), at ``weight``."""
        seeds: dict[int, float] = {}
        words = normalize_entity(text).split() if weight > 0 else []
        stop = self._comps.words.stopwords
        for n in range(1, min(4, len(words)) + 1):
            for i in range(len(words) - n + 1):
                gram = " ".join(words[i : i + n]).strip('.,;:!?"()')
                gram = gram.removesuffix("'s").removesuffix("\u2019s")  # "Hana Kraind's"
                row = index.get("e:" + gram)
                if row is not None and (n > 1 or gram not in stop):
                    seeds[row] = weight
        return seeds

    # -- activation -------------------------------------------------------------------------
    def activate(
        self,
        text: str,
        fused: list[Fused],
        depth: int,
        allowed: frozenset[str] | None,
        seeds: Mapping[int, float],
    ) -> tuple[list[tuple[str, float]], dict[int, float]]:
        """Passages the graph reaches from the question's entities and L2's top passages not
        yet seeds; returns them ranked, and the seeds used."""
        assert self._comps.graph_views is not None
        view, matrix, index, act_cfg = self._comps.graph_views.state()
        g = self._comps.config.graph
        grown = dict(seeds) or self.question_seeds(text, index, g.query_entities)
        new = [f for f in fused if f.id in index and index[f.id] not in grown][: g.seed_hits]
        if new and fused[0].score > 0:
            for f in new:
                row = index[f.id]
                grown[row] = max(grown.get(row, 0.0), max(0.0, f.score / fused[0].score))
        focus: dict[int, float] = {}
        direct: list[int] = []
        sources: dict[int, set[int]] = {}
        if fused and fused[0].score > 0 and g.focus > 0:
            said = self.names_said(text, index, view)
            read = [
                (f.id, f.score / fused[0].score)
                for f in [f for f in fused if f.id in index][: max(g.seed_hits, g.focus_hits)]
            ]
            # a rare name the question says: the few passages naming it are read too, and
            # listed, whatever L2 made of them (a short fact in a long passage ranks low)
            naming = view.edges["mentioned_in"]
            for n in said:
                rows = naming.indices[naming.indptr[n] : naming.indptr[n + 1]]
                if len(rows) <= g.bridge_max:
                    direct += [int(r) for r in rows if r < view.n_chunks and r not in grown]
            read += [(view.nodes[r], 1.0) for r in direct]
            names, sources = self.focus_seeds(text, read, index, view, said)
            focus = {row: g.focus * w for row, w in names.items() if row not in grown}
        if not grown and not focus:
            return [], grown
        # a seed passage L2 already found scores only by what other seeds spread to it
        act = spread(view, grown, act_cfg, matrix, include_seeds=False)
        if focus:
            seeds_l2 = {r for r in grown if r < view.n_chunks}
            reached = self.focused_hop(view, focus, sources, seeds_l2)
            act = 1.0 - (1.0 - act) * (1.0 - reached)
            grown.update(focus)
        if direct:
            act[direct] = np.maximum(act[direct], g.focus * act_cfg.decay)
        ranked = top_chunks(view, act, depth if allowed is None else 10 * depth)
        if allowed is not None:
            ranked = [(c, s) for c, s in ranked if c in allowed][:depth]
        return ranked, grown

    def focused_hop(
        self,
        view: GraphView,
        focus: Mapping[int, float],
        sources: Mapping[int, set[int]],
        seeds: set[int],
    ) -> np.ndarray:
        """One hop from each focused name to the *other* passages it leads to (not the ones it
        was read in, ``sources``, nor L2's ``seeds``): those about it or, when no document is
        about it and at most ``bridge_max`` passages name it, those naming it (at ``bridge``).
        Each gets ``decay x`` the name's weight, shared among them; arrivals combine as
        ``1 - prod(1 - a)``."""
        g = self._comps.config.graph
        about, naming = view.edges["about"], view.edges["mentioned_in"]
        miss = np.ones(len(view.nodes), dtype=np.float64)
        for n, w in focus.items():
            to = about.indices[about.indptr[n] : about.indptr[n + 1]]
            share = 1.0
            if not len(to) and g.bridge > 0:
                named = naming.indices[naming.indptr[n] : naming.indptr[n + 1]]
                if 2 <= len(named) <= g.bridge_max:
                    to, share = named, g.bridge
            skip = seeds | sources.get(n, set())
            to = [int(t) for t in to if t < view.n_chunks and int(t) not in skip]
            if to:
                a = min(1.0, g.decay * w * share / len(to))
                miss[to] *= 1.0 - a
        return 1.0 - miss

    def names_said(self, text: str, index: Mapping[str, int], view: GraphView) -> set[int]:
        """Entity nodes the question names as names: written with capitals or digits past its
        first word ("the Quorbel project", "ticket 4471"), not common words the graph knows."""
        marked = {
            w.casefold()
            for w in _WORDS_ONLY.split(text)[1:]
            if w.lower() != w or any(c.isdigit() for c in w)
        }
        return {
            n
            for n in self.question_seeds(text, index, 1.0)
            if marked & set(_WORDS_ONLY.split(view.nodes[n][2:]))
        }

    def focus_seeds(
        self,
        text: str,
        seeds: Sequence[tuple[str, float]],
        index: Mapping[str, int],
        view: GraphView,
        said: set[int],
    ) -> tuple[dict[int, float], dict[int, set[int]]]:
        """The names a reader would look up next: in each ``(passage id, weight)`` of
        ``seeds``, the sentences that name something the question names (``said``) and, of
        those, share the most words with it; the other names there, written as names, as
        entity nodes at the passage's weight (the best over passages), with the passages each
        was read in. "The leader of the Quorbel project" -> "Quorbel is led by Hana Kraind"
        -> Hana Kraind."""
        comps = self._comps
        asked = set(comps.words.tokenize(text))
        if not said or not asked:
            return {}, {}
        said_keys = [padded_key(view.nodes[n][2:]) for n in said]
        rows = comps.archive.chunks([cid for cid, _ in seeds])
        out: dict[int, float] = {}
        read_in: dict[int, set[int]] = {}
        for cid, weight in seeds:
            row = rows.get(cid)
            if row is None:
                continue
            found: list[tuple[int, list[int]]] = []
            for a, b, _ in split_sentences(row.text):
                sentence = row.text[a:b]
                if not says_any(sentence, said_keys):
                    continue  # cannot name what the question names (extracting costs more)
                mentions = [(index.get("e:" + m.key), m) for m in comps.extractor.extract(sentence)]
                if any(n in said for n, _ in mentions):
                    n_words = len(asked & set(comps.words.tokenize(sentence)))
                    names = [
                        n
                        for n, m in mentions
                        if n is not None and n not in said and looks_like_a_name(m)
                    ]
                    found.append((n_words, names))
            best = max((n for n, _ in found), default=0)
            for n_words, nodes in found:
                if n_words == best:
                    for node in nodes:
                        out[node] = max(out.get(node, 0.0), max(0.0, weight))
                        read_in.setdefault(node, set()).add(index[cid])
        return out, read_in
