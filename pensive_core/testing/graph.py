"""The entity graph conformance suites: what every :class:`~pensive_core.graph.GraphTables`
must do (passages, entities and mentions per document, the view loaded for traversal), and
what every pair of learning tables (:class:`~pensive_core.graph.UseHistory`,
:class:`~pensive_core.graph.EdgeStrengths`) must do, as pytest tests an implementation's own
test module inherits.

Written from the embedded SQLite tables (:class:`~pensive_core.graph.GraphStore`,
:class:`~pensive_core.graph.BaseLevel`, :class:`~pensive_core.graph.Hebbian`) before any
other engine's exist, so that one (Postgres, issue 26) is held to the same behaviour. Views
are compared by content (node names and weighted edges) with a reference: the SQLite
implementation on an in-memory database, or the in-memory learning state, fed the same calls.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..errors import InputError, PensiveError
from ..graph.extract import Mention, RuleExtractor
from ..graph.learning import BaseLevel, EdgeStrengths, Hebbian, LearningConfig, UseHistory
from ..graph.store import EDGE_TYPES, GraphStore, GraphTables, GraphView

__all__ = [
    "GraphFactory",
    "GraphTablesTests",
    "LearningFactory",
    "LearningTablesTests",
    "MarkupExtractor",
    "view_contents",
]

#: What the ``make_graph`` fixture returns: opens (or reopens) the graph kept at a folder,
#: with a ``max_pair_entities``.
GraphFactory = Callable[[Path, int], GraphTables]
#: What the ``make_learning`` fixture returns: opens (or reopens) the learning tables kept at
#: a folder with these knobs, to read only or to write.
LearningFactory = Callable[[Path, LearningConfig, bool], tuple[UseHistory, EdgeStrengths]]

RULES = RuleExtractor()

DOCS: dict[str, list[tuple[str, int, str]]] = {
    "a": [
        ("a#1", 0, "Scott Derrickson directed Sinister for Blumhouse."),
        ("a#2", 1, "Derrickson was born in Denver in 1966."),
    ],
    "b": [("b#1", 0, "Ed Wood was born in Poughkeepsie in 1924. Wood directed Glen or Glenda.")],
    "c": [("c#1", 0, "Blumhouse produced Get Out in 2017.")],
}


class MarkupExtractor:
    """A test extractor: every ``[key]`` or ``[key|kind]`` in a text is one mention (kind
    ``"name"`` when not given), the key taken as written: any text, NUL included."""

    name = "markup"

    def extract(self, text: str) -> list[Mention]:
        """The bracketed mentions of ``text``, in order."""
        out = []
        for m in re.finditer(r"\[([^\]|]*)(?:\|([^\]]*))?\]", text):
            out.append(Mention(m.group(1), m.group(1), m.group(2) or "name", m.start(), m.end()))
        return out


MARKUP = MarkupExtractor()


def view_contents(view: GraphView) -> dict[str, Any]:
    """What a view holds, by node name (comparable between engines): nodes and kinds in
    order, the counts, and each edge type's ``(src, dst) -> weight``."""

    def named(m: Any) -> dict[tuple[str, str], float]:
        coo = m.tocoo()
        return {
            (view.nodes[i], view.nodes[j]): float(w)
            for i, j, w in zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist())
            if w != 0
        }

    n = len(view.nodes)
    assert view.adjacency.shape == (n, n)
    assert set(view.edges) == set(EDGE_TYPES)
    return {
        "nodes": list(view.nodes),
        "kinds": list(view.kinds),
        "n_chunks": view.n_chunks,
        "n_entities": view.n_entities,
        "adjacency": named(view.adjacency),
        **{f"edge:{t}": named(view.edges[t]) for t in EDGE_TYPES},
    }


def reference_graph(max_pair_entities: int = 30) -> GraphStore:
    """The SQLite graph on an in-memory database: what every engine's view must equal."""
    return GraphStore(sqlite3.connect(":memory:", isolation_level=None), max_pair_entities)


