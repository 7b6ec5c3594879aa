"""The entity graph and its learning tables in a real Postgres (started by the
``postgres_dsn`` fixture): the conformance suites the SQLite tables pass, and attacks (two
processes writing at once, a dropped connection, bad prefixes, prefixes kept apart)."""

from __future__ import annotations

import hashlib
import multiprocessing

import psycopg
import pytest

from pensive_core import BackendError, ConfigError
from pensive_core.graph.learning import LearningConfig
from pensive_core.graph.pg_store import (
    PostgresGraphStore,
    PostgresLearningRows,
    open_postgres_learning,
)
from pensive_core.testing import GraphTablesTests, LearningTablesTests
from pensive_core.testing.graph import MARKUP, reference_graph, view_contents

pytestmark = pytest.mark.integration


def prefix_for(folder) -> str:
    """One graph per test folder: tests share the server, never each other's rows."""
    return "g" + hashlib.blake2b(str(folder).encode(), digest_size=8).hexdigest()


def named(dsn: str, app: str) -> str:
    """The DSN with its own ``application_name`` (to find this connection on the server)."""
    if "://" in dsn:
        return dsn + ("&" if "?" in dsn else "?") + f"application_name={app}"
    return f"{dsn} application_name={app}"


class TestPostgresGraph(GraphTablesTests):
    refused_write = BackendError

    @pytest.fixture
    def make_graph(self, postgres_dsn):
        opened = []

        def make(folder, max_pair):
            g = PostgresGraphStore(postgres_dsn, prefix_for(folder), max_pair)
            opened.append(g)
            return g

        yield make
        for g in opened:
            g.close()


class TestPostgresLearning(LearningTablesTests):
    @pytest.fixture
    def make_learning(self, postgres_dsn):
        def make(folder, knobs, read_only):
            return open_postgres_learning(postgres_dsn, prefix_for(folder), knobs, read_only)

        return make


def test_a_bad_prefix_is_refused(postgres_dsn):
    for bad in ("Bad-Prefix", "x; DROP TABLE y", "", "a" * 41, "1abc"):
        with pytest.raises(ConfigError, match="prefix"):
            PostgresGraphStore(postgres_dsn, bad)
        with pytest.raises(ConfigError, match="prefix"):
            PostgresLearningRows(postgres_dsn, bad, "hebbian")


def test_a_refused_write_says_it_was_rolled_back_whole(postgres_dsn, tmp_path):
    g = PostgresGraphStore(postgres_dsn, prefix_for(tmp_path))
    g.add_document("a", [("a#1", 0, "[acme] [globex]")], MARKUP)
    before = view_contents(g.load())
    with pytest.raises(BackendError, match="rolled back whole") as err:
        g.add_document("a", [("a#2", 0, "[initech]"), (None, 1, "[acme]")], MARKUP)
    assert "'a'" in str(err.value)
    assert view_contents(g.load()) == before
    assert g.touched_names == {"acme", "globex"}  # the refused write touched nothing
    g.close()


def test_two_prefixes_never_see_each_others_rows(postgres_dsn, tmp_path):
    one = PostgresGraphStore(postgres_dsn, prefix_for(tmp_path / "one"))
    two = PostgresGraphStore(postgres_dsn, prefix_for(tmp_path / "two"))
    one.add_document("a", [("a#1", 0, "[acme] [globex]")], MARKUP)
    two.add_document("a", [("a#9", 0, "[initech]")], MARKUP)
    assert one.documents() == {"a": {"a#1"}} and two.documents() == {"a": {"a#9"}}
    assert one.mentioning(["initech"]) == set() and two.rare(["acme"], 5) == set()
    two.remove_document("a")
    assert one.counts() == {"chunks": 1, "entities": 2, "mentions": 2}
    u1, h1 = open_postgres_learning(postgres_dsn, one.prefix, LearningConfig())
    u2, h2 = open_postgres_learning(postgres_dsn, two.prefix, LearningConfig())
    u1.use(["a#1"], 0.0)
    h1.strengthen([("e:acme", "a#1")], now=0.0)
    assert u2.boost([("a#1", 1.0)], 0.0) == [("a#1", 1.0)]
    assert h2.as_matrix({"e:acme": 0, "a#1": 1}, 2, 0.0).nnz == 0
    one.close()
    two.close()


