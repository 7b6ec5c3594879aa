"""The pgvector backend against a real Postgres 16 with pgvector 0.6 (started by the
``postgres_dsn`` fixture from the ``pgserver`` wheel, or ``PENSIVE_TEST_POSTGRES_DSN``)."""

from __future__ import annotations

import hashlib
import multiprocessing

import numpy as np
import psycopg
import pytest

from pensive_core import BackendError, ConfigError, InputError, Pensive
from pensive_core.backends import create_backend
from pensive_core.config import PgvectorConfig
from pensive_core.filters import matches, parse_filter
from pensive_core.testing import DIM, VectorBackendTests, unit_vectors
from tests.conftest import HASH_CONFIG, docs_corpus, free_port

pytestmark = pytest.mark.integration


def table_for(folder) -> str:
    """One table per test folder: tests share the server, never each other's vectors."""
    return "t" + hashlib.blake2b(str(folder).encode(), digest_size=6).hexdigest()


class TestPgvector(VectorBackendTests):
    @pytest.fixture
    def make_backend(self, postgres_dsn, monkeypatch):
        monkeypatch.setenv("PENSIVE_PGVECTOR_DSN", postgres_dsn)
        opened = []

        def make(folder):
            b = create_backend("pgvector", folder, DIM, PgvectorConfig(table=table_for(folder)))
            opened.append(b)
            return b

        yield make
        for b in opened:
            b.close()


@pytest.fixture
def backend(postgres_dsn, monkeypatch, tmp_path):
    """An HNSW index from 1,000 rows (not the default 20,000), so tests reach it quickly."""
    monkeypatch.setenv("PENSIVE_PGVECTOR_DSN", postgres_dsn)
    cfg = PgvectorConfig(table=table_for(tmp_path), hnsw_threshold=1000)
    b = create_backend("pgvector", tmp_path, DIM, cfg)
    yield b
    b.close()


def indexes(dsn, table):
    with psycopg.connect(dsn) as c:
        return [
            r[0]
            for r in c.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s", (table,))
        ]


def test_exact_below_the_threshold_and_an_index_built_once_past_it(backend, postgres_dsn, tmp_path):
    t = table_for(tmp_path)
    vecs = unit_vectors(np.random.default_rng(12), 1300)
    for s in range(0, 900, 300):  # 900 rows in small batches: no index yet
        backend.upsert([f"v{i}" for i in range(s, s + 300)], vecs[s : s + 300])
    assert not any("hnsw" in d for d in indexes(postgres_dsn, t))
    assert "Seq Scan" in plan(postgres_dsn, backend, t, vecs[0], 10)
    backend.upsert([f"v{i}" for i in range(900, 1300)], vecs[900:1300])  # passes 1,000
    assert sum("hnsw" in d for d in indexes(postgres_dsn, t)) == 1
    assert backend.search(vecs[1200], 1)[0][0] == "v1200"


def test_a_namespace_is_its_own_table_with_an_hnsw_index(postgres_dsn, monkeypatch, tmp_path):
    monkeypatch.setenv("PENSIVE_PGVECTOR_DSN", postgres_dsn)
    cfg = PgvectorConfig(table=table_for(tmp_path), hnsw_threshold=0)  # an index from the start
    backend = create_backend("pgvector", tmp_path, DIM, cfg)
    vecs = unit_vectors(np.random.default_rng(1), 2)
    backend.upsert(["a", "b"], vecs, namespace="Tenant-A")
    t = table_for(tmp_path)
    with psycopg.connect(postgres_dsn) as c:
        tables = {
            r[0]
            for r in c.execute(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE %s", (t + "%",)
            )
        }
        indexes = c.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s", (f"{t}__Tenant-A",)
        ).fetchall()
    assert tables == {t, f"{t}__Tenant-A"}  # case kept: "Tenant-A" and "tenant-a" stay apart
    assert any("hnsw" in d[0] and "vector_cosine_ops" in d[0] for d in indexes)
    assert backend.count(namespace="tenant-a") == 0
    backend.close()


