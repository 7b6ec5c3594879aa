"""The L1 hot cache, the query statistics and the context cache in a real Postgres (started by
the ``postgres_dsn`` fixture): the conformance suites the SQLite ones pass, and attacks
(replicas in other processes, a dropped connection, odd text, bad prefixes, refused writes)."""

from __future__ import annotations

import hashlib

import pytest

from pensive_core.storage.pg_cache import PostgresL1Cache
from pensive_core.storage.pg_context import PostgresContextCache
from pensive_core.storage.pg_stats import PostgresQueryStats
from pensive_core.testing import AnswerCacheTests, ContextStoreTests, QueryStatsTests

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