def test_a_dropped_connection_is_survived(postgres_dsn, tmp_path):
    prefix = prefix_for(tmp_path)
    g = PostgresGraphStore(named(postgres_dsn, "pensive_graph_kill"), prefix)
    uses, edges = open_postgres_learning(
        named(postgres_dsn, "pensive_graph_kill"), prefix, LearningConfig()
    )
    g.add_document("a", [("a#1", 0, "[acme] [globex]")], MARKUP)
    uses.use(["a#1"], 0.0)
    with psycopg.connect(postgres_dsn, autocommit=True) as c:
        killed = c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'pensive_graph_kill'"
        ).fetchall()
    assert len(killed) == 1  # the graph and its learning tables share one connection
    g.add_document("b", [("b#1", 0, "[acme]")], MARKUP)  # a write reconnects once
    assert g.mentioning(["acme"]) == {"a#1", "b#1"}
    uses.use(["a#1"], 1.0)
    assert uses.boost([("a#1", 1.0)], 1.0)[0][1] > 1.0
    with psycopg.connect(postgres_dsn, autocommit=True) as c:
        c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'pensive_graph_kill'"
        )
    assert g.load().n_chunks == 2  # and so does a read
    edges.strengthen([("e:acme", "a#1")], now=2.0)
    g.close()


def _docs(worker: int, n: int) -> dict[str, list[tuple[str, int, str]]]:
    """Documents of one worker: each names entities every worker names (so the writers meet
    on the same entity rows) and its own."""
    return {
        f"w{worker}-{i}": [
            (f"w{worker}-{i}#0", 0, f"[acme] [globex] [person{i % 5}] [own{worker}x{i}]"),
            (f"w{worker}-{i}#1", 1, f"[globex] [city{(i + worker) % 3}] [acme]"),
        ]
        for i in range(n)
    }


def _graph_writer(dsn: str, prefix: str, worker: int, n: int, start) -> None:
    g = PostgresGraphStore(dsn, prefix)
    docs = _docs(worker, n)
    start.wait(60)  # both processes connected: they write at the same moment
    for doc_id, chunks in docs.items():
        g.add_document(doc_id, chunks, MARKUP, subject="Acme" if worker % 2 else None)
    for doc_id in list(docs)[::4]:  # replace some, remove others
        g.add_document(doc_id, docs[doc_id][:1], MARKUP)
    for doc_id in list(docs)[1::4]:
        g.remove_document(doc_id)
    g.close()


