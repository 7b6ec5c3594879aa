"""The L1 hot cache, the query statistics and the context cache in a real Postgres (started by
the ``postgres_dsn`` fixture): the conformance suites the SQLite ones pass, and attacks
(replicas in other processes, a dropped connection, odd text, bad prefixes, refused writes)."""

from __future__ import annotations

import hashlib
import multiprocessing

import pytest

from pensive_core import BackendError, ConfigError
from pensive_core.cache import Deps, make_key
from pensive_core.storage.pg_cache import PostgresL1Cache
from pensive_core.storage.pg_context import PostgresContextCache
from pensive_core.storage.pg_stats import PostgresQueryStats
from pensive_core.testing import AnswerCacheTests, ContextStoreTests, QueryStatsTests
from pensive_core.types import Hit

pytestmark = pytest.mark.integration


def prefix_for(folder) -> str:
    """One cache per test folder: tests share the server, never each other's rows."""
    return "c" + hashlib.blake2b(str(folder).encode(), digest_size=8).hexdigest()


class TestPostgresAnswerCache(AnswerCacheTests):
    @pytest.fixture
    def make_cache(self, postgres_dsn):
        opened = []

        def make(folder, **options):
            c = PostgresL1Cache(postgres_dsn, prefix_for(folder), **options)
            opened.append(c)
            return c

        yield make
        for c in opened:
            c.close()


class TestPostgresQueryStats(QueryStatsTests):
    @pytest.fixture
    def make_stats(self, postgres_dsn):
        opened = []

        def make(folder, flush_every=256):
            s = PostgresQueryStats(postgres_dsn, prefix_for(folder), flush_every)
            opened.append(s)
            return s

        yield make
        for s in opened:
            s.close()


class TestPostgresContextCache(ContextStoreTests):
    @pytest.fixture
    def make_contexts(self, postgres_dsn):
        opened = []

        def make(folder):
            c = PostgresContextCache(postgres_dsn, prefix_for(folder))
            opened.append(c)
            return c

        yield make
        for c in opened:
            c.close()


# -- attacks ---------------------------------------------------------------------------------
def _key(text):
    return make_key(text, 5, None, {})


def _answer(c, text, version, commit):
    """Store an answer to ``text`` computed at ``commit``, its hit saying which version."""
    hit = Hit("d", "d#1", f"v{version}", 1.0)
    return c.put(_key(text), [hit], 0.5, "L2", Deps(docs=frozenset({"d"})), commit)


QUESTIONS = ["arctic tern migration", "green tea antioxidants", "invoice INV-4471 paid"]


def _invalidator(dsn, prefix, rounds, floors, done):
    """A replica that commits ``rounds`` times: each commit invalidates one question's answer
    (every answer, each fifth) and stores new ones; ``floors[i]`` is the last commit that
    invalidated question ``i``, published once that commit is done. An answer not invalidated
    is carried to the next commit (it was examined and found unaffected): still valid."""
    c = PostgresL1Cache(dsn, prefix)
    try:
        for r in range(1, rounds + 1):
            c.entries()
            victim = r % len(QUESTIONS)
            c.invalidate(None if r % 5 == 0 else [_key(QUESTIONS[victim]).exact], r)
            for i in range(len(QUESTIONS)):
                if r % 5 == 0 or i == victim:
                    floors[i] = r
            for q in QUESTIONS[: 1 + r % 3]:
                _answer(c, q, r, r)
    finally:
        done.value = 1
        c.close()


def _reader(dsn, prefix, floors, done, out):
    """A replica answering questions: it serves from L1 when it can and otherwise stores an
    answer computed at the commit it knows of (which may be behind by then). Counts answers
    served that are older than a commit that invalidated them, finished before the lookup."""
    c = PostgresL1Cache(dsn, prefix)
    lookups = hits = stale = refused = 0
    try:
        while not done.value or lookups < 200:
            for i, q in enumerate(QUESTIONS):
                before = floors[i]  # committed before this lookup started
                c.sync()
                got = c.get(_key(q))
                lookups += 1
                if got is None:
                    known = c.commit
                    if not _answer(c, q, known, known):
                        refused += 1
                    continue
                hits += 1
                if int(got.hits[0].text[1:]) < before:
                    stale += 1
            if lookups > 20_000:
                break
    finally:
        out[:] = [lookups, hits, stale, refused]
        c.close()