class GraphTablesTests:
    """What every entity graph store must do; subclass it once per implementation and give
    the ``make_graph`` fixture: ``make_graph(folder, max_pair_entities)`` opens (or reopens)
    the graph kept at ``folder`` (each test has its own ``tmp_path``; some open it twice at
    once, as a writer and a reader).

    Attributes:
        refused_write: The error a write the store refuses raises (a passage id of None).
    """

    refused_write: type[BaseException] | tuple[type[BaseException], ...] = Exception

    @pytest.fixture
    def make_graph(self) -> GraphFactory:
        """The factory each test opens the graph with; every subclass overrides it."""
        pytest.fail(f"{type(self).__name__} must override the `make_graph` fixture")

    @staticmethod
    def fill(*graphs: Any, docs: dict[str, list[tuple[str, int, str]]] | None = None) -> None:
        for doc, chunks in (docs or DOCS).items():
            for g in graphs:
                g.add_document(doc, chunks, RULES)

    def test_empty(self, make_graph: GraphFactory, tmp_path: Path) -> None:
        g = make_graph(tmp_path, 30)
        assert g.counts() == {"chunks": 0, "entities": 0, "mentions": 0}
        assert g.documents() == {}
        assert g.mentioning(["blumhouse"]) == set() and g.rare(["blumhouse"], 5) == set()
        assert g.mentioning([]) == set() and g.rare([], 5) == set()
        view = g.load()
        assert view_contents(view) == view_contents(reference_graph().load())
        assert view.nodes == [] and view.adjacency.shape == (0, 0)
        g.remove_document("never-there")
        assert g.counts() == {"chunks": 0, "entities": 0, "mentions": 0}
        assert g.touched_names == set() and g.touched_subjects == set()

    def test_add_counts_documents_and_view(self, make_graph: GraphFactory, tmp_path: Path) -> None:
        g, ref = make_graph(tmp_path, 30), reference_graph()
        stored = g.add_document("a", DOCS["a"], RULES)
        assert stored == ref.add_document("a", DOCS["a"], RULES) and stored > 0
        self.fill(g, ref, docs={k: v for k, v in DOCS.items() if k != "a"})
        assert g.counts() == ref.counts() and g.counts()["chunks"] == 4
        assert g.documents() == {"a": {"a#1", "a#2"}, "b": {"b#1"}, "c": {"c#1"}}
        view = g.load()
        assert view_contents(view) == view_contents(ref.load())
        row = view.index()
        e = view.edges
        assert e["mentions"][row["a#1"], row["e:blumhouse"]] == 1
        assert e["mentioned_in"][row["e:blumhouse"], row["c#1"]] == 1
        assert e["next"][row["a#1"], row["a#2"]] == 1 and e["next"][row["a#2"], row["a#1"]] == 0
        assert e["co_occurs"][row["e:scott derrickson"], row["e:blumhouse"]] == 1
        assert e["is_a"][row["e:blumhouse"], row["t:name"]] == 1
        # "Derrickson" in a#2 is the "Scott Derrickson" of a#1 (aliases merged per document)
        assert e["mentions"][row["a#2"], row["e:scott derrickson"]] == 1
        assert g.touched_names == ref.touched_names and "blumhouse" in g.touched_names

    def test_repeated_mentions_weigh_more(self, make_graph: GraphFactory, tmp_path: Path) -> None:
        g = make_graph(tmp_path, 30)
        g.add_document("r", [("r#1", 0, "[acme] and [acme] and [acme] met [globex]")], MARKUP)
        view = g.load()
        row = view.index()
        assert view.edges["mentions"][row["r#1"], row["e:acme"]] == 3
        assert g.counts() == {"chunks": 1, "entities": 2, "mentions": 4}

    def test_replace_and_remove(self, make_graph: GraphFactory, tmp_path: Path) -> None:
        g, ref = make_graph(tmp_path, 30), reference_graph()
        self.fill(g, ref)
        for t in (g, ref):
            t.touched_names.clear()
            t.touched_subjects.clear()
            t.remove_document("c")
        assert g.touched_names == ref.touched_names == {"blumhouse", "get out", "2017"}
        assert g.mentioning(["blumhouse"]) == {"a#1"}
        assert g.mentioning(["get out"]) == set()  # an entity no passage names is gone
        assert "c" not in g.documents()
        assert view_contents(g.load()) == view_contents(ref.load())
        new = [("a#9", 0, "Jason Blum founded Blumhouse."), ("a#1", 1, "Sinister, 2012.")]
        for t in (g, ref):
            t.add_document("a", new, RULES)
        assert g.documents()["a"] == {"a#9", "a#1"}
        assert g.mentioning(["scott derrickson"]) == set()
        assert g.counts() == ref.counts()
        assert view_contents(g.load()) == view_contents(ref.load())
        for t in (g, ref):
            t.add_document("a", [], RULES)  # no passages: the document leaves the graph
        assert "a" not in g.documents() and g.counts() == ref.counts()
        assert view_contents(g.load()) == view_contents(ref.load())

    def test_an_entity_recreated_by_a_replace_takes_its_new_kind(
        self, make_graph: GraphFactory, tmp_path: Path
    ) -> None:
        g, ref = make_graph(tmp_path, 30), reference_graph()
        for t in (g, ref):
            t.add_document("k", [("k#1", 0, "[acme|org] [globex|org]")], MARKUP)
            t.add_document("o", [("o#1", 0, "[globex|name]")], MARKUP)
            t.add_document("k", [("k#1", 0, "[acme|name] [globex|name]")], MARKUP)
        got = view_contents(g.load())
        assert got == view_contents(ref.load())
        # acme was named by k alone: made again, as a name; globex lived on in o: still an org
        assert got["edge:is_a"] == {("e:acme", "t:name"): 1.0, ("e:globex", "t:org"): 1.0}

    def test_mentioning_and_rare(self, make_graph: GraphFactory, tmp_path: Path) -> None:
        g = make_graph(tmp_path, 30)
        self.fill(g)
        assert g.mentioning(["blumhouse", "ed wood", "nobody"]) == {"a#1", "c#1", "b#1"}
        assert g.rare(["blumhouse", "ed wood", "nobody"], 1) == {"ed wood"}
        assert g.rare(["blumhouse", "ed wood"], 2) == {"blumhouse", "ed wood"}
        assert g.rare(["blumhouse"], 0) == set()
        keys = [f"k{i}" for i in range(1200)] + ["blumhouse"]  # more than one batch of keys
        assert g.rare(keys, 5) == {"blumhouse"}
        assert g.mentioning(iter(["blumhouse"])) == {"a#1", "c#1"}  # any iterable

    def test_a_document_is_about_its_title(self, make_graph: GraphFactory, tmp_path: Path) -> None:
        g, ref = make_graph(tmp_path, 30), reference_graph()
        film = [("f#1", 0, "Sinister was directed by Scott Derrickson.")]
        bio = [("b#1", 0, "He was born in Denver."), ("b#2", 1, "He studied in Los Angeles.")]
        for t in (g, ref):
            t.add_document("film", film, RULES)
            t.add_document("bio", bio, RULES, subject="Scott Derrickson (director)")
        assert g.touched_subjects == ref.touched_subjects == {"scott derrickson"}
        view = g.load()
        assert view_contents(view) == view_contents(ref.load())
        row = view.index()
        e = row["e:scott derrickson"]
        assert view.edges["about"][e, row["b#1"]] == 1 and view.edges["subject"][row["b#2"], e] == 1
        assert view.edges["about"][e, row["f#1"]] == 0
        # the title counts as one passage naming it
        assert g.rare(["scott derrickson"], 1) == set() and g.rare(["scott derrickson"], 2)
        for t in (g, ref):
            t.remove_document("film")
        assert "e:scott derrickson" in g.load().index()  # the title alone keeps it
        for t in (g, ref):
            t.remove_document("bio")
        assert g.counts() == {"chunks": 0, "entities": 0, "mentions": 0}
        assert view_contents(g.load()) == view_contents(ref.load())

    def test_hub_passages_add_no_pairs(self, make_graph: GraphFactory, tmp_path: Path) -> None:
        g = make_graph(tmp_path, 3)
        g.add_document("h", [("h#1", 0, "[w] [x] [y] [z]"), ("h#2", 1, "[w] [x]")], MARKUP)
        co = view_contents(g.load())["edge:co_occurs"]
        assert co == {("e:w", "e:x"): 1.0, ("e:x", "e:w"): 1.0}  # h#1 names four: no pairs

    def test_persists_across_a_reopen(self, make_graph: GraphFactory, tmp_path: Path) -> None:
        g = make_graph(tmp_path, 30)
        self.fill(g)
        g.add_document("s", [("s#1", 0, "Blumhouse again.")], RULES, subject="Blumhouse")
        before = (view_contents(g.load()), g.counts(), g.documents())
        close = getattr(g, "close", None)
        if close is not None:
            close()
        again = make_graph(tmp_path, 30)
        assert (view_contents(again.load()), again.counts(), again.documents()) == before
        assert again.touched_names == set()  # what changed is the writer's, not the store's

    def test_a_reader_sees_a_writers_commit(self, make_graph: GraphFactory, tmp_path: Path) -> None:
        writer = make_graph(tmp_path, 30)
        reader = make_graph(tmp_path, 30)
        assert reader.load().nodes == []
        self.fill(writer)
        assert reader.counts() == writer.counts()
        assert view_contents(reader.load()) == view_contents(writer.load())
        writer.remove_document("a")
        assert reader.mentioning(["scott derrickson"]) == set()
        assert view_contents(reader.load()) == view_contents(writer.load())

    def test_any_text_in_entity_keys_comes_back_exactly(
        self, make_graph: GraphFactory, tmp_path: Path
    ) -> None:
        g, ref = make_graph(tmp_path, 30), reference_graph()
        keys = ["nul\x00key", "ünïcødé ✓", "שלום", "𝔘𝔫𝔦", "tab\there", "a'b\"c;--"]
        text = " ".join(f"[{k}|kind\x00{i % 2}é]" for i, k in enumerate(keys))
        for t in (g, ref):
            t.add_document("odd", [("odd#1", 0, text), ("odd#2", 1, f"[{keys[0]}]")], MARKUP)
        view = g.load()
        assert view_contents(view) == view_contents(ref.load())
        assert {f"e:{k}" for k in keys} <= set(view.nodes)
        assert {"t:kind\x000é", "t:kind\x001é"} <= set(view.nodes)
        assert g.mentioning([keys[0]]) == {"odd#1", "odd#2"}
        assert g.mentioning(["nul"]) == set()  # not cut at the NUL
        assert g.rare(keys, 1) == set(keys[1:])
        assert g.touched_names == set(keys)

    def test_a_refused_write_stores_nothing(self, make_graph: GraphFactory, tmp_path: Path) -> None:
        g = make_graph(tmp_path, 30)
        self.fill(g)
        before = (view_contents(g.load()), g.counts(), g.documents())
        g.touched_names.clear()
        g.touched_subjects.clear()
        broken: list[Any] = [("a#7", 0, "Jason Blum founded Blumhouse."), (None, 1, "Zed Co.")]
        with pytest.raises(self.refused_write):
            g.add_document("a", broken, RULES, subject="Jason Blum")
        assert (view_contents(g.load()), g.counts(), g.documents()) == before
        # nothing changed, so nothing is noted for the cache to drop
        assert g.touched_names == set() and g.touched_subjects == set()
        g.add_document("a", broken[:1], RULES)  # the store still writes
        assert g.documents()["a"] == {"a#7"}

    def test_load_of_many_passages_equals_the_reference(
        self, make_graph: GraphFactory, tmp_path: Path
    ) -> None:
        g, ref = make_graph(tmp_path, 30), reference_graph()
        for d in range(40):
            chunks = [
                (f"d{d}#{i}", i, f"[org{(d * 7 + i) % 23}] met [person{i % 11}] in [city{d % 5}]")
                for i in range(25)
            ]
            for t in (g, ref):
                t.add_document(f"d{d}", chunks, MARKUP, subject=f"Org{d % 23}")
        for t in (g, ref):
            t.remove_document("d3")
        view = g.load()
        assert view.n_chunks == 39 * 25
        assert view_contents(view) == view_contents(ref.load())
        assert g.counts() == ref.counts()