def test_filters_with_odd_values_match_the_reference(backend):
    """Infinity (stored as the largest float), a quote in a value, numbers of both types."""
    vecs = unit_vectors(np.random.default_rng(2), 4)
    meta = [{"x": float("inf")}, {"x": -float("inf")}, {"x": 3}, {"s": 'it\'s "quoted"'}]
    backend.upsert(list("abcd"), vecs, meta)
    assert {
        c for c, _ in backend.search(vecs[0], 4, where=parse_filter({"x": {"$gt": 1e300}}))
    } == {"a"}
    assert {c for c, _ in backend.search(vecs[0], 4, where=parse_filter({"x": {"$lt": 0}}))} == {
        "b"
    }
    assert {c for c, _ in backend.search(vecs[0], 4, where=parse_filter({"x": 3.0}))} == {"c"}
    got = backend.search(vecs[0], 4, where=parse_filter({"s": 'it\'s "quoted"'}))
    assert [c for c, _ in got] == ["d"]


def plan(dsn, backend, table, vec, k, where=None):
    from pgvector.psycopg import register_vector
    from psycopg import sql

    stmt, params, _ = backend.search_sql(sql.Identifier(table), vec, k, where)
    with psycopg.connect(dsn) as c:
        register_vector(c)
        return "\n".join(r[0] for r in c.execute(sql.SQL("EXPLAIN ") + stmt, params))


def test_unfiltered_searches_use_the_hnsw_index_and_filtered_ones_scan(
    backend, postgres_dsn, tmp_path
):
    vecs = unit_vectors(np.random.default_rng(6), 3000)
    backend.upsert([f"v{i}" for i in range(3000)], vecs, [{"n": i} for i in range(3000)])
    t = table_for(tmp_path)
    assert f"Index Scan using {t}_i_" in plan(postgres_dsn, backend, t, vecs[0], 10)
    filtered = plan(postgres_dsn, backend, t, vecs[0], 10, parse_filter({"n": {"$lt": 5}}))
    assert "hnsw" not in filtered and "Seq Scan" in filtered
    hits = backend.search(vecs[7], 10)
    assert hits[0][0] == "v7"
    exact = {f"v{i}" for i in np.argsort(-(vecs @ vecs[7]))[:10]}
    assert len({c for c, _ in hits} & exact) >= 9  # approximate, but HNSW at ef_search 100


def test_k_past_the_hnsw_limit_is_exact(backend):
    vecs = unit_vectors(np.random.default_rng(3), 1200)
    backend.upsert([f"v{i}" for i in range(1200)], vecs)
    res = backend.search(vecs[0], 1100)
    assert len(res) == 1100 and res[0][0] == "v0"
    want = np.argsort(-(vecs @ vecs[0]), kind="stable")[:1100]
    assert {c for c, _ in res} == {f"v{i}" for i in want}


def test_another_dimension_is_refused(backend, postgres_dsn, monkeypatch, tmp_path):
    backend.upsert(["a"], unit_vectors(np.random.default_rng(4), 1))
    with pytest.raises(ConfigError, match="16-d"):
        create_backend("pgvector", tmp_path, 32, PgvectorConfig(table=table_for(tmp_path)))


def test_a_password_in_the_config_is_refused():
    for dsn in ("postgresql://app:s3cret@db/pensive", "host=db password=s3cret dbname=x"):
        with pytest.raises(ConfigError, match="PGPASSWORD") as err:
            create_backend("pgvector", None, DIM, PgvectorConfig(dsn=dsn))
        assert "s3cret" not in str(err.value)


def test_no_dsn_is_a_clear_config_error():
    with pytest.raises(ConfigError, match="PENSIVE_PGVECTOR_DSN"):
        create_backend("pgvector", None, DIM, PgvectorConfig())