def test_a_replica_never_serves_an_answer_older_than_another_replicas_commit(
    postgres_dsn, tmp_path
):
    prefix = prefix_for(tmp_path)
    PostgresL1Cache(postgres_dsn, prefix).close()  # tables made once
    ctx = multiprocessing.get_context("spawn")
    floors, done = ctx.Array("q", len(QUESTIONS)), ctx.Value("i", 0)
    out = ctx.Array("q", 4)
    procs = [
        ctx.Process(target=_reader, args=(postgres_dsn, prefix, floors, done, out)),
        ctx.Process(target=_invalidator, args=(postgres_dsn, prefix, 150, floors, done)),
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0, 0]
    lookups, hits, stale, refused = out[:]
    assert stale == 0, (lookups, hits, stale, refused)
    assert lookups >= 200 and hits > 0  # the reader did serve from L1 while commits went on
    last = PostgresL1Cache(postgres_dsn, prefix)
    assert last.commit == 150
    for e in last.entries():  # what is left was computed at the last commit
        assert last.get(_key(e.text)).hits[0].text == "v150"
    last.close()


def _victim_dsn(dsn, name):
    from psycopg.conninfo import make_conninfo

    return make_conninfo(dsn, application_name=name)


def _terminate(dsn, name):
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (name,),
        ).fetchall()
    assert rows and all(r[0] for r in rows)


def test_every_part_survives_a_dropped_connection(postgres_dsn, tmp_path):
    prefix = prefix_for(tmp_path)
    name = "victim_" + prefix
    dsn = _victim_dsn(postgres_dsn, name)
    a = PostgresL1Cache(dsn, prefix)
    b = PostgresL1Cache(postgres_dsn, prefix)
    assert _answer(a, "arctic tern", 0, 0)
    _terminate(postgres_dsn, name)
    assert a.get(_key("arctic tern")) is not None  # the freshness read reconnects
    _terminate(postgres_dsn, name)
    assert _answer(a, "green tea", 0, 0)  # so does the first statement of a write
    b.entries()
    b.invalidate([_key("arctic tern").exact], 1)
    _terminate(postgres_dsn, name)
    assert a.get(_key("arctic tern")) is None and a.commit == 1
    _terminate(postgres_dsn, name)
    a.entries()
    assert a.invalidate_all(2) == 1
    b.sync()
    assert b.commit == 2 and b.entries() == []

    stats = PostgresQueryStats(dsn, prefix)
    stats.record("L1", 0.5, 0.9)
    _terminate(postgres_dsn, name)
    stats.flush()
    contexts = PostgresContextCache(dsn, prefix)
    _terminate(postgres_dsn, name)
    contexts.put_many([("d", "c", "g", "ctx")])
    _terminate(postgres_dsn, name)
    assert contexts.get_many([("d", "c", "g")]) == {("d", "c", "g"): "ctx"}
    _terminate(postgres_dsn, name)
    assert PostgresQueryStats(postgres_dsn, prefix).summary()["L1"]["count"] == 1
    for part in (a, b, stats, contexts):
        part.close()


@pytest.mark.parametrize(
    "prefix", ["Bad-Prefix", "1abc", "x; DROP TABLE y", "a" * 41, "", "ünï", "a b"]
)
def test_a_prefix_that_is_not_an_identifier_is_refused(postgres_dsn, prefix):
    for make in (PostgresL1Cache, PostgresQueryStats, PostgresContextCache):
        with pytest.raises(ConfigError, match="prefix"):
            make(postgres_dsn, prefix)