# -- what the graph learns from use -----------------------------------------------------------
KNOBS = LearningConfig(
    enabled=True,
    base_level_half_life_s=100.0,
    hebbian_rate=0.25,
    hebbian_half_life_s=50.0,
    hebbian_max=1.0,
    hebbian_prune_below=0.05,
)


def reference_learning(knobs: LearningConfig = KNOBS) -> tuple[BaseLevel, Hebbian]:
    """The learning state in memory: what every engine's tables must equal."""
    return BaseLevel.from_config(knobs), Hebbian.from_config(knobs)


def boosted(uses: UseHistory, ids: Sequence[str], now: float) -> dict[str, float]:
    """Each passage's score 1.0 after :meth:`UseHistory.boost` (1.0: never used)."""
    return dict(uses.boost([(cid, 1.0) for cid in ids], now))


def matrix(edges: EdgeStrengths, names: Sequence[str], now: float) -> dict[tuple[str, str], float]:
    """The learned weights over ``names`` at ``now``, by node name."""
    m = edges.as_matrix({n: i for i, n in enumerate(names)}, len(names), now).tocoo()
    return {
        (names[i], names[j]): float(w)
        for i, j, w in zip(m.row.tolist(), m.col.tolist(), m.data.tolist())
    }


NAMES = ["c1", "c2", "c3", "e:acme", "e:nul\x00key", "e:ünï ✓", "t:name"]


