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
#: Entity kinds the relay does not follow: values that unrelated passages share by coincidence
#: (the rule extractor's kinds and spaCy's labels for them).
_NOT_FOLLOWED = frozenset(
    {"id", "quantity", "date", "DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL",
     "CARDINAL"}
)  # fmt: skip
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
        """Activation (when the graph is on and weighted), the relay (when ``[graph] relay``
        > 0), then the learning boost."""
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
        if comps.graph is not None and g.relay > 0 and state.fused:
            with state.timed("relay_ms"):
                relayed = self.relay(state)
                state.relayed = [(c, score) for c, score, _ in relayed]
                state.fused = self.place(state.fused, relayed, g.relay)
        if comps.learning is not None and state.fused:
            state.fused = comps.learning.boost(state.fused)

    @staticmethod
    def place(
        fused: list[Fused], relayed: Sequence[tuple[str, float, str]], share: float
    ) -> list[Fused]:
        """``fused`` with each relayed ``(passage, score, seed)`` raised by ``share x score x``
        the top fused score, but never to its seed's score or above: what L2 found first
        stays first (a needle L2 put on top stays there), and a bridge linked from it and as
        like the question as L2's best lands right below it. Never lowered; the order stays
        stable among equals, a relayed passage new to ``fused`` coming after them."""
        if not fused or not relayed:
            return fused
        top = fused[0].score
        out = list(fused)
        at = {f.id: i for i, f in enumerate(out)}
        for rank, (cid, score, seed) in enumerate(relayed, start=1):
            i = at.get(cid)
            own = out[i].score if i is not None else 0.0
            cap = out[at[seed]].score if seed in at else top
            raised = min(own + share * score * top, np.nextafter(cap, -np.inf))
            if i is None:
                if raised <= 0:
                    continue
                at[cid] = len(out)
                out.append(Fused(cid, raised, {"relay": rank}))
            else:
                f = out[i]
                out[i] = Fused(f.id, max(f.score, raised), {**f.ranks, "relay": rank})
        order = sorted(range(len(out)), key=lambda i: (-out[i].score, i))
        return [out[i] for i in order]

    # -- the relay ----------------------------------------------------------------------------
    def relay(self, state: QueryState) -> list[tuple[str, float, str]]:
        """Passages one or more links away from L2's top passages that are themselves like the
        question: the second passage of a two-hop question, which plain retrieval misses
        because only part of the question is about it.

        From each of L2's top ``relay_seeds`` passages (weight: its fused score relative to
        the top), every name it gives that the question does not say (not a date, quantity
        or code) leads to the passages about that name (``about``: its title) and, when at most
        ``relay_fanout`` passages name it, to those naming it (how a bridge looks without
        titles, and in a chat). Each passage reached scores ``weight x relevance``, relevance
        being its own stored vector's cosine with the question relative to L2's best dense
        score, so a passage is raised only when it is both linked and like the question; the
        best path counts. With ``relay_rounds`` > 1 the best passages reached seed the next
        round (three- and four-hop chains), at the score that reached them. Returns the
        passages reached with those scores (at most 1), best first (none when the question
        has no vector or the graph links nothing); :meth:`place` puts them in the answer.
        """
        comps = self._comps
        g = comps.config.graph
        backend = comps.backend
        dense = state.lists.get("dense")
        if backend is None or state.qvec is None or not dense or state.fused[0].score <= 0:
            return []
        namespace = comps.config.backend.namespace
        q = np.asarray(state.qvec, dtype=np.float64).ravel()
        q = q / (np.linalg.norm(q) or 1.0)

        def cosine(v: np.ndarray | None) -> float:
            if v is None:
                return 0.0
            v = np.asarray(v, dtype=np.float64).ravel()
            return float(q @ v) / (float(np.linalg.norm(v)) or 1.0)

        # relevance is relative to L2's best dense passage (computed here: a backend's scores
        # need not be cosines)
        top_sim = cosine(backend.fetch([dense[0][0]], namespace=namespace).get(dense[0][0]))
        if not top_sim > 0:
            return []
        assert comps.graph_views is not None
        view, _, index, _ = comps.graph_views.state()
        said = set(self.question_seeds(state.text, index, 1.0))
        kinds = comps.graph_views.kinds(view)
        mentions, about, naming = (
            view.edges["mentions"],
            view.edges["about"],
            view.edges["mentioned_in"],
        )
        top = state.fused[0].score
        frontier = {
            index[f.id]: max(0.0, f.score / top)
            for f in [f for f in state.fused if f.id in index][: g.relay_seeds]
        }
        root = {p: p for p in frontier}  # the seed (one of L2's passages) a path began at
        visited = set(frontier)
        best: dict[int, float] = {}
        best_root: dict[int, int] = {}
        relevance: dict[int, float] = {}
        for _ in range(g.relay_rounds):
            paths: dict[int, float] = {}  # passage reached -> best weight of a path to it
            came: dict[int, int] = {}  # ... and the seed that path began at
            for p, w in frontier.items():
                for e in mentions.indices[mentions.indptr[p] : mentions.indptr[p + 1]]:
                    e = int(e)
                    if e in said or kinds.get(e) in _NOT_FOLLOWED:
                        continue
                    to = [(int(c), w) for c in about.indices[about.indptr[e] : about.indptr[e + 1]]]
                    named = naming.indices[naming.indptr[e] : naming.indptr[e + 1]]
                    if g.relay_naming > 0 and len(named) <= g.relay_fanout:
                        to += [(int(c), w * g.relay_naming) for c in named]
                    for c, s in to:
                        if c != p and c < view.n_chunks and paths.get(c, -1.0) < s:
                            paths[c] = s
                            came[c] = root[p]
            if state.allowed is not None:
                paths = {c: w for c, w in paths.items() if view.nodes[c] in state.allowed}
            fresh = [c for c in paths if c not in relevance]
            if fresh:
                vecs = backend.fetch([view.nodes[c] for c in fresh], namespace=namespace)
                for c in fresh:
                    cos = cosine(vecs.get(view.nodes[c]))
                    relevance[c] = min(1.0, max(0.0, cos / top_sim))
            scored = {c: w * relevance[c] for c, w in paths.items() if relevance[c] > 0}
            for c, s in scored.items():
                if s > best.get(c, 0.0):
                    best[c] = s
                    best_root[c] = came[c]
            nxt = sorted(
                ((c, s) for c, s in scored.items() if c not in visited),
                key=lambda cs: (-cs[1], cs[0]),
            )[: g.relay_seeds]
            if not nxt:
                break
            frontier = dict(nxt)
            visited.update(frontier)
            root.update({c: came[c] for c in frontier})
        ranked = sorted(best.items(), key=lambda cs: (-cs[1], view.nodes[cs[0]]))
        return [
            (view.nodes[c], s, view.nodes[best_root[c]])
            for c, s in ranked[: comps.config.fusion.depth]
        ]

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