def test_two_prefixes_never_see_each_others_rows(postgres_dsn, tmp_path):
    one, two = prefix_for(tmp_path / "one"), prefix_for(tmp_path / "two")
    a, b = PostgresL1Cache(postgres_dsn, one), PostgresL1Cache(postgres_dsn, two)
    assert _answer(a, "arctic tern", 0, 0)
    assert b.get(_key("arctic tern")) is None and b.entries() == []
    assert b.keys_for_docs(["d"]) == set()
    b.invalidate_all(7)
    a.sync()
    assert a.commit == 0 and a.get(_key("arctic tern")) is not None
    sa, sb = PostgresQueryStats(postgres_dsn, one), PostgresQueryStats(postgres_dsn, two)
    sa.record("L2", 3.0, 0.5)
    sa.flush()
    assert sb.summary() == {"total": 0}
    ca, cb = PostgresContextCache(postgres_dsn, one), PostgresContextCache(postgres_dsn, two)
    ca.put_many([("d", "c", "g", "one's")])
    assert cb.get_many([("d", "c", "g")]) == {} and cb.count() == 0 and cb.clear() == 0
    assert ca.count() == 1
    for part in (a, b, sa, sb, ca, cb):
        part.close()


def _poison(dsn, table, column, value):
    """A trigger that makes Postgres refuse any row whose ``column`` is ``value``."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"CREATE OR REPLACE FUNCTION {table}_poison() RETURNS trigger AS $$ BEGIN "
            f"IF NEW.{column} = {value} THEN RAISE EXCEPTION 'poisoned row'; END IF; "
            f"RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        conn.execute(
            f"CREATE TRIGGER {table}_poison BEFORE INSERT OR UPDATE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {table}_poison()"
        )


def test_a_refused_l1_write_stores_nothing(postgres_dsn, tmp_path):
    prefix = prefix_for(tmp_path)
    a, b = PostgresL1Cache(postgres_dsn, prefix), PostgresL1Cache(postgres_dsn, prefix)
    qk = _key("arctic tern")
    assert a.put(qk, [Hit("old", "old#1", "old", 1.0)], 0.5, "L2", Deps(docs=frozenset({"old"})), 0)
    with pytest.raises(BackendError, match="rolled back whole"):  # a text column holds no NUL
        a.put(
            qk, [Hit("new", "new#1", "new", 1.0)], 0.5, "L2\x00", Deps(docs=frozenset({"new"})), 0
        )
    for c in (a, b):  # the old answer stays whole, in memory and in the tables
        c.sync()
        assert c.get(qk).hits[0].doc_id == "old"
        assert c.keys_for_docs(["old"]) == {qk.exact} and c.keys_for_docs(["new"]) == set()
    _poison(postgres_dsn, f"{prefix}_l1_docs", "doc_id", "'poison'::bytea")
    with pytest.raises(BackendError, match="rolled back whole"):
        _ = a.put(
            _key("green tea"), [Hit("x", "x#1", "t", 1.0)], 0.5, "L2",
            Deps(docs=frozenset({"fine", "poison"})), 0,
        )  # fmt: skip
    b.sync()
    assert [e.text for e in b.entries()] == ["arctic tern"] and b.keys_for_docs(["fine"]) == set()
    a.close()
    b.close()


def test_a_refused_context_batch_stores_nothing(postgres_dsn, tmp_path):
    prefix = prefix_for(tmp_path)
    c = PostgresContextCache(postgres_dsn, prefix)
    c.put_many([("d", "kept", "g", "kept")])
    _poison(postgres_dsn, f"{prefix}_context_cache", "context", "'poison'::bytea")
    with pytest.raises(BackendError, match="rolled back whole"):
        c.put_many([("d", "a", "g", "fine"), ("d", "b", "g", "poison"), ("d", "kept", "g", "new")])
    assert c.count() == 1 and c.get_many([("d", "kept", "g")]) == {("d", "kept", "g"): "kept"}
    c.close()


def test_a_refused_stats_flush_is_kept_for_the_next(postgres_dsn, tmp_path):
    import psycopg

    prefix = prefix_for(tmp_path)
    s = PostgresQueryStats(postgres_dsn, prefix)
    _poison(postgres_dsn, f"{prefix}_query_stats", "kind", "'latency'")
    s.record("L2", 5.0, 0.5)
    s.flush()  # refused: nothing stored, the counts stay pending
    assert PostgresQueryStats(postgres_dsn, prefix).summary() == {"total": 0}
    assert s.summary()["L2"]["count"] == 1
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"DROP TRIGGER {prefix}_query_stats_poison ON {prefix}_query_stats")
    s.flush()
    assert PostgresQueryStats(postgres_dsn, prefix).summary()["L2"]["count"] == 1
    s.close()


def _open_all(dsn, prefix):
    for make in (PostgresL1Cache, PostgresQueryStats, PostgresContextCache):
        make(dsn, prefix).close()


def test_replicas_opening_a_new_prefix_at_once_all_succeed(postgres_dsn, tmp_path):
    prefix = prefix_for(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_open_all, args=(postgres_dsn, prefix)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 4
    c = PostgresL1Cache(postgres_dsn, prefix)
    assert c.commit == 0 and c.entries() == []
    c.close()


# -- through the engine's query and ingest stages ----------------------------------------------
def _with_postgres_l1(p, dsn, prefix):
    """Swap an open store's L1 for a Postgres one (as the Postgres engine will open it)."""
    router = p.config.router
    cache = PostgresL1Cache(
        dsn, prefix, router.l1_capacity, router.l1_ttl_s, router.l1_hot, router.l1_fuzzy
    )
    cache.invalidate_all(p.components.commit_no)
    p.components.l1.close()
    p.components.l1 = cache
    return cache