class LearningTablesTests:
    """What every engine's learning tables must do; subclass it once per implementation and
    give the ``make_learning`` fixture: ``make_learning(folder, knobs, read_only)`` opens (or
    reopens) the use history and edge strengths kept at ``folder`` (several at once: a writer,
    a reader, a second writer)."""

    @pytest.fixture
    def make_learning(self) -> LearningFactory:
        """The factory each test opens the tables with; every subclass overrides it."""
        pytest.fail(f"{type(self).__name__} must override the `make_learning` fixture")

    def test_empty(self, make_learning: LearningFactory, tmp_path: Path) -> None:
        uses, edges = make_learning(tmp_path, KNOBS, False)
        assert uses.boost([("c1", 2.0), ("c2", 1.0)], 0.0) == [("c1", 2.0), ("c2", 1.0)]
        assert edges.as_matrix({"c1": 0, "c2": 1}, 2, 0.0).nnz == 0
        assert edges.prune(0.0) == 0 and edges.forget(["c1"]) == 0 and uses.forget(["c1"]) == 0

    def test_a_reader_of_an_empty_store_sees_nothing(
        self, make_learning: LearningFactory, tmp_path: Path
    ) -> None:
        uses, edges = make_learning(tmp_path, KNOBS, True)
        assert boosted(uses, ["c1"], 0.0) == {"c1": 1.0}
        assert edges.as_matrix({"c1": 0}, 1, 0.0).nnz == 0

    def test_uses_and_strengths_equal_the_reference(
        self, make_learning: LearningFactory, tmp_path: Path
    ) -> None:
        uses, edges = make_learning(tmp_path, KNOBS, False)
        ref_u, ref_e = reference_learning()
        for t, ids, paths in [
            (0.0, ["c1", "c2"], [("e:acme", "c1")]),
            (12.5, ["c1", "c1", "c3"], [("e:acme", "c1"), ("c1", "c2")]),
            (80.0, ["c2"], [("e:nul\x00key", "c3"), ("e:ünï ✓", "c2")]),
        ]:
            for u, e in ((uses, edges), (ref_u, ref_e)):
                u.use(ids, t)
                assert e.strengthen(paths, 0.8, now=t) == len(set(paths))
        for now in (80.0, 200.0):
            assert boosted(uses, NAMES, now) == boosted(ref_u, NAMES, now)
            assert matrix(edges, NAMES, now) == matrix(ref_e, NAMES, now)
        got = boosted(uses, ["c1", "c2", "c3", "never"], 80.0)
        assert got["never"] == 1.0 and all(got[c] > 1.0 for c in ("c1", "c2", "c3"))
        assert ("e:nul\x00key", "c3") in matrix(edges, NAMES, 80.0)

    def test_prune_and_forget(self, make_learning: LearningFactory, tmp_path: Path) -> None:
        uses, edges = make_learning(tmp_path, KNOBS, False)
        ref_u, ref_e = reference_learning()
        for u, e in ((uses, edges), (ref_u, ref_e)):
            u.use(["c1", "c2", "c3"], 0.0)
            e.strengthen([("c1", "c2"), ("c2", "c3"), ("e:acme", "c1")], 1.0, now=0.0)
            e.strengthen([("c3", "c1")], 1.0, now=200.0)
        assert edges.prune(200.0) == ref_e.prune(200.0) == 3  # four half-lives: below the floor
        assert matrix(edges, NAMES, 200.0) == {("c3", "c1"): 0.25}
        assert edges.forget(["c1"]) == 1 and matrix(edges, NAMES, 200.0) == {}
        assert uses.forget(["c1", "c3", "never"]) == 2
        assert boosted(uses, ["c1", "c2", "c3"], 10.0)["c1"] == 1.0
        assert boosted(uses, ["c2"], 10.0)["c2"] > 1.0

    def test_persists_across_a_reopen(self, make_learning: LearningFactory, tmp_path: Path) -> None:
        uses, edges = make_learning(tmp_path, KNOBS, False)
        uses.use(["c1", "c2"], 0.0)
        uses.use(["c1"], 30.0)
        edges.strengthen([("e:ünï ✓", "c1")], 1.0, now=30.0)
        want = (boosted(uses, NAMES, 60.0), matrix(edges, NAMES, 60.0))
        for part in (uses, edges):
            close = getattr(part, "close", None)
            if close is not None:
                close()
        again_u, again_e = make_learning(tmp_path, KNOBS, False)
        assert (boosted(again_u, NAMES, 60.0), matrix(again_e, NAMES, 60.0)) == want
        # and the reloaded accumulator goes on as the original would have
        ref_u, _ = reference_learning()
        for t, ids in [(0.0, ["c1", "c2"]), (30.0, ["c1"]), (90.0, ["c1"])]:
            ref_u.use(ids, t)
        again_u.use(["c1"], 90.0)
        assert boosted(again_u, ["c1"], 100.0) == boosted(ref_u, ["c1"], 100.0)

    def test_a_reader_sees_a_writers_commit_and_writers_add_up(
        self, make_learning: LearningFactory, tmp_path: Path
    ) -> None:
        knobs = LearningConfig(enabled=True, base_level_half_life_s=math.inf,
                               hebbian_half_life_s=math.inf, hebbian_rate=0.1)  # fmt: skip
        writer_u, writer_e = make_learning(tmp_path, knobs, False)
        reader_u, reader_e = make_learning(tmp_path, knobs, True)
        other_u, other_e = make_learning(tmp_path, knobs, False)
        ref_u, _ = reference_learning(knobs)
        assert boosted(reader_u, ["c1"], 0.0) == {"c1": 1.0}  # read (and cached) before
        for u in (writer_u, writer_u, other_u, writer_u, ref_u, ref_u, ref_u, ref_u):
            u.use(["c1"], 0.0)  # a second writer adds to, not over, the first's uses
        assert boosted(reader_u, ["c1"], 0.0) == boosted(ref_u, ["c1"], 0.0)
        writer_e.strengthen([("c1", "c2")], 1.0, now=0.0)
        other_e.strengthen([("c1", "c2")], 1.0, now=0.0)
        assert matrix(reader_e, NAMES, 0.0) == pytest.approx({("c1", "c2"): 0.2})

    def test_a_reader_refuses_writes(self, make_learning: LearningFactory, tmp_path: Path) -> None:
        uses, edges = make_learning(tmp_path, KNOBS, True)
        with pytest.raises(PensiveError, match="read-only"):
            uses.use(["c1"], 0.0)
        with pytest.raises(PensiveError, match="read-only"):
            uses.forget(["c1"])
        with pytest.raises(PensiveError, match="read-only"):
            edges.strengthen([("c1", "c2")], now=0.0)
        with pytest.raises(PensiveError, match="read-only"):
            edges.prune(0.0)
        with pytest.raises(PensiveError, match="read-only"):
            edges.forget(["c1"])

    def test_a_refused_write_stores_nothing(
        self, make_learning: LearningFactory, tmp_path: Path
    ) -> None:
        uses, edges = make_learning(tmp_path, KNOBS, False)
        uses.use(["c1"], 10.0)
        edges.strengthen([("c1", "c2")], 1.0, now=10.0)
        with pytest.raises(InputError, match="earlier"):
            uses.use(["c2", "c1"], 5.0)  # time ran backwards for c1: c2 is not used either
        with pytest.raises(InputError, match="earlier"):
            edges.strengthen([("c2", "c3"), ("c1", "c2")], 1.0, now=5.0)
        assert boosted(uses, ["c2"], 10.0) == {"c2": 1.0}
        assert set(matrix(edges, NAMES, 10.0)) == {("c1", "c2")}
        again_u, again_e = make_learning(tmp_path, KNOBS, False)
        assert boosted(again_u, ["c2"], 10.0) == {"c2": 1.0}
        assert set(matrix(again_e, NAMES, 10.0)) == {("c1", "c2")}
