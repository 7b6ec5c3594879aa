"""The cache conformance suites on the embedded SQLite implementations: the L1 hot cache, the
query statistics and the context cache."""

import pytest

from pensive_core.cache import L1Cache
from pensive_core.context.cache import ContextCache
from pensive_core.files import connect
from pensive_core.stats import RouterStats
from pensive_core.testing import AnswerCacheTests, ContextStoreTests, QueryStatsTests


class TestSQLiteAnswerCache(AnswerCacheTests):
    @pytest.fixture
    def make_cache(self):
        opened = []

        def make(folder, **options):
            c = L1Cache(folder / "l1.sqlite", **options)
            opened.append(c)
            return c

        yield make
        for c in opened:
            c.close()


class TestSQLiteQueryStats(QueryStatsTests):
    @pytest.fixture
    def make_stats(self):
        opened = []

        def make(folder, flush_every=256):
            db = connect(folder / "pensive.sqlite")
            opened.append(db)
            return RouterStats(db, flush_every)

        yield make
        for db in opened:
            db.close()


class TestSQLiteContextCache(ContextStoreTests):
    @pytest.fixture
    def make_contexts(self):
        opened = []

        def make(folder):
            db = connect(folder / "pensive.sqlite")
            opened.append(db)
            return ContextCache(db)

        yield make
        for db in opened:
            db.close()
