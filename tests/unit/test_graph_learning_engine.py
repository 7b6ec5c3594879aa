"""Learning from use inside a store: off by default, then base level and Hebbian edges."""

import pytest

from pensive_core import Document, Pensive
from pensive_core.errors import InputError
from tests.conftest import HASH_CONFIG, l2_state
from tests.unit.test_graph_engine import DOCS, Q

LEARN = {
    **HASH_CONFIG,
    "graph": {"learning": {"enabled": True, "deterministic": True}},
}


def tables(p):
    rows = p.components.archive.db.execute(
        "SELECT name FROM sqlite_master WHERE name LIKE 'graph_%'"
    )
    return {r[0] for r in rows}


def test_learning_is_off_by_default(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(DOCS)
        p.query(Q, k=3)
        assert p.components.learning is None
        assert not {"graph_base_level", "graph_hebbian"} & tables(p)


def test_used_passages_rise_and_graph_edges_that_led_to_them_strengthen(tmp_path):
    with Pensive(tmp_path, config=LEARN) as p:
        p.ingest(DOCS)
        first = p.query(Q, k=3)
        assert p.query(Q, k=3).tier == "L2"  # answers change with use: never cached
        base, hebbian = p.components.learning.history, p.components.learning.edges
        used = [h.chunk_id for h in first.hits]
        assert (base.value(used, p.components.learning.now(False)) > 0).all()
        # "bio" was reached from the film's passage through Scott Derrickson
        film = p.components.archive.chunk_ids("film")[0]
        bio = p.components.archive.chunk_ids("bio")[0]
        now = p.components.learning.now(False)
        assert hebbian.weight(film, "e:scott derrickson", now) > 0
        assert hebbian.weight("e:scott derrickson", bio, now) > 0
        # a passage asked about again and again scores higher in every later answer
        probe = "who was born in a city"
        before = {f.id.split("#")[0]: f.score for f in l2_state(p, probe).fused}
        for _ in range(5):
            assert p.query("Ada Park Leeds", k=1).hits[0].doc_id == "d0"
        after = {f.id.split("#")[0]: f.score for f in l2_state(p, probe).fused}
    assert after["d0"] > before["d0"] * 1.05
    assert after["d2"] == before["d2"]  # never used: untouched


def test_deleting_forgets_what_was_learned(tmp_path):
    with Pensive(tmp_path, config=LEARN) as p:
        p.ingest(DOCS)
        p.query(Q, k=3)
        bio = p.components.archive.chunk_ids("bio")[0]
        p.delete("bio")
        base, hebbian = p.components.learning.history, p.components.learning.edges
        assert base.value([bio], p.components.learning.now(False))[0] == 0
        assert hebbian.weight("e:scott derrickson", bio, p.components.learning.now(False)) == 0


def test_learning_is_deterministic(tmp_path):
    runs = []
    for n in range(2):
        with Pensive(tmp_path / str(n), config=LEARN) as p:
            p.ingest(DOCS)
            for q in (Q, "Ada Park Leeds", Q):
                p.query(q, k=3)
            runs.append([(h.chunk_id, h.score) for h in p.query(Q, k=5).hits])
    assert runs[0] == runs[1]


def test_a_reader_learns_nothing_but_sees_the_writers_learning(tmp_path):
    with Pensive(tmp_path, config=LEARN) as p:
        p.ingest(DOCS)
        p.query(Q, k=3)
        with Pensive(tmp_path, config=LEARN, read_only=True) as r:
            before = len(r.components.learning.history)
            r.query("Ada Park Leeds", k=1)
            assert len(r.components.learning.history) == before > 0


def test_context_raises_what_it_names_and_never_lowers(tmp_path):
    talk = ("We were just talking about Scott Derrickson.",)
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(DOCS)
        plain = l2_state(p, Q)
        ctx = l2_state(p, Q, context=talk)
        other = l2_state(p, Q, context=("Ada Park was here.",))
        nobody = l2_state(p, Q, context=("We talked about the weather.",))
        assert p.query(Q, k=3).tier == "L2" and p.query(Q, k=3).tier == "L1"
        res = p.query(Q, k=3, context=list(talk))  # with a context: never from the cache
        with pytest.raises(InputError, match="context"):
            p.query(Q, context=[42])
    # the question names Sinister: it keeps its own words, and the context only raises
    assert ctx.search_text == "" and plain.search_text == ""
    before = {f.id: f.score for f in plain.fused}
    after = {f.id: f for f in ctx.fused}
    assert set(after) == set(before)
    assert all(after[c].score >= s for c, s in before.items() if s >= 0)
    bio = next(c for c in before if c.startswith("bio#"))
    assert after[bio].score > before[bio] and "context" in after[bio].ranks
    film = next(c for c in before if c.startswith("film#"))
    assert after[film].score > before[film]  # it names Scott Derrickson too
    ada = next(c for c in before if c.startswith("d0#"))
    assert after[ada].score == before[ada]  # the context does not reach Ada Park
    assert {f.id: f.score for f in other.fused}[ada] > before[ada]
    assert [(f.id, f.score) for f in nobody.fused] == [(f.id, f.score) for f in plain.fused]
    assert res.tier == "L2"


def test_recall_cycles_seed_from_what_the_last_cycle_recalled(tmp_path):
    chain = [
        Document(
            id="a", text="Project Kestrel is run by Mira Holt.", metadata={"title": "Kestrel"}
        ),
        Document(id="b", text="Mira Holt reports to Ivo Lind.", metadata={"title": "Mira Holt"}),
        Document(id="c", text="Ivo Lind lives in Tromso.", metadata={"title": "Ivo Lind"}),
        *[Document(id=f"x{i}", text=f"Filler {i} about weather.") for i in range(5)],
    ]
    q = "Who is the boss of the Project Kestrel lead?"
    one = {**HASH_CONFIG, "graph": {"seed_hits": 1}}
    two = {**HASH_CONFIG, "graph": {"seed_hits": 1, "cycles": 2}}
    with Pensive(tmp_path, config=one) as p:
        p.ingest(chain)
        l1 = l2_state(p, q).lists
    with Pensive(tmp_path, config=two) as p:
        l2 = l2_state(p, q).lists
    reached1 = {c.split("#")[0] for c, _ in l1.get("graph", [])}
    reached2 = {c.split("#")[0] for c, _ in l2.get("graph", [])}
    assert "c" not in reached1 and "c" in reached2
