"""The temporal conformance suite on the embedded SQLite tables."""

import sqlite3

import pytest

from pensive_core.temporal.store import TemporalStore
from pensive_core.testing import TemporalTablesTests


class TestSQLiteTemporal(TemporalTablesTests):
    refused_write = sqlite3.IntegrityError

    @pytest.fixture
    def make_temporal(self):
        opened = []

        def make(folder):
            db = sqlite3.connect(folder / "pensive.sqlite", isolation_level=None)
            opened.append(db)
            return TemporalStore(db)

        yield make
        for db in opened:
            db.close()