def test_an_unreachable_server_names_host_and_database_never_the_password(monkeypatch):
    port = free_port()  # nothing listens here
    monkeypatch.setenv("PENSIVE_PGVECTOR_DSN", f"postgresql://app:s3cret@127.0.0.1:{port}/vecs")
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}/vecs") as err:
        create_backend("pgvector", None, DIM, PgvectorConfig(connect_timeout_s=2))
    assert "s3cret" not in str(err.value)


def test_a_dropped_connection_is_reopened(backend, postgres_dsn):
    vecs = unit_vectors(np.random.default_rng(5), 3)
    backend.upsert(list("abc"), vecs)
    with psycopg.connect(postgres_dsn, autocommit=True) as c:
        killed = c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'pensive' AND pid <> pg_backend_pid()"
        ).fetchall()
    assert killed  # the backend's connection was among them
    assert backend.search(vecs[1], 1)[0][0] == "b"  # the call reconnects once
    backend.upsert(["d"], vecs[:1])  # and writes again
    assert backend.count() == 4


def test_pensive_on_pgvector(tmp_path, postgres_dsn, monkeypatch):
    monkeypatch.setenv("PENSIVE_PGVECTOR_DSN", postgres_dsn)
    cfg = {
        **HASH_CONFIG,
        "backend": {"name": "pgvector", "pgvector": {"table": table_for(tmp_path)}},
    }
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest(docs_corpus())
        assert p.stats()["vectors"] == 8
        assert p.query("arctic tern migration", k=1).hits[0].doc_id == "bird"
        p.delete("bird")
        assert p.stats()["vectors"] == 7
    with Pensive(tmp_path, config=cfg) as p:  # reopened: the vectors are on the server
        assert p.query("arctic tern migration", k=3).hits[0].doc_id != "bird"
        assert p.stats()["vectors"] == 7


# -- an outside attack's findings, kept as tests ------------------------------------------------
def test_long_namespaces_never_share_a_table_or_lose_their_index(
    postgres_dsn, monkeypatch, tmp_path
):
    monkeypatch.setenv("PENSIVE_PGVECTOR_DSN", postgres_dsn)
    cfg = PgvectorConfig(table="abcdefghijklm", hnsw_threshold=0)  # the longest name allowed
    b = create_backend("pgvector", tmp_path, DIM, cfg)
    try:
        v = unit_vectors(np.random.default_rng(8), 3)
        ns1, ns2 = "n" + "x" * 46 + "1", "n" + "x" * 46 + "2"  # 48 characters, one apart at the end
        b.upsert(["secret"], v[:1], namespace=ns1)
        assert b.ids(namespace=ns2) == set()
        b.delete(["secret"], namespace=ns2)
        assert b.count(namespace=ns1) == 1
        b.upsert(["x"], v[1:2], namespace="foo")
        b.upsert(["y"], v[2:3], namespace="foo_hnsw")  # once the name of foo's index
        with psycopg.connect(postgres_dsn) as c:
            indexed = {
                r[0]
                for r in c.execute(
                    "SELECT tablename FROM pg_indexes WHERE indexdef LIKE '%%hnsw%%' "
                    "AND tablename LIKE 'abcdefghijklm%%'"
                )
            }
        assert {f"abcdefghijklm__{ns1}", f"abcdefghijklm__{ns2}"} - indexed == {
            f"abcdefghijklm__{ns2}"
        }
        assert {"abcdefghijklm__foo", "abcdefghijklm__foo_hnsw"} <= indexed
    finally:
        b.close()


@pytest.mark.parametrize("table", ["aa__bb", "pensive_", "abcdefghijklmn", "Upper"])
def test_a_table_name_that_could_read_as_another_namespace_is_refused(table):
    with pytest.raises(Exception, match="table"):
        PgvectorConfig(table=table)