def test_two_processes_writing_different_documents_at_once_give_the_exact_graph(
    postgres_dsn, tmp_path
):
    prefix = prefix_for(tmp_path)
    PostgresGraphStore(postgres_dsn, prefix).close()  # tables made once
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    n = 60
    procs = [
        ctx.Process(target=_graph_writer, args=(postgres_dsn, prefix, w, n, start)) for w in (1, 2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0, 0]
    ref = reference_graph()
    for w in (1, 2):
        docs = _docs(w, n)
        for doc_id, chunks in docs.items():
            ref.add_document(doc_id, chunks, MARKUP, subject="Acme" if w % 2 else None)
        for doc_id in list(docs)[::4]:
            ref.add_document(doc_id, docs[doc_id][:1], MARKUP)
        for doc_id in list(docs)[1::4]:
            ref.remove_document(doc_id)
    g = PostgresGraphStore(postgres_dsn, prefix)
    assert g.counts() == ref.counts()
    assert g.documents() == ref.documents()
    assert view_contents(g.load()) == view_contents(ref.load())
    keys = ["acme", "globex", *(f"person{i}" for i in range(5)), *(f"city{i}" for i in range(3))]
    for most in (0, 1, 5, 20, 40, 60, 80, 120):  # every entity's count of passages is exact
        assert g.rare(keys, most) == ref.rare(keys, most), most
    g.close()


def _learner(dsn: str, prefix: str, worker: int, start) -> None:
    knobs = LearningConfig(base_level_half_life_s=float("inf"), hebbian_rate=0.01)
    uses, edges = open_postgres_learning(dsn, prefix, knobs)
    start.wait(60)
    for _ in range(30):
        uses.use(["shared", f"own{worker}"], 0.0)
        edges.strengthen([("e:acme", "shared")], now=0.0)


def test_two_processes_learning_at_once_lose_no_use(postgres_dsn, tmp_path):
    prefix = prefix_for(tmp_path)
    knobs = LearningConfig(base_level_half_life_s=float("inf"), hebbian_rate=0.01)
    open_postgres_learning(postgres_dsn, prefix, knobs)  # tables made once
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    procs = [ctx.Process(target=_learner, args=(postgres_dsn, prefix, w, start)) for w in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0, 0]
    uses, edges = open_postgres_learning(postgres_dsn, prefix, knobs, read_only=True)
    want, _ = open_postgres_learning(postgres_dsn, prefix_for(tmp_path / "ref"), knobs)
    for _ in range(60):
        want.use(["shared"], 0.0)
    ids = ["shared", "own1", "own2"]
    got = dict(uses.boost([(c, 1.0) for c in ids], 0.0))
    assert got["shared"] == dict(want.boost([("shared", 1.0)], 0.0))["shared"]
    assert got["own1"] == got["own2"] < got["shared"]
    m = edges.as_matrix({"e:acme": 0, "shared": 1}, 2, 0.0)
    assert m[0, 1] == pytest.approx(0.6)  # 60 strengthenings of 0.01


def test_load_of_tens_of_thousands_of_passages_is_a_few_selects(postgres_dsn, tmp_path):
    """20,000 passages load in one snapshot: four SELECTs, not one per row."""
    import time

    g = PostgresGraphStore(postgres_dsn, prefix_for(tmp_path))
    for d in range(100):
        chunks = [(f"d{d}#{i}", i, f"[org{(d + i) % 97}] [p{i % 31}]") for i in range(200)]
        g.add_document(f"d{d}", chunks, MARKUP)
    statements: list[str] = []
    conn = g.connection.conn
    original = conn.execute

    def counting(query, *args, **kwargs):
        statements.append(str(query))
        return original(query, *args, **kwargs)

    conn.execute = counting
    t0 = time.perf_counter()
    view = g.load()
    took = time.perf_counter() - t0
    conn.execute = original
    assert view.n_chunks == 20_000 and view.n_entities == 97 + 31
    assert len(statements) == 5  # the snapshot setting and four SELECTs
    assert took < 30  # a loose guard against per-row queries, not a benchmark
    g.close()


def test_opening_the_store_does_not_wait_for_a_writer(postgres_dsn, tmp_path):
    """Opening takes no table lock once the tables exist: ``CREATE INDEX IF NOT EXISTS`` on
    every open queued behind a writer's transaction and deadlocked with a second table."""
    import threading

    prefix = prefix_for(tmp_path)
    PostgresGraphStore(postgres_dsn, prefix).close()
    open_postgres_learning(postgres_dsn, prefix, LearningConfig())
    opened: list[object] = []
    with psycopg.connect(postgres_dsn) as writer:  # a transaction left open on each table
        for table in ("graph_chunks", "graph_mentions", "graph_entities", "graph_subjects"):
            writer.execute(f'LOCK TABLE "{prefix}_{table}" IN ROW EXCLUSIVE MODE')
        for table in ("graph_base_level", "graph_hebbian", "graph_learning"):
            writer.execute(f'LOCK TABLE "{prefix}_{table}" IN ROW EXCLUSIVE MODE')

        def open_both() -> None:
            opened.append(PostgresGraphStore(postgres_dsn, prefix))
            opened.append(open_postgres_learning(postgres_dsn, prefix, LearningConfig()))

        t = threading.Thread(target=open_both, daemon=True)
        t.start()
        t.join(15)
        assert not t.is_alive() and len(opened) == 2
        writer.rollback()


def test_writers_queue_per_document_and_no_lock_is_global(postgres_dsn, tmp_path):
    """A write of a document waits while that document's lock is held (deterministic: held
    by another connection's open transaction); a write of another document does not."""
    import threading

    prefix = prefix_for(tmp_path)
    g = PostgresGraphStore(postgres_dsn, prefix)
    g.add_document("same", [("same#0", 0, "[acme] version zero")], MARKUP)
    done: list[str] = []
    with psycopg.connect(postgres_dsn) as holder:
        holder.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (f"pensive_graph:{prefix}:same",),
        )

        def write(doc: str, key: str) -> None:
            # a replica of its own (in one process, stores on one DSN share a connection)
            other = PostgresGraphStore(named(postgres_dsn, f"pensive_writer_{doc}"), prefix)
            other.add_document(doc, [(f"{doc}#1", 0, f"[{key}]")], MARKUP)
            other.close()
            done.append(doc)

        same = threading.Thread(target=write, args=("same", "globex"), daemon=True)
        same.start()
        elsewhere = threading.Thread(target=write, args=("other", "acme"), daemon=True)
        elsewhere.start()
        elsewhere.join(15)
        assert done == ["other"]  # not held up by the document being written
        assert same.is_alive()  # queued on its document
        holder.rollback()
    same.join(15)
    assert done == ["other", "same"]
    assert g.documents() == {"same": {"same#1"}, "other": {"other#1"}}
    assert g.rare(["acme", "globex"], 1) == {"acme", "globex"}  # counts exact after the queue
    g.close()


