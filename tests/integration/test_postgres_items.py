"""LangGraph item tables and the LLM cache's rows in a real Postgres (started by the
``postgres_dsn`` fixture): the conformance suites the SQLite ones pass, and attacks (a bad
prefix, two prefixes, two writers of one item, a dropped connection, a refused write)."""

from __future__ import annotations

import hashlib
import multiprocessing
from datetime import datetime, timedelta, timezone

import pytest

from pensive_core import BackendError, ConfigError
from pensive_core.llm_cache import LLMCache
from pensive_core.pg_items import PostgresItemTable, PostgresLLMCacheRecords, table_for
from pensive_core.testing import ItemRecordsTests, LLMCacheRecordsTests
from pensive_core.testing.items import value

pytestmark = pytest.mark.integration

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)


def prefix_for(folder) -> str:
    """One store per test folder: tests share the server, never each other's rows."""
    return "i" + hashlib.blake2b(str(folder).encode(), digest_size=8).hexdigest()


class TestPostgresItemTable(ItemRecordsTests):
    @pytest.fixture
    def make_items(self, postgres_dsn, tmp_path):
        opened = []

        def make():
            t = PostgresItemTable(postgres_dsn, prefix_for(tmp_path))
            opened.append(t)
            return t

        yield make
        for t in opened:
            t.close()


class TestPostgresLLMCacheRecords(LLMCacheRecordsTests):
    @pytest.fixture
    def make_records(self, postgres_dsn, tmp_path):
        opened = []

        def make():
            r = PostgresLLMCacheRecords(postgres_dsn, prefix_for(tmp_path))
            opened.append(r)
            return r

        yield make
        for r in opened:
            r.close()


def test_bad_prefixes_and_table_names_are_refused(postgres_dsn):
    for bad in ("Bad-Prefix", 'x"; DROP TABLE y; --', "", "a" * 41):
        with pytest.raises(ConfigError, match="prefix"):
            PostgresItemTable(postgres_dsn, bad)
        with pytest.raises(ConfigError, match="prefix"):
            PostgresLLMCacheRecords(postgres_dsn, bad)
    for bad in ("Items", "1items", "items;drop", "", "x" * 20):
        with pytest.raises(ConfigError, match="table"):
            PostgresItemTable(postgres_dsn, "ok", bad)
    assert table_for("items.sqlite") == "items" and table_for("LG-Store.sqlite") == "lg_store"
    assert table_for("langgraph_store.sqlite") == "langgraph_store"
    longest = PostgresItemTable(postgres_dsn, "p" * 40, "t" * 19)  # names within 63 characters
    longest.delete(("n",), "k")  # a server kept between runs (PENSIVE_TEST_POSTGRES_DSN)
    longest.put(("n",), "k", value(v=1), None, T0)
    assert longest.get(("n",), "k") is not None
    longest.close()
    with pytest.raises(ConfigError):
        table_for("..sqlite")


def test_two_prefixes_and_two_tables_never_see_each_other(postgres_dsn, tmp_path):
    a = PostgresItemTable(postgres_dsn, prefix_for(tmp_path / "a"))
    b = PostgresItemTable(postgres_dsn, prefix_for(tmp_path / "b"))
    other = PostgresItemTable(postgres_dsn, prefix_for(tmp_path / "a"), "other")
    a.put(("n",), "k", value(v=1), "t", T0)
    assert b.get(("n",), "k") is None and len(b) == 0 and list(b.newest()) == []
    assert other.get(("n",), "k") is None and other.unindexed() == []
    ra = PostgresLLMCacheRecords(postgres_dsn, prefix_for(tmp_path / "a"))
    rb = PostgresLLMCacheRecords(postgres_dsn, prefix_for(tmp_path / "b"))
    ra.put("k", "m", "p", '"v"')
    assert rb.get("k") is None and len(rb) == 0
    for part in (a, b, other, ra, rb):
        part.close()


def _item_writer(dsn, prefix, worker):
    t = PostgresItemTable(dsn, prefix)
    for r in range(30):
        with t.transaction():
            t.put(("shared",), "same", value(w=worker, r=r), f"w{worker} r{r}",
                  T0 + timedelta(seconds=r))  # fmt: skip
            t.put(("own", str(worker)), f"k{r}", value(r=r), None, T0)
    t.close()
    cache = LLMCache(records=PostgresLLMCacheRecords(dsn, prefix))
    for r in range(30):
        cache.put(f"question {r}", "m", [worker, r])
    cache.close()


def test_two_processes_writing_one_item_both_succeed(postgres_dsn, tmp_path):
    prefix = prefix_for(tmp_path)
    PostgresItemTable(postgres_dsn, prefix).close()
    PostgresLLMCacheRecords(postgres_dsn, prefix).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_item_writer, args=(postgres_dsn, prefix, w)) for w in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0, 0]
    t = PostgresItemTable(postgres_dsn, prefix)
    same = t.get(("shared",), "same")
    assert same is not None and same.value["r"] == 29 and same.created_at == T0
    assert len(t) == 1 + 2 * 30
    t.close()
    r = PostgresLLMCacheRecords(postgres_dsn, prefix)
    assert len(r) == 30
    r.close()


def test_a_dropped_connection_is_survived(postgres_dsn, tmp_path):
    import psycopg

    prefix = prefix_for(tmp_path)
    t = PostgresItemTable(postgres_dsn, prefix)
    r = PostgresLLMCacheRecords(postgres_dsn, prefix)
    t.put(("n",), "a", value(v=1), "t", T0)
    r.put("k", "m", "p", '"v"')
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        for part in (t, r):
            admin.execute(
                "SELECT pg_terminate_backend(%s)", (part.tables.pg.conn.info.backend_pid,)
            )
    assert t.get(("n",), "a") is not None and r.get("k") == '"v"'
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (t.tables.pg.conn.info.backend_pid,))
    with t.transaction():  # dropped before the block: reopened at its start
        t.put(("n",), "b", value(v=2), None, T0)
    with pytest.raises(BackendError, match="rolled back whole"), t.transaction():
        t.put(("n",), "lost", value(v=3), None, T0)
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (t.tables.pg.conn.info.backend_pid,))
        t.put(("n",), "lost2", value(v=4), None, T0)
    assert t.get(("n",), "lost") is None and len(t) == 2
    t.close()
    r.close()


def test_a_refused_write_stores_nothing(postgres_dsn, tmp_path):
    import random
    import string

    huge = "".join(random.Random(7).choices(string.ascii_letters, k=12_000))  # over a btree row
    t = PostgresItemTable(postgres_dsn, prefix_for(tmp_path))
    t.put(("n",), "kept", value(v=1), None, T0)
    with pytest.raises(BackendError, match="rolled back whole"), t.transaction():
        t.put(("n",), "lost", value(v=2), None, T0)
        t.delete(("n",), "kept")
        t.put(("n",), huge, value(v=3), None, T0)
    assert t.get(("n",), "lost") is None and t.get(("n",), "kept") is not None and len(t) == 1
    with pytest.raises(BackendError, match="store an item"):
        t.put(("n",), huge, value(v=3), None, T0)
    assert len(t) == 1
    r = PostgresLLMCacheRecords(postgres_dsn, prefix_for(tmp_path))
    with pytest.raises(BackendError, match="write the LLM cache"):
        r.put(huge, "m", "p", '"v"')
    assert len(r) == 0
    t.close()
    r.close()