def test_a_password_as_a_url_parameter_is_refused():
    dsn = "postgresql://app@/db?host=/tmp/x&password=S3cretPW"
    with pytest.raises(ConfigError, match="PGPASSWORD") as err:
        create_backend("pgvector", None, DIM, PgvectorConfig(dsn=dsn))
    assert "S3cretPW" not in str(err.value)


def test_a_malformed_dsn_from_the_environment_is_not_echoed(monkeypatch):
    monkeypatch.setenv("PENSIVE_PGVECTOR_DSN", "postgresql://app:S3cr%zzPW@localhost/db")
    with pytest.raises(BackendError, match="malformed") as err:
        create_backend("pgvector", None, DIM, PgvectorConfig(connect_timeout_s=2))
    assert "S3cr" not in str(err.value)


def test_values_that_compare_exactly_as_python_compares_them(backend):
    vecs = unit_vectors(np.random.default_rng(9), 4)
    meta = [{"x": 2**63}, {"x": float(2**63)}, {"s": "a\x00b"}, {"x": 2**53 + 1}]
    backend.upsert(list("abcd"), vecs, meta)  # a NUL in a string value is stored too
    for spec in ({"x": float(2**63)}, {"x": 2**63}, {"x": {"$ne": 2**63}}, {"s": "a\x00b"},
                 {"x": {"$gt": float(2**53)}}):  # fmt: skip
        where = parse_filter(spec)
        want = {c for c, m in zip("abcd", meta, strict=True) if matches(where, m)}
        assert {c for c, _ in backend.search(vecs[0], 4, where=where)} == want, spec


def test_bad_ids_and_keys_are_refused_and_nothing_is_stored(backend):
    v = unit_vectors(np.random.default_rng(10), 2)
    for ids, meta in (
        ([1, 2], None),
        (["a\x00b", "c"], None),
        (["\udc80", "c"], None),
        (["x" * 2001, "c"], None),
        (["a", "b"], [{("t",): 1}, {}]),
    ):
        with pytest.raises(InputError):
            backend.upsert(ids, v, meta)
    assert backend.count() == 0
    backend.upsert(["a", "b"], v)
    with pytest.raises(InputError, match="list of ids"):
        backend.delete("ab")
    assert backend.count() == 2


def test_two_writers_upserting_the_same_ids_in_opposite_orders_never_deadlock(
    postgres_dsn, tmp_path
):
    ctx = multiprocessing.get_context("spawn")
    table = table_for(tmp_path)
    procs = [ctx.Process(target=_upserter, args=(postgres_dsn, table, d)) for d in (1, -1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]


def _upserter(dsn, table, direction):
    import os

    os.environ["PENSIVE_PGVECTOR_DSN"] = dsn
    b = create_backend("pgvector", None, DIM, PgvectorConfig(table=table))
    ids = [f"id{i:03d}" for i in range(300)][::direction]
    for r in range(8):
        b.upsert(ids, unit_vectors(np.random.default_rng(r), 300), [{"round": r}] * 300)
    b.close()


def test_a_bulk_first_load_builds_the_index_once_and_answers_the_same(
    backend, postgres_dsn, tmp_path
):
    vecs = unit_vectors(np.random.default_rng(11), 2500)
    ids = [f"v{i}" for i in range(2500)]
    backend.upsert(ids, vecs, [{"n": i} for i in range(2500)])  # empty table: COPY, then index
    backend.upsert(ids[:1500], vecs[:1500][::-1].copy())  # not empty: row by row, replacing
    assert backend.count() == 2500
    t = table_for(tmp_path)
    assert f"Index Scan using {t}_i_" in plan(postgres_dsn, backend, t, vecs[2000], 10)
    got = backend.fetch(["v0", "v2000"])
    np.testing.assert_allclose(got["v0"], vecs[1499], atol=1e-6)
    np.testing.assert_allclose(got["v2000"], vecs[2000], atol=1e-6)
    assert backend.search(vecs[2000], 1)[0][0] == "v2000"