def _version(doc: str, worker: int, rnd: int) -> list[tuple[str, int, str]]:
    """What ``worker`` writes as ``doc`` in round ``rnd`` (its passage ids say which)."""
    n = 1 + (worker + rnd) % 3
    return [
        (f"{doc}#w{worker}r{rnd}#{i}", i,
         f"[acme] [person{(rnd + i) % 4}] [w{worker}] [{doc}x{rnd % 2}] [globex|org]")
        for i in range(n)
    ]  # fmt: skip


def _same_docs_writer(dsn: str, prefix: str, worker: int, start) -> None:
    import random

    g = PostgresGraphStore(dsn, prefix)
    rng = random.Random(worker)
    docs = [f"s{i}" for i in range(8)]
    start.wait(60)
    for rnd in range(12):
        rng.shuffle(docs)
        for doc in docs:
            if rng.random() < 0.15:
                g.remove_document(doc)
            else:
                g.add_document(doc, _version(doc, worker, rnd), MARKUP,
                               subject="Acme" if doc < "s4" else None)  # fmt: skip
    g.close()


def test_two_processes_writing_the_same_documents_leave_each_one_version_whole(
    postgres_dsn, tmp_path
):
    """Both processes replace and remove the same documents, naming the same entities, in
    random orders: every document ends as one writer's version, whole, and every entity's
    count of passages is the count an embedded store given those versions keeps."""
    prefix = prefix_for(tmp_path)
    PostgresGraphStore(postgres_dsn, prefix).close()
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    procs = [
        ctx.Process(target=_same_docs_writer, args=(postgres_dsn, prefix, w, start)) for w in (1, 2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0, 0]
    g = PostgresGraphStore(postgres_dsn, prefix)
    ref = reference_graph()
    for doc, chunk_ids in sorted(g.documents().items()):
        versions = {cid.split("#")[1] for cid in chunk_ids}
        assert len(versions) == 1, (doc, chunk_ids)  # one writer's version, whole
        worker, rnd = (int(x) for x in versions.pop()[1:].split("r"))
        chunks = _version(doc, worker, rnd)
        assert {c for c, _, _ in chunks} == chunk_ids
        ref.add_document(doc, chunks, MARKUP, subject="Acme" if doc < "s4" else None)
    assert g.counts() == ref.counts()
    assert view_contents(g.load()) == view_contents(ref.load())
    keys = ["acme", "globex", "w1", "w2", *(f"person{i}" for i in range(4))]
    for most in range(0, 40):
        assert g.rare(keys, most) == ref.rare(keys, most), most
    g.close()
