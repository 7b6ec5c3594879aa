"""The pgvector backend against a real Postgres 16 with pgvector 0.6 (started by the
``postgres_dsn`` fixture from the ``pgserver`` wheel, or ``PENSIVE_TEST_POSTGRES_DSN``)."""

from __future__ import annotations

import hashlib

import numpy as np
import psycopg
import pytest

from pensive_core import BackendError, ConfigError, Pensive
from pensive_core.backends import create_backend
from pensive_core.config import PgvectorConfig
from pensive_core.filters import parse_filter
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
    monkeypatch.setenv("PENSIVE_PGVECTOR_DSN", postgres_dsn)
    b = create_backend("pgvector", tmp_path, DIM, PgvectorConfig(table=table_for(tmp_path)))
    yield b
    b.close()


def test_a_namespace_is_its_own_table_with_an_hnsw_index(backend, postgres_dsn, tmp_path):
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
    assert f"Index Scan using {t}_hnsw" in plan(postgres_dsn, backend, t, vecs[0], 10)
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