@pytest.mark.parametrize("change", ["add", "replace", "delete"])
def test_the_engine_never_serves_a_stale_answer_from_a_postgres_l1(postgres_dsn, tmp_path, change):
    from pensive_core import Document, Pensive
    from tests.conftest import HASH_CONFIG, docs_corpus

    config = {**HASH_CONFIG, "router": {"l1": True, "l1_refresh": 0}}
    with Pensive(tmp_path / "store", config=config) as p:
        p.ingest(docs_corpus())
        _with_postgres_l1(p, postgres_dsn, prefix_for(tmp_path))
        q = "green tea antioxidants"
        first = p.query(q)
        assert (first.tier, p.query(q).tier) == ("L2", "L1")
        p.query("arctic tern migration")
        if change == "add":
            p.ingest([Document(id="tea2", text="Green tea antioxidants: new catechin study.")])
        elif change == "replace":
            p.ingest([Document(id="tea", text="Black tea is oxidised; green tea is not.")])
        else:
            p.delete("tea")
        res = p.query(q)
        assert res.tier == "L2"  # dropped by the commit, answered again
        again = p.query("arctic tern migration")  # kept if the change could not alter it
        l1, p.components.l1 = p.components.l1, None
        assert [h.chunk_id for h in p.query(q).hits] == [h.chunk_id for h in res.hits]
        fresh = p.query("arctic tern migration")
        p.components.l1 = l1
        assert [h.chunk_id for h in again.hits] == [h.chunk_id for h in fresh.hits]
        ids = {h.doc_id for h in res.hits}
        assert ("tea2" in ids) if change == "add" else ("tea" not in ids or change == "replace")
        assert p.stats()["l1"]["commit"] == p.components.commit_no


def _putter(dsn, prefix, who, n):
    c = PostgresL1Cache(dsn, prefix, capacity=10_000)
    for i in range(n):
        assert _answer(c, f"question {who} number {i} of the batch", i, 0)
    c.close()


def test_a_reader_misses_no_entry_of_writers_storing_at_once(postgres_dsn, tmp_path):
    """Entry ids must grow in commit order: a reader that only reads rows past the last id it
    saw would otherwise miss an entry whose transaction committed after a later id's."""
    prefix = prefix_for(tmp_path)
    reader = PostgresL1Cache(postgres_dsn, prefix, capacity=10_000)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_putter, args=(postgres_dsn, prefix, w, 150)) for w in range(3)]
    for p in procs:
        p.start()
    while any(p.is_alive() for p in procs):
        reader.sync()  # catching up while they write
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    reader.sync()
    assert len(reader.entries()) == 450
    reader.close()
